"""How one websocket route speaks: its messages in, its messages and audio out.

A ``Connection`` (connection.py) runs every route's contexts the same way, on the one model,
scheduler and limits; a ``Dialect`` only translates. ``decode`` turns a client's text frame
into our protocol's messages (``wire.py``) or replies sent back at once; ``encode`` turns
our messages into what the route's clients read; ``audio`` does the same for a frame's
samples; ``encoder`` says how a context's samples become bytes. ``NativeDialect`` is our own
protocol, unchanged; ``gradium.py`` and ``livekit.py`` are the others.

Every client-chosen id and string is checked here (``client_ids``) before it reaches a
context: an id that is too long or holds what cannot be sent back (a lone surrogate, a control
character) gets a coded error, and the connection goes on.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from .. import wire as p
from ..engine.errors import InvalidSettingError
from .encodings import FrameEncoder, check_format

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


class SampleEncoder(Protocol):
    def encode(self, samples: Any, *, last: bool = False) -> bytes: ...


class Dialect:
    """Our own protocol (``wire.py``); the base of the others."""

    route = "native"

    def hello(self, ready: p.Ready) -> list[Outgoing]:
        """What goes out when the connection opens."""
        return [p.encode(ready)]

    def decode(self, text: str) -> list[p.ClientMessage | Reply]:
        """A client's text frame as our messages; ``ProtocolError`` closes the connection."""
        message = decode_json(p.decode_client, text)
        problem = check_message(message)
        if problem is not None:
            return [Reply(p.encode(p.Error(None, p.ErrorCode.BAD_REQUEST, problem)))]
        return [message]

    def encode(self, message: p.ServerMessage) -> list[Outgoing]:
        return [p.encode(message)]

    def audio(self, header: p.AudioHeader, samples: bytes) -> list[Outgoing]:
        """A frame's messages; the last one is the audio (counted against the slow reader)."""
        return [p.pack_audio(header, samples)]

    def encoder(self, start: p.Start) -> SampleEncoder:
        check_format(start.encoding, start.sample_rate)
        return FrameEncoder(start.encoding)

    def farewell(self, code: int, reason: str) -> list[Outgoing]:
        """What goes out before the server closes the connection for a broken rule."""
        return []


NativeDialect = Dialect


def decode_json(parse: Callable[[str], T], text: str) -> T:
    """``parse(text)``, with JSON nested too deep for the parser a ``ProtocolError`` (a coded
    close) instead of a ``RecursionError`` that would end the connection without a frame."""
    try:
        return parse(text)
    except RecursionError:
        raise p.ProtocolError(p.CloseCode.MALFORMED, "JSON nested too deep") from None


def loads(text: str) -> Any:
    """A text frame's JSON; ``ProtocolError`` when it is none (or nested too deep)."""
    try:
        return decode_json(json.loads, text)
    except ValueError as e:
        if isinstance(e, p.ProtocolError):
            raise
        raise p.ProtocolError(p.CloseCode.MALFORMED, f"not a JSON message: {e}") from None


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


def check_message(message: Any) -> str | None:
    """The first problem of a decoded message's ids and strings (None: none)."""
    context = getattr(message, "context", None)
    if isinstance(context, str) and (problem := id_problem(context)):
        return problem
    for value in vars(message).values():
        strings = value.values() if isinstance(value, dict) else [value]
        for item in strings:
            if isinstance(item, str) and (problem := text_problem(item)):
                return problem
    return None


def check_setting(ok: bool, message: str) -> None:
    """Refuse a client setting with ``InvalidSettingError`` (a coded ``bad_request``)."""
    if not ok:
        raise InvalidSettingError(message)


__all__ = [
    "MAX_ID_CHARS",
    "CloseAfter",
    "Dialect",
    "NativeDialect",
    "Outgoing",
    "Reply",
    "SampleEncoder",
    "check_message",
    "check_setting",
    "decode_json",
    "id_problem",
    "loads",
    "text_problem",
]
