"""Gradium's websocket protocol against a real server process, through Pipecat's own
``GradiumTTSService`` (unchanged: only its ``url`` points here) and a raw Gradium client.

Audio, word timestamps and an interruption in a pipeline; requests multiplexed on one socket;
a refused setup is a coded error and the socket goes on; the key as ``x-api-key``.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
import websockets
from pipecat.frames.frames import (
    EndFrame,
    ErrorFrame,
    InterruptionFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineWorker
from pipecat.services.gradium.tts import GradiumTTSService
from pipecat.tests.utils import run_test
from pipecat.workers.runner import WorkerRunner
from polling import poll_until
from server_process import ServerProcess
from test_remote_service import Recorder
from websockets.asyncio.client import connect

from pipecat_pocket_tts.server.dialects.gradium import PATH

START_TIMEOUT_S = 60.0
MAX_MESSAGES = 20_000  # messages a wait reads before it fails (a count, not a time budget)


def gradium(server: ServerProcess, **kwargs: Any) -> GradiumTTSService:
    return GradiumTTSService(
        api_key=kwargs.pop("api_key", "any"),
        url=server.ws_url + PATH,
        settings=GradiumTTSService.Settings(voice="alba"),
        **kwargs,
    )


async def test_gradium_service_speaks_with_word_timestamps(server: ServerProcess) -> None:
    down, up = await run_test(
        gradium(server),
        frames_to_send=[TTSSpeakFrame("Hello there, how are you?")],
        start_timeout=START_TIMEOUT_S,
    )
    audio = [f for f in down if isinstance(f, TTSAudioRawFrame)]
    assert audio and {f.sample_rate for f in audio} == {48000}
    assert sum(len(f.audio) for f in audio) % 2 == 0
    words = [f.text for f in down if isinstance(f, TTSTextFrame)]
    assert words == ["Hello", "there,", "how", "are", "you?"]
    kinds = [type(f) for f in down if isinstance(f, TTSStartedFrame | TTSStoppedFrame)]
    assert kinds == [TTSStartedFrame, TTSStoppedFrame]
    assert not [f for f in up if isinstance(f, ErrorFrame)]


async def test_gradium_interruption_stops_the_reply(engine_endless_pack_dir: Path) -> None:
    """Pipecat interrupts a speaking Gradium reply by reconnecting: the server stops that
    request's compute, nothing of it reaches the pipeline after the interruption, and the next
    reply speaks on the new connection. (The never-EOS pack: the reply would go on for
    minutes.)"""
    server = ServerProcess(engine_endless_pack_dir).start()
    try:
        upstream, downstream = Recorder(), Recorder()
        worker = PipelineWorker(
            Pipeline([upstream, gradium(server), downstream]), cancel_on_idle_timeout=False
        )
        running = asyncio.create_task(WorkerRunner(handle_sigint=False).run(worker))
        await worker.queue_frame(TTSSpeakFrame("This reply goes on and on. " * 20))
        first = await downstream.wait_for(lambda f: isinstance(f, TTSAudioRawFrame))
        assert server.metric("pocket_tts_streams") == 1
        await worker.queue_frame(InterruptionFrame())
        cut = downstream.frames.index(
            await downstream.wait_for(lambda f: isinstance(f, InterruptionFrame))
        )
        await poll_until(  # the interrupted request's session is gone from the server
            lambda: server.metric("pocket_tts_streams") == 0, what="the reply's compute stopped"
        )
        await worker.queue_frame(TTSSpeakFrame("Next."))
        started = await downstream.wait_for(lambda f: isinstance(f, TTSStartedFrame), cut)
        await downstream.wait_for(lambda f: isinstance(f, TTSStoppedFrame), cut)
        await worker.queue_frame(EndFrame())
        await asyncio.wait_for(running, START_TIMEOUT_S)
    finally:
        server.stop()
    late = [f for f in downstream.frames[cut:] if isinstance(f, TTSAudioRawFrame)]
    assert late and {f.context_id for f in late} == {started.context_id} != {first.context_id}
    assert not [f for f in upstream.frames if isinstance(f, ErrorFrame)]


async def _until(ws: Any, kind: str, *requests: str | None) -> list[dict[str, Any]]:
    """Every message until one of type ``kind`` came for each of ``requests``."""
    messages, waiting = [], set(requests)
    for _ in range(MAX_MESSAGES):
        message = json.loads(await asyncio.wait_for(ws.recv(), START_TIMEOUT_S))
        messages.append(message)
        if message["type"] == kind:
            waiting.discard(message.get("client_req_id"))
        if not waiting:
            return messages
    raise AssertionError(f"no {kind!r} for {waiting}")


async def test_multiplexed_requests_and_a_refused_setup(server: ServerProcess) -> None:
    async with connect(server.ws_url + PATH, proxy=None) as ws:
        await ws.send(json.dumps({"type": "setup", "client_req_id": "bad", "voice_id": "nope"}))
        await ws.send(json.dumps({"type": "text", "client_req_id": "bad", "text": "Hi."}))
        refused = await _until(ws, "error", "bad")
        assert refused[-1]["code"] == 1008 and "nope" in refused[-1]["message"]
        for name, fmt in (("a", "pcm_16000"), ("b", "ulaw_8000")):
            setup = {"type": "setup", "client_req_id": name, "voice_id": "alba"}
            await ws.send(json.dumps({**setup, "output_format": fmt, "close_ws_on_eos": False}))
        await ws.send(json.dumps({"type": "text", "client_req_id": "a", "text": "One two."}))
        await ws.send(json.dumps({"type": "text", "client_req_id": "b", "text": "Three."}))
        for name in ("a", "b"):
            await ws.send(json.dumps({"type": "end_of_stream", "client_req_id": name}))
        messages = await _until(ws, "end_of_stream", "a", "b")  # in either order
        # The socket stays open (close_ws_on_eos false): a last request with the defaults.
        await ws.send(json.dumps({"type": "setup", "voice_id": "marius"}))
        await ws.send(json.dumps({"type": "text", "text": "Bye."}))
        await ws.send(json.dumps({"type": "end_of_stream"}))
        single = await _until(ws, "end_of_stream", None)
        with pytest.raises(websockets.ConnectionClosedOK):  # close_ws_on_eos: true by default
            await ws.recv()
    for name, rate, width in (("a", 16000, 2), ("b", 8000, 1)):
        mine = [m for m in messages if m.get("client_req_id") == name]
        assert mine[0]["type"] == "ready"
        audio = [m for m in mine if m["type"] == "audio"]
        size = sum(len(base64.b64decode(m["audio"])) for m in audio)
        assert audio[-1]["stop_s"] == pytest.approx(size / (rate * width))
        assert all(a["stop_s"] == b["start_s"] for a, b in itertools.pairwise(audio))
    words = [m for m in messages if m["type"] == "text" and m["client_req_id"] == "a"]
    assert [w["text"] for w in words] == ["One", "two."]
    assert 0 <= words[0]["start_s"] <= words[0]["stop_s"] <= words[1]["start_s"]
    assert single[0]["type"] == "ready"
    assert "client_req_id" not in single[-1]


async def test_the_key_as_x_api_key(engine_pack_dir: Path) -> None:
    keyed = ServerProcess(engine_pack_dir, "--api-key", "s3cret").start()
    try:
        down, _ = await run_test(
            gradium(keyed, api_key="s3cret"),
            frames_to_send=[TTSSpeakFrame("Keyed.")],
            start_timeout=START_TIMEOUT_S,
        )
        assert [f for f in down if isinstance(f, TTSAudioRawFrame)]
        headers = {"x-api-key": "wrong"}
        async with connect(keyed.ws_url + PATH, proxy=None, additional_headers=headers) as ws:
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await ws.recv()
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4001
    finally:
        keyed.stop()
