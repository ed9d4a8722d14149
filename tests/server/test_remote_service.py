"""``PocketTTSService(server_url=...)`` against a real server process (issue 32).

The same pipelines run on an in-process model and through the server give the same frames,
words and audio (same pack, same seed); a server killed mid-reply gives one ErrorFrame and,
once it is back, the next reply speaks; an unreachable server is an ErrorFrame, not a crash.
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import numpy as np
import pytest
from frame_recorder import EVENT_TIMEOUT_S, Recorder
from pipecat.frames.frames import (
    AggregatedTextProgressFrame,
    EndFrame,
    ErrorFrame,
    Frame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    MetricsFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.services.tts_service import TextAggregationMode
from pipecat.tests.utils import run_test
from pipecat.workers.runner import WorkerRunner
from server_process import ServerProcess, free_port

from pipecat_pocket_tts import PocketTTSService

START = 30.0


def llm_turn(text: str) -> list[Frame]:
    tokens = [w[i : i + 4] for w in re.findall(r"\s*\S+", text) for i in range(0, len(w), 4)]
    return [LLMFullResponseStartFrame(), *map(LLMTextFrame, tokens), LLMFullResponseEndFrame()]


SPEAKING = TTSAudioRawFrame | TTSTextFrame | AggregatedTextProgressFrame
"""Frames of audio being spoken: how many progress frames a sentence gets depends on how many
engine frames the consumer takes per wake-up (``handover``: more while the output is far
ahead), which follows the machine's timing; the words and the audio do not."""


def summary(frames: list[Frame]) -> tuple[list[str], list[str], bytes]:
    """Frame kinds (runs of speaking frames collapsed), spoken words, audio bytes."""
    kinds: list[str] = []
    for frame in frames:
        if isinstance(frame, MetricsFrame):
            continue
        kind = "audio" if isinstance(frame, SPEAKING) else type(frame).__name__
        if not (kind == "audio" and kinds and kinds[-1] == "audio"):
            kinds.append(kind)
    words = [f.text for f in frames if isinstance(f, TTSTextFrame)]
    audio = b"".join(f.audio for f in frames if isinstance(f, TTSAudioRawFrame))
    return kinds, words, audio


@pytest.mark.parametrize("mode", [TextAggregationMode.SENTENCE, TextAggregationMode.TOKEN])
async def test_through_the_server_as_in_process(
    server: ServerProcess, engine_pack_dir: Path, mode: TextAggregationMode
) -> None:
    frames = [*llm_turn("Hello there. How are you doing today?"), TTSSpeakFrame("Good, thanks.")]
    settings = PocketTTSService.Settings(seed=7)
    local = PocketTTSService(
        model_dir=engine_pack_dir, backend="numpy", settings=settings, text_aggregation_mode=mode
    )
    remote = PocketTTSService(
        server_url=server.ws_url, settings=settings, text_aggregation_mode=mode
    )
    here, _ = await run_test(local, frames_to_send=frames, start_timeout=START)
    there, _ = await run_test(remote, frames_to_send=frames, start_timeout=START)
    kinds, words, audio = summary(there)
    assert (kinds, words) == summary(here)[:2]
    assert words == ["Hello", "there.", "How", "are", "you", "doing", "today?", "Good,", "thanks."]
    assert audio and audio == summary(here)[2]  # same pack, same seed: the same samples
    assert not [f for f in there if isinstance(f, ErrorFrame)]
    assert remote.engine is None  # released at cleanup


async def test_server_killed_mid_reply_then_back(engine_endless_pack_dir: Path) -> None:
    """Killed mid-reply: one ErrorFrame; after a restart on the same port the next reply
    speaks. Nothing else of the killed reply reaches the pipeline."""
    server = ServerProcess(engine_endless_pack_dir).start()
    try:
        tts = PocketTTSService(server_url=server.ws_url)
        upstream, downstream = Recorder(), Recorder()
        worker = PipelineWorker(
            Pipeline([upstream, tts, downstream]),
            params=PipelineParams(audio_out_sample_rate=24000),
            cancel_on_idle_timeout=False,
        )
        runner = WorkerRunner(handle_sigint=False)
        running = asyncio.create_task(runner.run(worker))
        await worker.queue_frame(TTSSpeakFrame("A long reply that keeps on going. " * 20))
        first = await downstream.wait_for(lambda f: isinstance(f, TTSAudioRawFrame))
        killed_at = time.monotonic()
        server.kill()
        error = await upstream.wait_for(lambda f: isinstance(f, ErrorFrame))
        print(f"ErrorFrame {time.monotonic() - killed_at:.3f} s after the kill: {error.error}")
        assert "lost the connection to the TTS server" in error.error
        assert "\n" not in error.error
        await downstream.wait_for(lambda f: isinstance(f, TTSStoppedFrame))
        mark = len(downstream.frames)
        await asyncio.to_thread(server.start)  # the same port
        await worker.queue_frame(TTSSpeakFrame("Back again."))
        started = await downstream.wait_for(lambda f: isinstance(f, TTSStartedFrame), mark)
        assert started.context_id != first.context_id
        await downstream.wait_for(
            lambda f: isinstance(f, TTSAudioRawFrame) and f.context_id == started.context_id,
            mark,
        )
        await worker.queue_frame(EndFrame())
        await asyncio.wait_for(running, EVENT_TIMEOUT_S)
    finally:
        server.stop()
    errors = [f for f in upstream.frames if isinstance(f, ErrorFrame)]
    assert len(errors) == 1, [e.error for e in errors]
    late = [
        f
        for f in downstream.frames[mark:]
        if isinstance(f, TTSAudioRawFrame) and f.context_id == first.context_id
    ]
    assert not late


async def test_unreachable_server_is_an_error_frame_not_a_crash() -> None:
    tts = PocketTTSService(server_url=f"ws://127.0.0.1:{free_port()}")
    down, up = await run_test(
        tts,
        frames_to_send=[TTSSpeakFrame("Anyone there?")],
        expected_down_frames=None,
        start_timeout=START,
    )
    errors = [f.error for f in up if isinstance(f, ErrorFrame) and "PocketTTS" in f.error]
    assert errors and all("cannot reach the TTS server" in e for e in errors), errors
    assert not [f for f in down if isinstance(f, TTSAudioRawFrame)]


async def test_load_options_with_a_server_are_refused() -> None:
    with pytest.raises(TypeError, match="server's own options decide"):
        PocketTTSService(server_url="ws://127.0.0.1:1", precision="int8")


def test_frames_carry_their_words(server: ServerProcess) -> None:
    """The client's frames: 80 ms of float32 and the words, as the engine's."""
    from pipecat_pocket_tts.client import RemoteTTS

    remote = RemoteTTS(server.ws_url).connect()
    try:
        session = remote.session(timestamps=True, seed=1)
        session.enqueue("One two three.")
        session.mark("end")
        session.finish()
        items = list(session)
    finally:
        remote.close()
    frames = [i for i in items if hasattr(i, "samples") and i.samples.size]
    assert all(f.samples.dtype == np.float32 and f.samples.shape == (1920,) for f in frames)
    assert [w.text for f in frames for w in f.words] == ["One", "two", "three."]
    assert items[-1].payload == "end"


async def test_a_wrong_key_reaches_the_bot_as_a_refused_key(engine_pack_dir: Path) -> None:
    """A key the server refuses (4001) is an ErrorFrame that says so, not a pack that could
    not load or a server that cannot be reached."""
    keyed = ServerProcess(engine_pack_dir, "--api-key", "s3cret")
    await asyncio.to_thread(keyed.start)
    try:
        tts = PocketTTSService(server_url=keyed.ws_url, api_key="wrong")
        _, up = await run_test(tts, frames_to_send=[TTSSpeakFrame("Hi.")], start_timeout=START)
    finally:
        await asyncio.to_thread(keyed.stop)
    errors = [f.error for f in up if isinstance(f, ErrorFrame)]
    assert errors, "no ErrorFrame"
    for error in errors:
        print(error)
        assert "refused the API key" in error and "api_key" in error
        assert "could not load pack" not in error and "cannot reach" not in error
