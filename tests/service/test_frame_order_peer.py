"""Pipecat's frame-order guarantee, held by PocketTTSService while a reply still speaks.

Pipecat's own suite (``tests/test_tts_frame_ordering.py``: the two
``test_serialization_queue_*`` tests) checks that a frame queued behind a ``TTSSpeakFrame``
waits behind its audio, is dropped by an interruption that comes while the reply speaks, and
survives it when it is uninterruptible. Run against our service with sleeps, the tiny
"hello" reply had finished before the next frame arrived, so the frame was already out and
the test failed in most runs (timing, not order). Here the reply cannot finish first: its text
is long and the pack's EOS never fires, and the test waits on events, not on time: the frames
are queued once the reply's audio is flowing, the interruption once they are queued.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import pytest
from frame_recorder import EVENT_TIMEOUT_S, Recorder
from pipecat.frames.frames import (
    ControlFrame,
    DataFrame,
    EndFrame,
    Frame,
    InterruptionFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    TTSStoppedFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.workers.runner import WorkerRunner
from polling import poll_until

from pipecat_pocket_tts import PocketTTSService

LONG_REPLY = "This reply goes on for a long while and keeps the voice busy. " * 12


@dataclass
class FooFrame(DataFrame):
    label: str = ""


@dataclass
class KeptFrame(ControlFrame):
    label: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.interruptible = False


@pytest.mark.parametrize("kept", [False, True], ids=["regular", "with an uninterruptible"])
async def test_frames_queued_behind_a_speaking_reply_follow_pipecat_s_order(
    engine_endless_pack_dir: Path, kept: bool
) -> None:
    tts = PocketTTSService(
        model_dir=engine_endless_pack_dir,
        backend="numpy",
        settings=PocketTTSService.Settings(seed=1),
    )
    down = Recorder()
    worker = PipelineWorker(
        Pipeline([tts, down]),
        params=PipelineParams(audio_out_sample_rate=24000),
        cancel_on_idle_timeout=False,
    )
    runner = WorkerRunner(handle_sigint=False)
    running = asyncio.create_task(runner.run(worker))
    await worker.queue_frame(TTSSpeakFrame(LONG_REPLY, append_to_context=False))
    await down.wait_for(lambda f: isinstance(f, TTSAudioRawFrame))  # the reply speaks
    queued: list[Frame] = [FooFrame(label="will_be_dropped")]
    if kept:
        queued.append(KeptFrame(label="must_survive"))
    await worker.queue_frames(queued)
    # Pipecat's guarantee: behind the reply's audio, not pushed while it still speaks.
    waiting = tts._audio_context_manager._queue  # Pipecat's serialization queue (1.14)
    await poll_until(
        lambda: all(waiting.has_frame(type(f)) for f in queued),
        what="the frames to wait behind the reply in Pipecat's serialization queue",
    )
    assert not any(isinstance(f, (FooFrame, KeptFrame, TTSStoppedFrame)) for f in down.frames)
    await worker.queue_frame(InterruptionFrame())
    if kept:
        await down.wait_for(lambda f: isinstance(f, KeptFrame))
    await worker.queue_frame(EndFrame())
    await asyncio.wait_for(running, EVENT_TIMEOUT_S)
    assert not [f for f in down.frames if isinstance(f, FooFrame)]  # dropped, never pushed
    assert [f.label for f in down.frames if isinstance(f, KeptFrame)] == (
        ["must_survive"] if kept else []
    )
