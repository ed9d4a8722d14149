"""engine.tempo: WSOLA time-scaling keeps pitch, follows 1/speed, streams frame by frame."""

from __future__ import annotations

import numpy as np
import pytest

from pipecat_pocket_tts.engine.audio.tempo import TimeScaler
from pipecat_pocket_tts.engine.checks import check_speed
from pipecat_pocket_tts.engine.errors import InvalidSettingError, SettingTypeError
from pipecat_pocket_tts.engine.model.config import FRAME_SIZE, SAMPLE_RATE


def tone(seconds: float, hz: float = 220.0) -> np.ndarray:
    t = np.arange(round(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    return (0.5 * np.sin(2 * np.pi * hz * t) + 0.2 * np.sin(2 * np.pi * 3 * hz * t)).astype(
        np.float32
    )


def dominant_hz(audio: np.ndarray) -> float:
    spectrum = np.abs(np.fft.rfft(audio * np.hanning(audio.shape[0])))
    return float(np.fft.rfftfreq(audio.shape[0], 1 / SAMPLE_RATE)[np.argmax(spectrum)])


def scale_by_frames(audio: np.ndarray, speed: float) -> tuple[np.ndarray, list[int]]:
    scaler = TimeScaler(speed)
    pieces = [scaler.push(audio[i : i + FRAME_SIZE]) for i in range(0, audio.shape[0], FRAME_SIZE)]
    sizes = [p.shape[0] for p in pieces]
    pieces.append(scaler.flush())
    return np.concatenate(pieces), sizes


@pytest.mark.parametrize("speed", [0.25, 0.5, 0.8, 1.5, 2.0, 4.0])
def test_duration_follows_one_over_speed_and_pitch_stays(speed: float) -> None:
    audio = tone(2.0)
    out, _ = scale_by_frames(audio, speed)
    assert out.shape[0] == round(audio.shape[0] / speed)
    assert dominant_hz(out) == pytest.approx(220.0, abs=2.0)  # resampling would give 220·speed
    middle = out[out.shape[0] // 4 : 3 * out.shape[0] // 4]
    assert np.sqrt(np.mean(middle**2)) == pytest.approx(np.sqrt(np.mean(audio**2)), rel=0.05)


@pytest.mark.parametrize("speed", [0.25, 0.7, 1.5, 4.0])
def test_held_back_audio_is_bounded_by_one_frame(speed: float) -> None:
    """After every pushed frame, the audio out covers all but less than one frame of the input
    (the first frame's audio comes with it, except at 4x where it is all held: one frame)."""
    audio = tone(1.0)
    scaler = TimeScaler(speed)
    for start in range(0, audio.shape[0], FRAME_SIZE):
        scaler.push(audio[start : start + FRAME_SIZE])
        held = scaler.received - scaler.emitted * speed  # input samples not yet out
        assert held < FRAME_SIZE


def test_fragment_sizes_do_not_change_the_output() -> None:
    audio = tone(0.7, 180.0)
    by_frames, _ = scale_by_frames(audio, 1.3)
    scaler = TimeScaler(1.3)
    odd = [scaler.push(audio[i : i + 333]) for i in range(0, audio.shape[0], 333)]
    assert np.array_equal(np.concatenate([*odd, scaler.flush()]), by_frames)


def test_flush_resets_for_the_next_stretch() -> None:
    scaler = TimeScaler(2.0)
    first = np.concatenate([scaler.push(tone(0.3)), scaler.flush()])
    second = np.concatenate([scaler.push(tone(0.3)), scaler.flush()])
    assert np.array_equal(first, second)


@pytest.mark.parametrize("value", [0.2, 4.5, float("nan"), float("inf"), -1.0])
def test_speed_out_of_range_is_refused(value: float) -> None:
    with pytest.raises(InvalidSettingError, match=r"speed must be between 0\.25 and 4"):
        check_speed(value)


@pytest.mark.parametrize("value", [True, "1.5", None])
def test_speed_of_the_wrong_type_is_refused(value: object) -> None:
    with pytest.raises(SettingTypeError):
        check_speed(value)


@pytest.mark.parametrize("speed", [0.5, 1.5, 4.0])
def test_a_gliding_voice_comes_out_without_clicks(speed: float) -> None:
    """A voice-like tone whose pitch glides (120 ± 30 Hz, 11 harmonics): the windows are laid
    where the waveform continues, so no step between samples exceeds the input's."""
    t = np.arange(2 * SAMPLE_RATE) / SAMPLE_RATE
    phase = 2 * np.pi * np.cumsum(120 + 30 * np.sin(2 * np.pi * 3 * t)) / SAMPLE_RATE
    audio = (0.3 * sum(np.sin(k * phase) / k for k in range(1, 12))).astype(np.float32)
    out, _ = scale_by_frames(audio, speed)
    assert np.abs(np.diff(out)).max() <= np.abs(np.diff(audio)).max() * 1.01
    assert np.sqrt(np.mean(out**2)) == pytest.approx(np.sqrt(np.mean(audio**2)), rel=0.06)
