"""Engine frames (float32, 24 kHz) as the bytes a client asked for: PCM, float or μ-law.

``pcm_s16le`` and ``float32`` stay at 24 kHz; ``mulaw`` is G.711 μ-law at 8 kHz for telephony,
resampled as a stream (no seam between frames).
"""

from __future__ import annotations

import numpy as np

from ..engine import SAMPLE_RATE, to_pcm16
from ..engine.errors import InvalidSettingError
from ..wire import ENCODINGS, MULAW_RATE

_MULAW_BIAS = 33  # on 14-bit magnitudes (G.711)
_MULAW_CLIP = 8159


def check_format(encoding: str, sample_rate: int) -> None:
    """Refuse an encoding or rate the server does not produce."""
    if encoding not in ENCODINGS:
        raise InvalidSettingError(
            f"encoding must be one of {', '.join(ENCODINGS)}; got {encoding!r}"
        )
    rate = MULAW_RATE if encoding == "mulaw" else SAMPLE_RATE
    if sample_rate != rate:
        raise InvalidSettingError(
            f"{encoding} audio is sent at {rate} Hz; got sample_rate={sample_rate}"
        )


def mulaw(pcm16: np.ndarray) -> np.ndarray:
    """int16 samples → G.711 μ-law bytes (sign, 3-bit segment, 4-bit step; inverted).

    On 14-bit values (the sample shifted right, flooring), as the G.711 reference coder.
    """
    values = pcm16.astype(np.int32) >> 2
    sign = np.where(values < 0, 0x80, 0)
    magnitude = np.minimum(np.abs(values), _MULAW_CLIP) + _MULAW_BIAS
    segment = np.floor(np.log2(magnitude)).astype(np.int32) - 5  # 0..7 for 33..8192
    step = np.where(segment > 7, 0x0F, (magnitude >> (segment + 1)) & 0x0F)
    segment = np.minimum(segment, 7)  # the clipped top: the loudest code
    return (~(sign | (segment << 4) | step) & 0xFF).astype(np.uint8)


class FrameEncoder:
    """One context's frames as bytes in its encoding (its resampler state included)."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        self._resampler = None
        if encoding == "mulaw":
            import soxr

            self._resampler = soxr.ResampleStream(SAMPLE_RATE, MULAW_RATE, 1, dtype="float32")

    def encode(self, samples: np.ndarray, *, last: bool = False) -> bytes:
        """``samples`` (float32 at 24 kHz) as bytes; ``last`` flushes the resampler."""
        if self.encoding == "float32":
            return np.asarray(samples, dtype="<f4").tobytes()
        if self._resampler is not None:
            samples = self._resampler.resample_chunk(samples, last=last)
            return mulaw(to_pcm16(samples)).tobytes()
        return to_pcm16(samples).tobytes()


__all__ = ["FrameEncoder", "check_format", "mulaw"]
