"""The service's stream resampler: 24 kHz float frames → 16-bit PCM at the pipeline's rate.

One soxr stream per run of continuous audio. ``flush()`` at the end of a turn emits the
samples the filter still holds (Pipecat's own helper never does, so every turn loses its
last ~20–110 ms at 8/16 kHz); ``reset()`` after an interruption drops them. There is no
silence-based clearing: the caller decides where a run of audio ends.
"""

from __future__ import annotations

import numpy as np
import soxr

from ..engine.audio import to_pcm16

_EMPTY = np.zeros(0, dtype=np.float32)


class StreamResampler:
    """Resample a mono float32 stream chunk by chunk and convert it to int16 PCM bytes."""

    def __init__(self, in_rate: int, out_rate: int, *, quality: str = "HQ") -> None:
        if in_rate <= 0 or out_rate <= 0:
            raise ValueError(f"sample rates must be positive, got {in_rate} → {out_rate}")
        self.in_rate = in_rate
        self.out_rate = out_rate
        self.quality = quality
        self._stream: soxr.ResampleStream | None = None
        if in_rate != out_rate:
            self._stream = soxr.ResampleStream(
                in_rate, out_rate, 1, dtype="float32", quality=quality
            )
        self._holding = False  # fed since the last flush or reset

    @property
    def passthrough(self) -> bool:
        """True when input and output rates are equal (no filter, nothing held)."""
        return self._stream is None

    def process(self, samples: np.ndarray) -> bytes:
        """Resample samples float32 [n] (in_rate) → int16 PCM bytes at out_rate (may be empty)."""
        audio = np.asarray(samples, dtype=np.float32).reshape(-1)
        if self._stream is None:
            return to_pcm16(audio).tobytes()
        self._holding = True
        return to_pcm16(self._stream.resample_chunk(audio)).tobytes()

    def flush(self) -> bytes:
        """Emit what the filter still holds (int16 PCM bytes) and start a fresh stream."""
        if self._stream is None or not self._holding:
            return b""
        tail = self._stream.resample_chunk(_EMPTY, last=True)
        self._stream.clear()
        self._holding = False
        return to_pcm16(tail).tobytes()

    def reset(self) -> None:
        """Drop what the filter holds (after an interruption) and start a fresh stream."""
        if self._stream is not None:
            self._stream.clear()
        self._holding = False
