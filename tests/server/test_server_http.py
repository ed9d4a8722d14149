"""The server's HTTP side against a real server process (issue 32): Pipecat's own
``OpenAITTSService`` and the ``openai`` package on ``/v1/audio/speech``, upstream's ``/tts``
form, voices, probes and metrics, and the limits."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path

import httpx
import numpy as np
from openai import AsyncOpenAI
from pipecat.frames.frames import ErrorFrame, TTSAudioRawFrame, TTSSpeakFrame
from pipecat.services.openai.tts import OpenAITTSService
from pipecat.tests.utils import run_test
from polling import poll_until
from server_process import ServerProcess
from websockets.asyncio.client import connect

from pipecat_pocket_tts import wire
from pipecat_pocket_tts.engine.audio.wav import write_wav
from pipecat_pocket_tts.wire import handshake


def wav_fields(data: bytes) -> tuple[int, int, int]:
    """(channels, sample rate, bits) of a WAV header; the data follows at byte 44."""
    assert data[:4] == b"RIFF" and data[8:12] == b"WAVE" and data[36:40] == b"data"
    _, channels, rate, _, _, bits = struct.unpack("<HHIIHH", data[20:36])
    return channels, rate, bits


async def test_pipecat_openai_tts_service_speaks_through_the_server(server: ServerProcess) -> None:
    tts = OpenAITTSService(
        api_key="not-checked-on-loopback",
        base_url=f"{server.http_url}/v1",
        settings=OpenAITTSService.Settings(voice="alloy"),
    )
    down, up = await run_test(
        tts,
        frames_to_send=[TTSSpeakFrame("Hello from the shared server.")],
        expected_down_frames=None,
    )
    audio = [f for f in down if isinstance(f, TTSAudioRawFrame)]
    assert audio and sum(len(f.audio) for f in audio) >= 1920 * 2
    assert {f.sample_rate for f in audio} == {24000}
    assert not [f for f in up if isinstance(f, ErrorFrame)]


async def test_openai_package_wav_and_pcm(server: ServerProcess) -> None:
    client = AsyncOpenAI(api_key="x", base_url=f"{server.http_url}/v1")
    async with client.audio.speech.with_streaming_response.create(
        model="pocket-tts", voice="marius", input="One two three.", response_format="wav"
    ) as response:
        wav = await response.read()
    assert wav_fields(wav) == (1, 24000, 16)
    assert len(wav) > 44 and (len(wav) - 44) % 2 == 0
    async with client.audio.speech.with_streaming_response.create(
        model="pocket-tts", voice="marius", input="One two three.", response_format="pcm"
    ) as response:
        pcm = await response.read()
    assert pcm and len(pcm) % 2 == 0  # 16-bit samples, no header
    await client.close()


async def test_openai_refusals(server: ServerProcess) -> None:
    async with httpx.AsyncClient(base_url=server.http_url) as client:
        for body, status, words in [
            ({"input": "Hi.", "voice": "nobody", "response_format": "pcm"}, 400, "no voice"),
            ({"input": "Hi.", "voice": "alba", "response_format": "ogg"}, 400, "one of mp3"),
            ({"input": "", "voice": "alba", "response_format": "pcm"}, 400, "non-empty"),
            ({"input": "Hi." * 200_000, "voice": "alba"}, 413, "over"),
        ]:
            response = await client.post("/v1/audio/speech", json=body)
            assert response.status_code == status, body
            assert words in response.json()["error"]["message"]


async def test_upstream_tts_form_streams_a_wav(server: ServerProcess, tmp_path: Path) -> None:
    async with httpx.AsyncClient(base_url=server.http_url, timeout=60) as client:
        named = await client.post("/tts", data={"text": "Hello there.", "voice_url": "marius"})
        assert named.status_code == 200
        assert named.headers["content-type"] == "audio/wav"
        assert wav_fields(named.content) == (1, 24000, 16) and len(named.content) > 44 + 3840
        default = await client.post("/tts", data={"text": "Hello there."})
        assert default.status_code == 200 and wav_fields(default.content)[1] == 24000
        url = await client.post("/tts", data={"text": "Hi.", "voice_url": "https://x.invalid/a"})
        assert url.status_code == 403 and "fetches no voice URL" in url.json()["error"]["message"]
        path = await client.post("/tts", data={"text": "Hi.", "voice_url": "../alba"})
        assert path.status_code == 400 and "voice name" in path.json()["error"]["message"]
        recording = tmp_path / "me.wav"
        rng = np.random.default_rng(0)
        write_wav(recording, (0.1 * rng.standard_normal(24000 * 2)).astype(np.float32), 24000)
        files = {"voice_wav": ("me.wav", recording.read_bytes(), "audio/wav")}
        cloned = await client.post("/tts", data={"text": "Cloned."}, files=files)
        assert cloned.status_code == 200 and wav_fields(cloned.content)[1] == 24000


def test_voices_health_ready_metrics(server: ServerProcess) -> None:
    status, voices = server.json("/v1/voices")
    assert status == 200
    assert voices["voices"] == ["alba", "marius"] and voices["default"] == "alba"
    assert voices["aliases"]["alloy"] == "alba"
    assert server.json("/health") == (200, {"status": "ok"})
    assert server.json("/ready")[0] == 200
    status, body = server.get("/metrics")
    text = body.decode()
    assert status == 200
    for name in (
        "pocket_tts_streams",
        "pocket_tts_connections",
        "pocket_tts_admission_wait_seconds",
        "pocket_tts_first_audio_seconds",
        "pocket_tts_late_frames_total",
        "pocket_tts_real_time_factor",
        "pocket_tts_cancel_ticks",
    ):
        assert name in text


async def test_ready_says_503_while_admission_is_full(engine_endless_pack_dir: Path) -> None:
    full = ServerProcess(engine_endless_pack_dir, "--max-streams", "1").start()
    try:
        async with await connect(full.ws_url + handshake.PATH, proxy=None) as ws:
            await ws.recv()  # ready
            for name in ("first", "second"):
                await ws.send(wire.encode(wire.Start(name)))
                await ws.send(wire.encode(wire.Text(name, 0, "On and on. " * 50, complete=True)))
            await poll_until(  # the second session waits for the slot
                lambda: full.get("/ready")[0] == 503, what="/ready to say 503"
            )
            status, body = full.get("/ready")
            assert status == 503 and b"wait for a slot" in body
            await ws.send(wire.encode(wire.Cancel("first")))
            await ws.send(wire.encode(wire.Cancel("second")))
            cancelled = 0
            for _ in range(20_000):  # messages read before the test fails (a count)
                message = await asyncio.wait_for(ws.recv(), 60)  # a failure bound only
                cancelled += isinstance(message, str) and '"cancelled"' in message
                if cancelled == 2:
                    break
            assert cancelled == 2
        await poll_until(lambda: full.get("/ready")[0] == 200, what="/ready to say 200 again")
    finally:
        full.stop()


async def test_http_needs_the_key_when_one_is_set(engine_pack_dir: Path) -> None:
    keyed = ServerProcess(engine_pack_dir, "--api-key", "k3y").start()
    try:
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            async with httpx.AsyncClient(base_url=keyed.http_url, headers=headers) as client:
                body = {"input": "Hi.", "voice": "alba"}
                speech = await client.post("/v1/audio/speech", json=body)
                form = await client.post("/tts", data={"text": "Hi."})
            assert speech.status_code == form.status_code == 401
        client = AsyncOpenAI(api_key="k3y", base_url=f"{keyed.http_url}/v1")
        async with client.audio.speech.with_streaming_response.create(
            model="m", voice="alba", input="Hi.", response_format="pcm"
        ) as response:
            assert response.status_code == 200 and await response.read()
        await client.close()
    finally:
        keyed.stop()
