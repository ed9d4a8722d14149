"""The Pipecat service and the CLI at a narrow FlowLM precision."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pipecat.frames.frames import ErrorFrame, TTSAudioRawFrame, TTSSpeakFrame
from pipecat.tests.utils import run_test

from pipecat_pocket_tts import PocketTTSService
from pipecat_pocket_tts.__main__ import main
from pipecat_pocket_tts.engine import PocketTTS
from pipecat_pocket_tts.engine.audio.wav import read_wav
from pipecat_pocket_tts.engine.backends.numpy.weights import narrow_cache
from pipecat_pocket_tts.service import engine_load as loading_module

START = 30.0  # run_test start timeout: setup loads and warms the model up


@pytest.fixture(scope="module", autouse=True)
def _private_narrow_cache(tmp_path_factory):
    """Cached narrow copies go to a temporary folder, not the user's cache."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(narrow_cache.CACHE_ENV, str(tmp_path_factory.mktemp("narrow_cache")))
        yield


async def test_service_speaks_at_int8(engine_pack_dir: Path, monkeypatch) -> None:
    loaded: list[PocketTTS] = []
    load_shared = loading_module.load_shared_engine

    def recording(*args, **kwargs):
        loaded.append(load_shared(*args, **kwargs))
        return loaded[-1]

    monkeypatch.setattr(loading_module, "load_shared_engine", recording)
    tts = PocketTTSService(model_dir=engine_pack_dir, backend="numpy", precision="int8")
    down, up = await run_test(
        tts, frames_to_send=[TTSSpeakFrame("Good morning, how can I help?")], start_timeout=START
    )
    assert not [f for f in up if isinstance(f, ErrorFrame)]
    assert any(isinstance(f, TTSAudioRawFrame) for f in down)
    assert loaded and all(engine.backend.precision == "int8" for engine in loaded)


async def test_service_without_numba_reports_the_extra(engine_pack_dir: Path, no_numba) -> None:
    PocketTTS.clear_shared()
    tts = PocketTTSService(model_dir=engine_pack_dir, backend="numpy", precision="bf16")
    _, up = await run_test(tts, frames_to_send=[], start_timeout=START)
    errors = [f.error for f in up if isinstance(f, ErrorFrame)]
    assert errors and "pip install numba" in errors[0]


def test_cli_says_at_int8(engine_pack_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "int8.wav"
    argv = ["say", "Hello there.", "-o", str(out), "--model-dir", str(engine_pack_dir)]
    assert main([*argv, "--backend", "numpy", "--precision", "int8", "--seed", "1"]) == 0
    audio, _rate = read_wav(out)
    assert audio.size > 0 and np.isfinite(audio).all()


def test_cli_without_numba_is_one_clear_line(engine_pack_dir: Path, tmp_path, no_numba, capsys):
    argv = ["say", "Hi.", "-o", str(tmp_path / "x.wav"), "--model-dir", str(engine_pack_dir)]
    assert main([*argv, "--backend", "numpy", "--precision", "int8"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "pip install numba" in err
    assert "Traceback" not in err
