"""The server's HTTP endpoints: OpenAI's speech API, upstream's ``/tts``, voices and probes.

- ``POST /v1/audio/speech``: OpenAI's request (``model``, ``input``, ``voice``,
  ``response_format`` pcm or wav), streamed as it is made. OpenAI's voice names are aliases of
  the server's voices (``--voice-alias``; by default the pack's default voice).
- ``POST /tts``: upstream ``pocket-tts serve``'s form (``text``, ``voice_url`` a voice name or
  a URL the operator allows (``voice_urls``), ``voice_wav`` a recording to clone), streaming WAV.
- ``GET /v1/voices``, ``GET /health`` (the process answers), ``GET /ready`` (503 while the
  model loads or a session waits for a scheduler slot), ``GET /metrics`` (Prometheus).
"""

from __future__ import annotations

import asyncio
import json
import struct
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from ..engine import SAMPLE_RATE, PocketTTSError, UnknownVoiceError
from ..engine.audio import read_wav, to_pcm16
from ..engine.checks import check_speed
from .state import RequestError, ServerState

FORMATS = {"pcm": "audio/pcm", "wav": "audio/wav"}


def error_response(status: int, message: str) -> JSONResponse:
    """OpenAI's error shape, which the ``openai`` package reads."""
    kind = "invalid_request_error" if status < 500 else "server_error"
    return JSONResponse({"error": {"message": message, "type": kind}}, status_code=status)


def streaming_wav_header(sample_rate: int) -> bytes:
    """A 16-bit mono WAV header whose sizes say "unknown" (the stream's length is not known)."""
    unknown = 0xFFFFFFFF
    fmt = struct.pack("<HHIIHH", 1, 1, sample_rate, sample_rate * 2, 2, 16)
    return (
        b"RIFF" + struct.pack("<I", unknown) + b"WAVE" + b"fmt " + struct.pack("<I", len(fmt))
        + fmt + b"data" + struct.pack("<I", unknown)
    )  # fmt: skip


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused (413) beyond ``limit`` bytes, declared or not."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise RequestError(413, f"request body over {limit} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise RequestError(413, f"request body over {limit} bytes")
    return bytes(body)


async def speak(
    state: ServerState, text: str, voice: Any, wav: bool, speed: float | None = None
) -> AsyncIterator[bytes]:
    """The audio of ``text`` as 16-bit PCM at 24 kHz (after a WAV header with ``wav``), at
    ``speed`` (None: 1.0)."""
    tts = state.require_model()
    session = await asyncio.to_thread(tts.session, voice=voice, speed=speed)
    state.metrics.streams.inc()
    pacer = state.metrics.pacer()
    try:
        await asyncio.to_thread(session.enqueue, text)
        session.finish()
        pacer.text()
        if wav:
            yield streaming_wav_header(SAMPLE_RATE)
        async for frame in session:
            pacer.frame(frame.samples.shape[0] / SAMPLE_RATE)
            yield to_pcm16(frame.samples).tobytes()
        pacer.finish()
    finally:
        state.metrics.streams.dec()
        await session.acancel()  # the client left early: compute stops


async def _started(stream: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """``stream`` with its first item taken now, so a failure before any audio is a status."""
    first = await anext(stream)

    async def chained() -> AsyncIterator[bytes]:
        yield first
        async for item in stream:
            yield item

    return chained()


def _text(value: Any, limit: int, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise RequestError(400, f"{name} must be a non-empty string")
    if len(value) > limit:
        raise RequestError(413, f"{name} is over {limit} characters")
    return value


async def openai_speech(state: ServerState, request: Request) -> Response:
    """``POST /v1/audio/speech``."""
    body = await read_body(request, state.limits.max_body_bytes)
    try:
        fields = json.loads(body)
    except ValueError:
        raise RequestError(400, "the body must be a JSON object") from None
    if not isinstance(fields, dict):
        raise RequestError(400, "the body must be a JSON object")
    text = _text(fields.get("input"), state.limits.max_http_text, "input")
    response_format = fields.get("response_format", "mp3")
    if response_format not in FORMATS:
        raise RequestError(
            400, f"response_format {response_format!r} is not served; use pcm or wav"
        )
    speed = _speed(fields.get("speed"))
    if fields.get("instructions"):
        raise RequestError(400, "instructions are not supported by PocketTTS")
    voice = state.voices.resolve(fields.get("voice"))
    stream = await _started(speak(state, text, voice, response_format == "wav", speed))
    return StreamingResponse(stream, media_type=FORMATS[response_format])


def _speed(value: Any) -> float | None:
    """OpenAI's ``speed`` (0.25-4.0, pitch kept), or a 400 saying the range."""
    if value is None:
        return None
    try:
        return check_speed(value)
    except PocketTTSError as e:
        raise RequestError(400, str(e)) from None


async def upstream_tts(state: ServerState, request: Request) -> Response:
    """``POST /tts`` with upstream's form: ``text``, ``voice_url`` (a voice name, or a URL of
    an origin the operator allows: fetched and cloned), ``voice_wav`` (a recording to clone)."""
    limits = state.limits
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limits.max_upload_bytes:
        raise RequestError(413, f"request body over {limits.max_upload_bytes} bytes")
    form = await request.form(max_files=1, max_fields=8, max_part_size=limits.max_upload_bytes)
    try:
        text = _text(form.get("text"), limits.max_http_text, "text")
        voice_url = form.get("voice_url")
        upload = form.get("voice_wav")
        if upload is not None and not isinstance(upload, str):
            data = await upload.read()
            voice: Any = await asyncio.to_thread(_cloned_voice, state, data, "voice_wav")
        elif isinstance(voice_url, str) and "://" in voice_url:
            fetch = state.voice_urls.fetch
            data = await asyncio.to_thread(fetch, voice_url, limits.max_upload_bytes)
            voice = await asyncio.to_thread(_cloned_voice, state, data, "voice_url")
        elif isinstance(voice_url, str) and voice_url:
            if "/" in voice_url:
                raise RequestError(
                    400, "voice_url takes a voice name of this server (GET /v1/voices) or a URL"
                )
            voice = state.voices.resolve(voice_url)
        else:
            voice = None
    finally:
        await form.close()
    stream = await _started(speak(state, text, voice, wav=True))
    return StreamingResponse(stream, media_type="audio/wav")


def _cloned_voice(state: ServerState, data: bytes, field: str) -> Any:
    """A voice cloned from the WAV of form ``field`` (uploaded or fetched), refused beyond the
    upload limits."""
    limits = state.limits
    if len(data) > limits.max_upload_bytes:
        raise RequestError(413, f"{field} over {limits.max_upload_bytes} bytes")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "voice.wav"
        path.write_bytes(data)
        try:
            samples, rate = read_wav(path)
        except (ValueError, OSError) as e:
            raise RequestError(400, f"{field} is not a readable WAV file: {e}") from None
    seconds = samples.shape[0] / rate
    if seconds > limits.max_upload_seconds:
        raise RequestError(
            413, f"{field} is {seconds:.1f} s long; at most {limits.max_upload_seconds:g} s"
        )
    return state.require_model().clone_voice(np.asarray(samples), sample_rate=rate)


async def voices(state: ServerState, request: Request) -> Response:
    """``GET /v1/voices``."""
    tts = state.require_model()
    return JSONResponse(
        {
            "language": tts.language,
            "default": state.voices.default,
            "voices": state.voices.names,
            "aliases": state.voices.aliases,
        }
    )


def health(state: ServerState) -> Response:
    return JSONResponse({"status": "ok"})


def ready(state: ServerState) -> Response:
    """200 when a new call would start at once; 503 while loading or sessions wait."""
    if state.tts is None:
        reason = "loading" if state.load_error is None else f"load failed: {state.load_error}"
        return JSONResponse({"ready": False, "reason": reason}, status_code=503)
    stats = state.tts.scheduler.stats()
    if stats.waiting:
        return JSONResponse(
            {"ready": False, "reason": f"{stats.waiting} sessions wait for a slot"},
            status_code=503,
        )
    return JSONResponse({"ready": True, "streams": stats.active})


def metrics(state: ServerState) -> Response:
    return Response(state.metrics.render(), media_type=state.metrics.content_type)


def status_of(error: Exception) -> int:
    """The HTTP status of an engine error raised by a request."""
    if isinstance(error, RequestError):
        return error.status
    if isinstance(error, UnknownVoiceError | ValueError):
        return 400
    if isinstance(error, PocketTTSError):
        return 422
    return 500


__all__ = [
    "FORMATS",
    "error_response",
    "health",
    "metrics",
    "openai_speech",
    "read_body",
    "ready",
    "speak",
    "status_of",
    "streaming_wav_header",
    "upstream_tts",
    "voices",
]
