"""When the audio a service pushes is played: the clock its words are timed on.

The output transport plays the audio it gets back to back, from when it arrives: audio pushed
while earlier audio still plays starts when that ends. A context's words are timed from the
moment its first audio plays, never from the moment it was pushed (the engine makes audio
ahead of real time, so a reply queued behind a greeting is pushed long before it is heard).

A turn's last words can be timed at the end of its audio (words the voice could not say, or
that pile onto its last frame). Pipecat 1.14 commits a turn with a frame timed just after its
last word (``LLMAssistantPushAggregationFrame``, or the reply's ``LLMFullResponseEndFrame``),
which the output transport holds until its clock gets there, while the next turn's start
frames (``LLMFullResponseStartFrame``, ``TTSStartedFrame``) carry no time and come out as soon
as the audio before them has been written: when the last chunk of that audio starts playing.
The next turn then started inside the previous one, the commit closed it, and the next turn's
own commit found no turn open: its text never reached the context. ``turn_start`` times such a
turn's start frames and words after that commit.

An interruption drops the queued audio of interruptible contexts only: an uninterruptible
greeting plays on, and a reply made meanwhile is heard after it. Its words are timed from the
end of that audio (they came up to the rest of the greeting early, from its last word).

Contexts whose text made no audio (``UnspokenContexts``): none of that text may enter the LLM
context. With word timestamps, Pipecat's aggregated-frame sequencer releases each sentence's
words as they are played and, at a context's end, writes what no word covered into the
context. For text whose utterance failed (or reached no session) that would be unspoken text:
its word slot is closed without words, and at the end its leftover is dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loguru import logger
from pipecat.frames.frames import (
    AggregatedTextProgressFrame,
    Frame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    OutputAudioRawFrame,
    TTSStartedFrame,
    TTSTextFrame,
)

from ..engine import FRAME_RATE
from .pipecat_internals import text_slots

_TURN_FRAMES = (LLMFullResponseStartFrame, TTSStartedFrame, LLMFullResponseEndFrame)

NS = 1_000_000_000
LAST_FRAME_NS = round(NS / FRAME_RATE)
"""A commit timed after a word in this last stretch of the audio (the engine's last frame,
longer than the transport's chunk: 40 ms by default) may come out after the next turn's start."""


class Playout:
    """The end of the audio pushed so far, on the pipeline's clock (``now``: nanoseconds)."""

    def __init__(
        self, now: Callable[[], int], interruptible: Callable[[str | None], bool] = bool
    ) -> None:
        """``interruptible(context_id)``: whether an interruption drops that context's audio
        (None: audio of no context)."""
        self._now = now
        self._interruptible = interruptible
        self._end = 0
        # The [start, end) sample spans of uninterruptible audio still queued.
        self._kept: list[tuple[int, int]] = []

    def note(self, frame: Frame, last_word: int) -> None:
        """A frame the service pushes downstream: audio plays after what is queued; a turn's
        start or end frame with no time (a reply that timed no word) is timed after the
        commit of the turn before it where that may come out later (``turn_start``)."""
        if isinstance(frame, OutputAudioRawFrame):
            context_id = getattr(frame, "context_id", None)
            self.pushed(
                len(frame.audio) / (2 * frame.num_channels * frame.sample_rate),
                interruptible=frame.interruptible and self._interruptible(context_id),
            )
        elif (
            isinstance(frame, _TURN_FRAMES)
            and frame.pts is None
            # TTSStartedFrame has no skip_tts attribute.
            and not getattr(frame, "skip_tts", False)
        ):
            frame.pts = self.turn_start(last_word)

    def pushed(self, seconds: float, *, interruptible: bool = True) -> None:
        """``seconds`` of audio were pushed now: they play after what is queued.
        ``interruptible`` False: an interruption leaves them playing (an uninterruptible
        greeting), so the audio after them still waits for them."""
        now = self._now()
        start = max(self._end, now)
        self._end = start + round(seconds * NS)
        self._kept = [(a, b) for a, b in self._kept if b > now]
        if not interruptible:
            self._kept.append((start, self._end))

    def next_start(self) -> int:
        """When audio pushed now starts playing."""
        return max(self._end, self._now())

    def queued_s(self) -> float:
        """Seconds of pushed audio not yet played."""
        return max(0, self._end - self._now()) / NS

    def turn_start(self, last_word: int) -> int | None:
        """The time to give the next turn's start frames and words, when the commit of the turn
        before it (timed at ``last_word`` + 1) may come out after the audio before them has
        played; None when it comes out before (``last_word`` 0: no word was timed)."""
        start = self.next_start()
        if not last_word or last_word + 1 <= start - LAST_FRAME_NS:
            return None
        return max(last_word + 1, start) + 1

    def words_start(self, last_word: int) -> int:
        """When the next turn's words start: after the commit of the turn before it where its
        start frames wait for that (``turn_start``), else when its audio starts playing."""
        return self.turn_start(last_word) or self.next_start()

    def interrupted(self) -> None:
        """The transport dropped the interruptible audio it had queued; the uninterruptible
        audio still to play plays on, back to back, from now."""
        now = self._now()
        left = sum(b - max(a, now) for a, b in self._kept if b > now)
        self._kept = [(now, now + left)] if left else []
        self._end = now + left if left else 0


class UnspokenContexts:
    """The audio contexts (ids) with text that made no audio."""

    def __init__(self) -> None:
        self._ids: set[str] = set()
        # The turn last reported as going unspoken.
        self._noted: str | None = None

    def note_unusable(self, service: object, context_id: str, why: Exception | None) -> None:
        """A service with no model to speak with says so once per turn (Pipecat warns for
        every piece of text: every LLM token with TOKEN aggregation)."""
        if context_id != self._noted:
            self._noted = context_id
            reason = f" ({why})" if why is not None else ""
            logger.warning(f"{service}: no model to speak with{reason}; this reply is not spoken")

    def __contains__(self, context_id: object) -> bool:
        return context_id in self._ids

    def add(self, context_id: str) -> None:
        self._ids.add(context_id)

    def discard(self, context_id: str) -> None:
        self._ids.discard(context_id)

    def text_failed(self, context_id: str, sequencer: Any) -> None:
        """The text just handed over for ``context_id`` made no audio: close its word slot."""
        self._ids.add(context_id)
        for slot in reversed(text_slots(sequencer)):
            tracker = slot.tracker
            if slot.context_id == context_id and slot.spoken and not slot.complete and tracker:
                # No word has matched yet.
                if not tracker.get_accumulated_tts_text().strip():
                    slot.complete = True
                break

    @staticmethod
    def completed(sequencer: Any, context_id: str, last_pts: int) -> list[Frame]:
        """The frames of a context whose text made no audio, force-completed by ``sequencer``,
        less the text no word covered."""
        frames = sequencer.force_complete(context_id, last_pts)
        return [f for f in frames if not isinstance(f, (TTSTextFrame, AggregatedTextProgressFrame))]


__all__ = ["Playout", "UnspokenContexts"]
