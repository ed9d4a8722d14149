"""Frames to bytes: 24 kHz float samples as 16-bit PCM, float32 or G.711 μ-law at any rate.

The one place output audio becomes bytes: files, every server route and the Pipecat service
use it. A ``FrameEncoder`` resamples a run of continuous audio as one soxr stream (no seam
between frames), made at the run's first frame and dropped at its end: ``flush()`` emits what
the filter still holds, ``reset()`` (after an interruption) drops it. No soxr stream outlives
the interpreter: a stream alive when its extension unloads prints nanobind "leaked" lines, so
the streams of runs still open at exit are dropped by an ``atexit`` hook.
"""

from __future__ import annotations

import atexit
import weakref

import numpy as np

from ..model.config import SAMPLE_RATE

#: The sample formats a ``FrameEncoder`` writes.
SAMPLE_FORMATS = ("pcm_s16le", "float32", "mulaw")

_MULAW_BIAS = 33  # on 14-bit magnitudes (G.711)
_MULAW_CLIP = 8159
_EMPTY = np.zeros(0, dtype=np.float32)


def to_pcm16(samples: np.ndarray) -> np.ndarray:
    """float samples [n] → little-endian int16 [n] (clipped to ±1, rounded half to even)."""
    return np.rint(np.clip(samples, -1.0, 1.0) * 32767.0).astype("<i2")


def mulaw(pcm16: np.ndarray) -> np.ndarray:
    """int16 samples [n] → G.711 μ-law codes [n] uint8 (sign, 3-bit segment, 4-bit step; inverted).

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
    """One stream of frames as bytes: its rate, its sample format and its resampler's state.

    Args:
        rate: The output rate in Hz.
        sample_format: ``"pcm_s16le"`` (little-endian int16), ``"float32"`` (little-endian) or
            ``"mulaw"`` (G.711, one byte a sample).
        source_rate: The rate of the samples given to ``encode`` (the engine's 24 kHz).
        quality: soxr's quality name.
    """

    def __init__(
        self,
        rate: int,
        sample_format: str = "pcm_s16le",
        *,
        source_rate: int = SAMPLE_RATE,
        quality: str = "HQ",
    ) -> None:
        if rate <= 0 or source_rate <= 0:
            raise ValueError(f"sample rates must be positive, got {source_rate} → {rate}")
        if sample_format not in SAMPLE_FORMATS:
            raise ValueError(
                f"sample_format must be one of {SAMPLE_FORMATS}, got {sample_format!r}"
            )
        self.rate = rate
        self.source_rate = source_rate
        self.sample_format = sample_format
        self.quality = quality
        self._stream = None  # the open run's soxr filter, if any
        _LIVE.add(self)

    @property
    def passthrough(self) -> bool:
        """True when the source and output rates are equal (no filter, nothing held)."""
        return self.rate == self.source_rate

    def encode(self, samples: np.ndarray, *, last: bool = False) -> bytes:
        """Samples float32 [n] at ``source_rate`` → bytes at ``rate`` (may be empty).

        Args:
            samples: The run's next samples.
            last: The run ends with these samples: the filter's tail is emitted too.

        Returns:
            The bytes in the encoder's sample format.
        """
        audio = np.asarray(samples, dtype=np.float32).reshape(-1)
        if not self.passthrough:
            if self._stream is None:
                import soxr

                self._stream = soxr.ResampleStream(
                    self.source_rate, self.rate, 1, dtype="float32", quality=self.quality
                )
            audio = self._stream.resample_chunk(audio, last=last)
            if last:
                self._stream = None
        return self._bytes(audio)

    def flush(self) -> bytes:
        """Emit what the filter still holds; the next run starts afresh.

        Returns:
            The tail's bytes (empty when nothing is held).
        """
        if self._stream is None:
            return b""
        return self.encode(_EMPTY, last=True)

    def reset(self) -> None:
        """Drop what the filter holds (after an interruption); the next run starts afresh."""
        self._stream = None

    def _bytes(self, audio: np.ndarray) -> bytes:
        if self.sample_format == "float32":
            return np.asarray(audio, dtype="<f4").tobytes()
        pcm = to_pcm16(audio)
        return (mulaw(pcm) if self.sample_format == "mulaw" else pcm).tobytes()


_LIVE: weakref.WeakSet[FrameEncoder] = weakref.WeakSet()


@atexit.register
def _drop_open_streams() -> None:
    for encoder in list(_LIVE):
        encoder.reset()
