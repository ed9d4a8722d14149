"""How a session's output crosses threads: the scheduler's pool puts frames and markers into
a ``FrameChannel``; the caller reads it with ``for`` or ``async for``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..errors import SessionClosedError

# The end of the frame stream.
END: Any = object()

Item = TypeVar("Item")


@dataclass(frozen=True)
class Marker:
    """A caller's payload in a session's output, after the audio queued before it."""

    payload: Any


@dataclass(eq=False)
class _Waiter(Generic[Item]):
    """An async consumer waiting for ``at_least`` items, or for one that ``wakes_early``."""

    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]
    at_least: int = 1
    wakes_early: Callable[[Item], bool] | None = None

    def woken_by(self, item: Item, queued: int) -> bool:
        return queued >= self.at_least or (self.wakes_early is not None and self.wakes_early(item))


class FrameChannel(Generic[Item]):
    """A thread-safe FIFO with blocking and asyncio consumers.

    Producers never block. Async consumers wait on a future that producers resolve through
    ``loop.call_soon_threadsafe``, so the event loop is never blocked; ``aget_batch`` lets a
    consumer be woken once per several items instead of once per item.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._items: deque[Item] = deque()
        self._closed = False
        self._error: BaseException | None = None
        self._waiters: list[_Waiter[Item]] = []

    def put(self, item: Item) -> bool:
        """Append an item; False (dropped) once the channel is closed."""
        with self._cond:
            if self._closed:
                return False
            self._items.append(item)
            self._cond.notify_all()
            queued = len(self._items)
            woken = [w for w in self._waiters if w.woken_by(item, queued)]
            if woken:
                self._waiters = [w for w in self._waiters if w not in woken]
        _wake(woken)
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
        batch = await self.aget_batch(1)
        return batch[0] if batch else END

    async def aget_batch(
        self,
        limit: int,
        *,
        at_least: int = 1,
        wakes_early: Callable[[Item], bool] | None = None,
        within: float | None = None,
    ) -> list[Item]:
        """Up to ``limit`` items in order, once ``at_least`` are queued, an item that
        ``wakes_early`` is queued, the channel is closed or ``within`` seconds have passed
        (then the items queued, at least one); ``[]`` at the end (raises a worker's error).
        ``wakes_early`` runs on the producer's thread: it must only look at the item."""
        loop = asyncio.get_running_loop()
        deadline = None if within is None else loop.time() + within
        while True:
            with self._cond:
                items = self._items
                due = deadline is not None and loop.time() >= deadline
                ready = len(items) >= at_least or (due and items) or self._closed
                if not ready and wakes_early is not None:
                    ready = any(wakes_early(item) for item in items)
                if ready and not items:
                    # At the end this raises a worker's error, if one ended it.
                    self._take()
                    return []
                if ready:
                    return [items.popleft() for _ in range(min(limit, len(items)))]
                waiter = _Waiter(loop, loop.create_future(), at_least, wakes_early)
                self._waiters.append(waiter)
            timer = None
            if deadline is not None and not due:
                timer = loop.call_at(deadline, _resolve, waiter.future)
            try:
                await waiter.future
            finally:
                if timer is not None:
                    timer.cancel()
                with self._cond:
                    if waiter in self._waiters:
                        self._waiters.remove(waiter)

    def _take(self) -> Item:
        if self._items:
            return self._items.popleft()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        return END


def _wake(waiters: list[_Waiter[Any]]) -> None:
    for waiter in waiters:
        # The loop was closed meanwhile.
        with contextlib.suppress(RuntimeError):
            waiter.loop.call_soon_threadsafe(_resolve, waiter.future)


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
        """True after ``cancel()`` (or ``stop()``)."""
        return self._cancelled

    def _check_open(self) -> None:
        """``SessionClosedError`` once the session takes no more text, saying why."""
        if self._closed:
            state = "cancelled" if self._cancelled else "finished"
            if self._failure is not None and not self._cancelled:
                failure = self._failure
                state = f"stopped by an error ({type(failure).__name__}: {failure})"
            raise SessionClosedError(
                f"this session was {state}: no more text can be enqueued. "
                "Start a new session with tts.session()."
            )

    def __iter__(self) -> Iterator[Item]:
        """Yield the frames and markers in order, blocking for each; ends after the last.

        Raises:
            Exception: The error that stopped the session, after its frames so far.
        """
        while (item := self._frames.get()) is not END:
            yield item

    async def next_batch(
        self,
        limit: int,
        *,
        at_least: int = 1,
        wakes_early: Callable[[Item], bool] | None = None,
        within: float | None = None,
    ) -> list[Item]:
        """Wait for the next items, several per wake-up (``FrameChannel.aget_batch``).

        Args:
            limit: The most items to return.
            at_least: Wait until this many are ready (or the end comes).
            wakes_early: Returns early when an item it is true for arrives.
            within: After this many seconds, return the items queued (at least one).

        Returns:
            The items, or ``[]`` at the end.

        Raises:
            Exception: The error that stopped the session, at the end.
        """
        return await self._frames.aget_batch(
            limit, at_least=at_least, wakes_early=wakes_early, within=within
        )

    def __aiter__(self) -> AsyncIterator[Item]:
        return self

    async def __anext__(self) -> Item:
        """Wait for the next frame or marker without blocking the loop.

        Raises:
            StopAsyncIteration: After the last item.
        """
        item = await self._frames.aget()
        if item is END:
            raise StopAsyncIteration
        return item


__all__ = ["END", "ChannelOutput", "FrameChannel", "Marker"]
