"""Engine frames (float32, 24 kHz) as 16-bit PCM or μ-law at the rate another protocol asks for.

Gradium's clients take 48 kHz PCM by default, LiveKit's any rate from 8 to 48 kHz: each
context resamples its frames as one stream (soxr, no seam between frames).
"""

from __future__ import annotations

import numpy as np

from ..engine import SAMPLE_RATE, to_pcm16
from ..engine.errors import InvalidSettingError
from .encodings import mulaw

MIN_RATE = 8000
MAX_RATE = 48000


class RateEncoder:
    """One context's frames as little-endian int16 PCM (or μ-law bytes) at ``rate`` Hz."""

    def __init__(self, rate: int, *, ulaw: bool = False) -> None:
        if not isinstance(rate, int) or isinstance(rate, bool) or not MIN_RATE <= rate <= MAX_RATE:
            raise InvalidSettingError(
                f"sample_rate must be an integer from {MIN_RATE} to {MAX_RATE} Hz; got {rate!r}"
            )
        self.rate = rate
        self._ulaw = ulaw
        self._resampler = None
        if rate != SAMPLE_RATE:
            import soxr

            self._resampler = soxr.ResampleStream(SAMPLE_RATE, rate, 1, dtype="float32")

    def encode(self, samples: np.ndarray, *, last: bool = False) -> bytes:
        """``samples`` (float32, (n,), 24 kHz) as bytes; ``last`` flushes the resampler."""
        if self._resampler is not None:
            samples = self._resampler.resample_chunk(np.asarray(samples, np.float32), last=last)
        pcm = to_pcm16(samples)
        return mulaw(pcm).tobytes() if self._ulaw else pcm.astype("<i2").tobytes()


__all__ = ["MAX_RATE", "MIN_RATE", "RateEncoder"]
