"""OpenAI's speech API as its SDKs speak it: the request's fields checked, errors in OpenAI's
shape, server-sent events (``stream_format: "sse"``), and the model list.

Errors are ``{"error": {"message", "type", "param", "code"}}`` on every route (404 and 405
too), which the ``openai`` packages turn into their ``APIStatusError`` subclasses. A wrong
type where a field's value goes is a 400 naming the field, never a server error.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .audio_formats import FORMATS
from .errors import RequestError

RETRY_AFTER_S = 2
"""What a 503 (the model still loading) tells a client to wait before it tries again."""

MODELS = ("pocket-tts", "tts-1", "tts-1-hd", "gpt-4o-mini-tts")
"""The model names ``GET /v1/models`` lists: all are the one loaded model (any name is taken)."""

_STARTED = int(time.time())


class FieldError(RequestError):
    """A request field the server refuses (OpenAI's ``param``: the field's name)."""

    def __init__(self, status: int, message: str, param: str) -> None:
        super().__init__(status, message)
        self.param = param


_TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error"}
_CODES = {401: "invalid_api_key", 404: "not_found", 405: "method_not_allowed", 413: "too_large",
          503: "service_unavailable"}  # fmt: skip


def error_response(
    status: int,
    message: str,
    *,
    param: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """OpenAI's error shape; a 503 says when to retry (``Retry-After``)."""
    kind = _TYPES.get(status, "invalid_request_error" if status < 500 else "server_error")
    body = {"message": message, "type": kind, "param": param, "code": _CODES.get(status)}
    headers = dict(headers or {})
    if status == 503:
        headers.setdefault("Retry-After", str(RETRY_AFTER_S))
    return JSONResponse({"error": body}, status_code=status, headers=headers)


def parse_json_object(body: bytes) -> dict[str, Any]:
    """A request body that must be a JSON object (400 otherwise, however deep its nesting)."""
    try:
        fields = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: nested beyond the parser's stack
        raise RequestError(400, "the body must be a JSON object") from None
    if not isinstance(fields, dict):
        raise RequestError(400, "the body must be a JSON object")
    return fields


@dataclass(frozen=True)
class SpeechRequest:
    """A checked ``POST /v1/audio/speech`` body."""

    input: str
    voice: str | None  # a voice name of the server (an alias, a pack voice, a file voice)
    response_format: str
    sse: bool

    @classmethod
    def parse(cls, fields: dict[str, Any], max_text: int) -> SpeechRequest:
        text = fields.get("input")
        if not isinstance(text, str) or not text.strip():
            raise FieldError(400, "input must be a non-empty string", "input")
        if len(text) > max_text:
            raise FieldError(413, f"input is over {max_text} characters", "input")
        model = fields.get("model")
        if model is not None and not isinstance(model, str):
            raise FieldError(400, "model must be a string (any name: one model is served)", "model")
        response_format = fields.get("response_format")
        if response_format is None:
            response_format = "mp3"
        if not isinstance(response_format, str) or response_format not in FORMATS:
            raise FieldError(
                400,
                f"response_format must be one of {', '.join(FORMATS)}; "
                f"got {_shown(response_format)}",
                "response_format",
            )
        stream_format = fields.get("stream_format")
        if stream_format not in (None, "audio", "sse"):
            raise FieldError(
                400,
                f"stream_format must be audio or sse; got {_shown(stream_format)}",
                "stream_format",
            )
        instructions = fields.get("instructions")
        if instructions not in (None, ""):
            raise FieldError(
                400,
                "instructions are not supported: PocketTTS speaks as the voice it is given "
                "(pick another voice instead)",
                "instructions",
            )
        return cls(text, _voice(fields.get("voice")), response_format, stream_format == "sse")


def _voice(value: Any) -> str | None:
    """A voice given as a name or as OpenAI's ``{"id": name}``."""
    if isinstance(value, dict) and set(value) == {"id"}:
        value = value["id"]
    if value is None or (isinstance(value, str) and value):
        return value
    raise FieldError(
        400, f'voice must be a voice name or {{"id": name}}; got {_shown(value)}', "voice"
    )


def _shown(value: Any) -> str:
    """A client's value in a message, short."""
    text = repr(value) if isinstance(value, str) else f"a {type(value).__name__}"
    return text if len(text) <= 40 else text[:37] + "..."


def sse_delta(audio: bytes) -> bytes:
    """One ``speech.audio.delta`` event: a chunk of the audio, base64."""
    return _event({"type": "speech.audio.delta", "audio": base64.b64encode(audio).decode()})


def sse_done(frames: int) -> bytes:
    """The ``speech.audio.done`` event. Usage counts the audio frames made (12.5 a second) as
    output tokens; the text's tokens are not counted (0)."""
    usage = {"input_tokens": 0, "output_tokens": frames, "total_tokens": frames}
    return _event({"type": "speech.audio.done", "usage": usage})


def _event(data: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"


async def models(request: Request) -> JSONResponse:
    """``GET /v1/models``."""
    data = [
        {"id": name, "object": "model", "created": _STARTED, "owned_by": "pipecat-pocket-tts"}
        for name in MODELS
    ]
    return JSONResponse({"object": "list", "data": data})


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (no such route: 404, a method the route lacks: 405)."""
    assert isinstance(exc, HTTPException)
    path = _shown(request.url.path)
    messages = {404: f"no route {path}", 405: f"{request.method} is not served on {path}"}
    message = messages.get(exc.status_code, exc.detail)
    return error_response(exc.status_code, message, headers=exc.headers)


async def _server_error(request: Request, exc: Exception) -> Response:
    return error_response(500, "the server failed on this request (see its log)")


EXCEPTION_HANDLERS = {HTTPException: _http_error, Exception: _server_error}
"""The app's exception handlers: every error a route or the router raises, in OpenAI's shape."""

__all__ = [
    "EXCEPTION_HANDLERS",
    "MODELS",
    "RETRY_AFTER_S",
    "FieldError",
    "SpeechRequest",
    "error_response",
    "models",
    "parse_json_object",
    "sse_delta",
    "sse_done",
]
