"""The engine contract: what a caller (the Pipecat service) may ask of any speech engine.

Two engines implement it: ``PocketTTS`` (the model in this process) and ``client.RemoteTTS``
(a TTS server's model over a websocket). A caller types against ``SpeechEngine`` and
``SpeechSession`` and never asks which one it has; where they must differ, the engine says so
in its ``EngineCapabilities``.

Rules every engine keeps:

- ``has_speech`` and ``speech_probe`` answer with the very normalization and planning the
  engine's sessions run: text they call silent never makes a frame, text they call speech does
  (a caller gates its audio contexts on them).
- A marker (``SpeechSession.mark``) comes out after the audio of all the text given before it;
  text fed but still held by the session's text stream (an unfinished sentence) is waited for:
  the marker follows the chunk that text becomes, and is dropped if the text makes none.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from .frames import AudioFrame
    from .runtime.channel import Marker
    from .runtime.slots import AdmissionWait
    from .utterance import UtteranceOptions

OFF_LOOP_CHARS = 2000
"""Text longer than this is prepared (normalized, chunked, tokenized: about 2.5 ms of CPU per
1,000 characters) on a worker thread, never on an event loop."""


@dataclass(frozen=True)
class EngineCapabilities:
    """Where engines differ, said once, so a caller needs no branch on which engine it has."""

    answers_locally: bool  # has_speech/probes compute here (False: each asks a server)


@runtime_checkable
class SpeechProbe(Protocol):
    """Streamed text in; whether it has given the engine anything to say yet."""

    def push(self, text: str) -> bool:
        """Add a fragment; True once the text so far has released a chunk to speak."""
        ...

    def flush(self) -> bool:
        """The text is complete: True if all of it says anything."""
        ...


@runtime_checkable
class SpeechSession(Protocol):
    """Utterances in; ``AudioFrame``s and ``Marker``s out, in order (``async for``)."""

    def enqueue(
        self, text: str, options: UtteranceOptions | None = None, **keywords: Any
    ) -> int | None: ...

    def feed(
        self, text: str, options: UtteranceOptions | None = None, **keywords: Any
    ) -> list[int]: ...

    def flush(self, options: UtteranceOptions | None = None, **keywords: Any) -> list[int]: ...

    def mark(self, payload: Any, *, after_fed_text: bool = True) -> None:
        """A ``Marker(payload)`` after the audio of the text given so far (with
        ``after_fed_text`` False: after what is queued now, not waiting for held text)."""
        ...

    def finish(self) -> None: ...

    def cancel(self) -> None: ...

    async def acancel(self) -> None: ...

    async def next_batch(
        self,
        limit: int,
        *,
        at_least: int = 1,
        wakes_early: Callable[[AudioFrame | Marker], bool] | None = None,
        within: float | None = None,
    ) -> list[AudioFrame | Marker]: ...

    def __aiter__(self) -> AsyncIterator[AudioFrame | Marker]: ...

    @property
    def is_idle(self) -> bool: ...


@runtime_checkable
class SpeechEngine(Protocol):
    """A loaded pack (here or on a server): facts, text checks and sessions."""

    sample_rate: int

    @property
    def capabilities(self) -> EngineCapabilities: ...

    @property
    def language(self) -> str: ...

    @property
    def voices(self) -> list[str]: ...

    @property
    def default_voice(self) -> str | None: ...

    def session(
        self,
        options: UtteranceOptions | None = None,
        *,
        text_language: str | None = None,
        timestamps: bool = False,
        on_admission_wait: Callable[[AdmissionWait], None] | None = None,
        **keywords: Any,
    ) -> SpeechSession: ...

    def has_speech(
        self,
        text: str,
        language: str | None = None,
        *,
        normalize: bool = True,
        lexicon: Mapping[str, str] | None = None,
    ) -> bool: ...

    def speech_probe(
        self,
        language: str | None = None,
        *,
        normalize: bool = True,
        lexicon: Mapping[str, str] | None = None,
    ) -> SpeechProbe: ...

    def voice_state(self, voice: Any = None) -> Any:
        """Make ``voice`` ready to speak with (a local engine prefills and keeps it; a remote
        one asks its server); raises a ``PocketTTSError`` saying why it cannot."""
        ...

    def warm_up(self, voice: Any = None) -> None:
        """Make the first utterance with ``voice`` pay no first-call cost."""
        ...

    def close(self) -> None: ...


__all__ = [
    "OFF_LOOP_CHARS",
    "EngineCapabilities",
    "SpeechEngine",
    "SpeechProbe",
    "SpeechSession",
]
