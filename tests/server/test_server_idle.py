"""Idle means idle (issue 50, item 6): a connection whose contexts have nothing queued and
that sends nothing for ``--idle-timeout`` is closed, on every websocket route, so sockets that
opened a context and went silent cannot hold every slot; ``PocketTTSService(server_url=...)``
keeps its session between turns with its own keepalive. A short idle timeout; the tests wait
on the server's closes, never on the clock.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from frame_recorder import EVENT_TIMEOUT_S, RecordedPipeline
from pipecat.frames.frames import ErrorFrame, TTSAudioRawFrame, TTSSpeakFrame, TTSStoppedFrame
from pipecat.services.gradium.tts import GradiumTTSService
from polling import poll_until
from server_process import ServerProcess
from test_server_protocol import open_client, until
from websockets.asyncio.client import ClientConnection, connect

from pipecat_pocket_tts import PocketTTSService, wire
from pipecat_pocket_tts.server.dialects import gradium, livekit
from pipecat_pocket_tts.wire import handshake

IDLE_S = "1"
MAX_CONNECTIONS = 3
IDLE_CLOSES = 'pocket_tts_closed_connections_total{code="1000"}'


@pytest.fixture(scope="module")
def idle_server(engine_pack_dir: Path) -> Iterator[ServerProcess]:
    process = ServerProcess(
        engine_pack_dir,
        "--idle-timeout", IDLE_S,
        "--max-connections", str(MAX_CONNECTIONS),
    ).start()  # fmt: skip
    yield process
    process.stop()


async def start_only(server: ServerProcess, route: str) -> ClientConnection:
    """A socket that opens a context on ``route`` and then says nothing."""
    if route == "native":
        ws = await open_client(server.ws_url)
        await ws.send(wire.encode(wire.Start("c")))
        assert isinstance(await until(ws, wire.Started, "c"), list)
        return ws
    path, opening = {
        "gradium": (gradium.PATH, {"type": "setup", "voice_id": "alba"}),
        "livekit": (livekit.PATH, {"type": "config", "data": {"voice": "alba"}}),
    }[route]
    ws = await connect(server.ws_url + path, proxy=None, additional_headers={"x-api-key": "k"})
    await ws.send(json.dumps(opening))
    reply = json.loads(await asyncio.wait_for(ws.recv(), EVENT_TIMEOUT_S))
    assert reply["type"] in ("ready", "event"), reply
    return ws


async def closed(ws: ClientConnection) -> int | None:
    """Wait until the server closed ``ws``; its close code."""
    await asyncio.wait_for(ws.wait_closed(), EVENT_TIMEOUT_S)
    return ws.close_code


async def test_silent_sockets_are_closed_then_a_fresh_client_speaks(
    idle_server: ServerProcess,
) -> None:
    before = idle_server.metric(IDLE_CLOSES)
    holders = [await start_only(idle_server, r) for r in ("native", "gradium", "livekit")]
    assert idle_server.metric("pocket_tts_connections") == MAX_CONNECTIONS
    refused = await connect(idle_server.ws_url + handshake.PATH, proxy=None)
    assert await closed(refused) == wire.CloseCode.SERVER_FULL
    # Every context opened, nothing queued, nothing sent: each closed once idle.
    assert [await closed(ws) for ws in holders] == [wire.CloseCode.NORMAL] * 3
    assert idle_server.metric(IDLE_CLOSES) == before + 3
    async with await open_client(idle_server.ws_url) as ws:
        await ws.send(wire.encode(wire.Start("fresh")))
        await ws.send(wire.encode(wire.Text("fresh", 0, "Hello there.", complete=True)))
        await ws.send(wire.encode(wire.End("fresh")))
        items = await until(ws, wire.Done, "fresh")
    assert any(isinstance(i, tuple) for i in items)


OLD_READY_FIELDS = {"type", "language", "voices", "default_voice", "sample_rate", "frame_size"}


async def first_message(server: ServerProcess, subprotocols: list[str] | None) -> dict:
    async with connect(
        server.ws_url + handshake.PATH, proxy=None, subprotocols=subprotocols
    ) as websocket:
        return json.loads(await asyncio.wait_for(websocket.recv(), EVENT_TIMEOUT_S))


async def test_ready_says_the_idle_timeout_only_to_a_client_that_pings(
    idle_server: ServerProcess,
) -> None:
    """A client older than ``ping`` refuses unknown fields: its ``ready`` has none. A client
    offering ``KEEPALIVE_SUBPROTOCOL`` learns the timeout its pings must beat."""
    old = await first_message(idle_server, None)
    assert set(old) == OLD_READY_FIELDS
    plain = await first_message(idle_server, [handshake.SUBPROTOCOL])
    assert set(plain) == OLD_READY_FIELDS
    keepalive = [handshake.SUBPROTOCOL, handshake.KEEPALIVE_SUBPROTOCOL]
    new = await first_message(idle_server, keepalive)
    assert set(new) == OLD_READY_FIELDS | {"idle_timeout"}
    assert new["idle_timeout"] == float(IDLE_S)


async def test_a_ping_keeps_a_silent_connection(idle_server: ServerProcess) -> None:
    """A keepalive is something sent: a pinging socket outlives a silent one opened after."""
    async with await open_client(idle_server.ws_url) as pinging:
        await pinging.send(wire.encode(wire.Start("c")))
        await until(pinging, wire.Started, "c")
        silent = await start_only(idle_server, "native")
        for _ in range(1000):
            await pinging.send(wire.encode(wire.Ping()))
            assert isinstance(wire.decode_server(await pinging.recv()), wire.Pong)
            if silent.close_code is not None:
                break
        assert await closed(silent) == wire.CloseCode.NORMAL
        assert pinging.close_code is None


async def test_the_service_keeps_its_session_between_turns(idle_server: ServerProcess) -> None:
    """The bot's connection stays open while it is quiet between turns longer than the idle
    time (a silent socket opened after its first turn is closed meanwhile); its next turn
    speaks on the same connection."""
    pipeline = RecordedPipeline(PocketTTSService(server_url=idle_server.ws_url))
    downstream = pipeline.downstream
    try:
        await pipeline.queue(TTSSpeakFrame("Hello there."))
        await downstream.wait_for(lambda f: isinstance(f, TTSStoppedFrame))
        before = idle_server.metric(IDLE_CLOSES)
        silent = await start_only(idle_server, "native")
        assert await closed(silent) == wire.CloseCode.NORMAL
        assert idle_server.metric(IDLE_CLOSES) == before + 1  # the bot's was not closed
        mark = len(downstream.frames)
        await pipeline.queue(TTSSpeakFrame("Still here."))
        await downstream.wait_for(lambda f: isinstance(f, TTSAudioRawFrame), mark)
        await downstream.wait_for(lambda f: isinstance(f, TTSStoppedFrame), mark)
        assert idle_server.metric(IDLE_CLOSES) == before + 1
    finally:
        await pipeline.end()
    assert not [f for f in pipeline.upstream.frames if isinstance(f, ErrorFrame)]


async def test_pipecats_gradium_service_speaks_again_after_an_idle_close(
    idle_server: ServerProcess,
) -> None:
    """Pipecat's own ``GradiumTTSService`` (no voice given: Gradium's default voice id) keeps
    its socket between replies; the server closes it once idle (Pipecat reconnects at once);
    the next reply speaks."""
    service = GradiumTTSService(api_key="any", url=idle_server.ws_url + gradium.PATH)
    pipeline = RecordedPipeline(service)
    downstream = pipeline.downstream
    try:
        await pipeline.queue(TTSSpeakFrame("Hello there."))
        await downstream.wait_for(lambda f: isinstance(f, TTSStoppedFrame))
        before = idle_server.metric(IDLE_CLOSES)
        await poll_until(
            lambda: idle_server.metric(IDLE_CLOSES) > before, what="the idle socket's close"
        )
        mark = len(downstream.frames)
        await pipeline.queue(TTSSpeakFrame("Back again."))
        await downstream.wait_for(lambda f: isinstance(f, TTSAudioRawFrame), mark)
        await downstream.wait_for(lambda f: isinstance(f, TTSStoppedFrame), mark)
    finally:
        await pipeline.end()
    assert not [f for f in pipeline.upstream.frames if isinstance(f, ErrorFrame)]
