"""Measures of audio the speech-control tests share: spectral centroid, runs of silence."""

from __future__ import annotations

import numpy as np


def centroid(audio: np.ndarray, rate: int = 24000) -> float:
    """Spectral centroid (Hz) of float samples [n]: resampling by ``k`` moves it by ``k``."""
    magnitude = np.abs(np.fft.rfft(audio))
    frequencies = np.fft.rfftfreq(audio.shape[0], 1 / rate)
    return float((magnitude * frequencies).sum() / magnitude.sum())


def silent_run(audio: np.ndarray) -> int:
    """The longest run of exact zeros in samples [n]."""
    zero = np.concatenate(([0], (np.asarray(audio) == 0).astype(np.int8), [0]))
    edges = np.flatnonzero(np.diff(zero))
    return int((edges[1::2] - edges[::2]).max()) if edges.size else 0
