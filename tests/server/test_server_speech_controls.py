"""Speaking rate and pauses through a real server process: OpenAI's ``speed``, the websocket
protocol's ``speed`` (start, text, flush) and ``<break/>`` tags, and the remote client."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import numpy as np
import pytest
from audio_checks import centroid, silent_run
from openai import AsyncOpenAI
from pipecat.frames.frames import TTSAudioRawFrame, TTSSpeakFrame
from pipecat.tests.utils import run_test
from server_process import ServerProcess
from test_server_protocol import audio_of, open_client, until

from pipecat_pocket_tts import PocketTTSService, wire
from pipecat_pocket_tts.client.tts import RemoteTTS

TEXT = "One two three four five six."


async def openai_pcm(server: ServerProcess, **fields) -> np.ndarray:
    client = AsyncOpenAI(api_key="x", base_url=f"{server.http_url}/v1")
    async with client.audio.speech.with_streaming_response.create(
        model="pocket-tts", voice="alba", input=TEXT, response_format="pcm", **fields
    ) as response:
        data = await response.read()
    await client.close()
    return np.frombuffer(data, dtype=np.int16).astype(np.float32) / 32768


@pytest.mark.parametrize("speed", [0.5, 2.0])
async def test_openai_speed_scales_the_duration_and_keeps_the_spectrum(
    endless_server: ServerProcess, speed: float
) -> None:
    plain = await openai_pcm(endless_server)
    fast = await openai_pcm(endless_server, speed=speed)
    assert fast.shape[0] / plain.shape[0] == pytest.approx(1 / speed, rel=0.10)
    assert centroid(fast) == pytest.approx(centroid(plain), rel=0.10)


async def test_openai_speed_out_of_range_is_a_400_naming_the_range(server: ServerProcess) -> None:
    async with httpx.AsyncClient(base_url=server.http_url) as client:
        for speed in (4.5, 0.1, "fast"):
            body = {"input": "Hi.", "voice": "alba", "response_format": "pcm", "speed": speed}
            response = await client.post("/v1/audio/speech", json=body)
            assert response.status_code == 400
            assert "speed must be" in response.json()["error"]["message"]


async def run_context(server: ServerProcess, start: wire.Start, *messages) -> list:
    async with await open_client(server.ws_url) as ws:
        await ws.send(wire.encode(start))
        for message in messages:
            await ws.send(wire.encode(message))
        await ws.send(wire.encode(wire.End(start.context)))
        return await until(ws, wire.Done, start.context)


def samples_of(items: list, utterance: int | None = None) -> np.ndarray:
    pieces = [
        np.frombuffer(data, dtype=np.int16)
        for item in items
        if isinstance(item, tuple)
        for header, data in [item]
        if utterance is None or header.utterance == utterance
    ]
    return np.concatenate(pieces).astype(np.float32) / 32768


async def test_websocket_speed_on_start_text_and_flush(endless_server: ServerProcess) -> None:
    start = wire.Start("c", seed=5, timestamps=True, speed=2.0)
    items = await run_context(
        endless_server,
        start,
        wire.Text("c", 0, TEXT, complete=True),  # the context's speed: 2.0
        wire.Text("c", 1, TEXT, complete=True, speed=1.0),  # overridden
        wire.Text("c", 2, TEXT, complete=False),
        wire.Flush("c", 3, speed=0.5),  # the fed text's utterance is queued by the flush
    )
    fast, plain, slow = (samples_of(items, u).shape[0] for u in (0, 1, 3))
    assert fast / plain == pytest.approx(0.5, rel=0.10)
    assert slow / plain == pytest.approx(2.0, rel=0.10)
    # word times on the audio sent: each word starts within the audio before its frame's end
    clock = 0.0
    for header in audio_of(items, "c"):
        assert all(
            w.session_start <= clock + header_seconds(items, header) + 1e-6 for w in header.words
        )
        clock += header_seconds(items, header)


def header_seconds(items: list, header: wire.AudioHeader) -> float:
    data = next(d for item in items if isinstance(item, tuple) for h, d in [item] if h is header)
    return len(data) / 2 / 24000


async def test_websocket_break_is_silence_and_a_bad_one_an_error(server: ServerProcess) -> None:
    items = await run_context(
        server,
        wire.Start("b", seed=5, timestamps=True),
        wire.Text("b", 0, 'Hello there. <break time="800ms"/> And now more.', complete=True),
    )
    assert silent_run(samples_of(items)) >= round(0.7 * 24000)
    words = [w.text for h in audio_of(items, "b") for w in h.words]
    assert words == ["Hello", "there.", "And", "now", "more."]
    async with await open_client(server.ws_url) as ws:
        await ws.send(wire.encode(wire.Start("x")))
        await ws.send(wire.encode(wire.Text("x", 0, 'Hi <break time="20s"/> you.', complete=True)))
        while not isinstance(error := wire.decode_server(await ws.recv()), wire.Error):
            pass
    assert error.code == wire.ErrorCode.BAD_REQUEST and "at most 10 s" in error.message


async def test_a_bad_speed_on_start_is_refused(server: ServerProcess) -> None:
    async with await open_client(server.ws_url) as ws:
        await ws.send(wire.encode(wire.Start("s", speed=9.0)))
        error = wire.decode_server(await ws.recv())
    assert isinstance(error, wire.Error) and "speed must be" in error.message


async def test_the_remote_client_sends_speed(endless_server: ServerProcess) -> None:
    def speak(speed: float | None) -> int:
        remote = RemoteTTS(endless_server.ws_url).connect()
        try:
            session = remote.session(seed=2, speed=speed)
            session.enqueue(TEXT)
            session.finish()
            return sum(frame.samples.shape[0] for frame in session)
        finally:
            remote.close()

    plain, fast = await asyncio.to_thread(speak, None), await asyncio.to_thread(speak, 1.5)
    assert fast / plain == pytest.approx(1 / 1.5, rel=0.10)


async def test_the_service_through_the_server_speaks_at_its_speed_as_in_process(
    server: ServerProcess, engine_pack_dir: Path
) -> None:
    """``PocketTTSService(server_url=...)`` with ``Settings(speed=1.5)``: the very samples the
    in-process service makes, 1/1.5 of the audio at speed 1."""
    frames = [TTSSpeakFrame("Good morning, how can I help you today?")]

    async def audio(**where) -> bytes:
        settings = PocketTTSService.Settings(seed=7, speed=where.pop("speed"))
        down, _ = await run_test(
            PocketTTSService(settings=settings, **where), frames_to_send=frames, start_timeout=60
        )
        return b"".join(f.audio for f in down if isinstance(f, TTSAudioRawFrame))

    local = await audio(model_dir=engine_pack_dir, backend="numpy", speed=1.5)
    remote = await audio(server_url=server.ws_url, speed=1.5)
    plain = await audio(server_url=server.ws_url, speed=None)
    assert remote == local
    assert len(remote) / len(plain) == pytest.approx(1 / 1.5, rel=0.10)
