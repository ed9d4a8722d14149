"""The caller's words of one utterance with their times, as its frames are decoded.

``UtteranceWords`` runs a ``ChunkAligner`` per chunk and turns the chunks' word-unit times into
``Word``s of the caller's text: a caller word spans its first unit's start to its last unit's end
(across chunks when a chunk boundary falls inside its spoken form). A word is released on the
frame where it is complete (its end known), in order, once. A caller word with a spoken form
that the chunks did not contain (text the tokenizer could not say) is released with the end
time of the word before it and ``estimated=True``; words with no spoken form at all (markdown,
emoji) are not words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .config import FRAME_RATE
from .text.words import CallerWord, ChunkUnits
from .timestamps import ChunkAligner, UnitTiming


@dataclass(frozen=True)
class Word:
    """One word of the caller's text and when it is heard."""

    text: str  # as the caller wrote it ("$12.50.")
    index: int  # 0-based among its text's words (an enqueued text, or a fed stream)
    start: float  # seconds from the start of the utterance's audio
    end: float
    session_start: float  # the same on the session's audio clock
    session_end: float
    estimated: bool  # spread by length, not read from the model's attention


@dataclass(eq=False)
class WordLedger:
    """The caller words of one text and how far they were released.

    One per ``enqueue``d text, or per fed text stream (whose chunks are utterances of their
    own, sharing it). ``words`` may grow while the text streams in.
    """

    words: list[CallerWord]
    next: int = 0  # first caller word not released
    released: int = 0  # words released (the next Word.index)


class UtteranceWords:
    """Word times of one utterance, fed chunk by chunk and frame by frame."""

    def __init__(
        self,
        ledger: WordLedger | Sequence[CallerWord],
        *,
        session_offset: float = 0.0,
        frame_rate: float = FRAME_RATE,
    ) -> None:
        if not isinstance(ledger, WordLedger):
            ledger = WordLedger(list(ledger))
        self._ledger = ledger
        self._words = ledger.words
        self._offset = session_offset
        self._frame_seconds = 1.0 / frame_rate
        self._aligner: ChunkAligner | None = None
        self._chunk_start = 0  # utterance frame where the current chunk starts
        self._frames = 0  # frames of the utterance so far
        self._spans: dict[int, list] = {}  # caller word → [start, end, estimated] (frames)
        self._last_end = 0.0

    def start_chunk(self, units: ChunkUnits, *, attention: bool) -> None:
        """The next frames belong to a chunk with these units (attention: logits will come)."""
        self._aligner = ChunkAligner(units, attention=attention)
        self._chunk_start = self._frames

    def frame(
        self, samples: np.ndarray, logits: np.ndarray | None, *, last_in_chunk: bool
    ) -> tuple[Word, ...]:
        """One decoded frame of the current chunk → the words it completes."""
        if self._aligner is None:
            raise RuntimeError("start_chunk() must come before the chunk's frames")
        timings = self._aligner.frame(samples, logits)
        self._frames += 1
        out = self._take(timings, self._aligner.units)
        if last_in_chunk:
            out += self._end_chunk()
        return tuple(out)

    def finish(self, *, ends_text: bool = True) -> tuple[Word, ...]:
        """The utterance ended: release its words (``ends_text``: and every word left)."""
        out: list[Word] = []
        if self._aligner is not None:
            out += self._end_chunk()
        if ends_text:
            out += self._release(len(self._words))
        elif self._spans:
            out += self._release(max(self._spans) + 1)
        return tuple(out)

    # ------------------------------------------------------------------------- internals
    def _end_chunk(self) -> list[Word]:
        assert self._aligner is not None
        aligner, self._aligner = self._aligner, None
        out = self._take(aligner.finish(), aligner.units)
        held = aligner.units.open_word
        known = [w for w in self._spans if w != held]
        if known:
            out += self._release(max(known) + 1)
        return out

    def _take(self, timings: list[UnitTiming], chunk: ChunkUnits) -> list[Word]:
        units = chunk.units
        out: list[Word] = []
        for timing in timings:
            word = units[timing.unit].word
            assert word is not None
            if word < self._ledger.next:
                continue  # a word already released (a continuation after a cut)
            out += self._release(word)
            start = self._chunk_start + timing.start
            end = self._chunk_start + timing.end
            span = self._spans.setdefault(word, [start, end, timing.estimated])
            span[0], span[1] = min(span[0], start), max(span[1], end)
            span[2] = span[2] or timing.estimated
        return out

    def _release(self, limit: int) -> list[Word]:
        """Release the caller words before ``limit``, in order."""
        ledger = self._ledger
        limit = min(limit, len(self._words))
        out = []
        for index in range(ledger.next, limit):
            span = self._spans.pop(index, None)
            if span is None:
                if not self._words[index].keys:
                    continue  # markup: not a word
                span = [self._last_end, self._last_end, True]
            start, end = span[0] * self._frame_seconds, span[1] * self._frame_seconds
            out.append(
                Word(
                    text=self._words[index].text,
                    index=ledger.released,
                    start=start,
                    end=end,
                    session_start=self._offset + start,
                    session_end=self._offset + end,
                    estimated=bool(span[2]),
                )
            )
            ledger.released += 1
            self._last_end = span[1]
        ledger.next = max(ledger.next, limit)
        return out


@dataclass(frozen=True, eq=False)
class FrameWords:
    """What the word timing of one decoded frame needs besides its samples."""

    utterance: int  # the utterance's index in its session
    ledger: WordLedger  # the caller words of the utterance's text
    units: ChunkUnits  # the frame's chunk
    attention: np.ndarray | None  # [heads, chunk tokens] logits, None without heads
    first_in_chunk: bool
    last_in_chunk: bool
    last_in_utterance: bool
    ends_text: bool = True  # the utterance is the last of its text (enqueue; flush's last)


class SessionWords:
    """Word times of every utterance of a session, on the session's audio clock.

    Fed each decoded frame in output order; returns the words that frame completes. The
    session clock counts every frame the session output (80 ms each) since its start.
    """

    def __init__(self, frame_rate: float = FRAME_RATE) -> None:
        self._frame_rate = frame_rate
        self._frames = 0
        self._utterance: int | None = None
        self._current: UtteranceWords | None = None

    def frame(self, samples: np.ndarray, info: FrameWords) -> tuple[Word, ...]:
        out: tuple[Word, ...] = ()
        if info.utterance != self._utterance or self._current is None:
            out = self.reset()
            self._utterance = info.utterance
            self._current = UtteranceWords(
                info.ledger,
                session_offset=self._frames / self._frame_rate,
                frame_rate=self._frame_rate,
            )
        current = self._current
        if info.first_in_chunk:
            current.start_chunk(info.units, attention=info.attention is not None)
        self._frames += 1
        out += current.frame(samples, info.attention, last_in_chunk=info.last_in_chunk)
        if info.last_in_utterance:
            out += current.finish(ends_text=info.ends_text)
            self._current = self._utterance = None
        return out

    def reset(self) -> tuple[Word, ...]:
        """Forget the utterance under way (cancelled): its held words are dropped."""
        self._current = None
        self._utterance = None
        return ()


__all__ = ["FrameWords", "SessionWords", "UtteranceWords", "Word", "WordLedger"]
