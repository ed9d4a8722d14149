"""A bound on how long a TCP connection may take to send a request's head (slowloris).

uvicorn starts no timer before a request's head is complete: a socket that trickles header
bytes (or sends nothing) holds its connection forever. ``head_timeout_protocol(seconds)`` is
uvicorn's HTTP protocol (httptools or h11, as uvicorn would choose) with one more timer: from
the connection's start, and again after each response, the next request head (HTTP or a
websocket upgrade) must be complete within ``seconds``, else the socket is closed. Idle
keep-alive connections stay uvicorn's business (``timeout_keep_alive``); a body that stops
arriving is ``gate.py``'s; a websocket's silence is ``connection.py``'s.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.auto import AutoHTTPProtocol


def head_timeout_protocol(seconds: float, on_timeout: Any = None) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol class with the request-head timer (``on_timeout()`` is called
    for each socket it closes)."""

    class HeadTimeoutProtocol(AutoHTTPProtocol):  # type: ignore[misc, valid-type]
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            loop = asyncio.get_running_loop()
            self._head_timer = loop.call_later(seconds, self._overdue, self.cycle)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _overdue(self, cycle_before: Any) -> None:
            self._head_timer = None
            transport = self.transport
            if transport.is_closing() or transport.get_protocol() is not self:
                # Closed, or upgraded to a websocket.
                return
            if self.cycle is not cycle_before:
                # A request head came in time.
                return
            if on_timeout is not None:
                on_timeout()
            transport.close()

    return HeadTimeoutProtocol


__all__ = ["head_timeout_protocol"]
