"""The client of the TTS server: ``RemoteTTS`` and ``RemoteSession``, used as a local
``PocketTTS`` and its ``Session`` are.

``PocketTTSService(server_url=...)`` speaks through these with the very code it runs on an
in-process engine: ``session()``, ``enqueue`` / ``feed`` / ``flush`` / ``mark`` / ``acancel``,
and async iteration of ``AudioFrame`` (with its words) and ``Marker``. No Pipecat here.

The connection lives on a thread of its own with its own event loop (so any thread may open
sessions, and the caller's loop only wakes for frames), reconnecting with backoff whenever it
is lost. Losing it ends every open session with ``ServerUnavailableError``; opening a session
while the server is unreachable raises it. After ``cancel``/``acancel`` nothing of that
session is ever yielded.

Utterance numbers are the client's: every ``enqueue``, ``feed`` and ``flush`` call (with text)
is one utterance, whose audio the server tags with its number; an empty ``AudioFrame`` with
``is_last_in_utterance`` closes each one, where its last audio ends.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..engine import (
    SAMPLE_RATE,
    AdmissionWait,
    AudioFrame,
    Marker,
    PocketTTSError,
    ServerUnavailableError,
    SessionClosedError,
    UnknownVoiceError,
    UtteranceOptions,
    Word,
    WordStart,
)
from ..engine.errors import InvalidSettingError
from ..engine.runtime.channel import ChannelOutput, FrameChannel
from . import protocol as p

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 5.0
"""How long opening a session waits for the server before ``ServerUnavailableError``."""
BACKOFF_S = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0)
"""Waits between reconnection attempts (the last one repeats)."""
REPLY_TIMEOUT_S = 10.0
"""How long a request the server answers (start, voice check, cancel) waits for its answer."""

_EMPTY = np.zeros(0, dtype=np.float32)
_ERRORS: dict[str, type[PocketTTSError]] = {
    p.ErrorCode.UNKNOWN_VOICE: UnknownVoiceError,
    p.ErrorCode.BAD_REQUEST: InvalidSettingError,
}


def _error_of(message: p.Error) -> PocketTTSError:
    kind = _ERRORS.get(message.code, PocketTTSError)
    return kind(f"TTS server ({message.code}): {message.message}")


class RemoteTTS:
    """A TTS server, with the parts of ``PocketTTS``'s interface a service uses."""

    sample_rate: int = SAMPLE_RATE

    def __init__(
        self, url: str, *, api_key: str | None = None, connect_timeout: float = CONNECT_TIMEOUT_S
    ) -> None:
        """Start connecting to ``url`` (``ws://host:port``; the protocol's path is added when
        missing) in the background; ``connect()`` waits for it."""
        if not url.startswith(("ws://", "wss://")):
            raise ValueError(f"server_url must start with ws:// or wss://, got {url!r}")
        self.url = url if url.rstrip("/").endswith(p.PATH) else url.rstrip("/") + p.PATH
        self._api_key = api_key
        self._connect_timeout = connect_timeout
        self._info: p.Ready | None = None
        self._connected = threading.Event()
        self._attempts = threading.Condition()  # notified after each connection attempt
        self._failures = 0
        self._last_error: BaseException | None = None
        self._sessions: dict[str, RemoteSession] = {}
        self._voice_checks: dict[int, concurrent.futures.Future[p.VoiceChecked]] = {}
        self._ids = itertools.count()
        self._closed = False
        self._loop = asyncio.new_event_loop()
        self._outgoing: asyncio.Queue[str] | None = None
        self._retry: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="pocket-tts-remote", daemon=True)
        self._thread.start()

    # -- facts (known once connected) -------------------------------------------------
    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    @property
    def language(self) -> str:
        return self._info.language if self._info is not None else "unknown"

    @property
    def voices(self) -> list[str]:
        return list(self._info.voices) if self._info is not None else []

    @property
    def default_voice(self) -> str | None:
        return self._info.default_voice if self._info is not None else None

    def __repr__(self) -> str:
        return f"RemoteTTS({self.url!r}, language={self.language!r})"

    # -- blocking calls (any thread but the connection's) -----------------------------
    def connect(self, timeout: float | None = None) -> RemoteTTS:
        """Wait until connected; ``ServerUnavailableError`` after ``timeout`` seconds."""
        self._check_thread()
        with self._attempts:
            if self._connected.is_set():
                return self
            failures = self._failures
            self._loop.call_soon_threadsafe(self._wake)  # try now, not after the backoff
            self._attempts.wait_for(
                lambda: self._connected.is_set() or self._failures > failures,
                self._connect_timeout if timeout is None else timeout,
            )
            if not self._connected.is_set():
                raise ServerUnavailableError(
                    f"cannot reach the TTS server at {self.url}: {self._last_error or 'timed out'}"
                )
        return self

    def session(
        self,
        options: UtteranceOptions | None = None,
        *,
        max_frames: int | None = None,
        text_language: str | None = None,
        timestamps: bool = False,
        on_admission_wait: Callable[[AdmissionWait], None] | None = None,
        **keywords: Any,
    ) -> RemoteSession:
        """A session on the server (waits until it is open there; raises what it refused).

        As ``PocketTTS.session``: ``options`` (or its fields as keywords) are the session's
        defaults; ``max_frames`` is the server's to bound (refused here)."""
        if max_frames is not None:
            raise TypeError("max_frames is not offered by the TTS server")
        defaults = UtteranceOptions.build(options, **keywords)
        start = p.Start(
            context=f"s{next(self._ids)}",
            voice=_voice_name(defaults.voice),
            temperature=defaults.temperature,
            seed=defaults.seed,
            eos_threshold=defaults.eos_threshold,
            normalize=True if defaults.normalize is None else defaults.normalize,
            lexicon=None if defaults.lexicon is None else dict(defaults.lexicon),
            text_language=text_language,
            timestamps=timestamps,
            encoding="float32",
        )
        self.connect()
        session = RemoteSession(self, start.context, on_admission_wait)
        self._sessions[start.context] = session
        self.send(start)
        try:
            session.wait_started(REPLY_TIMEOUT_S)
        except BaseException:
            self._sessions.pop(start.context, None)
            raise
        return session

    def has_speech(
        self,
        text: str,
        language: str | None = None,
        *,
        normalize: bool = True,
        lexicon: Mapping[str, str] | None = None,
    ) -> bool:
        """Whether ``text`` has a letter or a digit of any script (``PocketTTS.has_speech``
        asks the pack's tokenizer, which is the server's: a text it cannot say comes back as
        an utterance with no audio)."""
        return any(c.isalnum() for c in text)

    def voice_state(self, voice: Any = None) -> None:
        """Check that the server speaks with ``voice`` (None: its default); raises why not."""
        self.check_voice(voice)

    def check_voice(self, voice: Any = None) -> None:
        name = _voice_name(voice)
        self.connect()
        check_id = next(self._ids)
        answer: concurrent.futures.Future[p.VoiceChecked] = concurrent.futures.Future()
        self._voice_checks[check_id] = answer
        self.send(p.CheckVoice(check_id, name))
        try:
            result = answer.result(REPLY_TIMEOUT_S)
        except concurrent.futures.TimeoutError:
            raise ServerUnavailableError(f"the TTS server at {self.url} did not answer") from None
        finally:
            self._voice_checks.pop(check_id, None)
        if result.error_code is not None:
            raise _error_of(p.Error(None, result.error_code, result.message or ""))

    def close(self) -> None:
        """Close the connection and stop its thread."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._wake)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=REPLY_TIMEOUT_S)

    # -- sending (any thread) ---------------------------------------------------------
    def send(self, message: p.ClientMessage) -> None:
        """Queue a message for the server (dropped while disconnected: sessions fail then)."""
        text = p.encode(message)
        with contextlib.suppress(RuntimeError):  # the loop is closed
            self._loop.call_soon_threadsafe(self._enqueue, text)

    def _enqueue(self, text: str) -> None:
        if self._outgoing is not None:
            self._outgoing.put_nowait(text)

    def forget(self, session: RemoteSession) -> None:
        self._sessions.pop(session.context_id, None)

    def _check_thread(self) -> None:
        if threading.current_thread() is self._thread:
            raise RuntimeError("RemoteTTS blocking calls cannot run on its connection thread")

    # -- the connection thread --------------------------------------------------------
    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._keep_connected())
        finally:
            self._loop.close()

    def _wake(self) -> None:
        if self._retry is not None:
            self._retry.set()

    async def _keep_connected(self) -> None:
        from websockets.asyncio.client import connect

        self._retry = asyncio.Event()
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else None
        delays = itertools.chain(BACKOFF_S, itertools.repeat(BACKOFF_S[-1]))
        while not self._closed:
            try:
                async with connect(
                    self.url,
                    additional_headers=headers,
                    compression=None,
                    proxy=None,
                    max_size=None,
                    open_timeout=self._connect_timeout,
                    close_timeout=1.0,
                ) as websocket:
                    first = await websocket.recv()
                    ready = p.decode_server(first)
                    if not isinstance(ready, p.Ready):
                        raise p.ProtocolError(p.CloseCode.MALFORMED, "expected 'ready'")
                    self._info = ready
                    self._outgoing = asyncio.Queue()
                    with self._attempts:
                        self._connected.set()
                        self._attempts.notify_all()
                    delays = itertools.chain(BACKOFF_S, itertools.repeat(BACKOFF_S[-1]))
                    await self._serve(websocket)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                with self._attempts:
                    self._last_error = e
                    self._failures += 1
                    self._attempts.notify_all()
            finally:
                self._connected.clear()
                self._outgoing = None
                self._lost()
            if self._closed:
                return
            self._retry.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._retry.wait(), next(delays))

    async def _serve(self, websocket: Any) -> None:
        """Send the queued messages and dispatch what arrives, until one side stops."""
        outgoing = self._outgoing
        assert outgoing is not None

        async def send() -> None:
            while True:
                await websocket.send(await outgoing.get())

        async def closing() -> None:
            while not self._closed:
                self._retry.clear()
                await self._retry.wait()

        async def receive() -> None:
            async for message in websocket:
                self._dispatch(message)

        tasks = [asyncio.create_task(job()) for job in (send, receive, closing)]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()  # raises the reason the connection ended
            code = websocket.close_code
            if code not in (None, p.CloseCode.NORMAL) and not self._closed:
                raise ConnectionError(f"closed by the server ({code}: {websocket.close_reason})")
        finally:
            for task in tasks:
                task.cancel()

    def _dispatch(self, data: str | bytes) -> None:
        if isinstance(data, bytes):
            header, samples = p.unpack_audio(data)
            session = self._sessions.get(header.context)
            if session is not None:
                session.audio(header, np.frombuffer(samples, dtype="<f4"))
            return
        message = p.decode_server(data)
        if isinstance(message, p.VoiceChecked):
            answer = self._voice_checks.get(message.id)
            if answer is not None and not answer.done():
                answer.set_result(message)
            return
        context = getattr(message, "context", None)
        session = self._sessions.get(context) if context is not None else None
        if session is not None:
            session.control(message)
        elif isinstance(message, p.Error):
            logger.warning("TTS server: %s: %s", message.code, message.message)

    def _lost(self) -> None:
        """The connection ended: every open session fails, every question is unanswered."""
        error = ServerUnavailableError(
            f"lost the connection to the TTS server at {self.url}: "
            f"{self._last_error or 'closed'}; retrying in the background"
        )
        for session in list(self._sessions.values()):
            session.fail(error)
        self._sessions.clear()
        for answer in self._voice_checks.values():
            if not answer.done():
                answer.set_exception(error)


class RemoteSession(ChannelOutput["AudioFrame | Marker"]):
    """A session on the server, with ``Session``'s interface (see the module docstring)."""

    def __init__(
        self,
        remote: RemoteTTS,
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
        flush = p.Flush(
            self.context_id,
            self._next_utterance(),
            voice=_voice_name(utterance.voice),
            temperature=utterance.temperature,
            eos_threshold=utterance.eos_threshold,
            seed=utterance.seed,
        )
        self._remote.send(flush)
        return [flush.utterance]

    @property
    def holds_fed_text(self) -> bool:
        """False: the server holds the fed text, and a marker placed while it holds some
        waits there for the chunk that text becomes (as the service holds its frames)."""
        return False

    def mark(self, payload: Any) -> None:
        """``Marker(payload)`` in the output after the audio of everything queued so far."""
        with self._lock:
            self._check_open()
            mark_id = next(self._mark_ids)
            self._marks[mark_id] = payload
        self._remote.send(p.Mark(self.context_id, mark_id))

    def finish(self) -> None:
        """No more text: iteration ends once everything queued has been spoken."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._remote.send(p.End(self.context_id))

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
        self._remote.send(p.Cancel(self.context_id))
        return True

    def _text(self, text: str, complete: bool, options: UtteranceOptions) -> int:
        message = p.Text(
            self.context_id,
            self._next_utterance(),
            text,
            complete=complete,
            voice=_voice_name(options.voice),
            temperature=options.temperature,
            eos_threshold=options.eos_threshold,
            seed=options.seed,
            normalize=options.normalize,
            lexicon=None if options.lexicon is None else dict(options.lexicon),
        )
        self._remote.send(message)
        return message.utterance

    def _next_utterance(self) -> int:
        with self._lock:
            index = next(self._utterances)
            self._pending.add(index)
            return index

    # -- state ------------------------------------------------------------------------
    @property
    def pending(self) -> int:
        """Utterances whose end has not come back yet (0 once stopped)."""
        return 0 if self._cancelled or self._failure is not None else len(self._pending)

    @property
    def is_idle(self) -> bool:
        return self.pending == 0

    @property
    def is_closed(self) -> bool:
        return self._closed

    @property
    def is_cancelled(self) -> bool:
        return self._cancelled

    # -- from the connection thread ---------------------------------------------------
    def wait_started(self, timeout: float) -> None:
        try:
            self._started.result(timeout)
        except concurrent.futures.TimeoutError:
            raise ServerUnavailableError("the TTS server did not open the session") from None

    def audio(self, header: p.AudioHeader, samples: np.ndarray) -> None:
        if not samples.size:
            return  # an encoder's tail; float32 has none
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

    def control(self, message: p.ServerMessage) -> None:
        if isinstance(message, p.Started):
            _resolve(self._started)
        elif isinstance(message, p.UtteranceEnd):
            with self._lock:
                self._pending.discard(message.utterance)
            end = AudioFrame(_EMPTY, 0, 0, message.utterance, is_last_in_utterance=True)
            self._frames.put(end)
        elif isinstance(message, p.MarkerReached):
            with self._lock:
                payload = self._marks.pop(message.id, None)
            self._frames.put(Marker(payload))
        elif isinstance(message, p.Admitted):
            if self._on_admission_wait is not None:
                self._on_admission_wait(
                    AdmissionWait(self.context_id, 0, message.active, message.waited)
                )
        elif isinstance(message, p.Done):
            self._remote.forget(self)
            self._frames.close()
            _resolve(self._stopped)
        elif isinstance(message, p.Cancelled):
            self._remote.forget(self)
            _resolve(self._stopped)
        elif isinstance(message, p.Error):
            self._remote.forget(self)
            error = _error_of(message)
            if not self._started.done():
                self._started.set_exception(error)
            self.fail(error)

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

    def _check_open(self) -> None:
        if self._closed:
            state = "cancelled" if self._cancelled else "finished"
            if self._failure is not None:
                state = f"stopped by an error ({self._failure})"
            raise SessionClosedError(
                f"this session was {state}: no more text can be enqueued. "
                "Start a new session with tts.session()."
            )


def _resolve(future: concurrent.futures.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _voice_name(voice: Any) -> str | None:
    """A voice as the server takes it: a name of its voices (or None: its default)."""
    if voice is None or isinstance(voice, str):
        return voice
    raise UnknownVoiceError(
        f"a TTS server takes voices by name (GET /v1/voices lists them), not a "
        f"{type(voice).__name__}; put voice files in the server's --voices-dir"
    )


__all__ = ["BACKOFF_S", "CONNECT_TIMEOUT_S", "RemoteSession", "RemoteTTS"]
