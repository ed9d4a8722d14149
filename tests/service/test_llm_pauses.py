"""A reply whose LLM pauses, mid-reply, longer than Pipecat lets an audio context go quiet.

The service holds a short last sentence to say with the next (SENTENCE aggregation) and a
streamed sentence until it ends (TOKEN aggregation). Pipecat ends an audio context that gets
nothing for ``stop_frame_timeout_s``: a context whose audio was all made, with text held, was
ended while its LLM paused; in SENTENCE mode its held words then came out in a second
TTSStarted … TTSStopped, timed as that new context's, and in TOKEN mode they were lost. The
service keeps such a context alive while it holds its text.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pipecat.frames.frames import (
    Frame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TTSAudioRawFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.tts_service import TextAggregationMode
from pipecat.tests.utils import run_test

from pipecat_pocket_tts import PocketTTSService

START = 240
QUIET_TIMEOUT_S = 1.5
"""Pipecat's quiet-context timeout here; the service's keepalives come every 0.5 s."""
KEEPALIVES = 6
"""Keepalives after the first audio that span more than the timeout (3 s against 1.5 s)."""
FIRST = "Sure, I can help with that."
HELD = "Or ten."


class _PausingLLM(FrameProcessor):
    """Lets the reply's text through, then holds its end (the LLM pauses) until the service
    has kept the context alive ``KEEPALIVES`` times since its first audio, or Pipecat ended
    the context (the defect: the test then fails on what follows)."""

    def __init__(self) -> None:
        super().__init__()
        self.resume = asyncio.Event()
        self._held: list[Frame] = []

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMFullResponseEndFrame):
            await self.resume.wait()
        await self.push_frame(frame, direction)


class _Tap(FrameProcessor):
    """Counts what the service pushes; tells the LLM to go on when the pause is over."""

    def __init__(self, llm: _PausingLLM, refreshed: list[str]) -> None:
        super().__init__()
        self._llm = llm
        self._refreshed = refreshed
        self.frames: list[Frame] = []
        self._since: int | None = None

    def keepalive(self) -> None:
        if self._since is not None and len(self._refreshed) - self._since >= KEEPALIVES:
            self._llm.resume.set()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if direction is FrameDirection.DOWNSTREAM:
            self.frames.append(frame)
            if isinstance(frame, TTSAudioRawFrame) and self._since is None:
                self._since = len(self._refreshed)
            if isinstance(frame, TTSStoppedFrame):
                self._llm.resume.set()
        await self.push_frame(frame, direction)


def _tokens(text: str) -> list[LLMTextFrame]:
    words = text.split(" ")
    return [LLMTextFrame(word if i == 0 else f" {word}") for i, word in enumerate(words)]


@pytest.mark.parametrize("mode", [TextAggregationMode.SENTENCE, TextAggregationMode.TOKEN])
async def test_held_text_keeps_its_context_through_an_llm_pause(
    engine_pack_dir: Path, monkeypatch: pytest.MonkeyPatch, mode: TextAggregationMode
) -> None:
    from pipecat_pocket_tts.service import output as output_module

    refreshed: list[str] = []
    refresh = output_module.refresh_audio_context
    llm = _PausingLLM()
    tap = _Tap(llm, refreshed)

    def counting(service, context_id: str) -> None:
        refreshed.append(context_id)
        tap.keepalive()
        refresh(service, context_id)

    monkeypatch.setattr(output_module, "refresh_audio_context", counting)
    service = PocketTTSService(
        model_dir=engine_pack_dir,
        backend="numpy",
        warmup=False,
        text_aggregation_mode=mode,
        stop_frame_timeout_s=QUIET_TIMEOUT_S,
    )
    reply = [LLMFullResponseStartFrame(), *_tokens(f"{FIRST} {HELD}"), LLMFullResponseEndFrame()]
    await run_test(Pipeline([llm, service, tap]), frames_to_send=reply, start_timeout=START)
    kinds = [type(f) for f in tap.frames if isinstance(f, TTSStartedFrame | TTSStoppedFrame)]
    assert kinds == [TTSStartedFrame, TTSStoppedFrame]  # one context, kept through the pause
    words = [f.text for f in tap.frames if isinstance(f, TTSTextFrame)]
    assert " ".join(words).split() == f"{FIRST} {HELD}".split()  # the held words were said
