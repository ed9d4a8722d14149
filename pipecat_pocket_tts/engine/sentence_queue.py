"""Whole sentences into a session, with the short-sentence rule written once.

The service (and any caller that speaks a text sentence by sentence) hands each sentence to a
``SentenceQueue`` over its session, local or remote: a sentence of one or two words waits to be
said with the next one, ``<break/>`` tags and text that says nothing are read by the engine's
own rules (``text.breaks``, ``text.speechless``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import BreakTagError
from .text.breaks import has_breaks, strip_breaks
from .text.speechless import speaks

if TYPE_CHECKING:
    from .contract import SpeechSession
    from .utterance import UtteranceOptions


SHORT_SENTENCE_WORDS = 2
"""A sentence of at most this many words is not spoken alone while its text goes on: upstream
pocket-tts #313 measured french_24l garbling ~40% of 1-2 word utterances against ~2% from three
words up (and #174: spanish_24l, a two-word sentence); its workaround is gluing a short chunk
to the next. It waits for the next sentence and is said with it (at the text's end it is said
alone: upstream found no prefix that helps). Cost: its first audio waits for the next
sentence."""


def is_short(text: str) -> bool:
    """Whether ``text`` has at most ``SHORT_SENTENCE_WORDS`` words with a letter or digit.

    ``<break/>`` tags are not words; a malformed one makes the text not short, so its error
    comes at once.

    Args:
        text: A sentence, such as ``Oui.`` or ``D'accord.``.

    Returns:
        True when the sentence is short enough to wait for the next.
    """
    try:
        text = strip_breaks(text) if has_breaks(text) else text
    except BreakTagError:
        return False
    return 0 < sum(1 for word in text.split() if speaks(word)) <= SHORT_SENTENCE_WORDS


class SentenceQueue:
    """Whole sentences into a session (any ``contract.SpeechSession``, local or remote), each
    enqueued as one utterance, except that a short one (``is_short``) waits to be said with
    the next; ``flush`` says one still waiting alone (the text has ended).

    Markers placed while a short sentence waits wait with it: they come out after the audio
    of the utterance it joins, and are dropped if that utterance fails. Not thread-safe: one
    caller at a time, as a session's text has one order.
    """

    def __init__(self, session: SpeechSession) -> None:
        """Queue sentences into ``session``.

        Args:
            session: The session the utterances go to.
        """
        self.session = session
        self._short = ""
        self._held: list[Any] = []

    @property
    def holds_text(self) -> bool:
        """True while a short sentence waits for the next."""
        return bool(self._short)

    def enqueue(self, text: str, options: UtteranceOptions | None = None) -> list[int]:
        """Queue one whole sentence (a short one waits).

        Args:
            text: The sentence.
            options: Its utterance options (those of the utterance a waiting one joins).

        Returns:
            The index of the utterance queued (none when it waits or says nothing).

        Raises:
            SessionClosedError: The session takes no more text.
            BreakTagError: A malformed or overlong break; nothing is queued.
        """
        if self._short:
            text, self._short = f"{self._short} {text.lstrip()}", ""
        if is_short(text):
            self._short = text
            return []
        return self._queue(text, options)

    def flush(self, options: UtteranceOptions | None = None) -> list[int]:
        """The text has ended: a short sentence still waiting is said alone.

        Args:
            options: Its utterance options.

        Returns:
            The index of the utterance queued (none when nothing waited).

        Raises:
            SessionClosedError: The session takes no more text.
        """
        short, self._short = self._short, ""
        return self._queue(short, options) if short else []

    def mark(self, payload: Any) -> None:
        """Place a marker as ``Session.mark`` does, held with a short sentence still waiting.

        Args:
            payload: What the marker carries back out.
        """
        if self._short:
            self._held.append(payload)
        else:
            self.session.mark(payload)

    def clear(self) -> None:
        """Forget a waiting sentence and its markers (the session was cancelled)."""
        self._short = ""
        self._held.clear()

    def _queue(self, text: str, options: UtteranceOptions | None) -> list[int]:
        held, self._held = self._held, []
        # If this raises, the held markers are dropped with the text they waited for.
        index = self.session.enqueue(text, options)
        for payload in held:
            self.session.mark(payload)
        return [] if index is None else [index]


__all__ = ["SHORT_SENTENCE_WORDS", "SentenceQueue", "is_short"]
