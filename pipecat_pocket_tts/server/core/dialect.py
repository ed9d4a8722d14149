"""What a websocket dialect gives the core: its messages in, its messages and audio out.

A ``Connection`` (``connection.py``) runs every dialect's contexts the same way, on the one
model, scheduler and limits; a ``Dialect`` only translates. ``decode`` turns a client's text
message into our protocol's messages (``wire``) or replies sent back at once; ``encode`` turns
our messages into what the dialect's clients read; ``audio`` does the same for a frame's bytes;
``encoder`` says how a context's samples become bytes (an ``engine.FrameEncoder`` at the rate
and sample format the client asked for). The dialects live in ``server/dialects/``: ours
(``native.py``), Gradium's and LiveKit's; a dialect over another transport (a TCP socket) talks
to the core the same way.

Every client-chosen id and string is checked here (``id_problem``, ``text_problem``) before it
reaches a context: an id that is too long or holds what cannot be sent back (a lone surrogate,
a control character) gets a coded error, and the connection goes on.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from ... import wire
from ...engine import FrameEncoder
from ...engine.errors import InvalidSettingError

T = TypeVar("T")

MAX_ID_CHARS = 128
"""The longest context id (or Gradium ``client_req_id``) a client may choose."""


@dataclass(frozen=True)
class Reply:
    """A message sent back at once, as is (a pong, a coded error for a refused message)."""

    data: str


@dataclass(frozen=True)
class CloseAfter:
    """Close the websocket once everything queued before this went out."""

    code: int
    reason: str


Outgoing = str | bytes | CloseAfter
"""What a dialect sends: a text message, a binary message, or a close after the rest."""


class Dialect(ABC):
    """How one client protocol speaks to the core; each method is the dialect's translation.

    A dialect object lives as long as its connection, so it may keep per-connection state (a
    context's output format, the open turn).
    """

    name = "dialect"
    """The dialect's name, in the log lines of its connections."""

    def hello(self, ready: wire.Ready) -> list[Outgoing]:
        """What goes out when the connection opens.

        Args:
            ready: The server's facts (pack, voices, rate) in our protocol's message.

        Returns:
            The messages to send first (none by default).
        """
        return []

    @abstractmethod
    def decode(self, text: str) -> list[wire.ClientMessage | Reply]:
        """A client's text message as our messages, or replies that go straight back.

        Args:
            text: The websocket text message.

        Returns:
            Our protocol's messages for the core to handle, in order, and ``Reply`` items.

        Raises:
            wire.ProtocolError: The message breaks the dialect's rules: the connection closes
                with the error's code.
        """

    @abstractmethod
    def encode(self, message: wire.ServerMessage) -> list[Outgoing]:
        """Our protocol's message as the dialect's (none when the dialect has no such message).

        Args:
            message: A message of the core (``started``, ``done``, an error…).

        Returns:
            What goes out for it; a ``CloseAfter`` closes the connection after the rest.
        """

    @abstractmethod
    def audio(self, header: wire.AudioHeader, samples: bytes) -> list[Outgoing]:
        """A frame's messages; the last one is the audio (counted against the slow reader).

        Args:
            header: What our protocol says of the frame (context, utterance, words).
            samples: The frame's bytes from the context's ``encoder``.

        Returns:
            The messages that carry the frame, the audio last.
        """

    @abstractmethod
    def encoder(self, start: wire.Start) -> FrameEncoder:
        """How the context ``start`` opens turns samples into bytes.

        Args:
            start: The ``start`` message ``decode`` made for the context.

        Returns:
            A new encoder for the context's audio.

        Raises:
            InvalidSettingError: The client asked for a rate or format the dialect refuses.
        """

    def farewell(self, code: int, reason: str) -> list[Outgoing]:
        """What goes out before the server closes the connection for a broken rule.

        Args:
            code: The close code.
            reason: Why, as the close frame says.

        Returns:
            The messages to send before the close (none by default).
        """
        return []


def decode_json(parse: Callable[[str], T], text: str) -> T:
    """``parse(text)``, with JSON nested too deep for the parser a ``ProtocolError`` (a coded
    close) instead of a ``RecursionError`` that would end the connection without a message."""
    try:
        return parse(text)
    except RecursionError:
        raise wire.ProtocolError(wire.CloseCode.MALFORMED, "JSON nested too deep") from None


def id_problem(value: str) -> str | None:
    """Why a client-chosen id cannot be used (None: it can)."""
    if not value or len(value) > MAX_ID_CHARS:
        return f"an id has 1 to {MAX_ID_CHARS} characters; got {len(value)}"
    if not value.isprintable() or any("\ud800" <= c <= "\udfff" for c in value):
        return "an id holds printable characters only (no control characters or lone surrogates)"
    return None


def text_problem(value: str) -> str | None:
    """Why client text cannot be spoken and echoed back in word timestamps (None: it can)."""
    if any("\ud800" <= c <= "\udfff" for c in value):
        return "text holds a lone surrogate (not valid Unicode)"
    return None


def check_setting(ok: bool, message: str) -> None:
    """Refuse a client setting with ``InvalidSettingError`` (a coded ``bad_request``)."""
    if not ok:
        raise InvalidSettingError(message)


__all__ = [
    "MAX_ID_CHARS",
    "CloseAfter",
    "Dialect",
    "Outgoing",
    "Reply",
    "check_setting",
    "decode_json",
    "id_problem",
    "text_problem",
]
