"""Every Pipecat private member the service uses, behind named functions (Pipecat 1.14).

Pipecat offers no public way to do these things, so the service reaches into ``TTSService``;
it does so only here, so a Pipecat release that renames or reshapes one touches this file
alone. ``tests/service/test_pipecat_names.py`` pins each name with the shape used here and
fails when another service module uses a Pipecat private name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipecat.services.tts_service import TTSService

if TYPE_CHECKING:
    from pipecat.services.settings import TTSSettings


class TTSServiceHooks(TTSService):
    """``TTSService`` with the private hooks the service changes under public names."""

    async def _update_settings(self, delta: TTSSettings) -> dict[str, Any]:
        return await self.on_settings_update(delta)

    async def on_settings_update(self, delta: TTSSettings) -> dict[str, Any]:
        """Every settings update goes through here: Pipecat applies ``delta`` and returns
        what changed. Override to check values first (call this to apply them)."""
        return await super()._update_settings(delta)

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


def refresh_audio_context(service: TTSService, context_id: str) -> None:
    """Keep an audio context alive (Pipecat ends one that makes no audio for 3 s)."""
    service._refresh_audio_context(context_id)


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


__all__ = [
    "TTSServiceHooks",
    "is_interruptible",
    "last_word_pts",
    "refresh_audio_context",
    "set_sentence_language",
    "stored_settings",
    "streams_tokens",
    "text_slots",
    "warn_unhandled_settings",
    "word_sequencer",
]
