"""The caller's words of one utterance with their times, as its frames are decoded.

``UtteranceWords`` runs a ``ChunkAligner`` per chunk and turns the chunks' word-span starts
and ends into words of the caller's text. Each word is released twice, in order, once each:

- a ``WordStart`` on the frame where it starts (its first span's start): what a player needs
  to show or commit the word as it is heard;
- a ``Word`` (start and end) on the frame where its end is known (its last span's end, across
  chunks when a chunk boundary falls inside its spoken form; a fed stream's chunks are
  utterances of their own, and a word still under way when one ends ends there). Its start is
  the ``WordStart``'s.

No value changes once released. A caller word with a spoken form that the chunks did not
contain (text the tokenizer could not say) starts and ends where the next word starts (at the
end of the text: where the word before it ends), ``estimated=True``; words with no spoken form
at all (markdown, emoji) are not words. A cancelled utterance's started words get no ``Word``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..model.config import FRAME_RATE
from .heads import ChunkAligner, SpanEvent, SpanStart, SpeakingRate
from .words import CallerWord, ChunkSpans


@dataclass(frozen=True)
class WordStart:
    """One word of the caller's text on the frame where it starts (its ``Word`` comes later)."""

    text: str
    """As the caller wrote it ("$12.50.")."""
    index: int
    """0-based among its text's words (an enqueued text, or a fed stream)."""
    start: float
    """Seconds from the start of the utterance's audio."""
    session_start: float
    """The same on the session's audio clock."""
    estimated: bool
    """Whether the start was estimated (spread by length) rather than read from attention."""


@dataclass(frozen=True)
class Word:
    """One word of the caller's text and when it is heard."""

    text: str
    """As the caller wrote it ("$12.50.")."""
    index: int
    """0-based among its text's words (an enqueued text, or a fed stream)."""
    start: float
    """Seconds from the start of the utterance's audio."""
    end: float
    session_start: float
    """The same on the session's audio clock."""
    session_end: float
    estimated: bool
    """Whether its start or end was spread by length rather than read from attention."""


@dataclass(frozen=True)
class WordTimes:
    """What one frame releases: the words starting in it, the words whose end it makes known."""

    starts: tuple[WordStart, ...] = ()
    words: tuple[Word, ...] = ()

    def __add__(self, other: WordTimes) -> WordTimes:
        return WordTimes(self.starts + other.starts, self.words + other.words)


class WordLedger:
    """The caller words of one text and how far they were started.

    One per ``enqueue``d text, or per fed text stream (whose chunks are utterances of their
    own, sharing it). ``words`` may grow while the text streams in.
    """

    def __init__(self, words: list[CallerWord]) -> None:
        self.words = words
        # First caller word not started.
        self._next = 0
        # Words started (the next Word.index).
        self._count = 0

    @property
    def next(self) -> int:
        """The first caller word not started yet."""
        return self._next

    def take(self, limit: int) -> list[tuple[int, int]]:
        """Start the caller words before ``limit``: (caller index, word index) of each that is
        a word (markup with no spoken form is passed over)."""
        limit = min(limit, len(self.words))
        out = []
        for caller in range(self._next, limit):
            if self.words[caller].keys:
                out.append((caller, self._count))
                self._count += 1
        self._next = max(self._next, limit)
        return out


@dataclass
class _Flight:
    """A started word of this utterance, in frames of the utterance (UtteranceWords' own)."""

    index: int
    start: float
    end: float | None
    estimated: bool
    done: bool = False


class UtteranceWords:
    """Word times of one utterance, fed chunk by chunk and frame by frame."""

    def __init__(
        self,
        ledger: WordLedger | Sequence[CallerWord],
        *,
        session_offset: float = 0.0,
        frame_rate: float = FRAME_RATE,
        rate: SpeakingRate | None = None,
    ) -> None:
        if not isinstance(ledger, WordLedger):
            ledger = WordLedger(list(ledger))
        self._ledger = ledger
        self._words = ledger.words
        self._offset = session_offset
        self._frame_seconds = 1.0 / frame_rate
        self._rate = rate or SpeakingRate()
        self._aligner: ChunkAligner | None = None
        # Caller word → its last span in the chunk.
        self._last_span: dict[int, int] = {}
        # Utterance frame where the current chunk starts.
        self._chunk_start = 0
        # Frames of the utterance so far.
        self._frames = 0
        # Caller word → started, not yet released whole.
        self._flights: dict[int, _Flight] = {}
        self._last_end = 0.0

    def start_chunk(self, spans: ChunkSpans, *, attention: bool) -> None:
        """The next frames belong to a chunk with these spans (attention: logits will come)."""
        self._aligner = ChunkAligner(spans, attention=attention, rate=self._rate)
        self._last_span = {u.word: i for i, u in enumerate(spans.spans) if u.word is not None}
        self._chunk_start = self._frames

    def frame(
        self, samples: np.ndarray, logits: np.ndarray | None, *, last_in_chunk: bool
    ) -> WordTimes:
        """One decoded frame of the current chunk → the words it starts and completes."""
        if self._aligner is None:
            raise RuntimeError("start_chunk() must come before the chunk's frames")
        events = self._aligner.frame(samples, logits)
        self._frames += 1
        out = self._take(events, self._aligner.spans)
        if last_in_chunk:
            out += self._end_chunk()
        return out

    def finish(self, *, ends_text: bool = True) -> WordTimes:
        """The utterance ended: release its words (``ends_text``: and every word left)."""
        out = self._end_chunk() if self._aligner is not None else WordTimes()
        # A word that goes on in the next utterance ends here.
        for flight in self._flights.values():
            flight.done = True
            flight.end = flight.start if flight.end is None else flight.end
        out += self._complete()
        if ends_text:
            out += self._start_upto(len(self._words), self._last_end)
        return out

    # ------------------------------------------------------------------------- internals
    def _end_chunk(self) -> WordTimes:
        assert self._aligner is not None
        aligner, self._aligner = self._aligner, None
        return self._take(aligner.finish(), aligner.spans)

    def _take(self, events: list[SpanEvent], chunk: ChunkSpans) -> WordTimes:
        out = WordTimes()
        for event in events:
            word = chunk.spans[event.span].word
            assert word is not None
            if isinstance(event, SpanStart):
                if word >= self._ledger.next:
                    frame = self._chunk_start + event.start
                    out += self._start_upto(word, frame)
                    out += self._start(word, frame, event.estimated)
                continue
            flight = self._flights.get(word)
            if flight is None:
                # A word already released (a continuation after a cut).
                continue
            end = self._chunk_start + event.end
            flight.end = end if flight.end is None else max(flight.end, end)
            flight.estimated = flight.estimated or event.estimated
            last = event.span == self._last_span[word] and word != chunk.open_word
            flight.done = flight.done or last
            out += self._complete()
        return out

    def _start_upto(self, limit: int, frame: float) -> WordTimes:
        """Caller words before ``limit`` that no chunk said: start and end at ``frame``."""
        starts = []
        for caller, index in self._ledger.take(limit):
            self._flights[caller] = _Flight(index, frame, frame, True, done=True)
            starts.append(self._word_start(caller, index, frame, True))
        return WordTimes(tuple(starts)) + self._complete()

    def _start(self, caller: int, frame: float, estimated: bool) -> WordTimes:
        starts = []
        # Taking up to ``caller + 1`` yields at most the one word ``caller``.
        for _, index in self._ledger.take(caller + 1):
            self._flights[caller] = _Flight(index, frame, None, estimated)
            starts.append(self._word_start(caller, index, frame, estimated))
        return WordTimes(tuple(starts))

    def _word_start(self, caller: int, index: int, frame: float, estimated: bool) -> WordStart:
        start = frame * self._frame_seconds
        return WordStart(self._words[caller].text, index, start, self._offset + start, estimated)

    def _complete(self) -> WordTimes:
        """Release the started words whose end is known, in order (each waits for earlier ones)."""
        out = []
        # The flights were started in caller order.
        for caller, flight in list(self._flights.items()):
            if not flight.done:
                break
            del self._flights[caller]
            assert flight.end is not None
            start, end = flight.start * self._frame_seconds, flight.end * self._frame_seconds
            out.append(
                Word(
                    self._words[caller].text,
                    flight.index,
                    start,
                    end,
                    self._offset + start,
                    self._offset + end,
                    flight.estimated,
                )
            )
            self._last_end = flight.end
        return WordTimes(words=tuple(out))


@dataclass(frozen=True, eq=False)
class FrameWords:
    """What the word timing of one decoded frame needs besides its samples."""

    utterance: int
    """The utterance's index in its session."""
    ledger: WordLedger
    """The caller words of the utterance's text."""
    spans: ChunkSpans
    """The frame's chunk."""
    attention: np.ndarray | None
    """[heads, chunk tokens] logits, None without heads."""
    first_in_chunk: bool
    last_in_chunk: bool
    last_in_utterance: bool
    ends_text: bool = True
    """Whether the utterance is the last of its text (enqueue's, or flush's last)."""


class SessionWords:
    """Word times of every utterance of a session, on the session's audio clock.

    Fed each decoded frame in output order; returns the words that frame starts and completes.
    The session clock counts every frame the session output (80 ms each) since its start. The
    fallback's speaking rate is learned over the session (``SpeakingRate``).
    """

    def __init__(self, frame_rate: float = FRAME_RATE) -> None:
        self._frame_rate = frame_rate
        self._frames = 0
        self._rate = SpeakingRate()
        self._utterance: int | None = None
        self._current: UtteranceWords | None = None

    def frame(self, samples: np.ndarray, info: FrameWords) -> WordTimes:
        if info.utterance != self._utterance or self._current is None:
            self.reset()
            self._utterance = info.utterance
            self._current = UtteranceWords(
                info.ledger,
                session_offset=self._frames / self._frame_rate,
                frame_rate=self._frame_rate,
                rate=self._rate,
            )
        current = self._current
        if info.first_in_chunk:
            current.start_chunk(info.spans, attention=info.attention is not None)
        self._frames += 1
        out = current.frame(samples, info.attention, last_in_chunk=info.last_in_chunk)
        if info.last_in_utterance:
            out += current.finish(ends_text=info.ends_text)
            self._current = self._utterance = None
        return out

    def reset(self) -> None:
        """Forget the utterance under way (cancelled): its started words get no ``Word``."""
        self._current = None
        self._utterance = None


__all__ = [
    "FrameWords",
    "SessionWords",
    "UtteranceWords",
    "Word",
    "WordLedger",
    "WordStart",
    "WordTimes",
]
