"""Operations against real server processes (issue 40 item 4): a bounded graceful drain on
SIGTERM, idle and handshake timeouts, bounded client ids, nested JSON, HTTP request counts.

Every wait is on an event or a condition (a message, a closed socket, an exit); the short
timeouts are the servers' own settings, given by the tests, and never measured here.
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import threading
from pathlib import Path

import pytest
import websockets
from polling import poll_until
from server_process import ServerProcess
from test_server_protocol import audio_frames, open_client, until
from websockets.asyncio.client import connect

from pipecat_pocket_tts import wire
from pipecat_pocket_tts.server.dialects.gradium import PATH as GRADIUM_PATH
from pipecat_pocket_tts.server.dialects.livekit import PATH as LIVEKIT_PATH
from pipecat_pocket_tts.wire import handshake

EXIT_TIMEOUT_S = 120.0  # failure bounds only: the tests wait for the event itself
SOCKET_TIMEOUT_S = 60.0
TERMINATOR = b"0\r\n\r\n"  # the end of a chunked body


def post_speech(server: ServerProcess, text: str, *, receive_buffer: int = 0) -> socket.socket:
    """A raw ``POST /v1/audio/speech`` (pcm) whose response head was read."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=SOCKET_TIMEOUT_S)
    if receive_buffer:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    body = json.dumps({"model": "tts-1", "input": text, "response_format": "pcm"}).encode()
    head = (
        f"POST /v1/audio/speech HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
        f"\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    sock.sendall(head.encode() + body)
    received = b""
    while b"\r\n\r\n" not in received:
        received += sock.recv(1)
    assert received.startswith(b"HTTP/1.1 200"), received
    return sock


def read_to_end(sock: socket.socket) -> bytes:
    """Everything until the server ends the body (its terminator) or closes the socket."""
    data = b""
    while not data.endswith(TERMINATOR):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def wait_exit(server: ServerProcess) -> int:
    assert server.process is not None
    return server.process.wait(timeout=EXIT_TIMEOUT_S)


# -- drain ------------------------------------------------------------------------------


async def test_sigterm_lets_a_websocket_reply_finish_then_exits_0(
    engine_endless_pack_dir: Path,
) -> None:
    """Draining: /ready 503, new work refused with 503, the reply in flight goes on until the
    client ends it; then the server closes that connection (going away) and exits 0."""
    server = ServerProcess(engine_endless_pack_dir, "--drain-timeout", "600").start()
    try:
        async with await open_client(server.ws_url) as ws:
            await ws.send(wire.encode(wire.Start("c")))
            await ws.send(wire.encode(wire.Text("c", 0, "A long reply. " * 50, complete=True)))
            await audio_frames(ws, "c", 2)
            server.process.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
            await poll_until(lambda: server.get("/ready")[0] == 503, what="/ready says 503")
            assert json.loads(server.get("/ready")[1])["reason"] == "draining"
            with pytest.raises(websockets.InvalidStatus) as refused:
                await connect(server.ws_url + handshake.PATH, proxy=None)
            assert refused.value.response.status_code == 503
            status, _ = await asyncio.to_thread(server.get, "/v1/voices")
            assert status == 503
            await audio_frames(ws, "c", 5)  # still speaking while the server drains
            await ws.send(wire.encode(wire.Cancel("c")))
            await until(ws, wire.Cancelled, "c")
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), SOCKET_TIMEOUT_S)
            assert closed.value.rcvd is not None
            assert closed.value.rcvd.code == wire.CloseCode.GOING_AWAY
        assert await asyncio.to_thread(wait_exit, server) == 0
    finally:
        server.kill()
    assert any("drained" in line for line in server.log)


def test_sigterm_lets_an_http_stream_finish(engine_pack_dir: Path) -> None:
    """An HTTP reply whose client paused reading when SIGTERM came is sent whole once the
    client reads again; a new request meanwhile gets 503; exit 0."""
    server = ServerProcess(engine_pack_dir).start()
    try:
        sock = post_speech(server, "Hello there, how are you today? " * 3, receive_buffer=4096)
        server.process.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
        poll_until_sync(lambda: server.get("/ready")[0] == 503)
        assert server.get("/v1/voices")[0] == 503
        body = read_to_end(sock)
        sock.close()
        assert body.endswith(TERMINATOR) and len(body) > 1920 * 2
        assert wait_exit(server) == 0
    finally:
        server.kill()


@pytest.mark.parametrize("reader", ["stopped", "reading"])
def test_sigterm_cuts_an_endless_http_stream_at_the_drain_timeout(
    engine_endless_pack_dir: Path, reader: str
) -> None:
    """A stream that cannot end (the never-EOS pack) whose client stopped reading, or reads
    as fast as it can: at the drain timeout it is cut (no body terminator), said in one log
    line, and the server exits 0."""
    server = ServerProcess(engine_endless_pack_dir, "--drain-timeout", "0.5").start()
    try:
        # A stopped reader's small buffer fills at once; a reading one keeps the default (a
        # 4 KB window under loopback's 64 KB segments leaves the kernel trickling what the
        # server queued through its persist timer, minutes after the server has exited).
        small = 4096 if reader == "stopped" else 0
        sock = post_speech(server, "On and on. " * 200, receive_buffer=small)
        received: list[bytes] = []
        if reader == "reading":
            thread = threading.Thread(target=lambda: received.append(read_to_end(sock)))
            thread.start()
        server.process.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
        assert wait_exit(server) == 0
        if reader == "reading":
            thread.join(SOCKET_TIMEOUT_S)
            body = received[0]
        else:
            body = read_to_end(sock)
        sock.close()
        assert body and not body.endswith(TERMINATOR)
        server.wait_for_logs("Finished server process")
    finally:
        server.kill()
    assert any("drain timeout" in line for line in server.log)
    # The cut request is one line of the log, never the ASGI server's traceback.
    cuts = [line for line in server.log if "drain timeout: cut" in line]
    assert len(cuts) == 1 and "POST /v1/audio/speech from 127.0.0.1:" in cuts[0], cuts
    assert not any("Traceback" in line or "ASGI application" in line for line in server.log)


def poll_until_sync(predicate, what: str = "a condition") -> None:
    asyncio.run(poll_until(predicate, what=what))


# -- timeouts ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", [handshake.PATH, GRADIUM_PATH, LIVEKIT_PATH])
async def test_idle_websockets_are_closed_and_free_their_slots(
    engine_pack_dir: Path, path: str
) -> None:
    server = ServerProcess(
        engine_pack_dir, "--max-connections", "4", "--idle-timeout", "0.5"
    ).start()
    try:
        idle = [await connect(server.ws_url + path, proxy=None) for _ in range(4)]
        for websocket in idle:
            with pytest.raises(websockets.ConnectionClosed) as closed:
                while True:  # the native route says ready first
                    await asyncio.wait_for(websocket.recv(), SOCKET_TIMEOUT_S)
            assert closed.value.rcvd is not None
            assert closed.value.rcvd.code == wire.CloseCode.NORMAL  # clients reconnect quietly
            assert "idle" in closed.value.rcvd.reason
        await poll_until(lambda: server.metric("pocket_tts_connections") == 0, what="slots free")
        async with await open_client(server.ws_url) as ws:  # a slot is free again
            await ws.send(wire.encode(wire.Start("c")))
            await ws.send(wire.encode(wire.Text("c", 0, "Served.", complete=True)))
            await ws.send(wire.encode(wire.End("c")))
            await until(ws, wire.Done, "c")
    finally:
        server.stop()


def test_slowloris_sockets_are_closed(engine_pack_dir: Path) -> None:
    """Sockets that never finish a request head (HTTP or websocket upgrade) are closed after
    the handshake timeout; a body that stops arriving gets 408; the server serves meanwhile."""
    server = ServerProcess(
        engine_pack_dir, "--handshake-timeout", "0.5", "--idle-timeout", "0.5"
    ).start()
    try:
        heads = [
            b"POST /v1/audio/speech HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-",
            b"GET /v1/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n",
            b"",
        ]
        sockets = []
        for i in range(50):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=SOCKET_TIMEOUT_S)
            sock.sendall(heads[i % len(heads)])
            sockets.append(sock)
        for sock in sockets:
            assert sock.recv(65536) == b""  # closed by the server
            sock.close()
        slow_body = socket.create_connection(("127.0.0.1", server.port), timeout=SOCKET_TIMEOUT_S)
        slow_body.sendall(
            b"POST /v1/audio/speech HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"input": '
        )
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += slow_body.recv(65536)
        assert answer.startswith(b"HTTP/1.1 408"), answer
        slow_body.close()
        sock = post_speech(server, "Still serving.")
        assert read_to_end(sock).endswith(TERMINATOR)
        sock.close()
    finally:
        server.stop()


# -- client ids and JSON ---------------------------------------------------------------


async def test_bad_context_ids_get_a_coded_error_and_the_connection_goes_on(
    server: ServerProcess,
) -> None:
    async with await open_client(server.ws_url) as ws:
        bad = [
            json.dumps({"type": "start", "context": "x" * 200_000}),
            '{"type": "start", "context": "\\ud800"}',  # a lone surrogate, as JSON escapes it
            '{"type": "start", "context": "a\\u0000b"}',
            '{"type": "text", "context": "\\udfff", "utterance": 0, "text": "Hi."}',
        ]
        for message in bad:
            await ws.send(message)
            error = wire.decode_server(await asyncio.wait_for(ws.recv(), SOCKET_TIMEOUT_S))
            assert isinstance(error, wire.Error), error
            assert error.context is None and error.code == wire.ErrorCode.BAD_REQUEST
            assert len(error.message) < 200
        await ws.send(wire.encode(wire.Start("ok")))
        await until(ws, wire.Started, "ok")
        await ws.send('{"type": "text", "context": "ok", "utterance": 0, "text": "a\\ud800"}')
        error = wire.decode_server(await asyncio.wait_for(ws.recv(), SOCKET_TIMEOUT_S))
        assert isinstance(error, wire.Error) and "lone surrogate" in error.message
        await ws.send(wire.encode(wire.Text("ok", 1, "Still here.", complete=True)))
        await ws.send(wire.encode(wire.End("ok")))
        await until(ws, wire.Done, "ok")
    async with connect(server.ws_url + GRADIUM_PATH, proxy=None) as ws:
        await ws.send('{"type": "setup", "client_req_id": "\\ud800", "voice_id": "alba"}')
        answer = json.loads(await asyncio.wait_for(ws.recv(), SOCKET_TIMEOUT_S))
        assert answer["type"] == "error" and answer["code"] == 1008


@pytest.mark.parametrize("path", [handshake.PATH, GRADIUM_PATH, LIVEKIT_PATH])
async def test_deeply_nested_json_is_a_coded_close(server: ServerProcess, path: str) -> None:
    async with connect(server.ws_url + path, proxy=None) as ws:
        await ws.send("[" * 100_000)
        with pytest.raises(websockets.ConnectionClosed) as closed:
            while True:
                await asyncio.wait_for(ws.recv(), SOCKET_TIMEOUT_S)
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == wire.CloseCode.MALFORMED
    assert "nested too deep" in closed.value.rcvd.reason


# -- metrics ----------------------------------------------------------------------------


def test_http_requests_are_counted_by_route_and_status(server: ServerProcess) -> None:
    def count(route: str, method: str, status: int) -> float:
        labels = f'method="{method}",route="{route}",status="{status}"'
        return server.metric(f"pocket_tts_http_requests_total{{{labels}}}")

    before = count("/v1/voices", "GET", 200), count("unmatched", "GET", 404)
    assert server.get("/v1/voices")[0] == 200
    assert server.get("/no/such/route")[0] == 404
    assert server.get("/v1/audio/speech")[0] == 405
    after = count("/v1/voices", "GET", 200), count("unmatched", "GET", 404)
    assert after == (before[0] + 1, before[1] + 1)
    assert count("/v1/audio/speech", "GET", 405) >= 1
