"""A bounded graceful stop: on SIGTERM (or Ctrl-C) the server drains, then exits 0.

Draining: ``/ready`` says 503 (a balancer stops sending new work), new synthesis requests and
websockets get 503 (the port stays open for probes), and what is in flight goes on: each
websocket closes with 1001 (going away) once nothing is left to speak on it, each HTTP response
ends when its audio is sent. After ``drain_timeout`` seconds whatever is still open is closed
(1001 "drain timeout" on a websocket; an HTTP response is cut, its chunked body never ended, so
the client sees an incomplete response, not a short one), each cut said in one log line (the
ASGI server's traceback of the cancelled request is dropped: ``quiet_drain_cuts``). A second
signal stops at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from types import FrameType
from typing import TYPE_CHECKING

import uvicorn

if TYPE_CHECKING:
    from .connection import Connection

logger = logging.getLogger(__name__)

DEFAULT_DRAIN_TIMEOUT_S = 30.0
_FINAL_GRACE_S = 2
"""Uvicorn's own bound once the drain is over (its shutdown)."""
CUT = "drain timeout"
"""The message of the cancellation that cuts an HTTP request at the drain timeout."""


class Drain:
    """What is in flight (websocket connections, HTTP requests) and whether the server drains."""

    def __init__(self) -> None:
        self.draining = False
        self.connections: set[Connection] = set()
        self.requests: dict[asyncio.Task, str] = {}
        """HTTP requests in flight, each with what it asked (``POST /tts``)."""
        self._changed = asyncio.Event()

    @property
    def in_flight(self) -> int:
        return len(self.connections) + len(self.requests)

    def add(self, item: Connection | asyncio.Task, label: str = "") -> None:
        """Track a connection, or an HTTP request's task (``label``: what it asked)."""
        if isinstance(item, asyncio.Task):
            self.requests[item] = label
        else:
            self.connections.add(item)

    def discard(self, item: Connection | asyncio.Task) -> None:
        if isinstance(item, asyncio.Task):
            self.requests.pop(item, None)
        else:
            self.connections.discard(item)
        self._changed.set()

    async def run(self, timeout: float) -> bool:
        """Drain: True when everything finished within ``timeout`` seconds, else False (what
        was left is closed)."""
        self.draining = True
        logger.info("draining: %d connections and requests in flight", self.in_flight)
        for connection in list(self.connections):
            connection.drain()
        try:
            async with asyncio.timeout(timeout):
                await self._until_empty()
            logger.info("drained")
            return True
        except TimeoutError:
            logger.warning(
                "drain timeout after %g s: closing %d websockets, cutting %d HTTP requests",
                timeout,
                len(self.connections),
                len(self.requests),
            )
            for connection in list(self.connections):
                connection.abort("drain timeout: the server stopped")
            for task, label in list(self.requests.items()):
                logger.warning("drain timeout: cut %s", label)
                task.cancel(CUT)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_FINAL_GRACE_S):
                    await self._until_empty()
            return False

    async def _until_empty(self) -> None:
        while self.in_flight:
            self._changed.clear()
            await self._changed.wait()


class _DropCutTraceback(logging.Filter):
    """Drops the ASGI server's error record of a request the drain cut (said once already)."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not (isinstance(error, asyncio.CancelledError) and error.args == (CUT,))


_DROP_CUT_TRACEBACK = _DropCutTraceback()


def quiet_drain_cuts() -> None:
    """Keep uvicorn's traceback of each request the drain cut out of the log (its one line is
    the drain's). Called once uvicorn configured its logging."""
    logging.getLogger("uvicorn.error").addFilter(_DROP_CUT_TRACEBACK)


class DrainingServer(uvicorn.Server):
    """uvicorn's server whose first SIGTERM/SIGINT drains (``Drain.run``) before it stops, and
    which then returns normally (exit status 0) instead of re-raising the signal."""

    def __init__(self, config: uvicorn.Config, drain: Drain, timeout: float) -> None:
        config.timeout_graceful_shutdown = _FINAL_GRACE_S
        super().__init__(config)
        self._drain = drain
        self._timeout = timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._signalled = False
        self._draining: asyncio.Task | None = None

    async def startup(self, sockets: list | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().startup(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._loop is None or self._signalled or self.should_exit:
            # A second signal stops at once.
            self.should_exit = self.force_exit = True
            return
        self._signalled = True
        logger.info("%s: draining for up to %g s", signal.Signals(sig).name, self._timeout)
        self._loop.call_soon_threadsafe(self._start_drain)

    def _start_drain(self) -> None:
        if self._draining is None:
            self._draining = asyncio.ensure_future(self._drain_then_exit())

    async def _drain_then_exit(self) -> None:
        try:
            await self._drain.run(self._timeout)
        finally:
            self.should_exit = True


__all__ = ["CUT", "DEFAULT_DRAIN_TIMEOUT_S", "Drain", "DrainingServer", "quiet_drain_cuts"]
