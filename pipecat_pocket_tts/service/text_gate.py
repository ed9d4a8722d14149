"""Which text opens a Pipecat audio context: text with nothing to say never does.

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
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Protocol

from pipecat.frames.frames import (
    EndFrame,
    Frame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TextFrame,
    TTSSpeakFrame,
)

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
        self._new_probe = new_probe  # None if no engine loaded (the turn finds out)
        self._streamed = streamed  # TOKEN aggregation
        self._probe: AsyncProbe | None = None
        self._reply_speaks = False  # the reply's tokens so far give the engine a chunk
        self._held: list[Frame] = []  # the reply's token frames, held until they speak
        self._reply_open = False  # an LLM reply started and has not ended
        self._whole_text = False  # the frame being handled is a whole text (TTSSpeakFrame)

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
        self._held = []  # all of it says nothing: no context opens for it
        return []

    def _release(self) -> list[Frame]:
        held, self._held, self._probe = self._held, [], None
        self._reply_speaks = True
        return held

    def _new_reply(self) -> None:
        self._reply_speaks, self._held, self._probe = False, [], None
