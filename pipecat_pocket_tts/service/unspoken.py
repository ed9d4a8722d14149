"""Contexts whose text made no audio: none of that text may enter the LLM context.

With word timestamps, Pipecat's aggregated-frame sequencer releases each sentence's words as
they are played and, at a context's end, writes what no word covered into the context. For
text whose utterance failed (or reached no session) that would be unspoken text: its word slot
is closed without words, and at the end its leftover is dropped. This reads Pipecat 1.14's
sequencer by its fields (pinned by tests/service/test_pipecat_names.py).
"""

from __future__ import annotations

from typing import Any

from loguru import logger
from pipecat.frames.frames import AggregatedTextProgressFrame, Frame, TTSTextFrame

from .pipecat_internals import text_slots


class UnspokenContexts:
    """The audio contexts (ids) with text that made no audio."""

    def __init__(self) -> None:
        self._ids: set[str] = set()
        self._noted: str | None = None  # the turn last said to go unspoken

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
                if not tracker.get_accumulated_tts_text().strip():  # no word matched yet
                    slot.complete = True
                break

    @staticmethod
    def completed(sequencer: Any, context_id: str, last_pts: int) -> list[Frame]:
        """The frames of a context whose text made no audio, force-completed by ``sequencer``,
        less the text no word covered."""
        frames = sequencer.force_complete(context_id, last_pts)
        return [f for f in frames if not isinstance(f, (TTSTextFrame, AggregatedTextProgressFrame))]
