"""Pipecat's own floor for ``benchmarks.profiles.loop``: a TTS service that synthesizes nothing.

``ReferenceTTS`` pushes silent audio frames of the size ours pushes (80 ms at 24 kHz), as many
as the text's length at a given speaking rate makes, and a word timestamp for every word, into
Pipecat's audio contexts, on the same bounded units of text as ``PocketTTSService``. What the
loop spends on it is what any word-timestamp TTS service costs Pipecat per frame and per word.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

from pipecat.frames.frames import AggregatedTextFrame, Frame, TTSAudioRawFrame, TTSStoppedFrame
from pipecat.services.settings import TTSSettings

from pipecat_pocket_tts.service.pipecat_internals import (
    TTSServiceHooks,
    bound_text_pieces,
    streams_tokens,
)
from pipecat_pocket_tts.service.text_gate import PIECE_CHARS, STREAMED_PIECE_CHARS, split_pieces

FRAME_SAMPLES = 1920  # one engine frame: 80 ms at 24 kHz


class _Made:
    """A context's audio so far: seconds of text handed over, frames pushed, open word."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.frames = 0
        self.word = ""
        self.word_start = 0.0


class ReferenceTTS(TTSServiceHooks):
    """Pre-made frames and word timestamps at ``chars_per_second``; no synthesis."""

    def __init__(
        self, *, chars_per_second: float, sample_rate: int, pace_s: float = 0.0, **kwargs: Any
    ) -> None:
        """``pace_s``: the wait after each frame (0: one frame per loop slice, a unit's frames
        in one burst; the engine's seconds per frame: frames spread as the engine makes them)."""
        super().__init__(
            push_start_frame=True,
            push_text_frames=False,
            push_stop_frames=True,
            sample_rate=sample_rate,
            settings=TTSSettings(model=None, voice=None, language=None),  # it has none
            **kwargs,
        )
        bound_text_pieces(self)
        self._char_s = 1 / chars_per_second
        self._frame_s = FRAME_SAMPLES / sample_rate
        self._silence = bytes(2 * FRAME_SAMPLES)
        self._made: dict[str, _Made] = {}
        self._pace_s = pace_s

    def can_generate_metrics(self) -> bool:
        return True

    async def on_aggregated_text(
        self, src_frame: AggregatedTextFrame, context_id: str | None = None
    ) -> None:
        """The service's bounded units for a long text, one per loop slice."""
        limit = STREAMED_PIECE_CHARS if streams_tokens(self) else PIECE_CHARS
        if len(src_frame.text) < limit:
            return await super().on_aggregated_text(src_frame, context_id)
        context_id = context_id or self.create_context_id()
        for unit in split_pieces(src_frame.text, limit):
            frame = AggregatedTextFrame(unit, src_frame.text_type, raw_text=unit)
            await super().on_aggregated_text(frame, context_id)
            await asyncio.sleep(0)

    async def run_tts(self, text: str, context_id: str) -> AsyncGenerator[Frame | None, None]:
        made = self._made.setdefault(context_id, _Made())
        words: list[tuple[str, float]] = []
        for char in text:
            if char.isspace():
                if made.word:
                    words.append((made.word, made.word_start))
                made.word = ""
            else:
                if not made.word:
                    made.word_start = made.seconds
                made.word += char
            made.seconds += self._char_s
        await self._push(context_id, made, words)
        yield None

    async def flush_audio(self, context_id: str | None = None) -> None:
        context_id = context_id or self.get_active_audio_context_id()
        made = self._made.pop(context_id, None) if context_id else None
        if made is None:
            return
        words = [(made.word, made.word_start)] if made.word else []
        made.seconds += self._frame_s  # the last partial frame
        await self._push(context_id, made, words)
        if self.audio_context_available(context_id):
            await self.append_to_audio_context(context_id, TTSStoppedFrame(context_id=context_id))
            await self.remove_audio_context(context_id)

    async def _push(self, context_id: str, made: _Made, words: list[tuple[str, float]]) -> None:
        """The whole frames the text so far makes, each with the words starting in it."""
        while (made.frames + 1) * self._frame_s <= made.seconds:
            end = (made.frames + 1) * self._frame_s
            due = [w for w in words if w[1] < end]
            words = words[len(due) :]
            frame = TTSAudioRawFrame(self._silence, self.sample_rate, 1, context_id=context_id)
            await self.append_to_audio_context(context_id, frame)
            if due:
                await self.add_word_timestamps(due, context_id)
            made.frames += 1
            await asyncio.sleep(self._pace_s)  # one frame per loop slice at least
        if words:
            await self.add_word_timestamps(words, context_id)


__all__ = ["FRAME_SAMPLES", "ReferenceTTS"]
