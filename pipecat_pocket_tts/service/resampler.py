"""The service's stream resampler: 24 kHz float frames → 16-bit PCM at the pipeline's rate.

One soxr stream per run of continuous audio, made at the run's first frame and dropped at its
end. ``flush()`` at the end of a turn emits the samples the filter still holds (Pipecat's own
helper never does, so every turn loses its last ~20–110 ms at 8/16 kHz); ``reset()`` after an
interruption drops them. There is no silence-based clearing: the caller decides where a run of
audio ends.

No soxr stream outlives its run, or the interpreter: the engine's scheduler threads keep a
shared model's sessions (and with them the service's turns) alive until exit, and a soxr
stream alive when its extension unloads prints nanobind "leaked" lines on stderr. The streams
of runs still open at exit are dropped by an ``atexit`` hook.
"""

from __future__ import annotations

import atexit
import weakref

import numpy as np
import soxr

from ..engine import to_pcm16

_EMPTY = np.zeros(0, dtype=np.float32)


class OutputResampler:
    """Resample a mono float32 stream chunk by chunk and convert it to int16 PCM bytes."""

    def __init__(self, in_rate: int, out_rate: int, *, quality: str = "HQ") -> None:
        if in_rate <= 0 or out_rate <= 0:
            raise ValueError(f"sample rates must be positive, got {in_rate} → {out_rate}")
        self.in_rate = in_rate
        self.out_rate = out_rate
        self.quality = quality
        self._stream: soxr.ResampleStream | None = None  # the open run's filter, if any
        _LIVE.add(self)

    @property
    def passthrough(self) -> bool:
        """True when input and output rates are equal (no filter, nothing held)."""
        return self.in_rate == self.out_rate

    def process(self, samples: np.ndarray) -> bytes:
        """Resample samples float32 [n] (in_rate) → int16 PCM bytes at out_rate (may be empty)."""
        audio = np.asarray(samples, dtype=np.float32).reshape(-1)
        if self.passthrough:
            return to_pcm16(audio).tobytes()
        if self._stream is None:  # a run of audio starts (a new stream costs less than clear())
            self._stream = soxr.ResampleStream(
                self.in_rate, self.out_rate, 1, dtype="float32", quality=self.quality
            )
        return to_pcm16(self._stream.resample_chunk(audio)).tobytes()

    def flush(self) -> bytes:
        """Emit what the filter still holds (int16 PCM bytes); the next run starts afresh."""
        stream, self._stream = self._stream, None
        if stream is None:
            return b""
        return to_pcm16(stream.resample_chunk(_EMPTY, last=True)).tobytes()

    def reset(self) -> None:
        """Drop what the filter holds (after an interruption); the next run starts afresh."""
        self._stream = None


_LIVE: weakref.WeakSet[OutputResampler] = weakref.WeakSet()


@atexit.register
def _drop_open_streams() -> None:
    for resampler in list(_LIVE):
        resampler.reset()
