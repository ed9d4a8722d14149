"""The websocket protocol against a real server process on 127.0.0.1 (issue 32).

Round trip with word timestamps and markers, cancel (nothing of the context after its
acknowledgement), many contexts on one connection, broken messages closing only their
connection, a client that stops reading, and the API key.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from typing import Any

import pytest
import websockets
from polling import poll_until
from server_process import ServerProcess, free_port
from websockets.asyncio.client import ClientConnection, connect
from websockets.typing import Subprotocol

from pipecat_pocket_tts import wire
from pipecat_pocket_tts.client import RemoteTTS
from pipecat_pocket_tts.wire import handshake

Received = tuple[wire.AudioHeader, bytes] | wire.ServerMessage
RECEIVE_TIMEOUT_S = 60.0  # a failure bound only: the tests wait on the server's messages
MAX_MESSAGES = 20_000  # messages a wait reads before it fails (a count, not a time budget)


async def open_client(url: str, **kwargs: Any) -> ClientConnection:
    websocket = await connect(url + handshake.PATH, proxy=None, compression=None, **kwargs)
    ready = wire.decode_server(await websocket.recv())
    assert isinstance(ready, wire.Ready)
    return websocket


async def receive(websocket: ClientConnection) -> Received:
    data = await asyncio.wait_for(websocket.recv(), RECEIVE_TIMEOUT_S)
    return wire.unpack_audio(data) if isinstance(data, bytes) else wire.decode_server(data)


async def until(websocket: ClientConnection, kind: type, context: str) -> list[Received]:
    """Everything received up to and including ``kind`` for ``context``."""
    items: list[Received] = []
    for _ in range(MAX_MESSAGES):
        item = await receive(websocket)
        items.append(item)
        if isinstance(item, kind) and item.context == context:
            return items
        if isinstance(item, wire.Error):
            raise AssertionError(f"error: {item}")
    raise AssertionError(f"no {kind.type!r} for {context!r} in {MAX_MESSAGES} messages")


async def audio_frames(websocket: ClientConnection, context: str, count: int) -> None:
    """Read until ``count`` audio frames of ``context`` have arrived."""
    for _ in range(MAX_MESSAGES):
        item = await receive(websocket)
        count -= isinstance(item, tuple) and item[0].context == context
        if count <= 0:
            return
    raise AssertionError(f"fewer than {count} more audio frames of {context!r}")


def audio_of(items: list[Received], context: str) -> list[wire.AudioHeader]:
    return [i[0] for i in items if isinstance(i, tuple) and i[0].context == context]


async def test_round_trip_words_and_markers(server: ServerProcess) -> None:
    async with await open_client(server.ws_url) as ws:
        await ws.send(wire.encode(wire.Start("c", timestamps=True, encoding="pcm_s16le")))
        await ws.send(wire.encode(wire.Text("c", 0, "Hello there, how are you?", complete=True)))
        await ws.send(wire.encode(wire.Mark("c", 1)))
        await ws.send(wire.encode(wire.Text("c", 1, "Fine ", complete=False)))
        await ws.send(wire.encode(wire.Text("c", 2, "thanks.", complete=False)))
        await ws.send(wire.encode(wire.Flush("c", 3)))
        await ws.send(wire.encode(wire.Mark("c", 2)))
        await ws.send(wire.encode(wire.End("c")))
        items = await until(ws, wire.Done, "c")
    assert isinstance(items[0], wire.Started)
    frames = audio_of(items, "c")
    assert all(len(i[1]) == 1920 * 2 for i in items if isinstance(i, tuple))  # 80 ms of s16
    words = [w.text for h in frames for w in h.words]
    assert words == ["Hello", "there,", "how", "are", "you?", "Fine", "thanks."]
    ended = [w.text for h in frames for w in h.completed_words]
    assert ended == words
    assert all(w.end is not None and w.end >= w.start for h in frames for w in h.completed_words)
    # Order: marker 1 after every frame of utterance 0, before any of the fed text's.
    order = [
        ("m", i.id) if isinstance(i, wire.MarkerReached) else ("a", i[0].utterance)
        for i in items
        if isinstance(i, wire.MarkerReached | tuple)
    ]
    first_marker = order.index(("m", 1))
    assert {u for kind, u in order[:first_marker]} == {0}
    assert all(kind == "a" and u in (1, 2, 3) for kind, u in order[first_marker + 1 : -1])
    assert order[-1] == ("m", 2)
    ends = [i.utterance for i in items if isinstance(i, wire.UtteranceEnd)]
    assert ends == [0, 1, 2, 3]


async def test_cancel_nothing_after_the_acknowledgement(endless_server: ServerProcess) -> None:
    async with await open_client(endless_server.ws_url) as ws:
        await ws.send(wire.encode(wire.Start("long")))
        await ws.send(wire.encode(wire.Start("other")))
        await ws.send(wire.encode(wire.Text("long", 0, "Hello there. " * 40, complete=True)))
        await audio_frames(ws, "long", 3)
        await ws.send(wire.encode(wire.Cancel("long")))
        await until(ws, wire.Cancelled, "long")
        assert endless_server.metric("pocket_tts_streams") == 1  # "other" only
        # The connection goes on: the other context speaks, and nothing of "long" comes.
        await ws.send(wire.encode(wire.Text("other", 0, "Hi.", complete=True)))
        await ws.send(wire.encode(wire.End("other")))
        items = await until(ws, wire.Done, "other")
    assert audio_of(items, "other")
    assert not [i for i in items if getattr(i, "context", None) == "long"]
    assert not audio_of(items, "long")


async def test_many_contexts_on_one_connection(server: ServerProcess) -> None:
    texts = {"a": "One two three.", "b": "Four five six seven.", "c": "Eight."}
    async with await open_client(server.ws_url) as ws:
        for name in texts:
            await ws.send(wire.encode(wire.Start(name, timestamps=True, encoding="float32")))
        for name, text in texts.items():
            await ws.send(wire.encode(wire.Text(name, 0, text, complete=True)))
            await ws.send(wire.encode(wire.End(name)))
        done: set[str] = set()
        items: list[Received] = []
        for _ in range(MAX_MESSAGES):
            if done == set(texts):
                break
            item = await receive(ws)
            items.append(item)
            if isinstance(item, wire.Done):
                done.add(item.context)
    assert done == set(texts)
    for name, text in texts.items():
        frames = audio_of(items, name)
        assert frames, name
        assert [w.text for h in frames for w in h.words] == text.split()
    assert all(len(i[1]) == 1920 * 4 for i in items if isinstance(i, tuple))  # float32


CANCEL_TICKS = "pocket_tts_cancel_ticks"


async def test_cancel_stops_compute_within_a_tick(engine_endless_pack_dir: Any) -> None:
    """Compute stops within a frame of a cancel, by the server's own count: the scheduler's
    ticks that computed for the context (each counted as it ends), read as the server handles
    the cancel (where it stops the stream: no tick starts for it afterwards) and at the
    acknowledgement. The bound is 1, the tick in flight when the cancel arrived, which the
    acknowledgement waits for; a tick computes at most one frame of a stream (its step, sample
    and decode; a chunk's first tick also steps the next frame ahead). The never-EOS pack and
    hundreds of sentences keep the context computing (thousands of frames) when it is cancelled.
    """
    rounds = 6
    server = ServerProcess(engine_endless_pack_dir, "--max-buffered-frames", "100000").start()
    try:
        async with await open_client(server.ws_url) as ws:
            for i in range(rounds):
                name = f"long{i}"
                await ws.send(wire.encode(wire.Start(name)))
                await ws.send(
                    wire.encode(wire.Text(name, 0, "On and on we go. " * 300, complete=True))
                )
                await audio_frames(ws, name, 1 + 3 * i)  # cancels at different moments
                await ws.send(wire.encode(wire.Cancel(name)))
                await until(ws, wire.Cancelled, name)
            # Nothing of a cancelled context after its acknowledgement, while another speaks.
            await ws.send(wire.encode(wire.Start("after")))
            await ws.send(wire.encode(wire.Text("after", 0, "And now.", complete=True)))
            await ws.send(wire.encode(wire.End("after")))
            items = await until(ws, wire.Done, "after")
        assert not [i for i in items if getattr(i, "context", "after") != "after"]
        assert not [i for i in items if isinstance(i, tuple) and i[0].context != "after"]
        assert server.metric(f"{CANCEL_TICKS}_count") == rounds
        assert server.metric(f'{CANCEL_TICKS}_bucket{{le="1.0"}}') == rounds
        print(f"ticks after the cancels' receipt: {server.metric(f'{CANCEL_TICKS}_sum'):g}")
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("message", "code", "reason"),
    [
        ("{not json", wire.CloseCode.MALFORMED, "not a JSON message"),
        ('{"type": "sing", "context": "x"}', wire.CloseCode.UNKNOWN_TYPE, "unknown message type"),
        ('{"type": "text", "context": "x"}', wire.CloseCode.MALFORMED, "needs the field"),
        ('{"type": "end", "context": "never-started"}', wire.CloseCode.MALFORMED, "send 'start'"),
        ("x" * 300_000, wire.CloseCode.TOO_BIG, ""),
    ],
    ids=["malformed", "unknown", "missing-field", "no-context", "oversized"],
)
async def test_broken_messages_close_only_their_connection(
    server: ServerProcess, message: str, code: int, reason: str
) -> None:
    async with await open_client(server.ws_url) as good, await open_client(server.ws_url) as bad:
        await good.send(wire.encode(wire.Start("g")))
        await until(good, wire.Started, "g")
        await bad.send(message)
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await bad.recv()
        assert closed.value.rcvd is not None
        assert closed.value.rcvd.code == code
        assert reason in closed.value.rcvd.reason
        await good.send(wire.encode(wire.Text("g", 0, "Still here.", complete=True)))
        await good.send(wire.encode(wire.End("g")))
        assert audio_of(await until(good, wire.Done, "g"), "g")


async def test_a_client_that_stops_reading_is_bounded(endless_server: ServerProcess) -> None:
    """The server ends the context of a client that stopped reading (slow_reader): its
    memory stays bounded, its compute stops, and another connection is served meanwhile."""
    rss_before = endless_server.rss_mb()
    errors = 'pocket_tts_errors_total{code="slow_reader"}'
    before = endless_server.metric(errors)
    # max_queue=1 and a small read buffer: this client stops taking data off the socket.
    async with await open_client(endless_server.ws_url, max_queue=1) as stalled:
        await stalled.send(wire.encode(wire.Start("s", encoding="float32")))
        await stalled.send(wire.encode(wire.Text("s", 0, "Words to say for a long time. " * 300)))
        await stalled.send(wire.encode(wire.Flush("s", 1)))
        async with await open_client(endless_server.ws_url) as other:
            await other.send(wire.encode(wire.Start("o")))
            await other.send(wire.encode(wire.Text("o", 0, "Meanwhile.", complete=True)))
            await audio_frames(other, "o", 1)  # served while the stalled one is not reading
            await other.send(wire.encode(wire.Cancel("o")))
            await until(other, wire.Cancelled, "o")
        await poll_until(  # the server's own count
            lambda: endless_server.metric(errors) > before, what="a slow_reader error"
        )
        assert endless_server.metric("pocket_tts_streams") == 0
    growth = endless_server.rss_mb() - rss_before
    assert growth < 64, f"the server grew {growth:.0f} MB for a client that stopped reading"


def test_public_bind_without_a_key_refuses_to_start(engine_pack_dir: Any) -> None:
    env = {k: v for k, v in os.environ.items() if k != "POCKET_TTS_API_KEY"}
    command = [sys.executable, "-m", "pipecat_pocket_tts", "serve", "--host", "0.0.0.0"]
    command += ["--port", str(free_port()), "--model-dir", str(engine_pack_dir)]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 2
    assert "refusing to listen on '0.0.0.0' without an API key" in result.stderr
    assert "Uvicorn running" not in result.stdout + result.stderr


async def test_wrong_key_gets_401_and_a_coded_close(engine_pack_dir: Any) -> None:
    keyed = ServerProcess(engine_pack_dir, "--api-key", "s3cret").start()
    try:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
            status, _ = keyed.get("/v1/voices", headers)
            assert status == 401, headers
        assert keyed.get("/v1/voices", {"Authorization": "Bearer s3cret"})[0] == 200
        assert keyed.get("/health")[0] == 200  # probes stay open
        websocket = await connect(
            keyed.ws_url + handshake.PATH,
            proxy=None,
            additional_headers={"Authorization": "Bearer no"},
        )
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await websocket.recv()
        assert closed.value.rcvd is not None
        assert closed.value.rcvd.code == wire.CloseCode.UNAUTHORIZED
        good = await open_client(
            keyed.ws_url, additional_headers={"Authorization": "Bearer s3cret"}
        )
        await good.close()
    finally:
        keyed.stop()


async def test_a_browser_key_rides_on_the_subprotocol(
    engine_pack_dir: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Browsers cannot set Authorization on a websocket: the key may come as the offered
    subprotocol ``bearer.KEY`` beside ``pocket-tts``, which the server answers (never the key).
    A wrong or missing key gets the same coded close as on the header; the key is never logged,
    by the server nor by the client (whose handshake carries it in Authorization).
    """
    key = "br0wser-Key_1"
    keyed = ServerProcess(engine_pack_dir, "--api-key", key, "--log-level", "debug").start()
    try:
        offer = [
            Subprotocol(handshake.SUBPROTOCOL),
            Subprotocol(handshake.KEY_SUBPROTOCOL_PREFIX + key),
        ]
        async with await open_client(keyed.ws_url, subprotocols=offer) as good:
            assert good.subprotocol == handshake.SUBPROTOCOL
            await good.send(wire.encode(wire.Start("b")))
            await good.send(wire.encode(wire.Text("b", 0, "From a browser.", complete=True)))
            await good.send(wire.encode(wire.End("b")))
            assert audio_of(await until(good, wire.Done, "b"), "b")
        for offers in (
            [handshake.SUBPROTOCOL, handshake.KEY_SUBPROTOCOL_PREFIX + "wrong"],
            [handshake.SUBPROTOCOL, key],  # the key without its prefix is no key
            [handshake.SUBPROTOCOL],
        ):
            websocket = await connect(
                keyed.ws_url + handshake.PATH,
                proxy=None,
                subprotocols=[Subprotocol(o) for o in offers],
            )
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await websocket.recv()
            assert closed.value.rcvd is not None, offers
            assert closed.value.rcvd.code == wire.CloseCode.UNAUTHORIZED, offers
        # The header still works, with or without the subprotocol offered.
        header = {"Authorization": f"Bearer {key}"}
        await (await open_client(keyed.ws_url, additional_headers=header)).close()
        plain = await open_client(
            keyed.ws_url,
            additional_headers=header,
            subprotocols=[Subprotocol(handshake.SUBPROTOCOL)],
        )
        assert plain.subprotocol == handshake.SUBPROTOCOL
        await plain.close()
        # The client's side of the handshake keeps it out of its debug log too.
        with caplog.at_level(logging.DEBUG):
            remote = RemoteTTS(keyed.ws_url, api_key=key)
            try:
                await asyncio.to_thread(remote.connect)
            finally:
                await asyncio.to_thread(remote.close)
        assert "authorization: <hidden>" in caplog.text.lower() and key not in caplog.text
    finally:
        keyed.stop()
    assert not [line for line in keyed.log if key in line]
    assert [line for line in keyed.log if "sec-websocket-protocol: <hidden>" in line]  # debug on
