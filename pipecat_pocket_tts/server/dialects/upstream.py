"""Upstream ``pocket-tts serve``'s ``POST /tts``: its form in, streaming WAV out.

``text``; ``voice_url``, a voice name of this server or a URL of an origin the operator allows
(``core.voice_urls``), fetched and cloned; ``voice_wav``, a recording to clone: WAV, or what
libsndfile reads with the ``audio`` extra. Uploads are bounded in bytes and seconds.
"""

from __future__ import annotations

import asyncio
import io
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ...engine import read_wav
from ..core.errors import FieldError, RequestError
from ..core.http_speech import resolve_voice, speak, started
from ..core.state import ServerState


async def upstream_tts(state: ServerState, request: Request) -> Response:
    """``POST /tts`` with upstream's form, answered with WAV as it is made.

    Args:
        state: The server's state.
        request: The form: ``text``, ``voice_url`` (a voice name, or a URL of an origin the
            operator allows: fetched and cloned), ``voice_wav`` (a recording to clone); not
            both voice fields.

    Returns:
        The streaming WAV response.
    """
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
            voice = resolve_voice(state, voice_url, "voice_url")
        else:
            voice = state.voices.resolve(None)
    finally:
        await form.close()
    body = await started(speak(state, text, voice, "wav"))
    return StreamingResponse(body, media_type="audio/wav")


def decode_recording(data: bytes, field: str) -> tuple[np.ndarray, int]:
    """An uploaded or fetched recording as samples.

    Args:
        data: The recording's bytes.
        field: The form field it came in, named in a refusal (never a file of the server).

    Returns:
        The samples ([n] or [n, channels], float32) and their rate.

    Raises:
        FieldError: Not a recording this server reads.
    """
    # soundfile raises an OSError when libsndfile itself is missing.
    try:
        import soundfile
    except (ImportError, OSError):
        soundfile = None
    if soundfile is not None:
        try:
            samples, rate = soundfile.read(io.BytesIO(data), dtype="float32", always_2d=True)
            return samples, int(rate)
        except Exception:
            # libsndfile reports every failure as its own error type: WAV is tried next.
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


def _text(value: Any, limit: int, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise FieldError(400, f"{name} must be a non-empty string", name)
    if len(value) > limit:
        raise FieldError(413, f"{name} is over {limit} characters", name)
    return value


__all__ = ["decode_recording", "upstream_tts"]
