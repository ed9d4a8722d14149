"""Output at the pipeline's rate: the service's audio contexts, as its speech streams use them.

``ContextOutput`` is the one place a ``SpeechStream`` reaches Pipecat's ``TTSService``: it
makes each stream's encoder (``engine.FrameEncoder``: the engine's 24 kHz frames → 16-bit PCM
at the pipeline's rate, one soxr stream per run of audio), appends audio, word timestamps and
frames to a context, ends it, keeps one alive while the engine still owes it audio, says how
much pushed audio is still to play, reports a failure and runs the stream's tasks on the
service's task manager. The ``EngineLoader`` runs its loads through it too, and keeps a turn
waiting for one alive as often as a stream does.

A stream's encoder is flushed where a run of audio ends (a turn's end, a pause): Pipecat's
own resampling helper never flushes, so every turn would lose its last ~20–110 ms at 8/16 kHz.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from loguru import logger
from pipecat.frames.frames import Frame, TTSAudioRawFrame, TTSStoppedFrame
from pipecat.services.tts_service import TTSService

from ..engine import SAMPLE_RATE, FrameEncoder
from .pipecat_internals import KEEPALIVE_INTERVAL_S, quiet_context_timeout, refresh_audio_context
from .playout import Playout


class ContextOutput:
    """A service's audio contexts and task manager, as its streams use them."""

    def __init__(self, service: TTSService, playout: Playout, quality: str = "HQ") -> None:
        """``quality``: soxr's quality name for the resampling to the pipeline's rate."""
        self._service = service
        self._playout = playout
        self._quality = quality

    @property
    def service(self) -> TTSService:
        return self._service

    def encoder(self) -> FrameEncoder:
        """A stream's encoder to the pipeline's output rate (known once the pipeline started).

        Returns:
            A ``FrameEncoder`` of 16-bit PCM from the engine's rate.
        """
        return FrameEncoder(
            self._service.sample_rate, source_rate=SAMPLE_RATE, quality=self._quality
        )

    async def append_audio(self, context_id: str, pcm: bytes) -> None:
        if pcm:
            frame = TTSAudioRawFrame(
                audio=pcm,
                sample_rate=self._service.sample_rate,
                num_channels=1,
                context_id=context_id,
            )
            await TTSService.append_to_audio_context(self._service, context_id, frame)

    @property
    def queued_s(self) -> float:
        """Seconds of audio pushed to the output transport and not yet played."""
        return self._playout.queued_s()

    async def add_words(self, context_id: str, words: list[tuple[str, float]]) -> None:
        """Word timestamps (seconds on the context's audio timeline) for Pipecat to release
        as ``TTSTextFrame``s while the words are played."""
        if words and self._service.audio_context_available(context_id):
            await self._service.add_word_timestamps(words, context_id)

    async def append_frame(self, context_id: str, frame: Frame) -> None:
        if self._service.audio_context_available(context_id):
            await TTSService.append_to_audio_context(self._service, context_id, frame)

    def keep_alive(self, context_id: str) -> None:
        """Restart Pipecat's wait for the context's next item (see ``keepalive_interval``)."""
        refresh_audio_context(self._service, context_id)

    @property
    def keepalive_interval(self) -> float:
        """How often a context waiting for a model or for audio the engine owes it is kept
        alive: a third of the time Pipecat lets a context go quiet, at most
        ``KEEPALIVE_INTERVAL_S``."""
        return min(KEEPALIVE_INTERVAL_S, quiet_context_timeout(self._service) / 3)

    async def end_context(self, context_id: str) -> None:
        """``TTSStoppedFrame`` and the end marker for a context that is still registered."""
        service = self._service
        if service.audio_context_available(context_id):
            stop = TTSStoppedFrame(context_id=context_id)
            await TTSService.append_to_audio_context(service, context_id, stop)
            await service.remove_audio_context(context_id)

    async def report_failure(self, error: Exception) -> None:
        logger.opt(exception=error).error(f"{self._service}: synthesis failed")
        await self._service.push_error(
            error_msg=f"PocketTTS synthesis failed: {error}", exception=error
        )

    async def refuse(self, error: Exception, about: str = "", permanent: bool = False) -> None:
        """Log ``error`` and send it upstream as an ErrorFrame (``permanent``: the service has
        no model to speak with); otherwise the service keeps working."""
        message = f"PocketTTS: {about}: {error}" if about else f"PocketTTS: {error}"
        logger.error(f"{self._service}: {message}")
        await self._service.push_error(
            error_msg=message, exception=error, force_treat_as_permanent=permanent
        )

    def create_task(self, coroutine: Coroutine[Any, Any, Any], name: str) -> asyncio.Task:
        return self._service.create_task(coroutine, name=name)

    async def cancel_task(self, task: asyncio.Task) -> None:
        await self._service.cancel_task(task)


__all__ = ["ContextOutput"]
