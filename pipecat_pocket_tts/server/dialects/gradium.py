"""Gradium's TTS websocket protocol (``/api/speech/tts``), so Gradium clients work unchanged.

Pipecat's ``GradiumTTSService(url="ws://HOST:PORT/api/speech/tts", api_key=KEY)`` and other
Gradium clients speak it; the key travels as ``x-api-key`` (checked like our bearer token).
Several requests share one connection, each named by its ``client_req_id``; each is one
context of the connection (one engine session), on the server's one scheduler and limits.

client → server (JSON text frames)::

    setup          client_req_id, voice_id (a voice of this server; ``DEFAULT_VOICE_ID``,
                   what clients send given no voice, is the server's default), output_format
                   (pcm = 48 kHz, pcm_8000 ... pcm_48000, ulaw_8000), close_ws_on_eos
                   (default true: the server closes the socket after end_of_stream),
                   json_config ({"temp": ...}), model_name (ignored: the server has one model)
    text           client_req_id, text (streamed text: tokens, sentences)
    end_of_stream  client_req_id: no more text

server → client::

    ready          client_req_id, request_id (its session is open)
    audio          client_req_id, audio (base64), start_s, stop_s
    text           client_req_id, text, start_s, stop_s (each word once its end is known)
    end_of_stream  client_req_id (after the last audio)
    error          client_req_id (if any), message, code (1008 the request's fault, 1011 ours)

A request without ``client_req_id`` is the connection's single request. Gradium has no
cancel message: a client interrupts by closing the socket (Pipecat reconnects), which stops
every request's compute at once.
"""

from __future__ import annotations

import base64
import json
from collections import OrderedDict
from typing import Any

from ... import wire
from ...engine import FrameEncoder
from ..core.dialect import (
    CloseAfter,
    Dialect,
    Outgoing,
    Reply,
    check_setting,
    decode_json,
    id_problem,
    text_problem,
)

PATH = "/api/speech/tts"

FORMATS = {
    "pcm": (48000, False),
    **{f"pcm_{rate}": (rate, False) for rate in (8000, 16000, 22050, 24000, 44100, 48000)},
    "ulaw_8000": (8000, True),
}
"""Gradium's output formats this server makes: (sample rate, μ-law)."""

DEFAULT_VOICE_ID = "_6Aslh2DxfmnRLmP"
"""The voice id Gradium clients send when given no voice (Pipecat's ``GradiumTTSService``):
here, the server's default voice."""

SINGLE = "gradium"
"""The context of a request sent without ``client_req_id``."""

POLICY = 1008
"""Gradium's error code for the client's fault."""
INTERNAL = 1011
"""Gradium's error code for the server's fault."""
_FAILED_REMEMBERED = 1024
_SERVER_FAULTS = (wire.ErrorCode.SYNTHESIS, wire.ErrorCode.SERVER)


class GradiumDialect(Dialect):
    """Gradium's messages in and out; one context per ``client_req_id``.

    Gradium says ``ready`` per request, after its setup, not on connect; it has no message
    for an utterance's end, a marker or an admission, so those are not sent.
    """

    name = "gradium"

    def __init__(self) -> None:
        self._formats: dict[str, tuple[int, bool]] = {}
        self._close_on_eos: dict[str, bool] = {}
        # The audio seconds sent per request, and the requests refused at their setup (their
        # later text is dropped).
        self._sent_s: dict[str, float] = {}
        self._failed: OrderedDict[str, None] = OrderedDict()

    def decode(self, text: str) -> list[wire.ClientMessage | Reply]:
        raw = decode_json(json.loads, text) if text.strip() else None
        if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
            raise wire.ProtocolError(
                wire.CloseCode.MALFORMED, 'a message is a JSON object with a "type"'
            )
        kind = raw["type"]
        given = raw.get("client_req_id")
        if given is not None and not isinstance(given, str):
            return [self._refusal(None, "client_req_id must be a string")]
        if given is not None and (problem := id_problem(given)):
            return [self._refusal(None, f"client_req_id: {problem}")]
        context = SINGLE if given is None else given
        if kind == "setup":
            return self._setup(context, raw)
        if context in self._failed:
            return []
        if kind == "text":
            value = raw.get("text")
            if not isinstance(value, str):
                return [self._refusal(given, "'text' needs a string field 'text'")]
            if problem := text_problem(value):
                return [self._refusal(given, problem)]
            return [wire.Text(context, 0, value, complete=False)]
        if kind == "end_of_stream":
            return [wire.Flush(context, 0), wire.End(context)]
        raise wire.ProtocolError(
            wire.CloseCode.UNKNOWN_TYPE,
            f"unknown message type {kind[:40]!r}; known: setup, text, end_of_stream",
        )

    def _setup(self, context: str, raw: dict[str, Any]) -> list[wire.ClientMessage | Reply]:
        given = raw.get("client_req_id")
        self._failed.pop(context, None)
        fmt = raw.get("output_format", "pcm")
        voice = raw.get("voice_id")
        close = raw.get("close_ws_on_eos", True)
        try:
            check_setting(
                fmt in FORMATS,
                f"output_format {fmt!r} is not served; use one of {', '.join(FORMATS)}",
            )
            check_setting(voice is None or isinstance(voice, str), "voice_id must be a string")
            check_setting(isinstance(close, bool), "close_ws_on_eos must be true or false")
            temperature = _temperature(raw.get("json_config"))
        except ValueError as e:
            self._fail(context)
            return [self._refusal(given, str(e))]
        self._formats[context] = FORMATS[fmt]
        self._close_on_eos[context] = close
        self._sent_s[context] = 0.0
        if voice == DEFAULT_VOICE_ID:
            voice = None
        start = wire.Start(context, voice=voice, temperature=temperature, timestamps=True)
        return [start]

    def encoder(self, start: wire.Start) -> FrameEncoder:
        rate, ulaw = self._formats.get(start.context, FORMATS["pcm"])
        return FrameEncoder(rate, "mulaw" if ulaw else "pcm_s16le")

    def encode(self, message: wire.ServerMessage) -> list[Outgoing]:
        if isinstance(message, wire.Started):
            return [_dump("ready", message.context, request_id=message.context)]
        if isinstance(message, wire.Done):
            close = self._close_on_eos.get(message.context, True)
            self._forget(message.context)
            eos: list[Outgoing] = [_dump("end_of_stream", message.context)]
            return [*eos, CloseAfter(wire.CloseCode.NORMAL, "end of stream")] if close else eos
        if isinstance(message, wire.Error):
            if message.context is not None:
                self._forget(message.context)
                self._fail(message.context)
            code = INTERNAL if message.code in _SERVER_FAULTS else POLICY
            return [_dump("error", message.context, message=message.message, code=code)]
        if isinstance(message, wire.Cancelled):
            self._forget(message.context)
        return []

    def audio(self, header: wire.AudioHeader, samples: bytes) -> list[Outgoing]:
        context = header.context
        rate, ulaw = self._formats.get(context, FORMATS["pcm"])
        start = self._sent_s.get(context, 0.0)
        seconds = len(samples) / (rate if ulaw else 2 * rate)
        self._sent_s[context] = start + seconds
        words: list[Outgoing] = [
            _dump("text", context, text=w.text, start_s=w.session_start, stop_s=w.session_end)
            for w in header.completed_words
        ]
        encoded = base64.b64encode(samples).decode()
        audio = _dump("audio", context, audio=encoded, start_s=start, stop_s=start + seconds)
        return [*words, audio]

    def farewell(self, code: int, reason: str) -> list[Outgoing]:
        return [_dump("error", None, message=reason, code=POLICY)]

    def _refusal(self, given: str | None, message: str) -> Reply:
        return Reply(_dump("error", given, message=message, code=POLICY))

    def _fail(self, context: str) -> None:
        self._failed[context] = None
        while len(self._failed) > _FAILED_REMEMBERED:
            self._failed.popitem(last=False)

    def _forget(self, context: str) -> None:
        for table in (self._formats, self._close_on_eos, self._sent_s):
            table.pop(context, None)


def _temperature(config: Any) -> float | None:
    """The temperature of Gradium's ``json_config`` (a JSON object, or a string holding one)."""
    if config is None:
        return None
    if isinstance(config, str):
        try:
            config = decode_json(json.loads, config)
        except ValueError:
            config = None
    check_setting(isinstance(config, dict), "json_config must be a JSON object")
    unknown = sorted(set(config) - {"temp"})
    check_setting(not unknown, f"json_config: {', '.join(unknown)} not supported (only temp)")
    temp = config.get("temp")
    check_setting(
        temp is None or (isinstance(temp, int | float) and not isinstance(temp, bool)),
        "json_config temp must be a number",
    )
    return None if temp is None else float(temp)


def _dump(kind: str, context: str | None, **fields: Any) -> str:
    """A Gradium message; ``client_req_id`` echoed unless the request had none."""
    message: dict[str, Any] = {"type": kind, **fields}
    if context is not None and context != SINGLE:
        message["client_req_id"] = context
    return json.dumps(message, ensure_ascii=False)


__all__ = ["DEFAULT_VOICE_ID", "FORMATS", "PATH", "GradiumDialect"]
