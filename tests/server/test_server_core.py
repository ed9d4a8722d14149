"""The server's core over a transport of its own (not Starlette's websocket), in process:
what a dialect over another transport (a TCP socket) relies on. No model is loaded: what the
core answers without a session, and a drain over a stub session whose frames are held."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from polling import poll_until

from pipecat_pocket_tts import wire
from pipecat_pocket_tts.engine import AudioFrame, Marker
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


class HeldSession:
    """A session whose compute is over (it is idle) while its frames still wait to be read:
    they come out only once the test lets them."""

    def __init__(self) -> None:
        self.items: list[AudioFrame | Marker] = []
        self.released = asyncio.Event()
        self.is_closed = False
        self.is_idle = True
        self.compute_ticks = 0

    def enqueue(self, text: str, **overrides: Any) -> int:
        self.items.append(AudioFrame(np.zeros(1920, np.float32), 0, 0, 0, True))
        return 0

    def mark(self, payload: Any, *, after_fed_text: bool = True) -> None:
        self.items.append(Marker(payload))

    def finish(self) -> None:
        self.is_closed = True

    def stop(self) -> int:
        return 0

    async def acancel(self) -> None:
        return None

    async def __aiter__(self) -> AsyncIterator[AudioFrame | Marker]:
        await self.released.wait()
        for item in self.items:
            yield item


@dataclass
class HeldModel(StubModel):
    held: HeldSession | None = None

    def session(self, **options: Any) -> HeldSession:
        self.held = HeldSession()
        return self.held


@dataclass
class ResolvingVoices(StubVoices):
    def resolve(self, name: str | None) -> str:
        return name or self.default


@dataclass
class QueuedTransport:
    """Hands the core the messages the test queues; records what is sent and the close."""

    incoming: asyncio.Queue = field(default_factory=asyncio.Queue)
    sent: list[Any] = field(default_factory=list)

    async def receive(self) -> Mapping[str, Any]:
        return await self.incoming.get()

    async def send_text(self, data: str) -> None:
        self.sent.append(wire.decode_server(data).type)

    async def send_bytes(self, data: bytes) -> None:
        self.sent.append("audio")

    async def close(self, code: int = 1000, reason: str | None = None) -> None:
        self.sent.append(("close", code))


def test_a_drain_closes_only_once_every_context_sent_what_it_owes() -> None:
    """The session's compute is over but its frame, ``utterance_end`` and ``done`` are not
    sent yet when the drain starts: they go out first, then the going-away close."""

    async def scenario() -> list[Any]:
        model, transport = HeldModel(), QueuedTransport()
        connection = Connection(
            transport,
            model,  # type: ignore[arg-type]
            ResolvingVoices(),  # type: ignore[arg-type]
            Limits(),
            ServerMetrics(),
            NativeDialect(),
        )
        running = asyncio.create_task(connection.run())
        for message in (
            {"type": "start", "context": "a"},
            {"type": "text", "context": "a", "utterance": 0, "text": "Hi.", "complete": True},
            {"type": "end", "context": "a"},
        ):
            transport.incoming.put_nowait(text(message))
        await poll_until(
            lambda: model.held is not None and model.held.is_closed,
            what="the context's text and end handled",
        )
        connection.drain()
        assert model.held is not None
        model.held.released.set()
        await poll_until(lambda: ("close", 1001) in transport.sent, what="the going-away close")
        transport.incoming.put_nowait({"type": "websocket.disconnect"})
        await running
        return transport.sent

    sent = asyncio.run(scenario())
    assert sent == ["ready", "started", "audio", "utterance_end", "done", ("close", 1001)]
