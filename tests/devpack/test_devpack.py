"""Random-weight development packs: real file layout, loadable, deterministic, sane audio."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import sentencepiece as spm
import tokenizers

from pipecat_pocket_tts import devpack
from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict
from pipecat_pocket_tts.engine.backends.numpy.backend import NumpyBackend
from pipecat_pocket_tts.engine.backends.numpy.weights.checkpoint import (
    expected_shapes,
    is_cloning_key,
    iter_safetensors,
    load_checkpoint,
)
from pipecat_pocket_tts.engine.model.config import ModelConfig
from pipecat_pocket_tts.engine.text.tokenizer import Tokenizer
from pipecat_pocket_tts.engine.voices.voice import Voice


@pytest.fixture(scope="module")
def standard_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_pack(tmp_path_factory.mktemp("standard"), tiny_config_dict("standard"))


@pytest.fixture(scope="module")
def small_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_pack(
        tmp_path_factory.mktemp("small"),
        tiny_config_dict("small"),
        voices=("alba", "lola"),
        tokenizer_format="json",
        dtype="bfloat16",
        with_cloning=False,
    )


def _config(folder: Path) -> ModelConfig:
    return ModelConfig.from_dict("english", json.loads((folder / "config.json").read_text()))


@pytest.mark.parametrize("kind", ["standard", "small"])
def test_tiny_configs_parse_and_keep_mimi_framing(kind: str) -> None:
    config = ModelConfig.from_dict("english", tiny_config_dict(kind))  # type: ignore[arg-type]
    assert config.mimi.frame_size == 1920
    assert config.mimi.seanet.hop_length == 120
    assert config.mimi.decoder_seanet.ratios == (6, 5, 4)
    if kind == "small":
        tr = config.flow_lm.transformer
        assert tr.kv_heads < tr.num_heads and tr.query_dim != tr.d_model
        assert config.flow_lm.lookup_table.rank is not None
        assert config.flow_lm.z_dim is not None
        assert config.flow_lm.sampler.type == "drifting"
        assert config.mimi.decoder_seanet_override is not None
    else:
        assert config.flow_lm.sampler.type == "lsd"


def test_tiny_config_kind_is_checked() -> None:
    with pytest.raises(ValueError, match="standard"):
        tiny_config_dict("huge")  # type: ignore[arg-type]


def test_standard_pack_layout(standard_pack: Path) -> None:
    names = sorted(p.relative_to(standard_pack).as_posix() for p in standard_pack.rglob("*"))
    assert names == [
        "config.json",
        "embeddings",
        "embeddings/alba.safetensors",
        "model.safetensors",
        "tokenizer.model",
    ]
    config = _config(standard_pack)
    weights = load_checkpoint(standard_pack / "model.safetensors", config)
    shapes = expected_shapes(config)
    assert set(weights) == set(shapes)
    for key, shape in shapes.items():
        assert weights[key].shape == shape, key
        assert np.isfinite(weights[key]).all(), key
    sp = spm.SentencePieceProcessor(model_file=str(standard_pack / "tokenizer.model"))
    assert sp.vocab_size() == config.flow_lm.lookup_table.n_bins
    voice = Voice.load(standard_pack / "embeddings" / "alba.safetensors", config)
    assert voice.config_name == "english"
    assert voice.length == 13  # bos_before_voice + 12 frames


def test_small_pack_json_bf16_without_cloning(small_pack: Path, tmp_path: Path) -> None:
    config = _config(small_pack)
    assert config.flow_lm.lookup_table.tokenizer == "tokenizers"
    assert not (small_pack / "tokenizer.model").exists()
    header = dict(iter_safetensors(small_pack / "model.safetensors"))
    assert not any(is_cloning_key(k) for k in header)
    backend = NumpyBackend.from_files(config, small_pack / "model.safetensors")
    assert not backend.has_voice_cloning
    for name in ("alba", "lola"):
        Voice.load(small_pack / "embeddings" / f"{name}.safetensors", config)
    # The voices were computed with the bf16-rounded weights the file holds.
    (again,) = devpack.write_random_voices(tmp_path, backend, ["lola"], seed=0, frames=12)
    ours, theirs = Voice.load(again), Voice.load(small_pack / "embeddings" / "lola.safetensors")
    for a, b in zip(ours.kv.keys + ours.kv.values, theirs.kv.keys + theirs.kv.values, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    vocab = json.loads((small_pack / "tokenizer.json").read_text())["model"]["vocab"]
    assert len(vocab) == config.flow_lm.lookup_table.n_bins


def test_bfloat16_file_holds_rounded_weights(tmp_path: Path) -> None:
    values = np.array([1.0, -2.5, 3.14159, 1e-3, 65504.0], dtype=np.float32)
    path = devpack.write_safetensors(tmp_path / "w.safetensors", {"x": values}, dtype="bfloat16")
    (key, read), *_ = list(iter_safetensors(path))
    assert key == "x" and read.dtype == np.float32
    np.testing.assert_allclose(read, values, rtol=2**-8)
    assert read[0] == 1.0 and read[1] == -2.5


def test_json_tokenizer_gives_the_sentencepiece_ids(tmp_path: Path) -> None:
    model = devpack.train_sentencepiece(tmp_path, 512)
    json_path = tmp_path / "tokenizer.json"
    json_path.write_text(json.dumps(devpack.sentencepiece_to_json(model), ensure_ascii=False))
    sp = spm.SentencePieceProcessor(model_file=str(model))
    ours = Tokenizer.from_file(json_path)
    texts = ["Hello world, 12345 ça va?", "  two  spaces ", "x", "\t tab \n", "Ünïcödé 日本."]
    for text in texts:
        assert list(ours.encode(text)) == sp.encode(text), text
    hf = tokenizers.Tokenizer.from_file(str(json_path))
    for text in texts:
        assert hf.encode(text).ids == sp.encode(text), text


def test_sentencepiece_training_is_deterministic(tmp_path: Path) -> None:
    train = devpack.tokenizer._trained_model.__wrapped__  # uncached: really train twice
    first = train(512, 3, 2000)
    assert first == train(512, 3, 2000)
    assert first != devpack.tokenizer._trained_model(512, 0, 2000)  # another seed (cached if built)
    a = devpack.train_sentencepiece(tmp_path / "a", 512, seed=3)
    assert a.read_bytes() == first
    sp = spm.SentencePieceProcessor(model_file=str(a))
    assert sp.vocab_size() == 512
    assert sp.encode("2024") == [sp.piece_to_id(p) for p in ("▁", "2", "0", "2", "4")]
    assert sp.decode(sp.encode("naïve 日本")) == "naïve 日本"  # byte fallback
    with pytest.raises(ValueError, match="vocab_size"):
        devpack.train_sentencepiece(tmp_path / "d", 100)


def test_build_is_deterministic(tmp_path: Path, standard_pack: Path) -> None:
    again = build_pack(tmp_path / "again", tiny_config_dict("standard"))
    for name in ("model.safetensors", "tokenizer.model", "config.json"):
        assert (again / name).read_bytes() == (standard_pack / name).read_bytes(), name
    other = build_pack(tmp_path / "other", tiny_config_dict("standard"), seed=1, voices=())
    assert (other / "model.safetensors").read_bytes() != (
        standard_pack / "model.safetensors"
    ).read_bytes()
    assert not (other / "embeddings").exists()


def _generate(folder: Path, frames: int, seed: int = 0) -> tuple[np.ndarray, list[float]]:
    config = _config(folder)
    backend = NumpyBackend.from_files(config, folder / "model.safetensors")
    voice = Voice.load(folder / "embeddings" / "alba.safetensors", config)
    tokenizer = Tokenizer.from_file(next(folder.glob("tokenizer.*")))
    state = backend.flow_state_from_voice(voice.kv)
    backend.prefill(state, backend.embed_text(tokenizer.encode("Hello world, this is a test.")))
    mimi = backend.new_mimi_state()
    rng = np.random.default_rng(seed)
    latent = None
    audio, eos = [], []
    for _ in range(frames):
        out = backend.step(state, latent)
        eos.append(out.eos_logit)
        noise = rng.standard_normal(config.flow_lm.latent_dim).astype(np.float32) * 0.3**0.5
        latent = backend.sample(out.hidden, noise)
        audio.append(backend.decode(mimi, latent))
    return np.concatenate(audio), eos


@pytest.mark.parametrize("pack", ["standard_pack", "small_pack"])
def test_generation_is_finite_audible_and_not_clipping(
    pack: str, request: pytest.FixtureRequest
) -> None:
    audio, eos = _generate(request.getfixturevalue(pack), frames=12)
    assert audio.shape == (12 * 1920,)
    assert np.isfinite(audio).all()
    rms = float(np.sqrt(np.mean(audio[1920:] ** 2)))
    assert 0.03 < rms < 0.3, rms
    assert np.abs(audio).max() < 1.0
    assert eos == pytest.approx([0.0] * 12)  # the constant EOS head


def test_eos_logit_is_configurable(tmp_path: Path) -> None:
    folder = build_pack(tmp_path, tiny_config_dict("standard"), eos_logit=-7.5)
    _, eos = _generate(folder, frames=2)
    assert eos == pytest.approx([-7.5, -7.5])


def test_registry_config_pack_writes_no_config_json(tmp_path: Path, monkeypatch) -> None:
    # A registry config keeps its name and tokenizer kind (english: tokenizer.json). The
    # full-size weights are swapped for a tiny structure to keep the test fast.
    tiny = ModelConfig.from_dict("english", tiny_config_dict("standard"))
    monkeypatch.setattr(devpack.pack, "get_config", lambda name: tiny)
    folder = build_pack(tmp_path, "english", voices=("alba",))
    assert not (folder / "config.json").exists()
    assert (folder / "tokenizer.model").exists()  # the tiny stand-in says sentencepiece
    assert Voice.load(folder / "embeddings" / "alba.safetensors").config_name == "english"


def test_command_line_builds_a_tiny_pack(tmp_path: Path, capsys) -> None:
    assert devpack.main([str(tmp_path / "cli"), "--config", "tiny-small", "--voices", "a,b"]) == 0
    assert "wrote" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "cli" / "embeddings").iterdir()) == [
        "a.safetensors",
        "b.safetensors",
    ]
    assert devpack.main([str(tmp_path / "bad"), "--config", "klingon"]) == 2
    assert "klingon" in capsys.readouterr().err


def test_package_command_line_has_a_devpack_verb(tmp_path: Path, capsys) -> None:
    from pipecat_pocket_tts.__main__ import main as package_main

    assert package_main(["devpack", str(tmp_path / "verb"), "--config", "tiny"]) == 0
    assert "wrote" in capsys.readouterr().out
    assert (tmp_path / "verb" / "tokenizer.model").exists()
    assert (tmp_path / "verb" / "embeddings" / "alba.safetensors").exists()
    assert package_main(["devpack", str(tmp_path / "bad"), "--config", "klingon"]) == 2
