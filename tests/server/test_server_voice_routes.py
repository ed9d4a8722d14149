"""The chosen voice speaks on every route (issue 50, item 1).

A two-voice pack at temperature 0 makes each voice's audio the same bytes every time, so the
audio says which voice spoke: on each route the chosen voice (``marius``) must differ from the
default voice's (``alba``) and equal what our own protocol's ``start.voice`` gives for it.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from livekit.agents import APIConnectOptions
from livekit.plugins import pocket
from pipecat.frames.frames import ErrorFrame, TTSAudioRawFrame, TTSSpeakFrame
from pipecat.tests.utils import run_test
from server_process import ServerProcess
from test_server_protocol import MAX_MESSAGES, open_client, receive
from websockets.asyncio.client import connect

from pipecat_pocket_tts import PocketTTSService, wire
from pipecat_pocket_tts.server.dialects import gradium, livekit

TEXT = "Hello there, how are you?"
CHOSEN, DEFAULT = "marius", "alba"
TIMEOUT_S = 60.0  # a failure bound only


def deterministic_pack(folder: Path) -> Path:
    """A tiny two-voice pack (alba, the default, and marius) whose audio is deterministic."""
    from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict

    config = {**tiny_config_dict("standard"), "default_temperature": 0.0}
    return build_pack(folder / "english", config, voices=(DEFAULT, CHOSEN))


@pytest.fixture(scope="module")
def voice_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    process = ServerProcess(deterministic_pack(tmp_path_factory.mktemp("voices"))).start()
    yield process
    process.stop()


async def native(
    server: ServerProcess, start_voice: str | None = None, text_voice: str | None = None
) -> bytes:
    """16-bit PCM at 24 kHz of ``TEXT`` through our protocol."""
    audio = bytearray()
    async with await open_client(server.ws_url) as ws:
        await ws.send(wire.encode(wire.Start("c", voice=start_voice)))
        await ws.send(wire.encode(wire.Text("c", 0, TEXT, complete=True, voice=text_voice)))
        await ws.send(wire.encode(wire.End("c")))
        for _ in range(MAX_MESSAGES):
            item = await receive(ws)
            if isinstance(item, tuple):
                audio += item[1]
            elif isinstance(item, wire.Error):
                raise AssertionError(str(item))
            elif isinstance(item, wire.Done):
                return bytes(audio)
    raise AssertionError("no done")


@pytest.fixture(scope="module")
def reference(voice_server: ServerProcess) -> dict[str | None, bytes]:
    """Our protocol's audio of each voice, named by the text (None: none named)."""

    async def all_voices() -> dict[str | None, bytes]:
        return {v: await native(voice_server, text_voice=v) for v in (None, DEFAULT, CHOSEN)}

    audio = asyncio.run(all_voices())
    assert audio[None] == audio[DEFAULT] != audio[CHOSEN]
    return audio


def chosen_voice_spoke(audio: bytes, reference: dict[str | None, bytes]) -> None:
    assert audio, "no audio"
    assert audio != reference[DEFAULT], "the default voice spoke"
    assert audio == reference[CHOSEN]


async def test_native_start_voice_and_a_texts_own_voice(
    voice_server: ServerProcess, reference: dict[str | None, bytes]
) -> None:
    # A text that names no voice keeps its context's; one that names a voice speaks with it.
    chosen_voice_spoke(await native(voice_server, start_voice=CHOSEN), reference)
    assert await native(voice_server, CHOSEN, DEFAULT) == reference[DEFAULT]


async def gradium_audio(server: ServerProcess, voice_id: str) -> bytes:
    """16-bit PCM at 24 kHz of ``TEXT`` through Gradium's protocol."""
    audio = bytearray()
    setup = {"type": "setup", "voice_id": voice_id, "output_format": "pcm_24000"}
    url = server.ws_url + gradium.PATH
    async with connect(url, proxy=None, additional_headers={"x-api-key": "any"}) as ws:
        await ws.send(json.dumps(setup))
        await ws.send(json.dumps({"type": "text", "text": TEXT}))
        await ws.send(json.dumps({"type": "end_of_stream"}))
        for _ in range(MAX_MESSAGES):
            message = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT_S))
            assert message["type"] != "error", message
            if message["type"] == "audio":
                audio += base64.b64decode(message["audio"])
            if message["type"] == "end_of_stream":
                return bytes(audio)
    raise AssertionError("no end_of_stream")


async def test_gradium_voice_id(
    voice_server: ServerProcess, reference: dict[str | None, bytes]
) -> None:
    chosen_voice_spoke(await gradium_audio(voice_server, CHOSEN), reference)


async def test_gradiums_default_voice_id_is_the_default_voice(
    voice_server: ServerProcess, reference: dict[str | None, bytes]
) -> None:
    """What Pipecat's ``GradiumTTSService`` sends when given no voice."""
    audio = await gradium_audio(voice_server, gradium.DEFAULT_VOICE_ID)
    assert audio == reference[DEFAULT]


async def test_the_packs_own_voice_file_as_default_voice(
    voice_server: ServerProcess, reference: dict[str | None, bytes]
) -> None:
    """``--default-voice PACK/embeddings/marius.safetensors`` is the pack's marius."""
    own_file = voice_server.pack_dir / "embeddings" / f"{CHOSEN}.safetensors"
    server = ServerProcess(voice_server.pack_dir, "--default-voice", str(own_file))
    await asyncio.to_thread(server.start)
    try:
        status, voices = await asyncio.to_thread(server.json, "/v1/voices")
        assert status == 200 and voices["default"] == CHOSEN
        chosen_voice_spoke(await native(server), reference)
    finally:
        await asyncio.to_thread(server.stop)


async def test_livekit_plugin_voice(
    voice_server: ServerProcess, reference: dict[str | None, bytes]
) -> None:
    tts = pocket.TTS(
        ws_url=voice_server.ws_url + livekit.PATH, voice=CHOSEN, sample_rate=24000, timeout=60
    )
    try:
        options = APIConnectOptions(max_retry=0, timeout=TIMEOUT_S)
        events = [e async for e in tts.synthesize(TEXT, conn_options=options)]
    finally:
        await tts.aclose()
    audio = b"".join(bytes(e.frame.data) for e in events)
    # The plugin fills its last 10 ms frame with silence.
    spoken, padding = audio[: len(reference[CHOSEN])], audio[len(reference[CHOSEN]) :]
    assert padding == bytes(len(padding)) and len(padding) <= 480
    chosen_voice_spoke(spoken, reference)


def test_openai_voice(voice_server: ServerProcess, reference: dict[str | None, bytes]) -> None:
    body = {"model": "tts-1", "input": TEXT, "voice": CHOSEN, "response_format": "pcm"}
    response = httpx.post(voice_server.http_url + "/v1/audio/speech", json=body, timeout=60)
    assert response.status_code == 200, response.text
    chosen_voice_spoke(response.content, reference)


def test_upstream_tts_voice(
    voice_server: ServerProcess, reference: dict[str | None, bytes]
) -> None:
    form = {"text": TEXT, "voice_url": CHOSEN}
    response = httpx.post(voice_server.http_url + "/tts", data=form, timeout=60)
    assert response.status_code == 200, response.text
    assert response.content[36:40] == b"data"
    chosen_voice_spoke(response.content[44:], reference)


async def test_client_mode_voice(
    voice_server: ServerProcess, reference: dict[str | None, bytes]
) -> None:
    service = PocketTTSService(
        server_url=voice_server.ws_url, settings=PocketTTSService.Settings(voice=CHOSEN)
    )
    down, up = await run_test(service, frames_to_send=[TTSSpeakFrame(TEXT)], start_timeout=60)
    assert not [f for f in up if isinstance(f, ErrorFrame)]
    frames = [f for f in down if isinstance(f, TTSAudioRawFrame)]
    assert {f.sample_rate for f in frames} == {24000}
    audio = b"".join(f.audio for f in frames)
    chosen_voice_spoke(audio, reference)
    assert np.frombuffer(audio, np.int16).size == len(reference[CHOSEN]) // 2
