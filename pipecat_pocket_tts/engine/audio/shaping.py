"""A session's frames on their way out: time-scaled to each utterance's speed, with its pauses.

``OutputShaper`` sits between a session's scheduler link and its frame channel (it has the
channel's ``put``/``close``), on the scheduler's thread, in output order. For an utterance
with a ``Shape`` (a speed other than 1, or ``<break/>`` pauses) it

- runs the frames' samples through a ``TimeScaler`` (pitch kept; frames come out shorter or
  longer, less than one frame held back; a frame whose audio is all held is not emitted);
  a word never comes before the frame its audio starts in, as at speed 1 (it waits);
- puts silent frames (≤ 1920 samples each) where the pauses are: before the first frame of a
  chunk (``before``) and after the utterance's last frame (``after``); the scaler is flushed
  at each pause, so the speech before it is whole;
- moves the word times with the audio: an utterance time ``t`` becomes
  ``out(segment) + (t - in(segment)) / speed`` and the session times count the samples really
  output, so a word's time is when it is heard (the context after a barge-in stays exact).

Utterances without a shape pass through untouched (bit for bit, same objects) until a shaped
one changed the session's clock; after that only their session times move.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ..frames import AudioFrame
from ..model.config import FRAME_SIZE, SAMPLE_RATE
from ..timing.word_timing import Word, WordStart
from .tempo import TimeScaler

if TYPE_CHECKING:
    from ..runtime.channel import FrameChannel

# Seconds: a word starting where a frame's audio ends goes with the next frame.
_EPSILON = 1e-9


@dataclass(frozen=True)
class Shape:
    """How one utterance's audio is shaped: its speed and its pauses (seconds)."""

    speed: float = 1.0
    # Chunk index to the pause before that chunk.
    before: dict[int, float] = field(default_factory=dict)
    # The pause after the utterance's last frame.
    after: float = 0.0

    @property
    def plain(self) -> bool:
        return self.speed == 1.0 and not any(self.before.values()) and not self.after


class OutputShaper:
    """One session's output stage (see the module doc). ``expect`` is called before an
    utterance's chunks are queued; ``put``/``close`` by the scheduler link."""

    def __init__(self, channel: FrameChannel[Any]) -> None:
        self._channel = channel
        self._lock = threading.Lock()
        self._shapes: dict[int, Shape] = {}
        # Input samples so far (the scheduler's clock).
        self._in = 0
        # Output samples so far (what is heard).
        self._out = 0
        # Once set, the two clocks differ.
        self._moved = False
        # The utterance under way.
        self._current: int | None = None
        self._shape = Shape()
        self._scaler: TimeScaler | None = None
        # The output sample where the current utterance starts.
        self._utterance_out = 0
        # Input samples of the current utterance so far.
        self._utterance_in = 0
        # Where each segment starts, as (utterance input, utterance output) samples.
        self._segments: list[tuple[int, int]] = []
        self._held: tuple[tuple[WordStart, ...], tuple[Word, ...]] = ((), ())

    def expect(self, utterance: int, shape: Shape) -> None:
        """``utterance`` will be shaped so (nothing to do for a plain shape)."""
        if not shape.plain:
            with self._lock:
                self._shapes[utterance] = shape

    # -- the channel's side --------------------------------------------------------------
    def put(self, item: Any) -> bool:
        if not isinstance(item, AudioFrame):
            return self._channel.put(item)
        if item.utterance_index != self._current:
            self._start(item.utterance_index)
        if not self._moved and self._shape.plain:
            size = item.samples.shape[0]
            self._in += size
            self._out += size
            return self._channel.put(item)
        return self._shaped(item)

    def close(self, error: BaseException | None = None, *, discard: bool = False) -> None:
        self._channel.close(error, discard=discard)

    # -- internals ------------------------------------------------------------------------
    def _start(self, utterance: int) -> None:
        with self._lock:
            self._shape = self._shapes.pop(utterance, Shape())
        self._current = utterance
        self._scaler = TimeScaler(self._shape.speed) if self._shape.speed != 1.0 else None
        self._utterance_out = self._out
        self._utterance_in = 0
        self._segments = [(0, 0)]
        if not self._shape.plain:
            self._moved = True

    def _shaped(self, frame: AudioFrame) -> bool:
        put = True
        if frame.frame_index == 0 and self._shape.before.get(frame.chunk_index):
            put = self._pause(frame, self._shape.before[frame.chunk_index])
        size = frame.samples.shape[0]
        samples = frame.samples if self._scaler is None else self._scaler.push(frame.samples)
        self._in += size
        self._utterance_in += size
        last = frame.is_last_in_utterance
        if last and self._scaler is not None:
            samples = np.concatenate((samples, self._scaler.flush()))
        starts = self._held[0] + tuple(self._word_start(w) for w in frame.words)
        words = self._held[1] + tuple(self._word(w) for w in frame.completed_words)
        self._held = ((), ())
        # A word whose audio is not out yet waits for the frame that has it.
        if not last:
            heard = (self._out + samples.shape[0] - self._utterance_out) / SAMPLE_RATE
            self._held = (
                tuple(w for w in starts if w.start >= heard - _EPSILON),
                tuple(w for w in words if w.start >= heard - _EPSILON),
            )
            starts = tuple(w for w in starts if w.start < heard - _EPSILON)
            words = tuple(w for w in words if w.start < heard - _EPSILON)
        if samples.shape[0] == 0 and not last:
            return put
        pause = self._shape.after if last else 0.0
        speech = replace(
            frame,
            samples=samples,
            words=starts,
            completed_words=words,
            is_last_in_utterance=last and not pause,
        )
        put = self._emit(speech) and put
        if pause:
            put = self._silence(frame, pause, last=True) and put
        return put

    def _pause(self, frame: AudioFrame, seconds: float) -> bool:
        """A pause before ``frame``: the scaler's rest, then silence; a new segment starts.
        Words held for audio not out yet go with the first of these frames."""
        fillers = []
        if self._scaler is not None:
            tail = self._scaler.flush()
            if tail.shape[0]:
                fillers.append(_filler(frame, tail))
        fillers += self._silence_frames(frame, seconds, last=False)
        if fillers:
            starts, words = self._held
            fillers[0] = replace(fillers[0], words=starts, completed_words=words)
            self._held = ((), ())
        put = all([self._emit(filler) for filler in fillers])
        self._segments.append((self._utterance_in, self._out - self._utterance_out))
        return put

    def _silence(self, frame: AudioFrame, seconds: float, *, last: bool) -> bool:
        return all([self._emit(f) for f in self._silence_frames(frame, seconds, last=last)])

    def _silence_frames(self, frame: AudioFrame, seconds: float, *, last: bool) -> list[AudioFrame]:
        """``seconds`` of silence in frames of at most FRAME_SIZE samples."""
        total = round(seconds * SAMPLE_RATE)
        return [
            _filler(
                frame,
                np.zeros(min(FRAME_SIZE, total - start), np.float32),
                last=last and start + FRAME_SIZE >= total,
            )
            for start in range(0, total, FRAME_SIZE)
        ]

    def _emit(self, frame: AudioFrame) -> bool:
        self._out += frame.samples.shape[0]
        return self._channel.put(frame)

    def _heard(self, seconds: float, *, end: bool = False) -> float:
        """An utterance input time → its output time (seconds into the utterance); a time on a
        pause's boundary is before the pause for an end, after it for a start."""
        sample = seconds * SAMPLE_RATE
        keys = [start for start, _ in self._segments]
        index = (bisect.bisect_left(keys, sample) if end else bisect.bisect_right(keys, sample)) - 1
        in_start, out_start = self._segments[max(index, 0)]
        return (out_start + (sample - in_start) / self._shape.speed) / SAMPLE_RATE

    def _word_start(self, word: WordStart) -> WordStart:
        start = self._heard(word.start)
        return replace(word, start=start, session_start=self._session(start))

    def _word(self, word: Word) -> Word:
        start, end = self._heard(word.start), self._heard(word.end, end=True)
        end = max(start, end)
        return replace(
            word,
            start=start,
            end=end,
            session_start=self._session(start),
            session_end=self._session(end),
        )

    def _session(self, seconds: float) -> float:
        return self._utterance_out / SAMPLE_RATE + seconds


def _filler(frame: AudioFrame, samples: np.ndarray, *, last: bool = False) -> AudioFrame:
    """A frame of ``frame``'s utterance and chunk holding ``samples`` and no words."""
    return replace(frame, samples=samples, words=(), completed_words=(), is_last_in_utterance=last)


__all__ = ["OutputShaper", "Shape"]
