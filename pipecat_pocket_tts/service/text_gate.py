"""The text gate: which text reaches Pipecat's audio contexts, and in what pieces.

Pipecat writes a service off after three contexts with no audio, so text the engine would say
nothing of ("👍", "***", a code block, a script the pack cannot read) never reaches a context.
The check is the engine's own planning (``SpeechEngine.has_speech``: the plan is kept for the
enqueue that follows), so what it lets through always speaks:

- SENTENCE aggregation (and any whole text, a ``TTSSpeakFrame``): a text transform of the
  service, after the user's own, turns such text into "";
- TOKEN aggregation: a reply's LLM token frames are held back, before Pipecat sees them, until
  the engine's text stream would release a chunk of them (``SpeechEngine.speech_probe``: the
  stream a session's ``feed`` runs, so no first audio waits longer than it would anyway), then
  handed on in order; at the reply's end they go on if all of them say anything, and are
  dropped otherwise.

The questions are asked where the event loop is not held (``SpeechChecks``): on an engine that
answers locally, short text is checked on the loop (a sentence costs well under a
millisecond) and text over ``OFF_LOOP_CHARS`` on a worker thread; an engine that asks a server
is always asked from a worker thread. A load of the current settings still running is waited
for; with no engine every text passes (the turn finds out).

Text pieces: Pipecat's sentence aggregator, word-timestamp sequencer and word tracker each work
on one piece of text at a time (a sentence, a ``TTSSpeakFrame``'s whole text), and their cost
per word or per character grows with the piece: a 20 KB piece held the event loop for
seconds. A piece ends where Pipecat ends a sentence or, once it is ``PIECE_CHARS`` long
(``STREAMED_PIECE_CHARS`` with TOKEN aggregation), after whitespace that follows a clause mark
(",;:" and dashes); past twice that, after any whitespace; past four times that (a run with no
whitespace), after any mark that is neither a letter nor a digit. A word is never split, and
the text of the pieces put together is the text.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from pipecat.frames.frames import (
    AggregatedTextFrame,
    EndFrame,
    Frame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TextFrame,
    TTSSpeakFrame,
)

from ..engine.contract import OFF_LOOP_CHARS, SpeechEngine, SpeechProbe

_SURROGATE = re.compile("[\ud800-\udfff]")


class AsyncProbe(Protocol):
    """A ``SpeechProbe`` whose work runs where the event loop is not held."""

    async def push(self, text: str) -> bool: ...

    async def flush(self) -> bool: ...


class TextGate:
    """Drops text with nothing to say; holds a reply's tokens until they speak (TOKEN mode)."""

    def __init__(
        self,
        has_speech: Callable[[str], Awaitable[bool]],
        new_probe: Callable[[], Awaitable[AsyncProbe | None]],
        *,
        streamed: bool,
    ) -> None:
        self._has_speech = has_speech
        # None if no engine is loaded; the turn then finds out.
        self._new_probe = new_probe
        # True with TOKEN aggregation.
        self._streamed = streamed
        self._probe: AsyncProbe | None = None
        # Whether the reply's tokens so far give the engine a chunk to speak.
        self._reply_speaks = False
        # The reply's token frames, held until they speak.
        self._held: list[Frame] = []
        # An LLM reply started and has not ended.
        self._reply_open = False
        # The frame being handled is a whole text (TTSSpeakFrame).
        self._whole_text = False

    def observe(self, frame: Frame) -> bool:
        """Follow the replies through the frames the service gets; True for an ``EndFrame``
        while a reply is open (the service ends the reply first, so its rest is spoken:
        Pipecat would stop the service before the final flush)."""
        if isinstance(frame, (TextFrame, TTSSpeakFrame)) and _SURROGATE.search(frame.text):
            # A lone UTF-16 half (an emoji split between tokens) makes Pipecat's sentence
            # splitter raise before any text reaches the engine: dropped here.
            frame.text = _SURROGATE.sub("", frame.text)
        if isinstance(
            frame, (LLMFullResponseStartFrame, LLMFullResponseEndFrame, InterruptionFrame)
        ):
            self._new_reply()
        if isinstance(frame, LLMFullResponseStartFrame):
            self._reply_open = True
        elif isinstance(frame, (LLMFullResponseEndFrame, InterruptionFrame)):
            self._reply_open = False
        elif isinstance(frame, EndFrame) and self._reply_open:
            return True
        return False

    async def admit(self, frame: Frame) -> list[Frame]:
        """The frames to hand Pipecat now for ``frame`` (TOKEN aggregation holds a reply's
        token frames until their text speaks; its end brings them if all of it does)."""
        self._whole_text = isinstance(frame, TTSSpeakFrame)
        if not self._streamed:
            return [frame]
        if isinstance(frame, LLMFullResponseEndFrame):
            return [*await self._finish_reply(), frame]
        if not isinstance(frame, LLMTextFrame) or frame.skip_tts or self._reply_speaks:
            return [frame]
        if self._probe is None:
            self._probe = await self._new_probe()
        self._held.append(frame)
        if self._probe is not None and not await self._probe.push(frame.text):
            return []
        return self._release()

    async def check(self, text: str, text_type: str) -> str:
        """The service's text transform: the text, or "" when it has nothing to say (with
        TOKEN aggregation, a reply's tokens were checked together as they came)."""
        if self._streamed and not self._whole_text:
            return text
        return text if await self._has_speech(text) else ""

    async def _finish_reply(self) -> list[Frame]:
        probe = self._probe
        if self._reply_speaks or not self._held:
            return []
        if probe is None or await probe.flush():
            return self._release()
        # None of it speaks, so no context opens for it.
        self._held = []
        return []

    def _release(self) -> list[Frame]:
        held, self._held, self._probe = self._held, [], None
        self._reply_speaks = True
        return held

    def _new_reply(self) -> None:
        self._reply_speaks, self._held, self._probe = False, [], None


# -- the engine's answers, off the loop ------------------------------------------------
Result = TypeVar("Result")


@dataclass(frozen=True)
class TextSettings:
    """How the service's text is read: normalized or not, its lexicon, a regional variant."""

    normalize: bool
    lexicon: dict[str, str] | None
    text_language: str | None


async def _answer(engine: SpeechEngine, text: str, ask: Callable[[], Result]) -> Result:
    """``ask()`` on the loop when the engine answers locally and the text is short."""
    if engine.capabilities.answers_locally and len(text) <= OFF_LOOP_CHARS:
        return ask()
    return await asyncio.to_thread(ask)


class EngineProbe:
    """A ``SpeechProbe`` of the engine, each push asked off the loop when it must be."""

    def __init__(self, engine: SpeechEngine, probe: SpeechProbe) -> None:
        self._engine = engine
        self._probe = probe

    async def push(self, text: str) -> bool:
        return await _answer(self._engine, text, lambda: self._probe.push(text))

    async def flush(self) -> bool:
        return await _answer(self._engine, "", self._probe.flush)


class SpeechChecks:
    """Whether text says anything on the service's current engine and settings."""

    def __init__(
        self,
        engine: Callable[[], SpeechEngine | None],
        settled: Callable[[], Awaitable[None]],
        settings: Callable[[], TextSettings],
    ) -> None:
        """The checks of one service.

        Args:
            engine: The service's engine, once loaded.
            settled: Waits for a load of the current settings still running.
            settings: The service's text settings now.
        """
        self._engine = engine
        self._settings = settings
        self._settled = settled

    async def has_speech(self, text: str) -> bool:
        """False when the engine would say nothing of ``text``; True with no engine."""
        if self._engine() is None:
            await self._settled()
        engine = self._engine()
        if engine is None:
            return True
        settings = self._settings()

        def ask() -> bool:
            return engine.has_speech(
                text,
                settings.text_language,
                normalize=settings.normalize,
                lexicon=settings.lexicon,
            )

        return await _answer(engine, text, ask)

    async def new_probe(self) -> EngineProbe | None:
        """A probe for a reply's streamed text, once a load still running has settled (None
        with no engine)."""
        if self._engine() is None:
            await self._settled()
        engine = self._engine()
        if engine is None:
            return None
        settings = self._settings()
        probe = engine.speech_probe(
            settings.text_language, normalize=settings.normalize, lexicon=settings.lexicon
        )
        return EngineProbe(engine, probe)


def text_settings(settings: Any, text_language: str | None) -> TextSettings:
    """The text settings of the service's settings object."""
    return TextSettings(bool(settings.normalize), settings.lexicon or None, text_language)


# -- text pieces -------------------------------------------------------------------------
PIECE_CHARS = 300
"""Length from which a piece ends at the next clause mark followed by whitespace, where the
pieces are also what the engine gets (SENTENCE aggregation: one utterance each)."""

STREAMED_PIECE_CHARS = 100
"""The same with TOKEN aggregation, where the pieces are Pipecat's alone (the engine's text
stream gets the tokens and cuts as the batch path): Pipecat's work per word grows with its
piece, so they are kept shorter."""

CLAUSE_MARKS = frozenset(",;:—–-)")


def ends_piece(length: int, previous: str, char: str, limit: int = PIECE_CHARS) -> bool:
    """Whether a piece of ``length`` characters ending in ``previous`` + ``char`` ends after
    ``char`` (``char`` is the piece's last character; ``limit``: ``PIECE_CHARS`` or
    ``STREAMED_PIECE_CHARS``)."""
    if length < limit:
        return False
    if char.isspace():
        return length >= 2 * limit or previous in CLAUSE_MARKS
    return length >= 4 * limit and not char.isalnum()


def boundary_ends_piece(piece: str, following: str, limit: int = PIECE_CHARS) -> bool:
    """Whether ``piece`` ends before the text ``following`` it (a streamed token), by the
    rules of ``ends_piece``; at whitespace on either side, as if one space were added."""
    if len(piece) < limit or not following:
        return False
    if piece[-1].isspace() or following[0].isspace():
        return ends_piece(len(piece), piece.rstrip()[-1:], " ", limit)
    return ends_piece(len(piece), piece[-2:-1], piece[-1], limit)


def split_pieces(text: str, limit: int = PIECE_CHARS) -> list[str]:
    """``text`` cut into pieces (one piece when it is short); ``"".join`` gives it back."""
    if len(text) < limit:
        return [text]
    pieces: list[str] = []
    start = 0
    previous = ""
    for position, char in enumerate(text):
        if ends_piece(position + 1 - start, previous, char, limit):
            pieces.append(text[start : position + 1])
            start = position + 1
        previous = char
    if start < len(text):
        pieces.append(text[start:])
    return pieces


def piece_frames(
    frame: AggregatedTextFrame, streamed: bool, skipped: Collection[str]
) -> list[AggregatedTextFrame] | None:
    """A long aggregated text cut into frames of one piece each, or None when it goes whole
    (short, transformed, or of a type the service skips)."""
    text = frame.text
    limit = STREAMED_PIECE_CHARS if streamed else PIECE_CHARS
    if len(text) < limit or frame.raw_text not in (None, text) or frame.text_type in skipped:
        return None
    pieces = []
    for piece in split_pieces(text, limit):
        part = AggregatedTextFrame(piece, frame.text_type, raw_text=piece)
        part.interruptible = frame.interruptible
        pieces.append(part)
    return pieces


__all__ = [
    "CLAUSE_MARKS",
    "PIECE_CHARS",
    "STREAMED_PIECE_CHARS",
    "EngineProbe",
    "SpeechChecks",
    "TextGate",
    "TextSettings",
    "boundary_ends_piece",
    "ends_piece",
    "piece_frames",
    "split_pieces",
    "text_settings",
]
