"""The two ways into the core: a websocket admitted to a ``Connection``, an HTTP request to its
route, each with the key checked and refusals in the one shape.

A websocket is accepted, then closed with a code when its key is wrong (4001), the model
failed to load (1001) or the server holds ``max_connections`` already (4008); while the
model loads it waits. An admitted connection is counted and known to the drain until it ends.
An HTTP route's handler takes the server's state and the request; what it raises (a
``RequestError``, an engine error, a ``ValueError``) is answered in the one error shape.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.websockets import WebSocket

from ... import wire
from ...engine import PocketTTSError
from ...wire.handshake import KEEPALIVE_SUBPROTOCOL, SUBPROTOCOL
from .connection import Connection
from .dialect import Dialect
from .errors import RequestError, error_response, status_of
from .outbox import Transport
from .state import ServerState

HttpHandler = Callable[[ServerState, Request], Awaitable[Response] | Response]
"""An HTTP dialect's route: the server's state and the request in, the response out."""


def http_endpoint(
    state: ServerState, handler: HttpHandler, *, open_: bool = False
) -> Callable[[Request], Awaitable[Response]]:
    """An HTTP route of the app: the key checked, every refusal in the one error shape.

    Args:
        state: The server's state.
        handler: The dialect's handler.
        open_: No key needed (the probes).

    Returns:
        The Starlette endpoint.
    """

    async def endpoint(request: Request) -> Response:
        if not open_ and not state.keys.accepts(request.headers.get("authorization")):
            return error_response(401, "missing or wrong API key (Authorization: Bearer KEY)")
        try:
            result = handler(state, request)
            return await result if isinstance(result, Awaitable) else result
        except (RequestError, PocketTTSError, ValueError) as e:
            message = state.public(str(e))
            return error_response(status_of(e), message, param=getattr(e, "param", None))

    return endpoint


def websocket_endpoint(
    state: ServerState, dialect: Callable[[], Dialect]
) -> Callable[[WebSocket], Awaitable[None]]:
    """A websocket route of the app: each connection admitted, then served in ``dialect``.

    Args:
        state: The server's state.
        dialect: Makes the dialect of one connection.

    Returns:
        The Starlette endpoint.
    """

    async def endpoint(websocket: WebSocket) -> None:
        await _serve(state, websocket, dialect())

    return endpoint


async def _serve(state: ServerState, websocket: WebSocket, dialect: Dialect) -> None:
    offers: list[str] = list(websocket.scope.get("subprotocols", []))
    await websocket.accept(subprotocol=SUBPROTOCOL if SUBPROTOCOL in offers else None)
    if not state.keys.admits_handshake(websocket.headers, offers):
        await _refuse(state, websocket, wire.CloseCode.UNAUTHORIZED, "missing or wrong API key")
        return
    refusal = await admission_refusal(state)
    if refusal is not None:
        await _refuse(state, websocket, *refusal)
        return
    keepalive = KEEPALIVE_SUBPROTOCOL in offers
    await serve_connection(state, websocket, dialect, announce_idle=keepalive)


async def admission_refusal(state: ServerState) -> tuple[int, str] | None:
    """Why a new connection cannot be served (waiting while the model loads), if it cannot.

    Args:
        state: The server's state.

    Returns:
        The close code and reason, or None when the connection may be served.
    """
    if state.tts is None:
        await state.loaded.wait()
    if state.tts is None:
        return wire.CloseCode.GOING_AWAY, "the model failed to load"
    limit = state.limits.max_connections
    if state.connections >= limit:
        return (
            wire.CloseCode.SERVER_FULL,
            f"the server holds {limit} connections; try another replica",
        )
    return None


async def serve_connection(
    state: ServerState, transport: Transport, dialect: Dialect, *, announce_idle: bool = False
) -> None:
    """Serve one admitted connection until it ends, counted and known to the drain meanwhile.

    Args:
        state: The server's state (its model loaded).
        transport: The connection's socket (a websocket, or a stream that acts as one).
        dialect: How the connection's clients speak.
        announce_idle: The client offered ``KEEPALIVE_SUBPROTOCOL``: ``ready`` says the idle
            timeout its pings must beat.
    """
    assert state.tts is not None
    metrics = state.metrics
    state.connections += 1
    metrics.connections.inc()
    connection = Connection(
        transport,
        state.tts,
        state.voices,
        state.limits,
        metrics,
        dialect,
        state.public,
        announce_idle=announce_idle,
    )
    state.drain.add(connection)
    try:
        await connection.run()
    finally:
        state.drain.discard(connection)
        state.connections -= 1
        metrics.connections.dec()


async def _refuse(state: ServerState, websocket: WebSocket, code: int, reason: str) -> None:
    state.metrics.closes.labels(str(code)).inc()
    await websocket.close(code, reason)


__all__ = [
    "HttpHandler",
    "admission_refusal",
    "http_endpoint",
    "serve_connection",
    "websocket_endpoint",
]
