"""A session on a TTS server, used as the engine's ``Session`` is: ``RemoteSession``.

Text goes out as the protocol's messages through its ``RemoteTTS`` (a ``SessionHost``); audio
frames (with their words), utterance ends and markers come back from the connection's thread
into a frame channel the caller iterates. After ``cancel``/``acancel`` nothing of the session
is ever yielded.

Utterance numbers are the client's: every ``enqueue``, ``feed`` and ``flush`` call (with text)
is one utterance, whose audio the server tags with its number; an empty ``AudioFrame`` with
``is_last_in_utterance`` closes each one, where its last audio ends.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import threading
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from .. import wire
from ..engine import (
    AdmissionWait,
    AudioFrame,
    ChannelOutput,
    FrameChannel,
    Marker,
    PocketTTSError,
    ServerUnavailableError,
    UnknownVoiceError,
    UtteranceOptions,
    Word,
    WordStart,
)
from ..engine.errors import InvalidSettingError

REPLY_TIMEOUT_S = 10.0
"""How long a request the server answers (start, voice check, cancel) waits for its answer."""

_EMPTY = np.zeros(0, dtype=np.float32)
_ERRORS: dict[str, type[PocketTTSError]] = {
    wire.ErrorCode.UNKNOWN_VOICE: UnknownVoiceError,
    wire.ErrorCode.BAD_REQUEST: InvalidSettingError,
}


def error_of(message: wire.Error) -> PocketTTSError:
    kind = _ERRORS.get(message.code, PocketTTSError)
    return kind(f"TTS server ({message.code}): {message.message}")


class SessionHost(Protocol):
    """What a session needs of its ``RemoteTTS``: a way to the server, and to be let go."""

    def send(self, message: wire.ClientMessage) -> None: ...

    def forget(self, session: RemoteSession) -> None: ...


class RemoteSession(ChannelOutput["AudioFrame | Marker"]):
    """A session on the server, with ``Session``'s interface (see the module docstring)."""

    def __init__(
        self,
        remote: SessionHost,
        context_id: str,
        on_admission_wait: Callable[[AdmissionWait], None] | None = None,
    ) -> None:
        self.context_id = context_id
        self._remote = remote
        self._on_admission_wait = on_admission_wait
        self._frames: FrameChannel[AudioFrame | Marker] = FrameChannel()
        self._lock = threading.Lock()
        self._started: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._stopped: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._marks: dict[int, Any] = {}
        self._mark_ids = itertools.count()
        self._utterances = itertools.count()
        self._pending: set[int] = set()
        self._closed = False
        self._cancelled = False
        self._failure: BaseException | None = None

    # -- input ------------------------------------------------------------------------
    def enqueue(
        self, text: str, options: UtteranceOptions | None = None, **keywords: Any
    ) -> int | None:
        """Queue ``text`` as one utterance; its number (None for blank text)."""
        self._check_open()
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        utterance = UtteranceOptions.build(options, **keywords)
        if not text.strip():
            return None
        return self._text(text, True, utterance)

    def feed(
        self, text: str, options: UtteranceOptions | None = None, **keywords: Any
    ) -> list[int]:
        """Add streamed text; the server's text stream cuts it. Its utterance number."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        self._check_open()
        utterance = UtteranceOptions.build(options, **keywords)
        return [self._text(text, False, utterance)] if text else []

    def flush(self, options: UtteranceOptions | None = None, **keywords: Any) -> list[int]:
        """The fed text is complete: the server queues what its text stream holds."""
        self._check_open()
        utterance = UtteranceOptions.build(options, **keywords)
        flush = wire.Flush(
            self.context_id,
            self._next_utterance(),
            voice=voice_name(utterance.voice),
            temperature=utterance.temperature,
            eos_threshold=utterance.eos_threshold,
            seed=utterance.seed,
            speed=utterance.speed,
        )
        self._remote.send(flush)
        return [flush.utterance]

    def mark(self, payload: Any, *, after_fed_text: bool = True) -> None:
        """``Marker(payload)`` in the output after the audio of the text given so far; the
        server's session holds it for fed text still unfinished (``Session.mark``)."""
        with self._lock:
            self._check_open()
            mark_id = next(self._mark_ids)
            self._marks[mark_id] = payload
        self._remote.send(wire.Mark(self.context_id, mark_id, after_fed_text))

    def finish(self) -> None:
        """No more text: iteration ends once everything queued has been spoken."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._remote.send(wire.End(self.context_id))

    def cancel(self) -> None:
        """Stop now; returns once the server acknowledged (or the connection is gone)."""
        if self._stop_locally():
            with contextlib.suppress(concurrent.futures.TimeoutError):
                self._stopped.result(REPLY_TIMEOUT_S)

    async def acancel(self) -> None:
        """``cancel()`` without blocking the event loop."""
        if self._stop_locally():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.wrap_future(self._stopped), REPLY_TIMEOUT_S)

    def close(self) -> None:
        self.cancel()

    def _stop_locally(self) -> bool:
        """Nothing more is yielded from here on; tell the server (True: an answer will come)."""
        with self._lock:
            already = self._cancelled
            self._closed = self._cancelled = True
        self._frames.close(discard=True)
        if already or self._stopped.done():
            return False
        self._remote.send(wire.Cancel(self.context_id))
        return True

    def _text(self, text: str, complete: bool, options: UtteranceOptions) -> int:
        message = wire.Text(
            self.context_id,
            self._next_utterance(),
            text,
            complete=complete,
            voice=voice_name(options.voice),
            temperature=options.temperature,
            eos_threshold=options.eos_threshold,
            seed=options.seed,
            normalize=options.normalize,
            lexicon=None if options.lexicon is None else dict(options.lexicon),
            speed=options.speed,
        )
        self._remote.send(message)
        return message.utterance

    def _next_utterance(self) -> int:
        with self._lock:
            index = next(self._utterances)
            self._pending.add(index)
            return index

    # -- state ------------------------------------------------------------------------
    def _unfinished(self) -> int:
        """Utterances whose end has not come back yet."""
        return len(self._pending)

    # -- from the connection thread ---------------------------------------------------
    def wait_started(self, timeout: float) -> None:
        try:
            self._started.result(timeout)
        except concurrent.futures.TimeoutError:
            raise ServerUnavailableError("the TTS server did not open the session") from None

    def audio(self, header: wire.AudioHeader, samples: np.ndarray) -> None:
        if not samples.size:
            # An encoder's tail; float32 has none.
            return
        frame = AudioFrame(
            samples=samples,
            frame_index=header.frame,
            chunk_index=header.chunk,
            utterance_index=header.utterance,
            is_last_in_utterance=False,
            words=tuple(
                WordStart(w.text, w.index, w.start, w.session_start, w.estimated)
                for w in header.words
            ),
            completed_words=tuple(
                Word(
                    w.text,
                    w.index,
                    w.start,
                    w.end if w.end is not None else w.start,
                    w.session_start,
                    w.session_end if w.session_end is not None else w.session_start,
                    w.estimated,
                )
                for w in header.completed_words
            ),
        )
        self._frames.put(frame)

    def control(self, message: wire.ServerMessage) -> None:
        if isinstance(message, wire.Started):
            _resolve(self._started)
        elif isinstance(message, wire.UtteranceEnd):
            with self._lock:
                self._pending.discard(message.utterance)
            end = AudioFrame(_EMPTY, 0, 0, message.utterance, is_last_in_utterance=True)
            self._frames.put(end)
        elif isinstance(message, wire.MarkerReached):
            with self._lock:
                payload = self._marks.pop(message.id, None)
            self._frames.put(Marker(payload))
        elif isinstance(message, wire.Admitted):
            if self._on_admission_wait is not None:
                self._on_admission_wait(
                    AdmissionWait(self.context_id, 0, message.active, message.waited)
                )
        elif isinstance(message, wire.Done):
            self._remote.forget(self)
            self._frames.close()
            _resolve(self._stopped)
        elif isinstance(message, wire.Cancelled):
            self._remote.forget(self)
            _resolve(self._stopped)
        elif isinstance(message, wire.Error):
            self._remote.forget(self)
            error = error_of(message)
            if not self._started.done():
                self._started.set_exception(error)
            self.fail(error)

    def end_idle(self, error: BaseException) -> None:
        """The connection ended while nothing of the session was owed: its output ends
        without an error (a draining server closed it; the next session reconnects), and
        text given after this raises why."""
        with self._lock:
            self._closed = True
            self._failure = error
        self._frames.close()
        _resolve(self._stopped)

    def fail(self, error: BaseException) -> None:
        """The session ends with ``error`` (after the frames already received)."""
        with self._lock:
            self._closed = True
            if not self._cancelled:
                self._failure = error
        if not self._started.done():
            self._started.set_exception(error)
        self._frames.close(error if not self._cancelled else None)
        _resolve(self._stopped)

    # -- output (iteration: ChannelOutput) ---------------------------------------------
    async def __aenter__(self) -> RemoteSession:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.acancel()


def _resolve(future: concurrent.futures.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def voice_name(voice: Any) -> str | None:
    """A voice as the server takes it: a name of its voices (or None: its default)."""
    if voice is None or isinstance(voice, str):
        return voice
    raise UnknownVoiceError(
        f"a TTS server takes voices by name (GET /v1/voices lists them), not a "
        f"{type(voice).__name__}; put voice files in the server's --voices-dir"
    )


__all__ = ["REPLY_TIMEOUT_S", "RemoteSession", "SessionHost", "error_of", "voice_name"]
