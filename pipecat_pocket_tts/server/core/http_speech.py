"""One HTTP request's speech: a session's frames as a response format's bytes, as they are made.

Every HTTP dialect that speaks (OpenAI's ``/v1/audio/speech``, upstream's ``/tts``) reads its
body here (bounded), resolves its voice here and answers with ``speak``: one engine session,
its frames through the response's encoder (``audio_formats``; a compressing one on a worker
thread), counted in the metrics, its compute stopped when the client leaves. A dialect that
wraps the audio (OpenAI's server-sent events) says how with a ``Wrapping``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, Protocol

import numpy as np
from starlette.requests import Request

from ...engine import SAMPLE_RATE, UnknownVoiceError
from .audio_formats import ResponseEncoder, open_encoder
from .errors import FieldError, RequestError
from .state import ServerState


class Wrapping(Protocol):
    """How a dialect wraps a response's audio bytes."""

    def piece(self, audio: bytes) -> bytes:
        """The bytes that carry a piece of the audio (never empty)."""
        ...

    def end(self, audio: bytes, frames: int) -> bytes:
        """The response's last bytes: the encoder's tail (maybe empty), after ``frames``."""
        ...


class _Bare:
    """The audio as it is."""

    def piece(self, audio: bytes) -> bytes:
        return audio

    def end(self, audio: bytes, frames: int) -> bytes:
        return audio


_BARE = _Bare()


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused (413) beyond ``limit`` bytes, declared or not.

    Args:
        request: The request.
        limit: The most bytes taken.

    Returns:
        The body.
    """
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise RequestError(413, f"request body over {limit} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise RequestError(413, f"request body over {limit} bytes")
    return bytes(body)


def resolve_voice(state: ServerState, name: str | None, field: str) -> Any:
    """The voice a request's field names.

    Args:
        state: The server's state (the model loaded).
        name: The voice name given (None: the default voice).
        field: The request field that gave it, named in the refusal.

    Returns:
        The voice, as the engine takes it.

    Raises:
        FieldError: No voice of that name (a 400 naming the field).
    """
    try:
        return state.voices.resolve(name)
    except UnknownVoiceError as e:
        raise FieldError(400, str(e), field) from None


async def speak(
    state: ServerState,
    text: str,
    voice: Any,
    response_format: str,
    *,
    wrapping: Wrapping | None = None,
    speed: float | None = None,
) -> AsyncIterator[bytes]:
    """The audio of one HTTP request, each frame's bytes as they are made.

    Args:
        state: The server's state (the model must be loaded).
        text: What to say.
        voice: The voice, resolved (``ServerVoices.resolve``) or cloned.
        response_format: A key of ``FORMATS``.
        wrapping: How the dialect wraps the audio (None: bare bytes).
        speed: The speaking rate (None: 1.0).

    Yields:
        Bytes at least once: a text with nothing to say is the format's empty audio; an
        empty item once the first frame is made when the format had nothing to send for it.
    """
    tts = state.require_model()
    session = await asyncio.to_thread(tts.session, voice=voice, speed=speed)
    state.metrics.sessions.inc()
    pacer = state.metrics.pacer()
    frames = 0
    coder = ResponseCoder()
    wrap = wrapping or _BARE
    try:
        await coder.open(response_format)
        await asyncio.to_thread(session.enqueue, text)
        session.finish()
        pacer.text()
        async for frame in session:
            # The frame's seconds, shorter or longer at a speed other than 1.
            pacer.frame(frame.samples.shape[0] / SAMPLE_RATE)
            frames += 1
            data = await coder.encode(frame.samples)
            if data:
                yield wrap.piece(data)
            elif frames == 1:
                # The reply has begun (its status is known) though its format sent nothing
                # yet: a FLAC reply is sent whole at its end.
                yield b""
        pacer.finish()
        yield wrap.end(await coder.finish(), frames)
    finally:
        coder.close()
        state.metrics.sessions.dec()
        # A client that left early stops the compute.
        await session.acancel()


class ResponseCoder:
    """A response's encoder, a compressing one called on a worker thread, one call at a time;
    a call in flight when the response ends (the client left) finishes before the encoder is
    closed, never beside it."""

    def __init__(self) -> None:
        self._encoder: ResponseEncoder | None = None
        self._running: asyncio.Future[Any] | None = None

    async def open(self, response_format: str) -> None:
        await self._call(self._open, response_format)

    def _open(self, response_format: str) -> None:
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


async def started(body: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """``body`` with its first item taken now, so a failure before any audio is a status.

    Args:
        body: A response's bytes, as ``speak`` yields them.

    Returns:
        The same bytes, the first already made.
    """
    first = await anext(body)

    async def chained() -> AsyncIterator[bytes]:
        yield first
        async for item in body:
            yield item

    return chained()


__all__ = ["ResponseCoder", "Wrapping", "read_body", "resolve_voice", "speak", "started"]
