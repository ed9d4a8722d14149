"""Which text opens a Pipecat audio context: text with nothing to say ("👍", "***") never does.

Pipecat writes a service off after three contexts with no audio, so such text is dropped before
a context opens (a text transform of the service, after the user's own), whatever its length
(long text is checked off the event loop). With TOKEN aggregation the reply's leading tokens
with nothing to say are held back until one with something to say takes them along ("$" then
"5" reads "$5"); each token is checked with the end of the held text before it
(``HELD_CONTEXT_CHARS``), so a long silent run costs the same for every token.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

from pipecat.frames.frames import (
    EndFrame,
    Frame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    TextFrame,
    TTSSpeakFrame,
)

_SURROGATE = re.compile("[\ud800-\udfff]")

HELD_CONTEXT_CHARS = 64
"""How much of the held silent text a new token is checked with: enough for any spoken form
that spans tokens ("$" "1" "2" ".5", "2026" "-" "11")."""


class TextGate:
    """Drops text with nothing to say; holds a reply's silent leading tokens (TOKEN mode)."""

    def __init__(self, has_speech: Callable[[str], Awaitable[bool]]) -> None:
        self._has_speech = has_speech
        self._reply_speaks = False  # a token of this reply had something to say
        self._silent_start: list[str] = []  # the reply's tokens so far, none with anything to say
        self._silent_tail = ""  # the end of that text (HELD_CONTEXT_CHARS)
        self._reply_open = False  # an LLM reply started and has not ended

    def observe(self, frame: Frame) -> bool:
        """Follow the replies through the frames the service gets; True for an ``EndFrame``
        while a reply is open (the service ends the reply first, so its rest is spoken:
        Pipecat would stop the service before the final flush)."""
        if isinstance(frame, (TextFrame, TTSSpeakFrame)) and _SURROGATE.search(frame.text):
            # A lone UTF-16 half (an emoji split between tokens) makes Pipecat's sentence
            # splitter raise before any text reaches the engine: dropped here.
            frame.text = _SURROGATE.sub("", frame.text)
        if isinstance(frame, (LLMFullResponseStartFrame, LLMFullResponseEndFrame, TTSSpeakFrame)):
            self.new_text()
        if isinstance(frame, LLMFullResponseStartFrame):
            self._reply_open = True
        elif isinstance(frame, (LLMFullResponseEndFrame, InterruptionFrame)):
            self._reply_open = False
        elif isinstance(frame, EndFrame) and self._reply_open:
            return True
        return False

    def new_text(self) -> None:
        """A new reply (or spoken text) begins."""
        self._reply_speaks, self._silent_start, self._silent_tail = False, [], ""

    async def sentence(self, text: str, text_type: str) -> str:
        """SENTENCE aggregation: the text, or "" when it has nothing to say."""
        return text if await self._has_speech(text) else ""

    async def token(self, text: str, text_type: str) -> str:
        """TOKEN aggregation: "" while the reply has said nothing yet, then all held text."""
        if self._reply_speaks:
            return text
        if not await self._has_speech(self._silent_tail + text):
            self._silent_start.append(text)
            self._silent_tail = (self._silent_tail + text)[-HELD_CONTEXT_CHARS:]
            return ""
        held = "".join(self._silent_start)
        self.new_text()
        self._reply_speaks = True
        return held + text
