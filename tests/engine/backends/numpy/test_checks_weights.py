"""Weights checked finite at load: NaN or inf in a pack is a WeightsMismatchError naming the
tensor (issue 14 #9), never a model that speaks NaN."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict, write_safetensors
from pipecat_pocket_tts.engine import PocketTTS
from pipecat_pocket_tts.engine.backends.numpy.weights.checkpoint import iter_safetensors
from pipecat_pocket_tts.engine.backends.numpy.weights.finite import (
    SLICE_ELEMENTS,
    check_finite_weights,
    first_non_finite,
)
from pipecat_pocket_tts.engine.errors import WeightsMismatchError

POISONED = "flow_lm.transformer.layers.0.linear1.weight"


def poison(folder: Path, key: str, value: float, *, dtype: str = "float32") -> None:
    """Rewrite the pack's model.safetensors with one element of ``key`` set to ``value``."""
    path = folder / "model.safetensors"
    weights = {k: np.array(v) for k, v in iter_safetensors(path)}
    weights[key].reshape(-1)[weights[key].size // 2] = value
    write_safetensors(path, weights, dtype=dtype)


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_a_pack_with_non_finite_weights_does_not_load(
    engine_pack_dir: Path, tmp_path: Path, value: float
) -> None:
    folder = shutil.copytree(engine_pack_dir, tmp_path / "english")
    poison(folder, POISONED, value)
    with pytest.raises(WeightsMismatchError, match=POISONED.replace(".", r"\.")) as raised:
        PocketTTS.load("english", backend="numpy", model_dir=folder)
    assert "NaN or infinite" in str(raised.value)


def test_a_bf16_pack_with_nan_does_not_load(tmp_path: Path) -> None:
    folder = build_pack(tmp_path / "english", tiny_config_dict("standard"), dtype="bfloat16")
    poison(
        folder,
        "mimi.decoder_transformer.transformer.layers.0.linear1.weight",
        np.nan,
        dtype="bfloat16",
    )
    with pytest.raises(WeightsMismatchError, match="decoder_transformer"):
        PocketTTS.load("english", backend="numpy", model_dir=folder)


def test_a_finite_pack_loads_and_speaks_finite_audio(engine_tts: PocketTTS) -> None:
    audio = engine_tts.synthesize("Hello there.", seed=1)
    assert audio.size and np.isfinite(audio).all()


@settings(max_examples=30, deadline=None)
@given(
    size=st.integers(min_value=1, max_value=3 * SLICE_ELEMENTS + 7),
    data=st.data(),
)
def test_first_non_finite_across_slices(size: int, data: st.DataObject) -> None:
    array = np.zeros(size, np.float32)
    assert first_non_finite(array) is None
    where = data.draw(st.integers(min_value=0, max_value=size - 1))
    later = data.draw(st.integers(min_value=where, max_value=size - 1))
    array[later] = np.inf
    array[where] = np.nan
    assert first_non_finite(array) == where


def test_every_bad_tensor_is_named_and_integers_are_skipped() -> None:
    weights = {
        "a": np.ones((2, 3), np.float32),
        "b": np.array([[0.0, 1.0], [np.inf, 2.0]], np.float32),
        "c": np.array(np.nan, np.float32),
        "steps": np.array([1, 2], np.int64),
    }
    with pytest.raises(WeightsMismatchError) as raised:
        check_finite_weights(weights, source="test.safetensors")
    message = str(raised.value)
    assert "test.safetensors" in message
    assert "b (first at (1, 0): inf)" in message and "c (first at (): nan)" in message
    assert "a (" not in message
