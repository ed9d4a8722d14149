"""Output at the pipeline's rate (the service's ``engine.FrameEncoder`` per stream): nothing lost
at the end of a turn, nothing left after a reset."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from paths import REPO_ROOT

from pipecat_pocket_tts.engine import FrameEncoder

FRAME = 1920  # samples per engine frame at 24 kHz


def _tone(frames: int) -> np.ndarray:
    t = np.arange(frames * FRAME) / 24000
    return (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)


def _samples(pcm: bytes) -> np.ndarray:
    return np.frombuffer(pcm, dtype="<i2").astype(np.float32) / 32767


@pytest.mark.parametrize("rate", [8000, 16000, 22050, 44100, 48000])
def test_flush_keeps_the_tail(rate: int) -> None:
    resampler = FrameEncoder(rate, source_rate=24000)
    audio = _tone(10)
    body = b"".join(resampler.encode(audio[i : i + FRAME]) for i in range(0, audio.size, FRAME))
    tail = resampler.flush()
    expected = audio.size * rate / 24000
    assert len(tail) > 0  # the filter held samples back: without the flush they are lost
    assert abs((len(body) + len(tail)) / 2 - expected) <= 2


@pytest.mark.parametrize("rate", [8000, 16000, 48000])
def test_resampled_tone_keeps_its_pitch_and_level(rate: int) -> None:
    resampler = FrameEncoder(rate, source_rate=24000)
    out = _samples(resampler.encode(_tone(10)) + resampler.flush())
    middle = out[out.size // 4 : 3 * out.size // 4]
    spectrum = np.abs(np.fft.rfft(middle * np.hanning(middle.size)))
    peak_hz = np.argmax(spectrum) * rate / middle.size
    assert abs(peak_hz - 440) < 5
    assert abs(np.sqrt(np.mean(middle**2)) - 0.5 / np.sqrt(2)) < 0.01


def test_reset_drops_held_audio_and_a_new_run_starts_clean() -> None:
    resampler = FrameEncoder(8000, source_rate=24000)
    resampler.encode(_tone(3))
    resampler.reset()
    assert resampler.flush() == b""  # nothing held after a reset
    silence = _samples(resampler.encode(np.zeros(FRAME * 3, np.float32)) + resampler.flush())
    assert np.max(np.abs(silence)) == 0.0  # no leftover of the tone leaks into the next run


def test_same_rate_is_a_passthrough_with_int16_conversion() -> None:
    resampler = FrameEncoder(24000, source_rate=24000)
    audio = np.array([0.0, 0.5, -0.5, 1.5, -2.0], np.float32)
    pcm = np.frombuffer(resampler.encode(audio), dtype="<i2")
    assert resampler.passthrough
    assert pcm.tolist() == [0, 16384, -16384, 32767, -32767]  # rounded, clipped
    assert resampler.flush() == b""


def test_flush_without_audio_is_empty_and_rates_must_be_positive() -> None:
    assert FrameEncoder(16000, source_rate=24000).flush() == b""
    with pytest.raises(ValueError, match="positive"):
        FrameEncoder(0, source_rate=24000)


def test_no_soxr_stream_outlives_a_run() -> None:
    resampler = FrameEncoder(8_000, source_rate=24_000)
    resampler.encode(np.zeros(1920, np.float32))
    assert resampler._stream is not None
    resampler.flush()
    assert resampler._stream is None  # dropped at the run's end, made again at the next
    assert len(resampler.encode(np.zeros(1920, np.float32))) > 0


def test_a_run_open_at_exit_prints_no_leak_lines() -> None:
    # Held by a daemon thread, as the engine's scheduler threads hold a shared model's sessions
    # (and the service's turns): alive while the extension modules unload.
    script = (
        "import threading\n"
        "import numpy as np\n"
        "from pipecat_pocket_tts.engine import FrameEncoder\n"
        "held = threading.Event()\n"
        "def hold(resampler):\n"
        "    resampler.encode(np.zeros(1920, np.float32))\n"
        "    held.set()\n"
        "    threading.Event().wait()\n"
        "resampler = FrameEncoder(8_000, source_rate=24_000)\n"
        "threading.Thread(target=hold, args=(resampler,), daemon=True).start()\n"
        "del resampler\n"
        "held.wait()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "leaked" not in result.stderr and "nanobind" not in result.stderr
