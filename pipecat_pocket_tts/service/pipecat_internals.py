"""Every Pipecat private member the service uses, behind named functions (Pipecat 1.14).

Pipecat offers no public way to do these things, so the service reaches into ``TTSService``;
it does so only here, so a Pipecat release that renames or reshapes one touches this file
alone. ``tests/service/test_pipecat_names.py`` pins each name with the shape used here and
fails when another service module uses a Pipecat private name.

It also holds the version-pinned replacements of Pipecat code paths the service changes:

- ``BoundedSentenceAggregator`` (SENTENCE aggregation) and ``BoundedFrameSequencer`` (TOKEN:
  its token → sentence regrouping) end a piece of text as Pipecat does, and also where
  ``text_gate`` says an overlong one ends, so Pipecat's word tracker, whose work per word
  grows with its piece, never sees more than a few hundred characters at once
  (``bound_text_pieces`` installs them).
- ``start_word_timestamps_at``: Pipecat's ``start_word_timestamps`` with the time the
  context's audio starts playing given by the caller (Pipecat takes the time of the push).
- ``SettledSegment``: Pipecat's ``TextSegment`` with ``is_transformed`` worked out once.
  Pipecat works it out again for every word the provider reports (``alnum_only`` of both
  sides of the whole segment, a Python loop per character), so a piece's per-word cost grew
  with the piece: it was the largest single cost of the loop in ``benchmarks.profiles.loop``.
  ``BoundedFrameSequencer`` gives its word trackers these segments.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipecat.services.tts_service import TTSService
from pipecat.transcriptions.language import Language
from pipecat.utils.context.aggregated_frame_sequencer import (
    AggregatedFrameSequencer,
    _ParallelAggregation,
    _ParallelSentenceAggregator,
    _StreamingContext,
)
from pipecat.utils.context.text_segment_map import TextSegment
from pipecat.utils.text.base_text_aggregator import Aggregation, TextType
from pipecat.utils.text.simple_text_aggregator import SimpleTextAggregator

from .text_gate import STREAMED_PIECE_CHARS, boundary_ends_piece, ends_piece

if TYPE_CHECKING:
    from pipecat.frames.frames import AggregatedTextFrame, Frame
    from pipecat.services.settings import TTSSettings
    from pipecat.utils.context.word_completion_tracker import WordCompletionTracker


class TTSServiceHooks(TTSService):
    """``TTSService`` with the private hooks the service changes under public names."""

    async def _update_settings(self, delta: TTSSettings) -> dict[str, Any]:
        return await self.on_settings_update(delta)

    async def on_settings_update(self, delta: TTSSettings) -> dict[str, Any]:
        """Every settings update goes through here: Pipecat applies ``delta`` and returns
        what changed. Override to check values first (call this to apply them)."""
        return await super()._update_settings(delta)

    def register_event(self, name: str) -> None:
        """An event of this service that ``event_handler(name)`` handlers can subscribe to."""
        self._register_event_handler(name)

    async def emit_event(self, name: str, *args: Any) -> None:
        """Call the handlers of one of this service's events."""
        await self._call_event_handler(name, *args)

    def _service_language(self, language: Any) -> Any:
        """A language setting as Pipecat stores it: a string passes as it is (the service
        hands Pipecat pack names it resolved itself; Pipecat would try each as a ``Language``
        code and log that "english" is not one), a ``Language`` goes through Pipecat."""
        if isinstance(language, str) and not isinstance(language, Language):
            return language
        return super()._service_language(language)

    async def _apply_force_complete(self, context_id: str) -> None:
        await self.on_context_force_complete(context_id)

    async def on_context_force_complete(self, context_id: str) -> None:
        """At a context's end Pipecat writes the text no word covered into the LLM context."""
        await super()._apply_force_complete(context_id)

    async def _synthesize_text(self, text: str, context_id: str) -> None:
        if self.is_usable:
            await super()._synthesize_text(text, context_id)
        else:
            await self.on_text_while_unusable(text, context_id)

    async def on_text_while_unusable(self, text: str, context_id: str) -> None:
        """Text for a service that can no longer speak; Pipecat warns once per piece of text
        (every LLM token with TOKEN aggregation). Override to say it otherwise."""
        await super()._synthesize_text(text, context_id)

    async def _handle_aggregated_text(
        self, src_frame: AggregatedTextFrame, context_id: str | None = None
    ) -> None:
        await self.on_aggregated_text(src_frame, context_id)

    async def on_aggregated_text(
        self, src_frame: AggregatedTextFrame, context_id: str | None = None
    ) -> None:
        """A piece of text (a sentence, a token, a ``TTSSpeakFrame``'s text) to speak in
        ``context_id`` (None: the turn's); Pipecat registers it for its words and speaks it."""
        await super()._handle_aggregated_text(src_frame, context_id)


def stored_settings(service: TTSService) -> Any:
    """The settings object Pipecat keeps (``service.settings`` returns it for reading); the
    service writes the values it resolves (the pack, the default voice's name) into it."""
    return service._settings


def warn_unhandled_settings(service: TTSService, names: set[str]) -> None:
    """Pipecat's warning for settings an update changed that the service does not use."""
    service._warn_unhandled_updated_settings(names)


def streams_tokens(service: TTSService) -> bool:
    """Whether text arrives token by token (TOKEN aggregation) rather than in sentences."""
    return service._is_streaming_tokens


def is_interruptible(service: TTSService, context_id: str) -> bool:
    """Whether an audio context may be interrupted (one Pipecat does not know yet: it may)."""
    context = service._tts_contexts.get(context_id)
    return context is None or context.interruptible


KEEPALIVE_INTERVAL_S = 1.0
"""While a turn waits (for a model loading, warming up or switching packs, or for audio the
engine owes it), its audio context is refreshed at least this often (more often when the
service's quiet-context timeout is under three times this: ``ContextOutput.keepalive_interval``),
so Pipecat's quiet-context timeout (3 s by default) never writes it off."""


def refresh_audio_context(service: TTSService, context_id: str) -> None:
    """Keep an audio context alive (Pipecat ends one that makes no audio for 3 s)."""
    service._refresh_audio_context(context_id)


def quiet_context_timeout(service: TTSService) -> float:
    """Seconds without an item after which Pipecat ends the playing audio context
    (``stop_frame_timeout_s``, 3 s by default) and, if it had no audio, reports it silent."""
    return service._stop_frame_timeout_s


def set_sentence_language(service: TTSService, code: str) -> None:
    """Give both of Pipecat's sentence splitters (spoken and skipped text) an ISO code."""
    for aggregator in (service._text_aggregator, service._skipped_text_aggregator):
        aggregator.set_language(code)


def word_sequencer(service: TTSService) -> Any:
    """Pipecat's sequencer of a context's text slots, which word timestamps fill."""
    return service._aggregated_frame_sequencer


def last_word_pts(service: TTSService) -> int:
    """The presentation time of the last word Pipecat timed."""
    return service._word_timestamp_tracker.last_pts


def text_slots(sequencer: Any) -> list[Any]:
    """The sequencer's slots of text (one per text handed over), oldest first."""
    return sequencer._slots


def bound_text_pieces(service: TTSService) -> None:
    """Give Pipecat's aggregation and word sequencer the bounded text pieces (``text_gate``)."""
    streaming = service._is_streaming_tokens
    if not streaming:
        service._text_aggregator = BoundedSentenceAggregator(aggregation_type=TextType.SENTENCE)
    service._aggregated_frame_sequencer = BoundedFrameSequencer(
        name=str(service), streaming=streaming
    )


class BoundedSentenceAggregator(SimpleTextAggregator):
    """Pipecat's sentence aggregator whose sentences also end where an overlong piece ends."""

    async def aggregate(self, text: str) -> AsyncIterator[Aggregation]:
        for char in text:
            previous = self._text[-1:]
            self._text += char
            sentence = await self._check_sentence_with_lookahead(char)
            if sentence is not None:
                yield sentence
                # A burst of text is handed on one piece per loop slice.
                await asyncio.sleep(0)
            elif ends_piece(len(self._text), previous, char):
                piece = self._text.strip(" ")
                # This drops the text and any lookahead still pending in it.
                await self.reset()
                if piece.strip():
                    yield Aggregation(text=piece, type=TextType.SENTENCE)
                    await asyncio.sleep(0)


class _BoundedParallelAggregator(_ParallelSentenceAggregator):
    """Pipecat's token → sentence regrouping, with overlong pieces ended before a token."""

    async def aggregate(
        self, tts_text: str, llm_text: str, user_facing_text: str
    ) -> AsyncIterator[_ParallelAggregation]:
        if self._user.strip() and boundary_ends_piece(self._tts, tts_text, STREAMED_PIECE_CHARS):
            piece = _ParallelAggregation(self._tts, self._llm, self._user)
            await self._aggregator.reset()
            self._reset()
            yield piece
        async for sentence in super().aggregate(tts_text, llm_text, user_facing_text):
            yield sentence


@dataclass(frozen=True)
class SettledSegment(TextSegment):
    """A ``TextSegment`` whose ``is_transformed`` (a function of its two texts, which never
    change) was worked out once, when it was made."""

    transformed: bool = False

    @property
    def is_transformed(self) -> bool:
        return self.transformed

    @classmethod
    def of(cls, segment: TextSegment) -> SettledSegment:
        return cls(
            original=segment.original,
            tts=segment.tts,
            original_start=segment.original_start,
            original_end=segment.original_end,
            transformed=segment.is_transformed,
        )


def settle_segments(tracker: WordCompletionTracker) -> None:
    """Give a new word tracker's text map ``SettledSegment``s (before any word)."""
    segment_map = tracker._segment_map
    segment_map._segments = [SettledSegment.of(s) for s in segment_map._segments]


class BoundedFrameSequencer(AggregatedFrameSequencer):
    """Pipecat's word-timestamp sequencer whose TOKEN regrouping ends overlong pieces and whose
    word trackers work out each segment's ``is_transformed`` once."""

    def _append_spoken_slot(
        self,
        frame: AggregatedTextFrame,
        context_id: str,
        tracker: WordCompletionTracker | None,
        append_to_context: bool,
        includes_inter_frame_spaces: bool,
    ) -> None:
        if tracker is not None:
            settle_segments(tracker)
        super()._append_spoken_slot(
            frame, context_id, tracker, append_to_context, includes_inter_frame_spaces
        )

    async def register_spoken(
        self,
        frame: AggregatedTextFrame,
        context_id: str,
        tts_text: str,
        append_to_context: bool,
        build_tracker: bool = True,
        includes_inter_frame_spaces: bool = False,
        *,
        language: str | None = None,
    ) -> list[Frame]:
        if self._streaming and context_id not in self._streaming_contexts:
            text_type = TextType.SENTENCE if frame.text_type == TextType.TOKEN else frame.text_type
            self._streaming_contexts[context_id] = _StreamingContext(
                _BoundedParallelAggregator(language), append_to_context, build_tracker, text_type
            )
        return await super().register_spoken(
            frame,
            context_id,
            tts_text,
            append_to_context,
            build_tracker,
            includes_inter_frame_spaces,
            language=language,
        )


async def start_word_timestamps_at(service: TTSService, start_ns: int) -> None:
    """Start timing the playing context's words from ``start_ns`` (or after the last word
    timed, if later), then time the words that came before its first audio."""
    tracker = service._word_timestamp_tracker
    for cached in tracker.start(start_ns):
        await service._add_word_timestamps(
            [(cached.word, cached.timestamp)],
            cached.context_id,
            includes_inter_frame_spaces=cached.includes_inter_frame_spaces,
        )


def skipped_text_types(service: TTSService) -> Any:
    """The text types the service passes on without speaking them."""
    return service._skip_text_types


__all__ = [
    "KEEPALIVE_INTERVAL_S",
    "BoundedFrameSequencer",
    "BoundedSentenceAggregator",
    "SettledSegment",
    "TTSServiceHooks",
    "bound_text_pieces",
    "is_interruptible",
    "last_word_pts",
    "quiet_context_timeout",
    "refresh_audio_context",
    "set_sentence_language",
    "settle_segments",
    "skipped_text_types",
    "start_word_timestamps_at",
    "stored_settings",
    "streams_tokens",
    "text_slots",
    "warn_unhandled_settings",
    "word_sequencer",
]
