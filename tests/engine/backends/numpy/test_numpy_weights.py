"""Checkpoint keys/shapes from configs, and loading model.safetensors (fp32, bf16) with checks."""

from __future__ import annotations

import ast
import json
import struct
from pathlib import Path

import numpy as np
import pytest
from paths import FIXTURES_DIR
from safetensors.numpy import save_file

from pipecat_pocket_tts.engine.backends.numpy.weights.checkpoint import (
    expected_shapes,
    has_voice_cloning,
    is_cloning_key,
    load_checkpoint,
)
from pipecat_pocket_tts.engine.backends.numpy.weights.safetensors_file import drop_resident_pages
from pipecat_pocket_tts.engine.errors import WeightsMismatchError
from pipecat_pocket_tts.engine.model.config import ModelConfig, get_config

FIXTURES = FIXTURES_DIR / "reference"
# Upstream's state-dict listings (key, shape) of eight real configs: a copy in the repo when
# present, else the team's shared reference folder.
_LISTING_DIRS = (
    FIXTURES_DIR / "upstream-state-dicts",
    Path("/work/shared/reference/upstream-state-dicts"),
)
REPO_STATE_DICTS = next(
    (sorted(d.glob("*.tsv")) for d in _LISTING_DIRS if any(d.glob("*.tsv"))), []
)


def _read_tsv(path: Path) -> dict[str, tuple[int, ...]]:
    rows = {}
    for line in path.read_text().splitlines():
        key, shape = line.split("\t")
        rows[key] = tuple(ast.literal_eval(shape))
    return rows


@pytest.mark.skipif(not REPO_STATE_DICTS, reason="upstream state-dict listings not on this machine")
@pytest.mark.parametrize("tsv", REPO_STATE_DICTS, ids=lambda p: p.stem)
def test_expected_shapes_match_upstream_state_dict(tsv):
    reference = _read_tsv(tsv)
    got = expected_shapes(get_config(tsv.stem))
    assert set(got) - set(reference) == set()
    assert set(reference) - set(got) == set()
    assert {k: v for k, v in got.items() if reference[k] != v} == {}


def test_expected_shapes_cover_every_registry_config():
    english = expected_shapes(get_config("english"))
    assert english["flow_lm.transformer.layers.5.self_attn.in_proj.weight"] == (3072, 1024)
    assert english["mimi.downsample.conv.conv.weight"] == (32, 512, 32)
    for name in ("english_7m_2026-10", "english_2m_2026-10", "english_18m_2026-10"):
        shapes = expected_shapes(get_config(name))
        assert "flow_lm.z_proj.weight" in shapes
        assert not any(".time_embed." in k for k in shapes)  # drifting / pointwise heads
    assert expected_shapes(get_config("english_2026-01"))["flow_lm.speaker_proj_weight"] == (
        1024,
        512,
    )


# -- loading ----------------------------------------------------------------------------------


def _tiny_config() -> ModelConfig:
    raw = json.loads((FIXTURES / "tiny_small" / "config.json").read_text())
    return ModelConfig.from_dict("tiny_small", raw)


def _random_weights(config: ModelConfig, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        key: rng.standard_normal(shape).astype(np.float32)
        for key, shape in expected_shapes(config).items()
    }


def _write_raw(path: Path, tensors: dict[str, np.ndarray], dtype: str, *, align: int = 8) -> None:
    """A safetensors file written by hand: F32, or BF16 (the top 16 bits of each float32).

    ``align`` pads the JSON header to a multiple of it (1: no padding, data may be misaligned).
    """
    header, blobs, offset = {}, [], 0
    for key, array in tensors.items():
        array = np.ascontiguousarray(array, np.float32)
        raw = (array.view(np.uint32) >> 16).astype("<u2") if dtype == "BF16" else array
        data = raw.tobytes()
        header[key] = {
            "dtype": dtype,
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        blobs.append(data)
        offset += len(data)
    text = json.dumps({"__metadata__": {"format": "pt"}, **header}).encode()
    text += b" " * (-len(text) % align)
    if align == 1 and (8 + len(text)) % 4 == 0:
        text += b" "  # force a misaligned data section
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for data in blobs:
            f.write(data)


def test_fp32_load_roundtrip_is_memory_mapped_and_read_only(tmp_path):
    config = _tiny_config()
    weights = _random_weights(config)
    save_file(weights, str(tmp_path / "model.safetensors"))
    loaded = load_checkpoint(tmp_path / "model.safetensors", config)
    assert set(loaded) == set(weights)
    for key, array in weights.items():
        assert loaded[key].dtype == np.float32
        np.testing.assert_array_equal(loaded[key], array)
    sample = loaded["flow_lm.transformer.layers.0.linear1.weight"]
    assert not sample.flags.writeable  # a view of the file, not a copy
    assert has_voice_cloning(loaded, config)


def _resident_kb(path: Path) -> int:
    """Resident kB of this process's mappings of ``path`` (/proc/self/smaps)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if not fields[0].endswith(":"):
            inside = len(fields) > 5 and fields[5] == str(path)
        elif inside and fields[0] == "Rss:":
            total += int(fields[1])
    return total


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="reads Linux /proc/self/smaps")
def test_dropping_resident_pages_keeps_the_values(tmp_path):
    config = _tiny_config()
    weights = _random_weights(config)
    path = (tmp_path / "model.safetensors").resolve()
    save_file(weights, str(path))
    loaded = load_checkpoint(path, config)  # the finite check has read every tensor
    assert _resident_kb(path) > 0
    assert drop_resident_pages([*loaded.values(), np.zeros(3)]) == 1  # one map behind them all
    assert _resident_kb(path) == 0
    for key, array in weights.items():  # read again: back from the page cache, unchanged
        np.testing.assert_array_equal(loaded[key], array)
    assert _resident_kb(path) > 0


def test_bf16_is_widened_to_fp32(tmp_path):
    config = _tiny_config()
    weights = _random_weights(config, seed=1)
    _write_raw(tmp_path / "model.safetensors", weights, "BF16")
    loaded = load_checkpoint(tmp_path / "model.safetensors", config)
    for key, array in weights.items():
        truncated = (array.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
        assert loaded[key].dtype == np.float32
        np.testing.assert_array_equal(loaded[key], truncated)


def test_misaligned_fp32_data_still_loads(tmp_path):
    config = _tiny_config()
    weights = _random_weights(config, seed=2)
    _write_raw(tmp_path / "model.safetensors", weights, "F32", align=1)
    loaded = load_checkpoint(tmp_path / "model.safetensors", config)
    for key, array in weights.items():
        assert loaded[key].flags.aligned
        np.testing.assert_array_equal(loaded[key], array)


def test_mismatches_name_missing_unexpected_and_misshapen_keys(tmp_path):
    config = _tiny_config()
    weights = _random_weights(config)
    del weights["flow_lm.out_norm.weight"]
    weights["flow_lm.not_a_weight"] = np.zeros(3, np.float32)
    weights["flow_lm.input_linear.weight"] = np.zeros((7, 7), np.float32)
    save_file(weights, str(tmp_path / "model.safetensors"))
    with pytest.raises(WeightsMismatchError) as info:
        load_checkpoint(tmp_path / "model.safetensors", config)
    message = str(info.value)
    assert "missing: flow_lm.out_norm.weight" in message
    assert "unexpected: flow_lm.not_a_weight" in message
    assert "misshapen: flow_lm.input_linear.weight (7, 7)" in message
    assert "tiny_small" in message


def test_other_config_weights_are_rejected(tmp_path):
    small = _tiny_config()
    lsd = ModelConfig.from_dict(
        "tiny_lsd", json.loads((FIXTURES / "tiny_lsd" / "config.json").read_text())
    )
    save_file(_random_weights(lsd), str(tmp_path / "model.safetensors"))
    with pytest.raises(WeightsMismatchError):
        load_checkpoint(tmp_path / "model.safetensors", small)


def test_not_a_safetensors_file_is_a_clear_error(tmp_path):
    path = tmp_path / "model.safetensors"
    path.write_bytes(b"\xff" * 64)
    with pytest.raises(WeightsMismatchError, match="not a safetensors file"):
        load_checkpoint(path, _tiny_config())


def test_cloning_weights_may_be_absent_or_zero(tmp_path):
    config = _tiny_config()
    weights = _random_weights(config)
    cloning = [k for k in weights if is_cloning_key(k)]
    assert "flow_lm.speaker_proj_weight" in cloning
    assert any(k.startswith("mimi.encoder.") for k in cloning)
    assert not any(k.startswith("mimi.decoder.") for k in cloning)

    absent = {k: v for k, v in weights.items() if not is_cloning_key(k)}
    save_file(absent, str(tmp_path / "absent.safetensors"))
    loaded = load_checkpoint(tmp_path / "absent.safetensors", config)
    assert not has_voice_cloning(loaded, config)

    zeroed = {k: (np.zeros_like(v) if is_cloning_key(k) else v) for k, v in weights.items()}
    save_file(zeroed, str(tmp_path / "zeroed.safetensors"))
    loaded = load_checkpoint(tmp_path / "zeroed.safetensors", config)
    assert not has_voice_cloning(loaded, config)
