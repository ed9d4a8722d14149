"""The Wyoming TCP listener (``serve --wyoming-port PORT``) beside the HTTP routes of ``app.py``.

``EventSocket`` carries a Wyoming TCP stream's events where a ``Connection`` expects a
websocket (the core's ``Transport``), so each connection is served by the core like every
websocket route, in ``dialects.wyoming``'s ``WyomingDialect``: on the one model, scheduler,
limits, metrics and drain.

Wyoming carries no API key: on a server that has one (``--api-key``), ``--wyoming-no-auth``
must say that Wyoming clients are trusted without it. ``--zeroconf`` announces the port as
``_wyoming._tcp`` so Home Assistant discovers it (the ``zeroconf`` package).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import logging
import socket
from typing import Any

from wyoming.error import Error as ErrorEvent

from .. import wire
from ..engine.errors import ServerConfigError
from .core.auth import is_loopback
from .core.entry import admission_refusal, serve_connection
from .core.state import ServerState
from .dialects.wyoming import PROGRAM, WyomingDialect, wire_event

logger = logging.getLogger(__name__)

SERVICE_TYPE = "_wyoming._tcp.local."
_WILDCARDS = ("", "0.0.0.0", "::")


def check_wyoming_options(
    port: int | None, zeroconf: bool, api_key: str | None, no_auth: bool
) -> None:
    """Refuse, at start, Wyoming options the server could not honour.

    Args:
        port: ``--wyoming-port`` (None: no Wyoming).
        zeroconf: ``--zeroconf``: announce the port (needs it, and the zeroconf package).
        api_key: The server's API key, if any.
        no_auth: ``--wyoming-no-auth``: Wyoming clients are trusted without the key
            (Wyoming has no way to send one).

    Raises:
        ServerConfigError: What to change.
    """
    if zeroconf and port is None:
        raise ServerConfigError("--zeroconf announces the Wyoming port: give --wyoming-port")
    if zeroconf and importlib.util.find_spec("zeroconf") is None:
        raise ServerConfigError("--zeroconf needs the zeroconf package: pip install zeroconf")
    if port is not None and api_key is not None and not no_auth:
        raise ServerConfigError(
            "Wyoming carries no API key, so --wyoming-port would serve anyone who reaches it "
            "without the key this server asks for: pass --wyoming-no-auth to allow it "
            "(trusted networks only)"
        )


class EventSocket:
    """A Wyoming TCP stream where a ``Connection`` expects a websocket: each event in as one
    text message (its JSON with the ``data`` merged), each outgoing message's bytes out."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, max_bytes: int
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._max_bytes = max_bytes

    async def receive(self) -> dict[str, Any]:
        """The next event as a websocket message; a disconnect at the end of the stream or
        after a malformed event (the client is told why first)."""
        try:
            event = await self._read()
        except (ConnectionError, asyncio.IncompleteReadError):
            event = None
        except ValueError as e:  # a broken event: the stream cannot be read further
            self.refuse(f"not a Wyoming event: {e}")
            event = None
        if event is None:
            return {"type": "websocket.disconnect"}
        return {"type": "websocket.receive", "text": json.dumps(event)}

    async def _read(self) -> dict[str, Any] | None:
        line = await self._reader.readline()  # ValueError past the reader's limit
        if not line:
            return None
        header = json.loads(line)
        if not isinstance(header, dict) or not isinstance(header.get("type"), str):
            raise ValueError('an event is a JSON object with a string "type"')
        data = header.get("data") or {}
        lengths = [header.get("data_length") or 0, header.get("payload_length") or 0]
        if not isinstance(data, dict) or not all(isinstance(n, int) and n >= 0 for n in lengths):
            raise ValueError("data must be an object, its lengths whole numbers")
        if sum(lengths) > self._max_bytes:
            raise ValueError(f"an event of over {self._max_bytes} bytes")
        if lengths[0]:
            more = json.loads(await self._reader.readexactly(lengths[0]))
            if not isinstance(more, dict):
                raise ValueError("data must be an object")
            data = {**data, **more}
        if lengths[1]:
            await self._reader.readexactly(lengths[1])  # audio in: not for a TTS server
        return {"type": header["type"], "data": data}

    async def send_text(self, data: str) -> None:
        await self.send_bytes(data.encode())

    async def send_bytes(self, data: bytes) -> None:
        self._writer.write(data)
        await self._writer.drain()

    async def close(self, code: int = 1000, reason: str = "") -> None:
        """Close the stream (Wyoming has no close codes: the reason went out as an error)."""
        self._writer.close()
        with contextlib.suppress(Exception):
            await self._writer.wait_closed()

    def refuse(self, message: str) -> None:
        """Say why in an error event, and close."""
        with contextlib.suppress(Exception):
            self._writer.write(wire_event(ErrorEvent(text=message, code="refused").event()))
        self._writer.close()


class WyomingServer:
    """The Wyoming TCP listener of one server app, beside its HTTP routes."""

    def __init__(self, state: ServerState, host: str, port: int, *, announce: bool = False):
        """``announce``: register the port with zeroconf (mDNS) for Home Assistant."""
        self._state = state
        self._host = host
        self._port = port
        self._announce = announce
        self._server: asyncio.Server | None = None
        self._zeroconf: Any = None

    async def start(self) -> None:
        limit = self._state.limits.max_message_bytes
        self._server = await asyncio.start_server(self._accept, self._host, self._port, limit=limit)
        logger.info("Wyoming listening on %s:%d", self._host, self._port)
        if self._announce:
            self._zeroconf = await _announce(self._host, self._port)

    async def close(self) -> None:
        if self._zeroconf is not None:
            with contextlib.suppress(Exception):
                await self._zeroconf.async_close()
        if self._server is not None:
            self._server.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        state = self._state
        stream = EventSocket(reader, writer, state.limits.max_message_bytes)
        refusal = await self._refusal()
        if refusal is not None:
            code, message = refusal
            state.metrics.closes.labels(str(code)).inc()
            stream.refuse(message)
            return
        try:
            await serve_connection(state, stream, WyomingDialect())
        finally:
            await stream.close()

    async def _refusal(self) -> tuple[int, str] | None:
        """Why a new connection is refused (the websocket close code it stands for), if so."""
        if self._state.drain.draining:
            return wire.CloseCode.GOING_AWAY, "the server is shutting down: try another replica"
        return await admission_refusal(self._state)


async def _announce(host: str, port: int) -> Any:
    """Register ``_wyoming._tcp`` for ``host:port`` with mDNS: on loopback only when bound
    there, else on every interface with this machine's outward address."""
    from zeroconf import InterfaceChoice  # present: checked at start
    from zeroconf.asyncio import AsyncServiceInfo, AsyncZeroconf

    wildcard = host in _WILDCARDS
    address = _outward_address() if wildcard else socket.gethostbyname(host)
    interfaces = InterfaceChoice.All if wildcard else [address]
    zeroconf = AsyncZeroconf(interfaces=interfaces)
    name = f"{PROGRAM}-{socket.gethostname()}-{port}"
    info = AsyncServiceInfo(
        SERVICE_TYPE,
        f"{name}.{SERVICE_TYPE}",
        addresses=[socket.inet_aton(address)],
        port=port,
        properties={"program": PROGRAM},
    )
    await zeroconf.async_register_service(info)
    where = "loopback only" if is_loopback(address) else address
    logger.info("zeroconf: announced %s on port %d (%s)", name, port, where)
    return zeroconf


def _outward_address() -> str:
    """The address this machine reaches the mDNS group from (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("224.0.0.251", 5353))
        return probe.getsockname()[0]


__all__ = ["SERVICE_TYPE", "EventSocket", "WyomingServer", "check_wyoming_options"]
