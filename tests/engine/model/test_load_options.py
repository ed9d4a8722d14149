"""LoadOptions: one declaration of every load option, checked when it is made."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pipecat_pocket_tts.engine import PocketTTS
from pipecat_pocket_tts.engine.errors import LoadOptionError, UnknownBackendError
from pipecat_pocket_tts.engine.model.options import LoadOptions


@pytest.mark.parametrize(
    ("fields", "error", "match"),
    [
        ({"backend": "tpu"}, UnknownBackendError, "numpy"),
        ({"sampler_steps": 0}, LoadOptionError, "sampler_steps"),
        ({"sampler_steps": True}, LoadOptionError, "sampler_steps"),
        ({"sampler_steps": 1.5}, LoadOptionError, "sampler_steps"),
        ({"model_dir": 3}, LoadOptionError, "model_dir"),
        ({"revision": ""}, LoadOptionError, "revision"),
        ({"token": 3}, LoadOptionError, "token"),
        ({"precision": 8}, LoadOptionError, "precision"),
        ({"max_streams": "lots"}, LoadOptionError, 'max_streams must be an integer ≥ 1, "auto"'),
        ({"max_streams": 0}, LoadOptionError, "max_streams"),
        ({"compute_units": "gpu"}, ValueError, "preset"),
    ],
)
def test_bad_values_are_refused_when_made(fields: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        LoadOptions(**fields)


def test_options_are_frozen_and_normalized(tmp_path: Path) -> None:
    options = LoadOptions(backend="NumPy", model_dir=str(tmp_path))
    assert options.backend == "numpy" and options.model_dir == tmp_path
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.backend = "coreml"  # type: ignore[misc]


def test_keywords_build_the_options(engine_pack_dir: Path) -> None:
    tts = PocketTTS.load("english", backend="numpy", model_dir=engine_pack_dir)
    assert tts.options == LoadOptions(backend="numpy", model_dir=engine_pack_dir)
    base = LoadOptions(backend="numpy", model_dir=engine_pack_dir)
    four = PocketTTS.load("en", options=base, sampler_steps=4)
    assert four.options.sampler_steps == 4 and four.backend.capabilities.sampler_steps == 4
    with pytest.raises(TypeError, match="unknown load option"):
        PocketTTS.load("english", options=base, temp=0.5)


def test_load_shared_keys_on_the_options(engine_pack_dir: Path) -> None:
    PocketTTS.clear_shared()
    try:
        a = PocketTTS.load_shared("english", backend="numpy", model_dir=engine_pack_dir)
        b = PocketTTS.load_shared(
            "English", options=LoadOptions(backend="numpy", model_dir=engine_pack_dir)
        )
        c = PocketTTS.load_shared(
            "english", backend="numpy", model_dir=engine_pack_dir, sampler_steps=2
        )
        assert a is b and a is not c
    finally:
        PocketTTS.clear_shared()
