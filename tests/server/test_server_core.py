"""The server's core over a transport of its own (not Starlette's websocket), in process:
what a dialect over another transport (a TCP socket) relies on. No model is loaded; only
what the core answers without a session is exercised."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pipecat_pocket_tts import wire
from pipecat_pocket_tts.server.core.connection import Connection
from pipecat_pocket_tts.server.core.limits import Limits
from pipecat_pocket_tts.server.core.metrics import ServerMetrics
from pipecat_pocket_tts.server.dialects.livekit import LiveKitDialect
from pipecat_pocket_tts.server.dialects.native import NativeDialect


@dataclass
class ScriptedTransport:
    """Hands the core a fixed list of ASGI messages, then a disconnect; records what is sent."""

    incoming: list[Mapping[str, Any]]
    sent: list[str | bytes] = field(default_factory=list)
    closed: tuple[int, str | None] | None = None

    async def receive(self) -> Mapping[str, Any]:
        if self.incoming:
            return self.incoming.pop(0)
        return {"type": "websocket.disconnect"}

    async def send_text(self, data: str) -> None:
        self.sent.append(data)

    async def send_bytes(self, data: bytes) -> None:
        self.sent.append(data)

    async def close(self, code: int = 1000, reason: str | None = None) -> None:
        self.closed = (code, reason)


@dataclass
class StubModel:
    pack_name: str = "english"
    sample_rate: int = 24000


@dataclass
class StubVoices:
    names: list[str] = field(default_factory=lambda: ["alba"])
    default: str = "alba"


def serve(transport: ScriptedTransport, dialect: Any) -> None:
    connection = Connection(
        transport,
        StubModel(),  # type: ignore[arg-type]
        StubVoices(),  # type: ignore[arg-type]
        Limits(),
        ServerMetrics(),
        dialect,
    )
    asyncio.run(connection.run())


def text(data: Any) -> Mapping[str, Any]:
    return {"type": "websocket.receive", "text": json.dumps(data)}


def test_a_dialect_speaks_through_any_transport() -> None:
    transport = ScriptedTransport([text({"type": "ping"})])
    serve(transport, LiveKitDialect())
    assert [json.loads(m) for m in transport.sent] == [{"type": "pong"}]
    assert transport.closed is None


def test_our_dialect_says_ready_first_and_closes_on_a_binary_message() -> None:
    transport = ScriptedTransport([{"type": "websocket.receive", "bytes": b"\x00"}])
    serve(transport, NativeDialect())
    ready = wire.decode_server(transport.sent[0])
    assert isinstance(ready, wire.Ready) and ready.voices == ["alba"]
    assert transport.closed == (wire.CloseCode.MALFORMED, "binary messages are not accepted")


def test_a_refused_id_is_a_coded_error_and_the_connection_goes_on() -> None:
    transport = ScriptedTransport(
        [text({"type": "voice", "id": 1, "voice": "\ud800"}), text({"type": "end", "context": "x"})]
    )
    serve(transport, NativeDialect())
    error = wire.decode_server(transport.sent[1])
    assert isinstance(error, wire.Error) and error.code == wire.ErrorCode.BAD_REQUEST
    # The next message names a context never started: a protocol error closes the connection.
    assert transport.closed is not None and transport.closed[0] == wire.CloseCode.MALFORMED
