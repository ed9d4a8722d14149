"""The streaming-TTS websocket protocol of ``livekit-plugins-pocket`` (``/tts/ws``).

LiveKit Agents' ``pocket.TTS(ws_url="ws://HOST:PORT/tts/ws", api_key=KEY)`` speaks it (the key
as ``Authorization: Bearer KEY``). A connection runs one reply (a *turn*) at a time; each turn
is one context of the connection (one engine session) on the server's one scheduler and limits.

client → server (JSON text frames, ``{"type": ..., "data": {...}}``)::

    config  sample_rate (8000-48000), voice (a voice of this server), normalize, language
            (a variant of the pack's language), format ("pcm"), binary (PCM as binary frames,
            else base64 in ``audio`` messages), pauses (false: not served): a new turn; a
            turn still open is cancelled first
    text    text (streamed: sentences, tokens)
    flush   the turn's text is complete
    cancel  stop the turn now (nothing more of it is sent)
    ping

server → client::

    event   event_type config_accepted (request_id), final (the turn's audio is all sent),
            cancelled
    audio   PCM int16 mono at sample_rate: binary frames, or {"audio": base64}
    error   code, message
    pong
"""

from __future__ import annotations

import base64
import itertools
import json
from typing import Any

from ... import wire
from ...engine import FrameEncoder
from ..core.dialect import Dialect, Outgoing, Reply, check_setting, decode_json, text_problem

PATH = "/tts/ws"

MIN_RATE = 8000
MAX_RATE = 48000
"""The output rates a client may ask for, in Hz."""

_TYPES = ("config", "text", "flush", "cancel", "ping")


class LiveKitDialect(Dialect):
    """The plugin's messages in and out; one context per turn.

    The plugin has no message for an utterance's end, a marker or an admission, so those are
    not sent.
    """

    name = "livekit"

    def __init__(self) -> None:
        self._numbers = itertools.count(1)
        self._turn: str | None = None
        self._rate = 24000
        self._binary = True

    def decode(self, text: str) -> list[wire.ClientMessage | Reply]:
        raw = decode_json(json.loads, text) if text.strip() else None
        if not isinstance(raw, dict) or raw.get("type") not in _TYPES:
            raise wire.ProtocolError(
                wire.CloseCode.UNKNOWN_TYPE,
                f"a message is a JSON object whose type is one of {', '.join(_TYPES)}",
            )
        kind, data = raw["type"], raw.get("data") or {}
        if not isinstance(data, dict):
            return [_error(wire.ErrorCode.BAD_REQUEST, "data must be a JSON object")]
        if kind == "ping":
            return [Reply(json.dumps({"type": "pong"}))]
        if kind == "config":
            return self._config(data)
        turn = self._turn
        if kind == "cancel":
            return [] if turn is None else [wire.Cancel(turn)]
        if turn is None:
            return [_error(wire.ErrorCode.BAD_REQUEST, f"send 'config' before '{kind}'")]
        if kind == "flush":
            return [wire.Flush(turn, 0), wire.End(turn)]
        value = data.get("text")
        if not isinstance(value, str):
            return [_error(wire.ErrorCode.BAD_REQUEST, "'text' needs a string data.text")]
        if problem := text_problem(value):
            return [_error(wire.ErrorCode.BAD_REQUEST, problem)]
        return [wire.Text(turn, 0, value, complete=False)]

    def _config(self, data: dict[str, Any]) -> list[wire.ClientMessage | Reply]:
        before: list[wire.ClientMessage | Reply] = (
            [] if self._turn is None else [wire.Cancel(self._turn)]
        )
        self._turn = None
        rate, voice = data.get("sample_rate", 24000), data.get("voice")
        language, normalize = data.get("language"), data.get("normalize", True)
        try:
            check_setting(
                isinstance(rate, int)
                and not isinstance(rate, bool)
                and MIN_RATE <= rate <= MAX_RATE,
                f"sample_rate must be an integer from {MIN_RATE} to {MAX_RATE} Hz; got {rate!r}",
            )
            check_setting(data.get("format", "pcm") == "pcm", "format must be 'pcm'")
            check_setting(not data.get("pauses", False), "pauses are not served by this server")
            check_setting(voice is None or isinstance(voice, str), "voice must be a string")
            check_setting(language is None or isinstance(language, str), "language: a string")
            check_setting(isinstance(normalize, bool), "normalize must be true or false")
            check_setting(isinstance(data.get("binary", True), bool), "binary: true or false")
        except ValueError as e:
            return [*before, _error(wire.ErrorCode.BAD_REQUEST, str(e))]
        self._rate, self._binary = rate, data.get("binary", True)
        self._turn = f"turn-{next(self._numbers)}"
        start = wire.Start(self._turn, voice=voice, normalize=normalize, text_language=language)
        return [*before, start]

    def encoder(self, start: wire.Start) -> FrameEncoder:
        return FrameEncoder(self._rate)

    def encode(self, message: wire.ServerMessage) -> list[Outgoing]:
        if isinstance(message, wire.Started):
            return [_event("config_accepted", request_id=message.context)]
        if isinstance(message, wire.Done):
            self._end(message.context)
            return [_event("final", request_id=message.context)]
        if isinstance(message, wire.Cancelled):
            self._end(message.context)
            return [_event("cancelled", request_id=message.context)]
        if isinstance(message, wire.Error):
            if message.context is not None:
                self._end(message.context)
            return [_error(message.code, message.message).data]
        return []

    def audio(self, header: wire.AudioHeader, samples: bytes) -> list[Outgoing]:
        if self._binary:
            return [samples]
        encoded = base64.b64encode(samples).decode()
        return [json.dumps({"type": "audio", "data": {"audio": encoded}})]

    def farewell(self, code: int, reason: str) -> list[Outgoing]:
        return [_error(wire.ErrorCode.BAD_REQUEST, reason).data]

    def _end(self, context: str) -> None:
        if self._turn == context:
            self._turn = None


def _event(kind: str, **fields: Any) -> str:
    return json.dumps({"type": "event", "data": {"event_type": kind, **fields}})


def _error(code: str, message: str) -> Reply:
    return Reply(json.dumps({"type": "error", "data": {"code": code, "message": message}}))


__all__ = ["PATH", "LiveKitDialect"]
