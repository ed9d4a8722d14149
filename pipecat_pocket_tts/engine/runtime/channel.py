"""How a session's output crosses threads: the scheduler's pool puts frames and markers into
a ``FrameChannel``; the caller reads it with ``for`` or ``async for``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

END: Any = object()  # end of the frame stream

Item = TypeVar("Item")


@dataclass(frozen=True)
class Marker:
    """A caller's payload in a session's output, after the audio queued before it."""

    payload: Any


class FrameChannel(Generic[Item]):
    """A thread-safe FIFO with blocking and asyncio consumers.

    Producers never block. Async consumers wait on a future that producers resolve through
    ``loop.call_soon_threadsafe``, so the event loop is never blocked.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._items: deque[Item] = deque()
        self._closed = False
        self._error: BaseException | None = None
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def put(self, item: Item) -> bool:
        """Append an item; False (dropped) once the channel is closed."""
        with self._cond:
            if self._closed:
                return False
            self._items.append(item)
            self._cond.notify_all()
            waiters, self._waiters = self._waiters, []
        _wake(waiters)
        return True

    def close(self, error: BaseException | None = None, *, discard: bool = False) -> None:
        """End the stream after the queued items (all dropped with ``discard``)."""
        with self._cond:
            if discard:
                self._items.clear()
            if not self._closed:
                self._closed = True
                self._error = error
            self._cond.notify_all()
            waiters, self._waiters = self._waiters, []
        _wake(waiters)

    @property
    def closed(self) -> bool:
        return self._closed

    def get(self) -> Item:
        """The next item, waiting for it; ``END`` at the end (raises a worker's error)."""
        with self._cond:
            while not self._items and not self._closed:
                self._cond.wait()
            return self._take()

    async def aget(self) -> Item:
        """Like ``get`` without blocking the running event loop."""
        loop = asyncio.get_running_loop()
        while True:
            with self._cond:
                if self._items or self._closed:
                    return self._take()
                waiter: asyncio.Future[None] = loop.create_future()
                self._waiters.append((loop, waiter))
            try:
                await waiter
            finally:
                with self._cond:
                    if (loop, waiter) in self._waiters:
                        self._waiters.remove((loop, waiter))

    def _take(self) -> Item:
        if self._items:
            return self._items.popleft()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        return END


def _wake(waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]]) -> None:
    for loop, waiter in waiters:
        with contextlib.suppress(RuntimeError):  # the loop was closed meanwhile
            loop.call_soon_threadsafe(_resolve, waiter)


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class ChannelOutput(Generic[Item]):
    """The output side of a session, local or remote: ``for`` and ``async for`` over a
    channel's items (``self._frames``) until its end, and the state every session shows.

    A subclass sets ``_closed`` (no more text), ``_cancelled`` and ``_failure`` as it goes and
    says how many utterances it still owes (``_unfinished``)."""

    _frames: FrameChannel[Item]
    _closed: bool
    _cancelled: bool
    _failure: BaseException | None

    def _unfinished(self) -> int:
        """Utterances taken whose last frame has not come out yet."""
        raise NotImplementedError

    @property
    def pending(self) -> int:
        """Utterances whose last frame has not come out yet (0 once cancelled or failed)."""
        if self._cancelled or self._failure is not None:
            return 0
        return self._unfinished()

    @property
    def is_idle(self) -> bool:
        """True when nothing is queued or being spoken."""
        return self.pending == 0

    @property
    def is_closed(self) -> bool:
        """True after ``finish()``, ``cancel()`` or a failure."""
        return self._closed

    @property
    def is_cancelled(self) -> bool:
        return self._cancelled

    def __iter__(self) -> Iterator[Item]:
        while (item := self._frames.get()) is not END:
            yield item

    def __aiter__(self) -> AsyncIterator[Item]:
        return self

    async def __anext__(self) -> Item:
        item = await self._frames.aget()
        if item is END:
            raise StopAsyncIteration
        return item


__all__ = ["END", "ChannelOutput", "FrameChannel", "Marker"]
