"""Upstream model configs wherever a pack name is accepted (issue 51): a community model loaded
by path or hf://…@revision speaks as upstream 4.0.1 with --config on the same files (the
fixture of tools/reference/make_config_fixture.py), with its text options and tokenizer, no
normalizer of another language, its voices, and cloning only where its weights have it."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
from community_config import (
    HUB_COMMIT,
    HUB_REPO,
    TEXT,
    VOICE,
    publish,
    reference,
    voice,
    write_config,
)
from reference_fixtures import MIN_AUDIO_SNR_DB, snr_db
from safetensors.numpy import load_file, save_file

from pipecat_pocket_tts.engine import PocketTTS
from pipecat_pocket_tts.engine.backends import find_pack_files
from pipecat_pocket_tts.engine.backends.numpy.weights.checkpoint import is_cloning_key
from pipecat_pocket_tts.engine.errors import (
    BackendUnavailableError,
    CloningUnavailableError,
    ModelConfigError,
    PackFilesMissingError,
    UnknownLanguageError,
)
from pipecat_pocket_tts.engine.model.config_reference import (
    config_pack_name,
    is_config_reference,
)
from pipecat_pocket_tts.engine.model.languages import find_language, pack_name
from pipecat_pocket_tts.engine.model.upstream_config import config_language_code, load_config_pack


@pytest.fixture(scope="module")
def by_path(tmp_path_factory: pytest.TempPathFactory) -> PocketTTS:
    config = write_config(tmp_path_factory.mktemp("community"))
    tts = PocketTTS.load(str(config), backend="numpy")
    yield tts
    tts.close()


def _speaks_as_upstream(tts: PocketTTS, config: str = "czech") -> tuple[float, int, int]:
    expected, chunks = reference(config)
    assert [c.text for c in tts.text_preparer.split(TEXT)] == chunks
    audio = tts.synthesize(TEXT, voice=voice(config), temperature=0.0)
    assert audio.shape == expected.shape  # same length, frame for frame
    snr = snr_db(expected, audio)
    assert snr >= MIN_AUDIO_SNR_DB, snr
    return snr, audio.shape[0], expected.shape[0]


def test_a_config_by_path_speaks_as_upstream(by_path: PocketTTS) -> None:
    assert by_path.pack_name == "czech"
    assert by_path.pack.has_voice_cloning
    snr, ours, theirs = _speaks_as_upstream(by_path)
    print(f"by path: SNR {snr:.1f} dB, {ours} samples (upstream {theirs})")


def test_a_small_layout_config_speaks_as_upstream(tmp_path: Path) -> None:
    """The small 2026-10 layout (GQA, low-rank table, z_proj, drifting head, own decoder)."""
    config = write_config(tmp_path, name="korean.yaml", config="korean")
    with PocketTTS.load(str(config), backend="numpy") as tts:
        assert tts.pack_name == "korean" and tts.config.flow_lm.z_dim
        snr, ours, theirs = _speaks_as_upstream(tts, "korean")
    print(f"korean (small layout): SNR {snr:.1f} dB, {ours} samples (upstream {theirs})")


def test_a_config_by_hub_reference_speaks_as_upstream(hf_cache: Path) -> None:
    reference_url = publish(hf_cache)
    with PocketTTS.load(reference_url, backend="numpy") as tts:
        assert tts.pack_name == "czech"
        assert str(tts.pack.weights).startswith(str(hf_cache))
        assert HUB_COMMIT in str(tts.pack.tokenizer)  # the pinned revision's snapshot
        snr, ours, theirs = _speaks_as_upstream(tts)
    print(f"by hf://…@revision: SNR {snr:.1f} dB, {ours} samples (upstream {theirs})")


def test_weights_and_tokenizer_by_hub_reference_from_a_local_config(
    hf_cache: Path, tmp_path: Path
) -> None:
    publish(hf_cache)
    hub = f"hf://{HUB_REPO}/v1/{{}}@{HUB_COMMIT}"
    config = write_config(
        tmp_path,
        copy_files=False,
        weights_path=hub.format("model.safetensors"),
        tokenizer=hub.format("tokenizer.model"),
    )
    pack = find_pack_files(str(config))
    assert pack.weights.is_relative_to(hf_cache) and pack.tokenizer.is_relative_to(hf_cache)


def test_the_text_options_apply_and_no_other_language_normalizes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = write_config(tmp_path)
    with caplog.at_level(logging.WARNING), PocketTTS.load(str(config), backend="numpy") as tts:
        notes = [r for r in caplog.records if "No text normalization" in r.getMessage()]
        assert len(notes) == 1 and "'czech'" in notes[0].getMessage()
        [chunk] = tts.text_preparer.split("«mam» 3 psy \u2013 dobry den")
        assert chunk.text == "mam 3 psy , dobry den"  # replaced, not capitalized, no stop
        [planned] = tts._planner.plan("mam 3 psy, dr. den 12")
        assert planned.text == "mam 3 psy, dr. den 12"  # digits as written, no English rules
        assert tts.has_speech("ahoj") and not tts.has_speech("\U0001f44d")
        probe = tts.speech_probe()
        assert not probe.push("\U0001f44d ") and probe.push("ahoj svete. ")


def test_upstream_voice_files_and_a_local_voices_folder(tmp_path: Path) -> None:
    (tmp_path / "embeddings").mkdir()
    (tmp_path / "embeddings" / "pavel.safetensors").write_bytes(VOICE.read_bytes())
    config = write_config(tmp_path)
    with PocketTTS.load(str(config), backend="numpy") as tts:
        assert tts.voices == ["pavel"] and tts.default_voice == "pavel"
        by_name = tts.synthesize(TEXT, temperature=0.0)
        by_file = tts.synthesize(TEXT, voice=str(VOICE), temperature=0.0)
        np.testing.assert_array_equal(by_name, by_file)


def test_cloning_where_the_weights_have_it_and_a_named_error_where_not(
    by_path: PocketTTS, tmp_path: Path
) -> None:
    prompt = (0.1 * np.sin(np.arange(48_000) * 0.05)).astype(np.float32)
    cloned = by_path.clone_voice(prompt, sample_rate=24_000)
    assert by_path.synthesize("ahoj svete", voice=cloned, temperature=0.0).size > 0

    weights = load_file(str(Path(by_path.pack.weights)))
    save_file(
        {k: v for k, v in weights.items() if not is_cloning_key(k)},
        str(tmp_path / "without.safetensors"),
    )
    config = write_config(
        tmp_path,
        weights_path=None,
        weights_path_without_voice_cloning="without.safetensors",
    )
    with PocketTTS.load(str(config), backend="numpy") as tts:
        assert not tts.pack.has_voice_cloning
        with pytest.raises(CloningUnavailableError):
            tts.clone_voice(prompt, sample_rate=24_000)
        assert tts.synthesize(TEXT, voice=VOICE, temperature=0.0).size > 0


def test_references_are_pack_names_and_name_their_language() -> None:
    for reference_url in ("/m/czech.yaml", "hf://a/b/c.yml@main", "https://127.0.0.1/welsh.yaml"):
        assert is_config_reference(reference_url)
        assert pack_name(f" {reference_url} ") == reference_url
        assert find_language(reference_url) is None
    assert not is_config_reference("english") and not is_config_reference("cs")
    assert not is_config_reference("hf://a/b/v2.1/dutch@x")  # a CoreML pack folder
    assert pack_name("hf://a/b/v2.1/dutch@x") == "hf://a/b/v2.1/dutch@x"
    assert config_language_code("hf://someone/pocket-tts-korean/config.yaml@abc") == "ko"
    assert config_language_code("/models/czech.yaml") == "cs"
    assert config_language_code("/models/model.yaml") is None
    assert config_pack_name("hf://someone/pocket-tts-korean/config.yaml") == "korean_config"
    assert config_pack_name("/m/english.yaml") == "english_config"  # never the built-in pack


def test_bad_configs_raise_named_errors(tmp_path: Path) -> None:
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n", encoding="utf-8")
    with pytest.raises(ModelConfigError, match="flow_lm"):
        find_pack_files(str(tmp_path / "list.yaml"))
    with pytest.raises(PackFilesMissingError, match="not found"):
        find_pack_files(str(tmp_path / "absent.yaml"))
    with pytest.raises(ModelConfigError, match="YAML"):
        load_config_pack("hf://someone/repo/weights.bin@main")
    with pytest.raises(UnknownLanguageError):  # no YAML: no config, no pack name either
        find_pack_files("hf://someone/repo/weights.bin@main")
    missing = write_config(tmp_path / "nofiles", copy_files=False)
    with pytest.raises(PackFilesMissingError, match="tokenizer"):
        find_pack_files(str(missing))
    with pytest.raises(BackendUnavailableError, match="numpy"):
        find_pack_files(str(missing), backend_kind="coreml")
