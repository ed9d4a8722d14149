"""The server's HTTP endpoints: OpenAI's speech API, upstream's ``/tts``, voices and probes.

- ``POST /v1/audio/speech``: OpenAI's request (``model``, ``input``, ``voice`` a name or
  ``{"id": name}``, ``response_format`` mp3 (the default), opus, aac, flac, wav or pcm,
  ``stream_format`` audio or sse), streamed as it is made (``audio_formats``,
  ``openai_api``). OpenAI's voice names are aliases of the server's voices (``--voice-alias``;
  by default the server's default voice).
- ``POST /tts``: upstream ``pocket-tts serve``'s form (``text``, ``voice_url`` a voice name or
  a URL the operator allows (``voice_urls``), ``voice_wav`` a recording to clone: WAV, or
  what libsndfile reads with the ``audio`` extra), streaming WAV.
- ``GET /v1/voices`` (and ``/v1/audio/voices``, Kokoro's list), ``GET /health`` (the process
  answers), ``GET /ready`` (503 while the model loads or a session waits for a scheduler
  slot), ``GET /metrics`` (Prometheus).
"""

from __future__ import annotations

import asyncio
import io
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from ..engine import SAMPLE_RATE, PocketTTSError, UnknownVoiceError, check_speed, read_wav
from .audio_formats import FORMATS, StreamEncoder, open_encoder, streaming_wav_header
from .openai_api import (
    FieldError,
    SpeechRequest,
    error_response,
    parse_json_object,
    sse_delta,
    sse_done,
)
from .state import RequestError, ServerState


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
    state: ServerState,
    text: str,
    voice: Any,
    response_format: str,
    *,
    sse: bool = False,
    speed: float | None = None,
) -> AsyncIterator[bytes]:
    """The audio of ``text`` in ``response_format`` (as ``speech.audio`` events with ``sse``),
    at ``speed`` (None: 1.0).

    Yields each frame's bytes as they are made, and at least once: a text with nothing to say
    is the format's empty stream.
    """
    tts = state.require_model()
    session = await asyncio.to_thread(tts.session, voice=voice, speed=speed)
    state.metrics.streams.inc()
    pacer = state.metrics.pacer()
    frames = 0
    coder = _Coder()
    try:
        await coder.open(response_format)
        await asyncio.to_thread(session.enqueue, text)
        session.finish()
        pacer.text()
        async for frame in session:
            pacer.frame(frame.samples.shape[0] / SAMPLE_RATE)  # shorter or longer at speed
            frames += 1
            data = await coder.encode(frame.samples)
            if data:
                yield sse_delta(data) if sse else data
        pacer.finish()
        data = await coder.finish()
        if sse:
            yield (sse_delta(data) if data else b"") + sse_done(frames)
        else:
            yield data
    finally:
        coder.close()
        state.metrics.streams.dec()
        await session.acancel()  # the client left early: compute stops


class _Coder:
    """A response's encoder, a compressing one called on a worker thread, one call at a time;
    a call in flight when the response ends (the client left) finishes before the encoder is
    closed, never beside it."""

    def __init__(self) -> None:
        self._encoder: StreamEncoder | None = None
        self._running: asyncio.Future[Any] | None = None

    async def open(self, response_format: str) -> None:
        await self._call(self._open, response_format)

    def _open(self, response_format: str) -> None:  # on the worker thread
        self._encoder = open_encoder(response_format)

    async def encode(self, samples: np.ndarray) -> bytes:
        assert self._encoder is not None
        if not self._encoder.compresses:
            return self._encoder.encode(samples)
        return await self._call(self._encoder.encode, samples)

    async def finish(self) -> bytes:
        assert self._encoder is not None
        return await self._call(self._encoder.finish)

    def close(self) -> None:
        """Close the encoder now, or once the call in flight returns."""
        running = self._running
        if running is not None and not running.done():
            running.add_done_callback(lambda _: self.close())
        elif self._encoder is not None:
            self._encoder.close()

    async def _call(self, function: Any, *args: Any) -> Any:
        self._running = asyncio.ensure_future(asyncio.to_thread(function, *args))
        return await asyncio.shield(self._running)


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
        raise FieldError(400, f"{name} must be a non-empty string", name)
    if len(value) > limit:
        raise FieldError(413, f"{name} is over {limit} characters", name)
    return value


async def openai_speech(state: ServerState, request: Request) -> Response:
    """``POST /v1/audio/speech``."""
    fields = parse_json_object(await read_body(request, state.limits.max_body_bytes))
    speech = SpeechRequest.parse(fields, state.limits.max_http_text)
    speed = _speed(fields.get("speed"))
    state.require_model()
    voice = _resolve(state, speech.voice, "voice")
    stream = await _started(
        speak(state, speech.input, voice, speech.response_format, sse=speech.sse, speed=speed)
    )
    media_type = "text/event-stream" if speech.sse else FORMATS[speech.response_format].media_type
    return StreamingResponse(stream, media_type=media_type)


def _resolve(state: ServerState, name: str | None, field: str) -> Any:
    """The voice a request's field names (a 400 naming the field when there is none such)."""
    try:
        return state.voices.resolve(name)
    except UnknownVoiceError as e:
        raise FieldError(400, str(e), field) from None


def _speed(value: Any) -> float | None:
    """OpenAI's ``speed`` (0.25-4.0, pitch kept), or a 400 naming the field and the range."""
    if value is None:
        return None
    try:
        return check_speed(value)
    except PocketTTSError as e:
        raise FieldError(400, str(e), "speed") from None


async def upstream_tts(state: ServerState, request: Request) -> Response:
    """``POST /tts`` with upstream's form: ``text``, ``voice_url`` (a voice name, or a URL of
    an origin the operator allows: fetched and cloned), ``voice_wav`` (a recording to clone);
    not both voice fields."""
    limits = state.limits
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limits.max_upload_bytes:
        raise RequestError(413, f"request body over {limits.max_upload_bytes} bytes")
    form = await request.form(max_files=1, max_fields=8, max_part_size=limits.max_upload_bytes)
    try:
        text = _text(form.get("text"), limits.max_http_text, "text")
        voice_url = form.get("voice_url")
        upload = form.get("voice_wav")
        if voice_url is not None and not isinstance(voice_url, str):
            raise FieldError(400, "voice_url must be a form field, not a file", "voice_url")
        if upload is not None and voice_url:
            raise FieldError(400, "give voice_url or voice_wav, not both", "voice_wav")
        state.require_model()
        if upload is not None:
            if isinstance(upload, str):
                raise FieldError(400, "voice_wav must be a file upload", "voice_wav")
            data = await upload.read()
            voice: Any = await asyncio.to_thread(_cloned_voice, state, data, "voice_wav")
        elif voice_url and "://" in voice_url:
            fetch = state.voice_urls.fetch
            data = await asyncio.to_thread(fetch, voice_url, limits.max_upload_bytes)
            voice = await asyncio.to_thread(_cloned_voice, state, data, "voice_url")
        elif voice_url:
            if "/" in voice_url:
                raise FieldError(
                    400,
                    "voice_url takes a voice name of this server (GET /v1/voices) or a URL",
                    "voice_url",
                )
            voice = _resolve(state, voice_url, "voice_url")
        else:
            voice = state.voices.resolve(None)
    finally:
        await form.close()
    stream = await _started(speak(state, text, voice, "wav"))
    return StreamingResponse(stream, media_type="audio/wav")


def decode_recording(data: bytes, field: str) -> tuple[np.ndarray, int]:
    """An uploaded or fetched recording → (samples [n] or [n, channels], rate); its messages
    name the form field, never a file of the server."""
    try:
        import soundfile
    except (ImportError, OSError):  # OSError: libsndfile itself is missing
        soundfile = None
    if soundfile is not None:
        try:
            samples, rate = soundfile.read(io.BytesIO(data), dtype="float32", always_2d=True)
            return samples, int(rate)
        except Exception:  # libsndfile reports every failure as its own error type
            pass
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "voice.wav"
        path.write_bytes(data)
        try:
            return read_wav(path)
        except (ValueError, OSError) as e:
            reason = str(e).replace(str(path), field)
    readable = "WAV, FLAC, OGG or MP3" if soundfile else "WAV (this server lacks the audio extra)"
    raise FieldError(
        400, f"{field} is not a recording this server reads ({readable}): {reason}", field
    )


def _cloned_voice(state: ServerState, data: bytes, field: str) -> Any:
    """A voice cloned from the recording of form ``field`` (uploaded or fetched), refused
    beyond the upload limits."""
    limits = state.limits
    if len(data) > limits.max_upload_bytes:
        raise FieldError(413, f"{field} over {limits.max_upload_bytes} bytes", field)
    samples, rate = decode_recording(data, field)
    seconds = samples.shape[0] / rate
    if seconds > limits.max_upload_seconds:
        raise FieldError(
            413, f"{field} is {seconds:.1f} s long; at most {limits.max_upload_seconds:g} s", field
        )
    return state.require_model().clone_voice(np.asarray(samples), sample_rate=rate)


async def kokoro_voices(state: ServerState, request: Request) -> Response:
    """``GET /v1/audio/voices``: the voice names, as Kokoro's OpenAI-style servers list them."""
    state.require_model()
    return JSONResponse({"voices": state.voices.names})


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
        error = state.load_error
        reason = "loading" if error is None else state.public(f"load failed: {error}")
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
    "decode_recording",
    "error_response",
    "health",
    "kokoro_voices",
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
