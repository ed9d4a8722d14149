"""WAV reading/writing, mono mixing, resampling, fades and the post-processing filter."""

from __future__ import annotations

import math
import struct
import wave
from pathlib import Path

import numpy as np
import pytest

from pipecat_pocket_tts.engine.audio import wav
from pipecat_pocket_tts.engine.audio.signal import (
    fade_in,
    high_shelf_coefficients,
    post_process,
    resample,
    to_mono,
)
from pipecat_pocket_tts.engine.audio.wav import read_wav, write_wav
from pipecat_pocket_tts.engine.errors import CloneAudioError

# -- write_wav ----------------------------------------------------------------------------


def test_write_wav_is_16_bit_mono_pcm_clipped_and_rounded(tmp_path: Path) -> None:
    samples = np.array([0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -3.0, 1 / 32767 * 0.6], np.float32)
    path = write_wav(tmp_path / "out.wav", samples, sample_rate=24_000)
    with wave.open(str(path)) as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, 24_000)
        pcm = np.frombuffer(w.readframes(w.getnframes()), "<i2")
    assert pcm.tolist() == [0, 16384, -16384, 32767, -32767, 32767, -32767, 1]
    assert path.stat().st_size == 44 + 2 * samples.size


def test_write_wav_accepts_n_by_1_and_other_rates(tmp_path: Path) -> None:
    path = write_wav(tmp_path / "x.wav", np.zeros((10, 1), np.float32), sample_rate=16_000)
    read, sr = read_wav(path)
    assert sr == 16_000 and read.shape == (10,)


@pytest.mark.parametrize(
    "bad",
    [np.zeros((4, 2), np.float32), np.array([0.1, np.nan], np.float32)],
)
def test_write_wav_failure_leaves_nothing(tmp_path: Path, bad: np.ndarray) -> None:
    target = tmp_path / "out.wav"
    target.write_bytes(b"previous content")
    with pytest.raises(ValueError):
        write_wav(target, bad)
    assert target.read_bytes() == b"previous content"
    assert [p.name for p in tmp_path.iterdir()] == ["out.wav"]


def test_write_wav_interrupted_mid_write_leaves_no_partial_file(
    tmp_path: Path, monkeypatch
) -> None:
    def broken_header(**_: int) -> bytes:
        raise OSError("disk full")

    monkeypatch.setattr(wav, "_wav_header", broken_header)
    with pytest.raises(OSError, match="disk full"):
        write_wav(tmp_path / "out.wav", np.zeros(100, np.float32))
    assert list(tmp_path.iterdir()) == []


# -- read_wav -----------------------------------------------------------------------------


def _pcm_file(path: Path, ints: np.ndarray, width: int, rate: int, channels: int = 1) -> Path:
    """A PCM WAV written by the standard library (independent of our writer)."""
    if width == 1:
        data = (ints + 128).astype(np.uint8).tobytes()
    elif width == 3:
        little = ints.astype("<i4").view(np.uint8).reshape(-1, 4)[:, :3]
        data = little.tobytes()
    else:
        data = ints.astype({2: "<i2", 4: "<i4"}[width]).tobytes()
    with wave.open(str(path), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(width)
        w.setframerate(rate)
        w.writeframes(data)
    return path


@pytest.mark.parametrize(
    ("width", "full_scale"), [(1, 128), (2, 32768), (3, 1 << 23), (4, 1 << 31)]
)
def test_read_pcm_widths(tmp_path: Path, width: int, full_scale: int) -> None:
    ints = np.array([0, full_scale // 2, -full_scale // 2, full_scale - 1, -full_scale], np.int64)
    path = _pcm_file(tmp_path / f"pcm{width}.wav", ints, width, 22_050)
    samples, sr = read_wav(path)
    assert sr == 22_050 and samples.dtype == np.float32 and samples.shape == (5,)
    np.testing.assert_allclose(samples, ints / full_scale, atol=1e-7)


def test_read_stereo_gives_frames_by_channels(tmp_path: Path) -> None:
    ints = np.array([100, -100, 200, -200, 300, -300], np.int64)  # interleaved L, R
    samples, _ = read_wav(_pcm_file(tmp_path / "st.wav", ints, 2, 8_000, channels=2))
    assert samples.shape == (3, 2)
    np.testing.assert_allclose(samples[:, 0] * 32768, [100, 200, 300])
    np.testing.assert_allclose(to_mono(samples), [0, 0, 0])


def _float_wav(
    samples: np.ndarray, rate: int, *, bits: int, extensible: bool, extra: bytes = b""
) -> bytes:
    channels = 1 if samples.ndim == 1 else samples.shape[1]
    data = samples.astype("<f4" if bits == 32 else "<f8").tobytes()
    block = channels * bits // 8
    if extensible:
        guid = struct.pack("<H", 3) + b"\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71"
        fmt = struct.pack(
            "<HHIIHHHHI", 0xFFFE, channels, rate, rate * block, block, bits, 22, bits, 0
        )
        fmt += guid
    else:
        fmt = struct.pack("<HHIIHHH", 3, channels, rate, rate * block, block, bits, 0)
    chunks = b"fmt " + struct.pack("<I", len(fmt)) + fmt + extra
    chunks += b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", 4 + len(chunks)) + b"WAVE" + chunks


@pytest.mark.parametrize(("bits", "extensible"), [(32, False), (64, False), (32, True)])
def test_read_float_wav(tmp_path: Path, bits: int, extensible: bool) -> None:
    samples = np.array([0.0, 0.25, -0.75, 1.5], np.float32)  # float WAVs may exceed ±1
    path = tmp_path / "f.wav"
    odd_chunk = b"LIST" + struct.pack("<I", 3) + b"abc" + b"\x00"  # odd size: padded
    path.write_bytes(_float_wav(samples, 48_000, bits=bits, extensible=extensible, extra=odd_chunk))
    read, sr = read_wav(path)
    assert sr == 48_000
    np.testing.assert_array_equal(read, samples)


def test_read_what_write_wav_wrote(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    samples = rng.uniform(-1, 1, 1000).astype(np.float32)
    read, sr = read_wav(write_wav(tmp_path / "rt.wav", samples))
    assert sr == 24_000
    np.testing.assert_allclose(read, samples, atol=2.0 / 32767)  # ×32767 out, /32768 in


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"ID3\x03\x00 this is an mp3", "not a WAV file"),
        (b"RIFF\x04\x00\x00\x00WAVE", "no 'fmt' chunk"),
    ],
)
def test_unreadable_files(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "x.wav"
    path.write_bytes(content)
    with pytest.raises(CloneAudioError, match=message):
        read_wav(path)


def test_unsupported_encodings_and_missing_file(tmp_path: Path) -> None:
    alaw = _float_wav(np.zeros(4, np.float32), 8000, bits=32, extensible=False)
    alaw = alaw.replace(struct.pack("<HH", 3, 1), struct.pack("<HH", 6, 1), 1)  # A-law tag
    (tmp_path / "alaw.wav").write_bytes(alaw)
    with pytest.raises(CloneAudioError, match="unsupported WAV encoding"):
        read_wav(tmp_path / "alaw.wav")
    with pytest.raises(CloneAudioError, match="cannot read audio file"):
        read_wav(tmp_path / "missing.wav")


# -- mono, resample, fade -----------------------------------------------------------------


def test_to_mono() -> None:
    mono = np.array([0.1, 0.2], np.float32)
    assert to_mono(mono) is not None and np.array_equal(to_mono(mono), mono)
    np.testing.assert_allclose(to_mono(np.array([[1.0, 0.0], [0.5, 0.5]])), [0.5, 0.5])
    with pytest.raises(ValueError):
        to_mono(np.zeros((2, 2, 2)))


def test_resample_keeps_frequency_and_duration() -> None:
    rate_in, rate_out = 44_100, 24_000
    t = np.arange(rate_in) / rate_in
    tone = np.sin(2 * np.pi * 440 * t).astype(np.float32)
    out = resample(tone, rate_in, rate_out)
    assert out.dtype == np.float32 and abs(out.size - rate_out) <= 1
    spectrum = np.abs(np.fft.rfft(out[:rate_out]))
    assert abs(np.argmax(spectrum) * rate_out / rate_out - 440) <= 1
    same = resample(tone, 16_000, 16_000)
    assert np.array_equal(same, tone) and same is not tone
    assert resample(np.zeros((100, 2), np.float32), 16_000, 8_000).shape == (50, 2)
    with pytest.raises(ValueError):
        resample(tone, 0, 24_000)


def test_fade_in() -> None:
    ones = np.ones(10, np.float32)
    faded = fade_in(ones, 4)
    np.testing.assert_allclose(faded, [0, 0.25, 0.5, 0.75, 1, 1, 1, 1, 1, 1])
    assert ones.tolist() == [1.0] * 10  # input untouched
    np.testing.assert_allclose(fade_in(np.ones(2, np.float32), 4), [0, 0.25])
    np.testing.assert_array_equal(fade_in(ones, 0), ones)
    assert fade_in(np.ones((3, 2), np.float32), 2)[:, 1].tolist() == [0.0, 0.5, 1.0]


# -- post-processing ----------------------------------------------------------------------


def _reference_post_process(x: np.ndarray, sr: int) -> np.ndarray:
    """Sample by sample, as the FluidAudio contract describes it (slow, obviously right)."""
    x = x.astype(np.float64)
    rc, dt = 1 / (2 * math.pi * 80), 1 / sr
    alpha = rc / (rc + dt)
    y = x.copy()
    prev_in, prev_out = x[0], 0.0
    for i in range(1, len(x)):
        prev_out = alpha * (prev_out + x[i] - prev_in)
        prev_in = x[i]
        y[i] = prev_out
    (b0, b1, b2), (a1, a2) = high_shelf_coefficients(sr)
    z1 = z2 = 0.0
    out = np.empty_like(y)
    for i, v in enumerate(y):  # Direct Form II transposed
        o = b0 * v + z1
        z1 = b1 * v - a1 * o + z2
        z2 = b2 * v - a2 * o
        out[i] = o
    return out


@pytest.mark.parametrize("n", [1, 2, 3, 127, 128, 129, 3001])
def test_post_process_matches_the_sample_by_sample_filter(n: int) -> None:
    x = (np.random.default_rng(n).standard_normal(n) * 0.3).astype(np.float32)
    out = post_process(x, 24_000)
    assert out.dtype == np.float32 and out.shape == (n,)
    np.testing.assert_allclose(out, _reference_post_process(x, 24_000), atol=1e-6)
    assert post_process(np.zeros(0, np.float32)).shape == (0,)


def _gain_db(freq: float, sr: int = 24_000) -> float:
    t = np.arange(sr) / sr
    tone = np.sin(2 * np.pi * freq * t).astype(np.float32)
    out = post_process(tone, sr)[sr // 2 :]
    return 20 * math.log10(np.sqrt(np.mean(out**2)) / np.sqrt(np.mean(tone[sr // 2 :] ** 2)))


def test_post_process_frequency_response() -> None:
    assert _gain_db(20) < -10  # rumble removed
    assert abs(_gain_db(1_000)) < 0.3  # speech band untouched
    assert -3.5 < _gain_db(11_000) < -2.5  # the -3 dB high shelf
    assert -2.5 < _gain_db(6_000) < -0.5  # half-way at the shelf frequency


def test_post_process_handles_long_audio_in_one_call() -> None:
    x = np.random.default_rng(0).standard_normal(240_000).astype(np.float32) * 0.1
    y = post_process(x)
    assert y.shape == x.shape and y.dtype == np.float32 and np.isfinite(y).all()


def test_high_shelf_coefficients_are_the_cookbook_ones() -> None:
    (b0, b1, b2), (a1, a2) = high_shelf_coefficients(24_000)
    # DC gain 1 (0 dB below the shelf), Nyquist gain A² = 10^(-3/20).
    assert (b0 + b1 + b2) / (1 + a1 + a2) == pytest.approx(1.0)
    assert (b0 - b1 + b2) / (1 - a1 + a2) == pytest.approx(10 ** (-3 / 20))
