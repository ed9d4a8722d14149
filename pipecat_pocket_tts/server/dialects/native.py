"""Our own websocket protocol (``wire``, at ``wire.handshake.PATH``), as ``RemoteTTS`` speaks it.

Its messages are the core's own, so the dialect translates nothing but checks: every id and
string a client chose (``check_message``) and the encoding and rate a context asks for
(``check_format``: 16-bit PCM or float32 at 24 kHz, μ-law at 8 kHz).
"""

from __future__ import annotations

from typing import Any

from ... import wire
from ...engine import SAMPLE_RATE, FrameEncoder
from ...engine.errors import InvalidSettingError
from ..core.dialect import Dialect, Outgoing, Reply, decode_json, id_problem, text_problem


class NativeDialect(Dialect):
    """Our protocol, unchanged."""

    name = "native"

    def hello(self, ready: wire.Ready) -> list[Outgoing]:
        return [wire.encode(ready)]

    def decode(self, text: str) -> list[wire.ClientMessage | Reply]:
        message = decode_json(wire.decode_client, text)
        problem = check_message(message)
        if problem is not None:
            error = wire.Error(None, wire.ErrorCode.BAD_REQUEST, problem)
            return [Reply(wire.encode(error))]
        return [message]

    def encode(self, message: wire.ServerMessage) -> list[Outgoing]:
        return [wire.encode(message)]

    def audio(self, header: wire.AudioHeader, samples: bytes) -> list[Outgoing]:
        return [wire.pack_audio(header, samples)]

    def encoder(self, start: wire.Start) -> FrameEncoder:
        check_format(start.encoding, start.sample_rate)
        return FrameEncoder(start.sample_rate, start.encoding)


def check_format(encoding: str, sample_rate: int) -> None:
    """Refuse an encoding or rate our protocol does not send.

    Args:
        encoding: One of ``wire.ENCODINGS``.
        sample_rate: 24000, or 8000 for ``mulaw``.

    Raises:
        InvalidSettingError: Another encoding, or another rate.
    """
    if encoding not in wire.ENCODINGS:
        raise InvalidSettingError(
            f"encoding must be one of {', '.join(wire.ENCODINGS)}; got {encoding!r}"
        )
    rate = wire.MULAW_RATE if encoding == "mulaw" else SAMPLE_RATE
    if sample_rate != rate:
        raise InvalidSettingError(
            f"{encoding} audio is sent at {rate} Hz; got sample_rate={sample_rate}"
        )


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


__all__ = ["NativeDialect", "check_format", "check_message"]
