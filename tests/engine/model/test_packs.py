"""Pack resolution: local folders, the HF cache, and every failure with its fix. No network:
hub tests run offline against an empty or pre-populated HF cache (real cache layout), and
hub errors are real huggingface_hub exception classes raised by a patched download."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from types import SimpleNamespace

import huggingface_hub
import pytest
from hub_cache import cache_put
from huggingface_hub import errors as hf_errors

from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict
from pipecat_pocket_tts.engine.backends import find_pack_files
from pipecat_pocket_tts.engine.backends.numpy.weights import pack_files as numpy_files
from pipecat_pocket_tts.engine.backends.numpy.weights.pack_files import KNOWN_VOICES
from pipecat_pocket_tts.engine.errors import (
    GatedRepoError,
    PackFilesMissingError,
    UnknownBackendError,
    UnknownLanguageError,
    UnknownVoiceError,
)
from pipecat_pocket_tts.engine.model import packs
from pipecat_pocket_tts.engine.model.config import VOICES_REPO, VOICES_REVISION, get_config
from pipecat_pocket_tts.engine.model.packs import PackFiles

ENGLISH = get_config("english")


@pytest.fixture(scope="module")
def tiny_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_pack(
        tmp_path_factory.mktemp("pack"), tiny_config_dict("standard"), voices=("alba", "marius")
    )


@pytest.fixture
def pack_copy(tiny_pack: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(tiny_pack, tmp_path / "copy"))


# -- model_dir ----------------------------------------------------------------------------


def test_model_dir_pack(tiny_pack: Path) -> None:
    pack = find_pack_files("english", model_dir=tiny_pack)
    assert isinstance(pack, PackFiles)
    assert pack.model_dir == tiny_pack
    assert pack.weights == tiny_pack / "model.safetensors"
    assert pack.tokenizer == tiny_pack / "tokenizer.model"
    assert pack.tokenizer_kind == "sentencepiece"
    assert pack.voice_names == ("alba", "marius")
    assert pack.default_voice == "alba"
    assert pack.voice_path("marius") == tiny_pack / "embeddings" / "marius.safetensors"
    assert pack.has_voice_cloning
    # config.json replaced the registry config
    assert pack.config.name == "english"
    assert pack.config.flow_lm.transformer.d_model == 64
    assert pack.backend_kind == "numpy"


def test_model_dir_unknown_voice_lists_the_folder_voices(tiny_pack: Path) -> None:
    pack = find_pack_files("english", model_dir=str(tiny_pack))
    with pytest.raises(UnknownVoiceError) as info:
        pack.voice_path("javert")
    message = str(info.value)
    assert "alba, marius" in message and str(tiny_pack / "embeddings") in message


def test_model_dir_without_cloning_weights(tmp_path: Path) -> None:
    folder = build_pack(tmp_path, tiny_config_dict("small"), with_cloning=False, voices=())
    pack = find_pack_files("english", model_dir=folder)
    assert not pack.has_voice_cloning
    assert pack.voice_names == () and pack.default_voice is None


def test_model_dir_default_voice_follows_the_language(pack_copy: Path) -> None:
    (pack_copy / "embeddings" / "alba.safetensors").rename(
        pack_copy / "embeddings" / "estelle.safetensors"
    )
    assert find_pack_files("french", model_dir=pack_copy).default_voice == "estelle"
    assert find_pack_files("english", model_dir=pack_copy).default_voice == "estelle"  # first one


def test_model_dir_json_tokenizer_preferred_when_config_says_so(pack_copy: Path) -> None:
    (pack_copy / "tokenizer.json").write_text("{}")
    assert find_pack_files("english", model_dir=pack_copy).tokenizer.name == "tokenizer.model"
    config = json.loads((pack_copy / "config.json").read_text())
    config["flow_lm"]["lookup_table"]["tokenizer"] = "tokenizers"
    (pack_copy / "config.json").write_text(json.dumps(config))
    assert find_pack_files("english", model_dir=pack_copy).tokenizer.name == "tokenizer.json"
    (pack_copy / "tokenizer.json").unlink()
    assert find_pack_files("english", model_dir=pack_copy).tokenizer.name == "tokenizer.model"


def test_model_dir_without_config_json_uses_the_registry(pack_copy: Path) -> None:
    (pack_copy / "config.json").unlink()
    pack = find_pack_files("french_24l", model_dir=pack_copy)
    assert pack.config is get_config("french_24l")
    with pytest.raises(UnknownLanguageError, match="klingon"):
        find_pack_files("klingon", model_dir=pack_copy)


def test_model_dir_with_config_json_accepts_a_custom_name(tiny_pack: Path) -> None:
    pack = find_pack_files("english_tiny", model_dir=tiny_pack)
    assert pack.config.name == "english_tiny" and pack.config.language == "english"
    assert find_pack_files("german", model_dir=tiny_pack).config.name == "german"
    with pytest.raises(UnknownLanguageError, match=r"klingon.*english, french, german"):
        find_pack_files("klingon", model_dir=tiny_pack)


def test_missing_model_dir(tmp_path: Path) -> None:
    with pytest.raises(PackFilesMissingError) as info:
        find_pack_files("english", model_dir=tmp_path / "nowhere")
    assert str(tmp_path / "nowhere") in str(info.value)
    assert "does not exist" in str(info.value)


@pytest.mark.parametrize(
    ("remove", "named"),
    [
        (["model.safetensors"], "model.safetensors"),
        (["tokenizer.model"], "tokenizer.json or tokenizer.model"),
        (["model.safetensors", "tokenizer.model"], "model.safetensors, tokenizer.json or"),
    ],
)
def test_model_dir_missing_files_are_named(pack_copy: Path, remove: list[str], named: str) -> None:
    for name in remove:
        (pack_copy / name).unlink()
    with pytest.raises(PackFilesMissingError) as info:
        find_pack_files("english", model_dir=pack_copy)
    assert named in str(info.value) and str(pack_copy) in str(info.value)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not readable JSON"),
        ('{"flow_lm": {}}', "not a PocketTTS model config"),
        ('{"flow_lm": {}, "mimi": {}}', "not a valid PocketTTS model config"),
    ],
)
def test_model_dir_bad_config_json(pack_copy: Path, content: str, message: str) -> None:
    (pack_copy / "config.json").write_text(content)
    with pytest.raises(PackFilesMissingError, match=message):
        find_pack_files("english", model_dir=pack_copy)


def test_model_dir_config_with_unsupported_feature(pack_copy: Path) -> None:
    config = json.loads((pack_copy / "config.json").read_text())
    config["flow_lm"]["quantum"] = True
    (pack_copy / "config.json").write_text(json.dumps(config))
    with pytest.raises(NotImplementedError, match="quantum") as info:
        find_pack_files("english", model_dir=pack_copy)
    assert "config.json" in str(info.value)


# -- backend kinds ------------------------------------------------------------------------


def test_unknown_backend_kind() -> None:
    with pytest.raises(UnknownBackendError, match="numpy"):
        find_pack_files("english", backend_kind="tpu")


def test_the_backends_layout_receives_the_request(monkeypatch) -> None:
    from pipecat_pocket_tts.engine.backends.coreml.backend import CoreMLBackend

    seen = []

    def resolver(cls, request: packs.PackRequest) -> PackFiles:
        seen.append(request)
        return PackFiles(ENGLISH, Path("w"), Path("t"), (), False, backend_kind="coreml")

    monkeypatch.setattr(CoreMLBackend, "find_pack_files", classmethod(resolver))
    pack = find_pack_files("english", backend_kind="coreml", revision="r", token="t")
    assert pack.backend_kind == "coreml"
    assert seen == [packs.PackRequest("english", None, "r", "t", None)]


# -- the hub (offline, against a temp HF cache) -------------------------------------------


def _populate_english(cache: Path, pack: Path, *, gated: bool, voices: tuple[str, ...]) -> None:
    """The english pack's hub files (tiny stand-ins) at their pinned revisions."""
    files = [(ENGLISH.weights_without_voice_cloning, pack / "model.safetensors")]
    if gated:
        files.append((ENGLISH.weights, pack / "model.safetensors"))
    files.append((ENGLISH.flow_lm.lookup_table.tokenizer_file, pack / "tokenizer.model"))
    for hub, local in files:
        cache_put(cache, hub.repo, hub.revision, hub.path, local.read_bytes())
    for name in voices:
        hub = numpy_files.voice_hub_file(ENGLISH, name)
        cache_put(cache, hub.repo, hub.revision, hub.path, f"voice {name}".encode())


def test_offline_with_empty_cache_says_what_to_do(hf_cache: Path) -> None:
    with pytest.raises(PackFilesMissingError) as info:
        find_pack_files("english")
    message = str(info.value)
    ungated = ENGLISH.weights_without_voice_cloning
    assert f"{ungated.repo}/{ungated.path}@{ungated.revision}" in message
    assert "HF_HUB_OFFLINE" in message
    assert "python -m pipecat_pocket_tts download" in message
    assert "model_dir" in message


def test_offline_names_the_gated_weights_tried_first_and_the_fallback(hf_cache: Path) -> None:
    with pytest.raises(PackFilesMissingError) as info:
        numpy_files.resolve_hub_pack("english")
    message = str(info.value)
    gated, ungated = ENGLISH.weights, ENGLISH.weights_without_voice_cloning
    tried_gated = f"{gated.repo}/{gated.path}@{gated.revision}"
    tried_ungated = f"{ungated.repo}/{ungated.path}@{ungated.revision}"
    assert tried_gated in message and tried_ungated in message
    assert message.index(tried_gated) < message.index(tried_ungated)  # the order they were tried
    assert "HF_ENDPOINT" in message and packs.PREFETCH_FIX in message
    assert packs.MODEL_DIR_FIX in message


def test_offline_without_cloning_names_only_the_ungated_weights(hf_cache: Path) -> None:
    with pytest.raises(PackFilesMissingError) as info:
        numpy_files.resolve_hub_pack("english", voice_cloning=False)
    message = str(info.value)
    assert "kyutai/pocket-tts/" not in message
    assert "kyutai/pocket-tts-without-voice-cloning/languages/english" in message
    assert packs.NOT_CACHED_FIXES in message


def test_gated_weights_from_the_cache(hf_cache: Path, tiny_pack: Path, caplog) -> None:
    _populate_english(hf_cache, tiny_pack, gated=True, voices=("alba",))
    with caplog.at_level(logging.WARNING, logger="pipecat_pocket_tts"):
        pack = find_pack_files("english")
    assert not caplog.records
    assert pack.has_voice_cloning
    assert pack.weights.read_bytes() == (tiny_pack / "model.safetensors").read_bytes()
    assert f"snapshots/{ENGLISH.weights.revision}/languages/english" in pack.weights.as_posix()
    assert "models--kyutai--pocket-tts/" in pack.weights.as_posix()
    assert pack.tokenizer.name == "tokenizer.json"  # the hub file's name, not its content
    assert pack.voice_names == KNOWN_VOICES
    assert pack.default_voice == "alba"
    voice = pack.voice_path("alba")
    assert voice.read_bytes() == b"voice alba"
    assert f"snapshots/{VOICES_REVISION}/languages/english/embeddings" in voice.as_posix()


def test_fallback_to_ungated_weights_warns(hf_cache: Path, tiny_pack: Path, caplog) -> None:
    _populate_english(hf_cache, tiny_pack, gated=False, voices=())
    with caplog.at_level(logging.WARNING, logger="pipecat_pocket_tts"):
        pack = find_pack_files("english")
    assert not pack.has_voice_cloning
    assert "pocket-tts-without-voice-cloning" in pack.weights.as_posix()
    (record,) = caplog.records
    text = record.getMessage()
    assert "Voice cloning is unavailable" in text
    assert "https://huggingface.co/kyutai/pocket-tts" in text and "HF_TOKEN" in text


def test_no_cloning_wanted_means_no_warning(hf_cache: Path, tiny_pack: Path, caplog) -> None:
    _populate_english(hf_cache, tiny_pack, gated=False, voices=())
    with caplog.at_level(logging.WARNING, logger="pipecat_pocket_tts"):
        pack = numpy_files.resolve_hub_pack("english", voice_cloning=False)
    assert not pack.has_voice_cloning and not caplog.records


def test_cloning_required_but_gated_missing(hf_cache: Path, tiny_pack: Path) -> None:
    _populate_english(hf_cache, tiny_pack, gated=False, voices=())
    with pytest.raises(PackFilesMissingError, match="kyutai/pocket-tts/languages/english"):
        numpy_files.resolve_hub_pack("english", voice_cloning=True)


def test_voice_missing_offline(hf_cache: Path, tiny_pack: Path) -> None:
    _populate_english(hf_cache, tiny_pack, gated=True, voices=())
    pack = find_pack_files("english")  # voices are not needed to resolve the pack
    with pytest.raises(PackFilesMissingError, match="voice 'marius'"):
        pack.voice_path("marius")
    with pytest.raises(UnknownVoiceError, match="bob"):
        pack.voice_path("bob")


def test_revision_override(hf_cache: Path, tiny_pack: Path) -> None:
    other = "0123456789abcdef0123456789abcdef01234567"
    ungated = ENGLISH.weights_without_voice_cloning
    tokenizer = ENGLISH.flow_lm.lookup_table.tokenizer_file
    cache_put(hf_cache, ungated.repo, other, ungated.path, b"weights at other")
    cache_put(hf_cache, tokenizer.repo, other, tokenizer.path, b"tokenizer at other")
    cache_put(hf_cache, VOICES_REPO, other, "languages/english/embeddings/alba.safetensors", b"v")
    pack = find_pack_files("english", revision=other)
    assert pack.weights.read_bytes() == b"weights at other"
    assert pack.tokenizer.read_bytes() == b"tokenizer at other"
    assert pack.voice_path("alba").read_bytes() == b"v"


def _http_error(kind: type[Exception], message: str) -> Exception:
    """A real huggingface_hub HTTP error (a minimal response object: no network)."""
    return kind(message, response=SimpleNamespace(headers={}, request=None))


def _serve(monkeypatch, fail: dict[str, Exception], calls: list | None = None) -> None:
    """hf_hub_download that raises for some files and really looks up the cache otherwise.

    ``fail`` keys: a repo id (every file of it) or "repo id:path prefix".
    """
    real = huggingface_hub.hf_hub_download

    def download(repo_id: str, filename: str, **kwargs):
        if calls is not None:
            calls.append((repo_id, filename, kwargs))
        for key, error in fail.items():
            repo, _, prefix = key.partition(":")
            if repo == repo_id and filename.startswith(prefix):
                raise error
        return real(repo_id, filename, **kwargs)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)


def test_gated_repo_error_falls_back_with_a_warning(
    hf_cache: Path, tiny_pack: Path, monkeypatch, caplog
) -> None:
    _populate_english(hf_cache, tiny_pack, gated=False, voices=())
    gated = _http_error(hf_errors.GatedRepoError, "401 Cannot access gated repo")
    calls: list = []
    _serve(monkeypatch, {"kyutai/pocket-tts": gated}, calls)
    with caplog.at_level(logging.WARNING, logger="pipecat_pocket_tts"):
        pack = find_pack_files("english", token="hf_secret")
    assert not pack.has_voice_cloning
    assert "GatedRepoError" in caplog.records[0].getMessage()
    assert calls[0][0] == "kyutai/pocket-tts" and calls[0][2]["token"] == "hf_secret"
    assert all(kwargs["token"] == "hf_secret" for _, _, kwargs in calls)


@pytest.mark.parametrize(
    "error",
    [
        _http_error(hf_errors.GatedRepoError, "401 gated"),
        _http_error(hf_errors.RepositoryNotFoundError, "401 not found"),
    ],
)
def test_gated_without_access_raises_with_the_fix(hf_cache: Path, monkeypatch, error) -> None:
    _serve(monkeypatch, {"kyutai/pocket-tts": error})
    with pytest.raises(GatedRepoError) as info:
        numpy_files.resolve_hub_pack("english", voice_cloning=True)
    message = str(info.value)
    assert "https://huggingface.co/kyutai/pocket-tts" in message and "HF_TOKEN" in message


def test_voice_not_published_is_an_unknown_voice(
    hf_cache: Path, tiny_pack: Path, monkeypatch
) -> None:
    _populate_english(hf_cache, tiny_pack, gated=True, voices=())
    missing = _http_error(hf_errors.RemoteEntryNotFoundError, "404 entry not found")
    _serve(monkeypatch, {f"{VOICES_REPO}:languages/english/embeddings/": missing})
    pack = find_pack_files("english")
    with pytest.raises(UnknownVoiceError, match="not published"):
        pack.voice_path("daan")


def test_connection_failure_and_bad_revision(hf_cache: Path, monkeypatch) -> None:
    _serve(monkeypatch, {"kyutai/pocket-tts-without-voice-cloning": ConnectionError("reset")})
    with pytest.raises(PackFilesMissingError, match="could not be downloaded"):
        numpy_files.resolve_hub_pack("english", voice_cloning=False)
    bad = _http_error(hf_errors.RevisionNotFoundError, "404 revision")
    _serve(monkeypatch, {"kyutai/pocket-tts-without-voice-cloning": bad})
    with pytest.raises(PackFilesMissingError, match="revision 'nope' does not exist"):
        numpy_files.resolve_hub_pack("english", voice_cloning=False, revision="nope")


def test_unknown_language_on_the_hub() -> None:
    with pytest.raises(UnknownLanguageError, match="english"):
        find_pack_files("klingon")


def test_download_pack_fetches_what_the_cache_has(hf_cache: Path, tiny_pack: Path) -> None:
    _populate_english(hf_cache, tiny_pack, gated=True, voices=("alba", "jean"))
    pack, fetched = numpy_files.download_pack("english", voices=["alba", "jean"])
    assert sorted(fetched) == ["alba", "jean"] and pack.has_voice_cloning
    with pytest.raises(UnknownVoiceError, match="bob"):
        numpy_files.download_pack("english", voices=["bob"])
    with pytest.raises(PackFilesMissingError):
        numpy_files.download_pack("english")  # all voices: most are not cached (offline)
