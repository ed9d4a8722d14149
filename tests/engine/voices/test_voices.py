"""Voice-state files: upstream's exported layout, our metadata, and every way a file is wrong."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from pipecat_pocket_tts.devpack import tiny_config_dict
from pipecat_pocket_tts.engine.backends.base import VoiceKV
from pipecat_pocket_tts.engine.errors import VoiceFileError
from pipecat_pocket_tts.engine.model.config import ModelConfig, get_config
from pipecat_pocket_tts.engine.voices.voice import CONFIG_METADATA_KEY, Voice

CACHE0 = "transformer.layers.0.self_attn/cache"
CACHE1 = "transformer.layers.1.self_attn/cache"
TINY = ModelConfig.from_dict("english", tiny_config_dict("standard"))  # 2 layers, 4 × 16


def _kv(layers: int = 2, length: int = 5, heads: int = 4, dim: int = 16, seed: int = 0) -> VoiceKV:
    rng = np.random.default_rng(seed)
    return VoiceKV(
        keys=[rng.standard_normal((length, heads, dim)).astype(np.float32) for _ in range(layers)],
        values=[
            rng.standard_normal((length, heads, dim)).astype(np.float32) for _ in range(layers)
        ],
    )


def _upstream_tensors(kv: VoiceKV, capacity: int, *, pad: bool = True) -> dict[str, np.ndarray]:
    """A state as upstream exports it: a preallocated cache, NaN beyond the offset."""
    out: dict[str, np.ndarray] = {}
    for i, (k, v) in enumerate(zip(kv.keys, kv.values, strict=True)):
        cache = np.full((2, 1, capacity, *k.shape[1:]), np.nan, dtype=np.float32)
        cache[0, 0, : k.shape[0]] = k
        cache[1, 0, : v.shape[0]] = v
        prefix = f"transformer.layers.{i}.self_attn/"
        out[prefix + "cache"] = cache
        out[prefix + "offset"] = np.array([k.shape[0]], dtype=np.int64)
        if pad:
            out[prefix + "pad"] = np.zeros(1, dtype=np.int64)
    return out


def _assert_same_kv(a: VoiceKV, b: VoiceKV) -> None:
    assert len(a.keys) == len(b.keys)
    for x, y in zip(a.keys + a.values, b.keys + b.values, strict=True):
        np.testing.assert_array_equal(x, y)


def test_save_load_round_trip(tmp_path: Path) -> None:
    voice = Voice(_kv(), config_name="english", source="unit test")
    path = voice.save(tmp_path / "sub" / "v.safetensors")
    loaded = Voice.load(path, TINY)
    _assert_same_kv(voice.kv, loaded.kv)
    assert loaded.config_name == "english"
    assert loaded.source == "unit test"
    assert (loaded.num_layers, loaded.length, loaded.kv_heads, loaded.head_dim) == (2, 5, 4, 16)
    assert [p.name for p in path.parent.iterdir()] == ["v.safetensors"]  # no temp files left


def test_saved_file_is_in_upstream_layout(tmp_path: Path) -> None:
    from safetensors import safe_open

    path = Voice(_kv(length=7), config_name="french").save(tmp_path / "v.safetensors")
    with safe_open(str(path), framework="np") as f:
        keys = set(f.keys())
        assert f.metadata()[CONFIG_METADATA_KEY] == "french"
        cache = f.get_tensor("transformer.layers.1.self_attn/cache")
        offset = f.get_tensor("transformer.layers.1.self_attn/offset")
    assert keys == {
        f"transformer.layers.{i}.self_attn/{name}"
        for i in (0, 1)
        for name in ("cache", "offset", "pad")
    }
    assert cache.shape == (2, 1, 7, 4, 16) and cache.dtype == np.float32
    assert offset.dtype == np.int64 and offset.tolist() == [7]


def test_upstream_file_with_nan_beyond_offset_loads(tmp_path: Path) -> None:
    kv = _kv(length=6)
    path = tmp_path / "upstream.safetensors"
    save_file(_upstream_tensors(kv, capacity=20), str(path))  # no metadata, like upstream
    voice = Voice.load(path, TINY)
    assert voice.length == 6 and voice.config_name is None
    _assert_same_kv(kv, voice.kv)
    assert voice.source == str(path)


def test_file_without_pad_loads(tmp_path: Path) -> None:
    kv = _kv(length=3)
    save_file(_upstream_tensors(kv, capacity=3, pad=False), str(tmp_path / "v.safetensors"))
    _assert_same_kv(kv, Voice.load(tmp_path / "v.safetensors", TINY).kv)


def test_legacy_current_end_gives_the_offset(tmp_path: Path) -> None:
    kv = _kv(length=4)
    tensors = _upstream_tensors(kv, capacity=10, pad=False)
    for i in range(2):
        del tensors[f"transformer.layers.{i}.self_attn/offset"]
        tensors[f"transformer.layers.{i}.self_attn/current_end"] = np.zeros(4, dtype=np.float32)
    save_file(tensors, str(tmp_path / "old.safetensors"))
    assert Voice.load(tmp_path / "old.safetensors").length == 4


def _write(tmp_path: Path, tensors: dict[str, np.ndarray]) -> Path:
    path = tmp_path / "bad.safetensors"
    save_file(tensors, str(path))
    return path


def _broken(tmp_path: Path, change) -> Path:
    tensors = _upstream_tensors(_kv(length=5), capacity=8)
    change(tensors)
    return _write(tmp_path, tensors)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda t: t.pop("transformer.layers.0.self_attn/cache"), "'cache' entry is missing"),
        (lambda t: t.pop("transformer.layers.1.self_attn/offset"), "'offset' entry is missing"),
        (
            lambda t: t.update({"transformer.layers.3.self_attn/cache": np.zeros(1, np.float32)}),
            "not contiguous",
        ),
        (
            lambda t: t.update(
                {"transformer.layers.1.self_attn/cache": np.zeros((2, 1, 8, 4, 8), np.float32)}
            ),
            "differs from layer 0",
        ),
        (
            lambda t: t.update({"transformer.layers.1.self_attn/offset": np.array([4])}),
            "offset 4 differs",
        ),
        (
            lambda t: t["transformer.layers.0.self_attn/cache"].__setitem__(
                (1, 0, 2, 0, 0), np.nan
            ),
            "NaN or infinite",
        ),
        (
            lambda t: t["transformer.layers.1.self_attn/cache"].__setitem__(
                (0, 0, 0, 1, 1), np.inf
            ),
            "NaN or infinite",
        ),
        (
            lambda t: t.update({"transformer.layers.0.self_attn/offset": np.array([9])}),
            "outside the cache",
        ),
        (
            lambda t: t.update({"transformer.layers.0.self_attn/offset": np.array([0])}),
            "outside the cache",
        ),
        (
            lambda t: t.update({"transformer.layers.0.self_attn/pad": np.array([2])}),
            "padded batch state",
        ),
        (
            lambda t: t.update({"transformer.layers.0.self_attn/cache": np.zeros((2, 8, 4), "f4")}),
            "expected \\[2, 1, T, kv_heads, head_dim\\]",
        ),
        (
            lambda t: t.update({"transformer.layers.0.self_attn/offset": np.array([1.5])}),
            "integer",
        ),
        (lambda t: t.update({"mimi.decoder/state": np.zeros(3, np.float32)}), "unexpected entry"),
    ],
)
def test_malformed_files_raise_voice_file_error(tmp_path: Path, change, message: str) -> None:
    path = _broken(tmp_path, change)
    with pytest.raises(VoiceFileError, match=message):
        Voice.load(path)


def test_empty_and_garbage_and_missing_files(tmp_path: Path) -> None:
    with pytest.raises(VoiceFileError, match="no voice state"):
        Voice.load(_write(tmp_path, {}))
    garbage = tmp_path / "garbage.safetensors"
    garbage.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00not json at all!")
    with pytest.raises(VoiceFileError, match="cannot read voice file"):
        Voice.load(garbage)
    with pytest.raises(VoiceFileError, match="not found"):
        Voice.load(tmp_path / "nope.safetensors")


@pytest.mark.parametrize(
    ("kv", "found"),
    [(_kv(layers=3), "3 layers"), (_kv(heads=2), "2 KV heads"), (_kv(dim=8), "8 dims")],
)
def test_voice_for_another_model_shape(tmp_path: Path, kv: VoiceKV, found: str) -> None:
    path = Voice(kv, config_name="english").save(tmp_path / "v.safetensors")
    Voice.load(path)  # fine without a model to check against
    with pytest.raises(VoiceFileError, match=found) as info:
        Voice.load(path, TINY)
    assert "needs 2 × 4 × 16" in str(info.value)


def _full_size_voice(config_name: str | None) -> Voice:
    return Voice(_kv(layers=6, length=2, heads=16, dim=64), config_name=config_name)


@pytest.mark.parametrize("made_for", ["english", None])
def test_voice_of_the_same_pack_is_accepted(made_for: str | None) -> None:
    _full_size_voice(made_for).check_compatible(get_config("english"))


@pytest.mark.parametrize(
    ("made_for", "loaded"),
    [
        ("french", "english"),  # same shapes, another language
        ("english_2026-04", "english"),  # same language and shapes, other weights
        ("german", "dutch"),
    ],
)
def test_voice_of_another_pack_is_rejected(made_for: str, loaded: str, tmp_path: Path) -> None:
    path = _full_size_voice(made_for).save(tmp_path / "v.safetensors")
    with pytest.raises(VoiceFileError, match=f"made for model config '{made_for}'"):
        Voice.load(path, get_config(loaded))


def test_custom_config_names_compare_by_language() -> None:
    custom = ModelConfig.from_dict("english_tiny", tiny_config_dict("standard"))
    Voice(_kv(), config_name="english").check_compatible(custom)
    Voice(_kv(), config_name="english_other_custom").check_compatible(custom)
    with pytest.raises(VoiceFileError, match="another language or other weights"):
        Voice(_kv(), config_name="french").check_compatible(custom)
    with pytest.raises(VoiceFileError):
        Voice(_kv(), config_name="spanish_custom").check_compatible(custom)


def test_extra_metadata_survives(tmp_path: Path) -> None:
    voice = Voice(
        _kv(), config_name="english", metadata={"speaker": "me", "notes": json.dumps([1])}
    )
    loaded = Voice.load(voice.save(tmp_path / "v.safetensors"))
    assert loaded.metadata["speaker"] == "me"
    assert loaded.metadata[CONFIG_METADATA_KEY] == "english"
