"""Speaking rate: time-scale modification that keeps pitch (WSOLA), streamed frame by frame.

``TimeScaler`` stretches or compresses one stretch of 24 kHz audio by ``1/speed`` without
resampling: 26.7 ms Hann windows are laid every 13.3 ms on the output, each copied from the
input around ``speed`` times that position, shifted by up to ±6.7 ms to where it best
continues the previous window (waveform-similarity overlap-add). Pitch and spectrum stay; only
time changes.

It is fed as the audio comes (``push``: any number of samples) and gives back what is final at
once; ``flush`` ends the stretch with exactly ``round(n / speed)`` samples out in all. What it
holds back is bounded: after any push the output covers all but less than one 80 ms frame of
the input (at most 1760 of 1920 samples, at speed 4). An input time ``t`` is heard at
``t / speed`` of the output (± the tolerance), which is how word times are scaled. Speed 1 is
never run through it (callers pass the audio as is, bit for bit).
"""

from __future__ import annotations

import numpy as np

from ..checks import check_speed

# Samples: 26.7 ms at 24 kHz, two periods of a 75 Hz voice.
WINDOW = 640
# The output hop, 13.3 ms: Hann windows at half overlap sum to one.
HOP = WINDOW // 2
# How far (±6.7 ms, half a 75 Hz period) a window may move to fit its neighbour.
TOLERANCE = 160
# Input samples past a window's nominal centre that it may need.
LOOKAHEAD = HOP + TOLERANCE


_WINDOW_SHAPE = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(WINDOW) / WINDOW)).astype(np.float32)


class TimeScaler:
    """One stretch of audio (an utterance, or the part of it between two pauses) at ``speed``."""

    def __init__(self, speed: float) -> None:
        self.speed = check_speed(speed)
        # Input samples from ``_base`` on.
        self._input = np.zeros(0, np.float32)
        self._base = 0
        self._received = 0
        # The next output window.
        self._frame = 0
        # The input centre the last window was copied from.
        self._previous: int | None = None
        # Output from ``_emitted`` on, still summing.
        self._output = np.zeros(0, np.float32)
        self._emitted = 0

    @property
    def received(self) -> int:
        """Input samples pushed so far."""
        return self._received

    @property
    def emitted(self) -> int:
        """Output samples given back so far."""
        return self._emitted

    def push(self, samples: np.ndarray) -> np.ndarray:
        """Input samples [n] float32 → the output samples [m] float32 now final."""
        samples = np.asarray(samples, dtype=np.float32).reshape(-1)
        self._input = np.concatenate((self._input, samples))
        self._received += samples.shape[0]
        while self._needs(self._frame) <= self._received:
            self._add_window()
        return self._take(self._final_end())

    def flush(self) -> np.ndarray:
        """The stretch ends: the rest of its output (``round(received / speed)`` in all)."""
        total = round(self._received / self.speed)
        while self._final_end() < total:
            self._add_window()
        out = self._take(total)
        self.__init__(self.speed)  # type: ignore[misc]  # ready for a next stretch
        return out

    # -- internals ------------------------------------------------------------------------
    def _centre(self, frame: int) -> int:
        """The input centre window ``frame`` is nominally copied from."""
        return round(frame * HOP * self.speed)

    def _needs(self, frame: int) -> int:
        """Input samples window ``frame`` needs before it can be laid."""
        need = self._centre(frame) + LOOKAHEAD
        if self._previous is not None:
            # The natural continuation.
            need = max(need, self._previous + HOP + HOP)
        return need

    def _final_end(self) -> int:
        """Output samples before this are complete (no later window reaches them)."""
        return max(0, (self._frame - 1) * HOP)

    def _slice(self, start: int, end: int) -> np.ndarray:
        """Input [start, end) with zeros outside what was received [end - start]."""
        out = np.zeros(end - start, np.float32)
        lo, hi = max(start, self._base), min(end, self._base + self._input.shape[0])
        if hi > lo:
            out[lo - start : hi - start] = self._input[lo - self._base : hi - self._base]
        return out

    def _add_window(self) -> None:
        centre = self._centre(self._frame)
        if self._previous is not None:
            # Centred HOP samples past the last window.
            template = self._slice(self._previous, self._previous + WINDOW)
            region = self._slice(centre - TOLERANCE - HOP, centre + TOLERANCE + HOP)
            # Shape [2 * TOLERANCE + 1].
            fit = np.correlate(region, template, mode="valid")
            centre += int(np.argmax(fit)) - TOLERANCE
        segment = self._slice(centre - HOP, centre + HOP) * _WINDOW_SHAPE
        # Where the window lands in _output.
        start = (self._frame - 1) * HOP - self._emitted
        lo = max(0, -start)
        if start + WINDOW > self._output.shape[0]:
            grown = np.zeros(start + WINDOW, np.float32)
            grown[: self._output.shape[0]] = self._output
            self._output = grown
        self._output[start + lo : start + WINDOW] += segment[lo:]
        self._previous = centre
        self._frame += 1
        keep = min(self._centre(self._frame) - TOLERANCE - HOP, centre)
        # Drop the input no later window can reach.
        if keep > self._base:
            self._input = self._input[keep - self._base :]
            self._base = keep

    def _take(self, end: int) -> np.ndarray:
        """Output [emitted, end) out of the sum; the sum shifts to start at ``end``."""
        count = max(0, end - self._emitted)
        out = self._output[:count].copy()
        self._output = self._output[count:]
        self._emitted += count
        return out


__all__ = ["HOP", "LOOKAHEAD", "WINDOW", "TimeScaler"]
