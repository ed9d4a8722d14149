"""OpenAI's speech API as its SDKs speak it: ``POST /v1/audio/speech`` and ``GET /v1/models``.

The request: ``model`` (any name: one model is served), ``input``, ``voice`` (a name or
``{"id": name}``; OpenAI's voice names are aliases of the server's voices, ``--voice-alias``,
by default the server's default voice), ``response_format`` (mp3, the default, opus, aac,
flac, wav or pcm: ``core.audio_formats``), ``speed`` and ``stream_format`` (audio, or ``sse``:
server-sent ``speech.audio`` events). The audio is streamed as it is made. Refusals are the
core's error shape (``core.errors``), which is OpenAI's.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from ...engine import PocketTTSError, check_speed
from ..core.audio_formats import FORMATS
from ..core.errors import FieldError, RequestError, shown
from ..core.http_speech import read_body, resolve_voice, speak, started
from ..core.state import ServerState

MODELS = ("pocket-tts", "tts-1", "tts-1-hd", "gpt-4o-mini-tts")
"""The model names ``GET /v1/models`` lists: all are the one loaded model (any name is taken)."""

_STARTED = int(time.time())


async def openai_speech(state: ServerState, request: Request) -> Response:
    """``POST /v1/audio/speech``: OpenAI's request, answered with audio as it is made.

    Args:
        state: The server's state.
        request: The request.

    Returns:
        The streaming response: the audio, or its server-sent events.
    """
    fields = parse_json_object(await read_body(request, state.limits.max_body_bytes))
    speech = SpeechRequest.parse(fields, state.limits.max_http_text)
    speed = _speed(fields.get("speed"))
    state.require_model()
    voice = resolve_voice(state, speech.voice, "voice")
    wrapping = SSE_EVENTS if speech.sse else None
    body = await started(
        speak(state, speech.input, voice, speech.response_format, wrapping=wrapping, speed=speed)
    )
    media_type = "text/event-stream" if speech.sse else FORMATS[speech.response_format].media_type
    return StreamingResponse(body, media_type=media_type)


def _speed(value: Any) -> float | None:
    """OpenAI's ``speed`` (0.25-4.0, pitch kept), or a 400 naming the field and the range."""
    if value is None:
        return None
    try:
        return check_speed(value)
    except PocketTTSError as e:
        raise FieldError(400, str(e), "speed") from None


def parse_json_object(body: bytes) -> dict[str, Any]:
    """A request body that must be a JSON object (400 otherwise, however deep its nesting)."""
    try:
        fields = json.loads(body)
    except (ValueError, RecursionError):
        raise RequestError(400, "the body must be a JSON object") from None
    if not isinstance(fields, dict):
        raise RequestError(400, "the body must be a JSON object")
    return fields


@dataclass(frozen=True)
class SpeechRequest:
    """A checked ``POST /v1/audio/speech`` body."""

    input: str
    voice: str | None
    """A voice name of the server (an alias, a pack voice, a file voice)."""
    response_format: str
    sse: bool

    @classmethod
    def parse(cls, fields: dict[str, Any], max_text: int) -> SpeechRequest:
        """Check a request's fields.

        Args:
            fields: The JSON body.
            max_text: The most characters ``input`` may hold.

        Returns:
            The request.

        Raises:
            FieldError: A field is missing, of the wrong type or not served.
        """
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
                f"got {shown(response_format)}",
                "response_format",
            )
        stream_format = fields.get("stream_format")
        if stream_format not in (None, "audio", "sse"):
            raise FieldError(
                400,
                f"stream_format must be audio or sse; got {shown(stream_format)}",
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
        400, f'voice must be a voice name or {{"id": name}}; got {shown(value)}', "voice"
    )


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


class _SseEvents:
    """The audio as ``speech.audio.delta`` events, then ``speech.audio.done``."""

    def piece(self, audio: bytes) -> bytes:
        return sse_delta(audio)

    def end(self, audio: bytes, frames: int) -> bytes:
        return (sse_delta(audio) if audio else b"") + sse_done(frames)


SSE_EVENTS = _SseEvents()


async def models(state: ServerState, request: Request) -> JSONResponse:
    """``GET /v1/models``: every name of ``MODELS`` (each is the one loaded model).

    Args:
        state: The server's state.
        request: The request.

    Returns:
        OpenAI's model list.
    """
    return JSONResponse({"object": "list", "data": [_model(name) for name in MODELS]})


async def model(state: ServerState, request: Request) -> JSONResponse:
    """``GET /v1/models/{model}`` (``models.retrieve``): a name ``MODELS`` lists, else a 404.

    Args:
        state: The server's state.
        request: The request.

    Returns:
        OpenAI's model object.
    """
    name = request.path_params["model"]
    if name not in MODELS:
        raise RequestError(404, f"no model {shown(name)}; the models: {', '.join(MODELS)}")
    return JSONResponse(_model(name))


def _model(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": _STARTED, "owned_by": "pipecat-pocket-tts"}


__all__ = [
    "MODELS",
    "SSE_EVENTS",
    "SpeechRequest",
    "model",
    "models",
    "openai_speech",
    "parse_json_object",
    "sse_delta",
    "sse_done",
]
