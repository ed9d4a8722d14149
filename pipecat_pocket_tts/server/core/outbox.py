"""A connection's ordered sender: every outgoing message, in order, through one task.

What a context queued can be dropped at once (a cancel, a failure, a slow reader); a
``CloseAfter`` closes the socket once what was queued before it went out. The socket is any
``Transport``: Starlette's ``WebSocket``, or an adapter a dialect over another transport
brings.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Mapping
from typing import Any, Protocol

from .dialect import CloseAfter, Outgoing

logger = logging.getLogger(__name__)

INTERNAL_ERROR = 1011
"""The websocket close code of a server fault."""


class Transport(Protocol):
    """What the core needs of a connection's socket (Starlette's ``WebSocket`` has it)."""

    async def receive(self) -> Mapping[str, Any]:
        """The next ASGI message: ``websocket.receive`` (``text`` or ``bytes``) or
        ``websocket.disconnect``."""
        ...

    async def send_text(self, data: str) -> None: ...

    async def send_bytes(self, data: bytes) -> None: ...

    async def close(self, code: int = 1000, reason: str | None = None) -> None: ...


class Owner(Protocol):
    """Who queued a message (a context): counted while its audio waits, dropped at once."""

    dropped: bool
    buffered: int


class Outbox:
    """A connection's outgoing messages, sent in order by one task; an owner's can be dropped.

    Args:
        transport: The socket the messages go out on.
    """

    def __init__(self, transport: Transport) -> None:
        self._transport = transport
        self._items: deque[tuple[Outgoing, Owner | None, bool]] = deque()
        self._ready = asyncio.Event()
        self._closed = False

    def put(self, data: Outgoing, owner: Owner | None = None, *, audio: bool = False) -> None:
        """Queue ``data`` (nothing once closed, or once ``owner`` was dropped).

        Args:
            data: The message.
            owner: The context it belongs to, if one.
            audio: It is a frame's audio: counted in ``owner.buffered`` until it is sent.
        """
        if self._closed or (owner is not None and owner.dropped):
            return
        if audio and owner is not None:
            owner.buffered += 1
        self._items.append((data, owner, audio))
        self._ready.set()

    def drop(self, owner: Owner) -> None:
        """Nothing more of ``owner`` goes out (what is queued is forgotten now)."""
        owner.dropped = True
        self._items = deque(item for item in self._items if item[1] is not owner)
        owner.buffered = 0

    def close(self) -> None:
        """Queue nothing more; the sender ends once the queue is empty."""
        self._closed = True
        self._ready.set()

    def close_after(self, code: int, reason: str, *, drop: bool = False) -> None:
        """Close the socket once what is queued went out; nothing more is queued after this.

        Args:
            code: The close code.
            reason: The close reason (cut to 120 bytes).
            drop: Forget every context's queued output first.
        """
        if drop:
            self._items = deque(item for item in self._items if item[1] is None)
        self.put(CloseAfter(code, reason))
        self.close()

    @property
    def empty(self) -> bool:
        return not self._items

    async def run(self) -> None:
        """Send what is queued, in order, until closed and empty (or the socket fails)."""
        while True:
            while not self._items:
                if self._closed:
                    return
                self._ready.clear()
                await self._ready.wait()
            data, owner, audio = self._items.popleft()
            if owner is not None:
                if owner.dropped:
                    continue
                if audio:
                    owner.buffered -= 1
            if isinstance(data, CloseAfter):
                with contextlib.suppress(Exception):
                    reason = data.reason.encode()[:120].decode(errors="ignore")
                    await self._transport.close(data.code, reason)
                return
            try:
                if isinstance(data, bytes):
                    await self._transport.send_bytes(data)
                else:
                    await self._transport.send_text(data)
            except Exception as e:
                # A sender never dies silently: the client is told by the close.
                logger.warning("closing a connection whose send failed: %s", e)
                with contextlib.suppress(Exception):
                    await self._transport.close(INTERNAL_ERROR, "send failed")
                return


__all__ = ["INTERNAL_ERROR", "Outbox", "Owner", "Transport"]
