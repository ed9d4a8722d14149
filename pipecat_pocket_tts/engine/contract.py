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

    answers_locally: bool
    """True when ``has_speech`` and probes compute here; False when each asks a server."""


@runtime_checkable
class SpeechProbe(Protocol):
    """Streamed text in; whether it has given the engine anything to say yet."""

    def push(self, text: str) -> bool:
        """Add a fragment of the text.

        Args:
            text: The next fragment.

        Returns:
            True once the text so far has released a chunk to speak.
        """
        ...

    def flush(self) -> bool:
        """End the text.

        Returns:
            True if any of the text says anything.
        """
        ...


@runtime_checkable
class SpeechSession(Protocol):
    """Utterances in; ``AudioFrame``s and ``Marker``s out, in order (``async for``)."""

    def enqueue(
        self, text: str, options: UtteranceOptions | None = None, **keywords: Any
    ) -> int | None:
        """Queue a whole text as one utterance.

        Args:
            text: What to say.
            options: This utterance's options over the session's (``UtteranceOptions``).
            **keywords: ``UtteranceOptions`` fields, over ``options``.

        Returns:
            The utterance's index, or None when the text says nothing.
        """
        ...

    def feed(
        self, text: str, options: UtteranceOptions | None = None, **keywords: Any
    ) -> list[int]:
        """Add streamed text; each chunk its text stream releases is queued as an utterance.

        Args:
            text: The next fragment of the text.
            options: As in ``enqueue``.
            **keywords: As in ``enqueue``.

        Returns:
            The indexes of the utterances this call queued.
        """
        ...

    def flush(self, options: UtteranceOptions | None = None, **keywords: Any) -> list[int]:
        """End the fed text: queue what the text stream still holds.

        Args:
            options: As in ``enqueue``.
            **keywords: As in ``enqueue``.

        Returns:
            The indexes of the utterances this call queued.
        """
        ...

    def mark(self, payload: Any, *, after_fed_text: bool = True) -> None:
        """Put a ``Marker(payload)`` after the audio of the text given so far.

        Args:
            payload: What the marker carries back.
            after_fed_text: Whether the marker also waits for text ``feed`` still holds;
                False places it after what is queued now.
        """
        ...

    def finish(self) -> None:
        """Take no more text: iteration ends once everything queued has been spoken."""
        ...

    def cancel(self) -> None:
        """Drop queued text, markers and unread frames; return once no computation runs."""
        ...

    async def acancel(self) -> None:
        """``cancel`` without blocking an event loop."""
        ...

    async def next_batch(
        self,
        limit: int,
        *,
        at_least: int = 1,
        wakes_early: Callable[[AudioFrame | Marker], bool] | None = None,
        within: float | None = None,
    ) -> list[AudioFrame | Marker]:
        """Wait for the next frames and markers, several at a wake-up.

        Returns once ``at_least`` items are queued, an item ``wakes_early`` picks is queued,
        the session has ended or ``within`` seconds have passed with at least one item.

        Args:
            limit: At most this many items.
            at_least: How many items make a wake-up.
            wakes_early: Picks an item that wakes the caller at once; it runs on the
                producer's thread and must only look at the item.
            within: Seconds after which the items queued are returned, or None.

        Returns:
            The items in order; empty once the session has ended.
        """
        ...

    def __aiter__(self) -> AsyncIterator[AudioFrame | Marker]: ...

    @property
    def is_idle(self) -> bool:
        """True when nothing is queued or being spoken."""
        ...


@runtime_checkable
class SpeechEngine(Protocol):
    """A loaded pack (here or on a server): facts, text checks and sessions."""

    sample_rate: int

    @property
    def capabilities(self) -> EngineCapabilities:
        """Where this engine differs from the others."""
        ...

    @property
    def pack_name(self) -> str:
        """The pack's name ("english", "french_24l")."""
        ...

    @property
    def voices(self) -> list[str]:
        """The names of the voices the pack ships."""
        ...

    @property
    def default_voice(self) -> str | None:
        """The voice used when none is given."""
        ...

    def session(
        self,
        options: UtteranceOptions | None = None,
        *,
        text_language: str | None = None,
        timestamps: bool = False,
        on_admission_wait: Callable[[AdmissionWait], None] | None = None,
        **keywords: Any,
    ) -> SpeechSession:
        """Open a session.

        Args:
            options: The defaults of every utterance (``UtteranceOptions``).
            text_language: A regional variant of the pack's language to normalize as
                ("pt-BR"), or None.
            timestamps: Whether frames carry the caller's words and their times.
            on_admission_wait: Told when the session waits for a slot, and when it gets one.
            **keywords: ``UtteranceOptions`` fields, over ``options``.

        Returns:
            The session.
        """
        ...

    def has_speech(
        self,
        text: str,
        text_language: str | None = None,
        *,
        normalize: bool = True,
        lexicon: Mapping[str, str] | None = None,
    ) -> bool:
        """Whether ``text`` gives the pack anything to say, as a session would plan it.

        Args:
            text: The text, whole.
            text_language: As in ``session``.
            normalize: Whether the text is normalized first.
            lexicon: Words spoken as other words.

        Returns:
            True if the text makes at least one chunk to speak.
        """
        ...

    def speech_probe(
        self,
        text_language: str | None = None,
        *,
        normalize: bool = True,
        lexicon: Mapping[str, str] | None = None,
    ) -> SpeechProbe:
        """The text stream a session's ``feed`` runs, without the session.

        Args:
            text_language: As in ``session``.
            normalize: As in ``has_speech``.
            lexicon: As in ``has_speech``.

        Returns:
            A ``SpeechProbe``.
        """
        ...

    def voice_state(self, voice: Any = None) -> Any:
        """Make ``voice`` ready to speak with (a local engine prefills and keeps it; a remote
        one asks its server); raises a ``PocketTTSError`` saying why it cannot.

        Args:
            voice: The voice, or None for the pack's default.

        Returns:
            What the engine keeps for it (a local engine: the prefilled state).
        """
        ...

    def warm_up(self, voice: Any = None) -> None:
        """Make the first utterance with ``voice`` pay no first-call cost.

        Args:
            voice: The voice to prepare, or None for the pack's default.
        """
        ...

    def close(self) -> None:
        """Release the engine's threads and connections; later sessions fail."""
        ...


__all__ = [
    "OFF_LOOP_CHARS",
    "EngineCapabilities",
    "SpeechEngine",
    "SpeechProbe",
    "SpeechSession",
]
