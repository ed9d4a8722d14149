"""Deterministic, band-limited voice-like test signals for the cloning fixtures and tests.

NumPy and the standard library only: the reference tool (torch venv) and the package tests
(system Python) both import this file and must produce the same samples. Every signal is a
closed-form function of time (no random generator, no running sums), so sampling it at 8 kHz,
24 kHz or 44.1 kHz gives the same sound, and all its energy lies below ``MAX_HZ`` (well inside
the band an 8 kHz recording keeps). It fades in over 20 ms, speaks, fades out over 10 ms ending
exactly at ``speech_seconds`` (a multiple of 20 ms, so upstream's trailing-silence trim lands
on the same 20 ms window at every sample rate) and is then exactly zero.
"""

from __future__ import annotations

import hashlib
import wave
from pathlib import Path

import numpy as np

#: Highest frequency present in the signals (Hz).
MAX_HZ = 3_000.0
_NOISE_PARTIALS = 48


def voice_like(
    speech_seconds: float,
    sample_rate: float,
    *,
    silence_seconds: float = 0.3,
    pitch_hz: float = 140.0,
    variant: int = 0,
) -> np.ndarray:
    """A speech-like mono signal [n] float64: gliding harmonics, syllable envelope, and a
    dense set of fixed partials standing in for breath noise. ``variant`` changes the timbre
    (another "speaker")."""
    n = round((speech_seconds + silence_seconds) * sample_rate)
    t = np.arange(n, dtype=np.float64) / sample_rate
    glide_hz, glide_depth = 0.8 + 0.1 * variant, 25.0 + 5.0 * variant
    # f0(t) = pitch + depth·sin(2π·glide·t): its phase in closed form.
    phase = 2 * np.pi * pitch_hz * t - (glide_depth / glide_hz) * np.cos(2 * np.pi * glide_hz * t)
    top = int(MAX_HZ // (pitch_hz + glide_depth))
    voiced = sum(
        np.sin(k * phase + 0.7 * k * (variant + 1)) / k ** (1.0 + 0.15 * variant)
        for k in range(1, top + 1)
    )
    partials = np.arange(_NOISE_PARTIALS, dtype=np.float64)
    freqs = 180.0 + (MAX_HZ - 200.0) * ((partials * 0.6180339887 + 0.05 * variant) % 1.0)
    phases = 2 * np.pi * ((partials * 0.7548776662 + 0.3 * variant) % 1.0)
    breath = np.zeros(n)
    for freq, offset in zip(freqs, phases, strict=True):
        breath += np.sin(2 * np.pi * freq * t + offset)
    syllables = 0.55 + 0.45 * np.sin(2 * np.pi * (3.1 + 0.4 * variant) * t) ** 2
    signal = 0.22 * syllables * voiced / np.log(top + 1) + 0.004 * breath
    return signal * _envelope(t, speech_seconds)


def stereo_pair(mono: np.ndarray, sample_rate: float, speech_seconds: float) -> np.ndarray:
    """[n] → [n, 2] whose channel mean is ``mono``: the channels differ by a faded tone."""
    t = np.arange(mono.shape[0], dtype=np.float64) / sample_rate
    side = 0.05 * np.sin(2 * np.pi * 523.25 * t) * _envelope(t, speech_seconds)
    return np.stack([mono + side, mono - side], axis=1)


def to_pcm16(samples: np.ndarray) -> np.ndarray:
    """Float samples in [-1, 1] → int16 PCM (rounded, clipped)."""
    return np.clip(np.round(np.asarray(samples) * 32767.0), -32768, 32767).astype(np.int16)


def write_pcm16_wav(path: Path, pcm: np.ndarray, sample_rate: int) -> Path:
    """int16 [n] or [n, channels] → a 16-bit PCM WAV file."""
    pcm = np.asarray(pcm, dtype=np.int16)
    channels = 1 if pcm.ndim == 1 else pcm.shape[1]
    with wave.open(str(path), "wb") as f:
        f.setnchannels(channels)
        f.setsampwidth(2)
        f.setframerate(int(sample_rate))
        f.writeframes(pcm.astype("<i2").tobytes())
    return path


def digest(pcm: np.ndarray) -> str:
    """sha256 of int16 PCM: proves both sides generated the very same samples."""
    return hashlib.sha256(np.ascontiguousarray(pcm, dtype="<i2").tobytes()).hexdigest()


def _envelope(t: np.ndarray, end: float, rise: float = 0.02, fall: float = 0.01) -> np.ndarray:
    """Raised-cosine fade-in over ``rise`` s, fade-out over the last ``fall`` s before ``end``,
    zero from ``end`` on."""
    up = np.clip(t / rise, 0.0, 1.0)
    down = np.clip((end - t) / fall, 0.0, 1.0)
    return (0.5 - 0.5 * np.cos(np.pi * up)) * (0.5 - 0.5 * np.cos(np.pi * down))
