"""The client's websocket to a TTS server: its thread, its reconnections and its reader.

A ``ServerLink`` lives on a thread of its own with its own event loop (so any thread may send,
and the caller's loop only wakes for what it receives). It connects, reads the server's
``ready``, sends what was queued and hands every message it receives to ``on_message`` (on its
thread); when a connection or an attempt ends it calls ``on_lost`` (with ``last_error``) and
reconnects with backoff (``BACKOFF_S``) until closed. While ``keep_alive()`` says so it sends
a ``ping`` every third of the server's ``idle_timeout``, so a connection whose sessions wait
between turns is not closed as idle. What the messages mean is ``client.RemoteTTS``'s
business.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
from collections.abc import Callable
from typing import Any

from .. import wire
from ..engine import ServerKeyRefusedError, ServerUnavailableError
from ..wire.handshake import KEEPALIVE_SUBPROTOCOL, SUBPROTOCOL, hide_secret_headers

CONNECT_TIMEOUT_S = 5.0
"""How long opening a session waits for the server before ``ServerUnavailableError``."""
BACKOFF_S = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0)
"""Waits between reconnection attempts (the last one repeats)."""


class ServerLink:
    """One websocket to a TTS server, kept open in the background (see the module docstring)."""

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None,
        connect_timeout: float,
        on_message: Callable[[str | bytes], None],
        on_lost: Callable[[BaseException | None], None],
        keep_alive: Callable[[], bool] = lambda: False,
    ) -> None:
        """Start connecting to ``url`` (the full websocket URL, path included); while
        ``keep_alive()`` is true (called on the link's thread) the connection is kept from
        being idle."""
        self.url = url
        self._api_key = api_key
        self._connect_timeout = connect_timeout
        self._on_message = on_message
        self._on_lost = on_lost
        self._keep_alive = keep_alive
        #: The server's ``ready`` of the latest connection (None before the first).
        self.info: wire.Ready | None = None
        #: Why the latest connection attempt or connection ended (None: none ended yet).
        self.last_error: BaseException | None = None
        self._connected = threading.Event()
        self._attempts = threading.Condition()
        """Notified after each connection attempt."""
        self._failures = 0
        self._closed = False
        self._loop = asyncio.new_event_loop()
        self._outgoing: asyncio.Queue[str] | None = None
        self._retry: asyncio.Event | None = None
        # The handshake's Authorization never reaches a debug log.
        hide_secret_headers()
        self._thread = threading.Thread(target=self._run, name="pocket-tts-remote", daemon=True)
        self._thread.start()

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    # -- blocking calls (any thread but the link's) -----------------------------------
    def connect(self, timeout: float | None = None) -> None:
        """Wait until connected; ``ServerUnavailableError`` after ``timeout`` seconds."""
        self.check_thread()
        with self._attempts:
            if self._connected.is_set():
                return
            failures = self._failures
            # Try now, not after the backoff.
            self._loop.call_soon_threadsafe(self._wake)
            self._attempts.wait_for(
                lambda: self._connected.is_set() or self._failures > failures,
                self._connect_timeout if timeout is None else timeout,
            )
            if isinstance(self.last_error, ServerKeyRefusedError):
                raise self.last_error
            if not self._connected.is_set():
                raise ServerUnavailableError(
                    f"cannot reach the TTS server at {self.url}: {self.last_error or 'timed out'}"
                )

    def close(self, join_timeout: float) -> None:
        """Close the connection and stop the thread (waiting up to ``join_timeout`` for it)."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._wake)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=join_timeout)

    def check_thread(self) -> None:
        if threading.current_thread() is self._thread:
            raise RuntimeError("RemoteTTS blocking calls cannot run on its connection thread")

    # -- sending (any thread) ---------------------------------------------------------
    def send(self, text: str) -> None:
        """Queue a text message (dropped while disconnected: sessions fail then)."""
        # A closed loop has nobody left to tell.
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._enqueue, text)

    def _enqueue(self, text: str) -> None:
        if self._outgoing is not None:
            self._outgoing.put_nowait(text)

    # -- the link's thread ------------------------------------------------------------
    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._keep_connected())
        finally:
            self._loop.close()

    def _wake(self) -> None:
        if self._retry is not None:
            self._retry.set()

    async def _keep_connected(self) -> None:
        from websockets.asyncio.client import connect

        self._retry = asyncio.Event()
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else None
        delays = itertools.chain(BACKOFF_S, itertools.repeat(BACKOFF_S[-1]))
        while not self._closed:
            try:
                async with connect(
                    self.url,
                    subprotocols=[SUBPROTOCOL, KEEPALIVE_SUBPROTOCOL],
                    additional_headers=headers,
                    compression=None,
                    proxy=None,
                    max_size=None,
                    open_timeout=self._connect_timeout,
                    close_timeout=1.0,
                ) as websocket:
                    first = await websocket.recv()
                    ready = wire.decode_server(first)
                    if not isinstance(ready, wire.Ready):
                        raise wire.ProtocolError(wire.CloseCode.MALFORMED, "expected 'ready'")
                    self.info = ready
                    self._outgoing = asyncio.Queue()
                    with self._attempts:
                        self._connected.set()
                        self._attempts.notify_all()
                    delays = itertools.chain(BACKOFF_S, itertools.repeat(BACKOFF_S[-1]))
                    await self._serve(websocket)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                with self._attempts:
                    self.last_error = self._key_refusal(e) or e
                    self._failures += 1
                    self._attempts.notify_all()
            finally:
                self._connected.clear()
                self._outgoing = None
                self._on_lost(self.last_error)
            if self._closed:
                return
            self._retry.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._retry.wait(), next(delays))

    def _key_refusal(self, error: Exception) -> ServerKeyRefusedError | None:
        """The refusal of the API key that ``error`` is (a 4001 close, a 401), if it is one."""
        from websockets.exceptions import ConnectionClosed, InvalidStatus

        closed = isinstance(error, ConnectionClosed) and error.rcvd is not None
        if closed and error.rcvd.code == wire.CloseCode.UNAUTHORIZED:  # type: ignore[union-attr]
            reason = error.rcvd.reason  # type: ignore[union-attr]
        elif isinstance(error, InvalidStatus) and error.response.status_code == 401:
            reason = "401"
        else:
            return None
        given = "a wrong api_key" if self._api_key else "no api_key"
        return ServerKeyRefusedError(
            f"the TTS server at {self.url} refused the API key ({reason}): the client has "
            f"{given}; set it to the server's key (its --api-key / POCKET_TTS_API_KEY)"
        )

    async def _serve(self, websocket: Any) -> None:
        """Send the queued messages and hand over what arrives, until one side stops."""
        outgoing = self._outgoing
        retry = self._retry
        assert outgoing is not None and retry is not None

        async def send() -> None:
            while True:
                await websocket.send(await outgoing.get())

        async def closing() -> None:
            while not self._closed:
                retry.clear()
                await retry.wait()

        async def receive() -> None:
            async for message in websocket:
                self._on_message(message)

        async def keepalive() -> None:
            idle = self.info.idle_timeout if self.info is not None else None
            if idle is None:
                return await asyncio.Event().wait()
            while True:
                await asyncio.sleep(idle / 3)
                if self._keep_alive():
                    outgoing.put_nowait(wire.encode(wire.Ping()))

        jobs = (send, receive, closing, keepalive)
        tasks = [asyncio.create_task(job()) for job in jobs]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                # Raises the reason the connection ended.
                task.result()
            code = websocket.close_code
            if code not in (None, wire.CloseCode.NORMAL) and not self._closed:
                raise ConnectionError(f"closed by the server ({code}: {websocket.close_reason})")
        finally:
            for task in tasks:
                task.cancel()


__all__ = ["BACKOFF_S", "CONNECT_TIMEOUT_S", "ServerLink"]
