"""The ASGI layer in front of every route: request counts, the drain, the body's idle timeout.

- Every HTTP request is counted by route (the route's path, ``unmatched`` for none: bounded
  labels), method and status (``pocket_tts_http_requests_total``).
- While the server drains (``drain.py``): ``/ready`` says 503, synthesis requests and new
  websockets get 503 (``Retry-After``); every HTTP request in flight is tracked so the drain
  can wait for it, or cut it at its timeout.
- A request body that stops arriving for ``idle_timeout`` seconds is refused with 408 (a
  client trickling its body cannot hold a connection).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from .drain import Drain
from .errors import RequestError, error_body
from .metrics import ServerMetrics

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

PROBES = frozenset({"/health", "/ready", "/metrics"})
DRAIN_RETRY_AFTER_S = 1
"""What a 503 while the server drains tells a client to wait before it retries elsewhere."""


class Gate:
    """Wraps the app (see the module docstring)."""

    def __init__(
        self,
        app: App,
        *,
        drain: Drain,
        metrics: ServerMetrics,
        routes: list[Any],
        idle_timeout: float,
    ) -> None:
        self._app = app
        self._drain = drain
        self._metrics = metrics
        self._routes = routes
        self._idle = idle_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "websocket" and self._drain.draining:
            await _deny_websocket(scope, send)
            return
        if kind != "http":
            await self._app(scope, receive, send)
            return
        path, method = scope["path"], scope["method"]
        route = self._route(path)
        # An app that raised before it answered counts as a 500.
        status = 500
        if self._drain.draining and (path == "/ready" or path not in PROBES):
            status = 503
            await _refuse(send, path)
            self._count(route, method, status)
            return

        async def counted(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        task = asyncio.current_task()
        tracked = path not in PROBES and task is not None
        if tracked:
            self._drain.add(task, f"{method} {route} from {_client(scope)}")
        try:
            await self._app(scope, self._timed(receive), counted)
        finally:
            if tracked:
                self._drain.discard(task)
            self._count(route, method, status)

    def _timed(self, receive: Receive) -> Receive:
        """``receive`` whose body messages must come within the idle timeout."""
        body_done = False

        async def timed() -> Message:
            nonlocal body_done
            if body_done:
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), self._idle)
            except TimeoutError:
                raise RequestError(408, f"no request body for {self._idle:g} s") from None
            body_done = message["type"] != "http.request" or not message.get("more_body")
            return message

        return timed

    def _route(self, path: str) -> str:
        for route in self._routes:
            if route.path_regex.match(path):
                return route.path
        return "unmatched"

    def _count(self, route: str, method: str, status: int) -> None:
        self._metrics.http_requests.labels(route, method, str(status)).inc()


def _client(scope: Scope) -> str:
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else "an unknown client"


def _response(payload: dict[str, Any]) -> tuple[Message, Message]:
    """A 503 with ``Retry-After``: its start and body messages."""
    body = json.dumps(payload).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"retry-after", str(DRAIN_RETRY_AFTER_S).encode()),
        (b"content-length", str(len(body)).encode()),
    ]
    start = {"type": "http.response.start", "status": 503, "headers": headers}
    return start, {"type": "http.response.body", "body": body}


def _draining(path: str) -> dict[str, Any]:
    if path == "/ready":
        return {"ready": False, "reason": "draining"}
    return error_body(503, "the server is draining; retry on another replica")


async def _refuse(send: Send, path: str) -> None:
    for message in _response(_draining(path)):
        await send(message)


async def _deny_websocket(scope: Scope, send: Send) -> None:
    """A 503 to the upgrade (a balancer may retry it elsewhere), else a going-away close."""
    if "websocket.http.response" in scope.get("extensions", {}):
        for message in _response(_draining(scope["path"])):
            await send({**message, "type": "websocket." + message["type"]})
    else:
        await send({"type": "websocket.close", "code": 1001, "reason": "the server is draining"})


__all__ = ["PROBES", "Gate"]
