"""One websocket connection of the server: its contexts (one engine ``Session`` each) and its
outbox.

Messages are handled in order as they arrive; text work beyond ``OFF_LOOP_CHARS`` and opening a
session (the voice's prefill) run off the event loop. Each context's output is read by a task
that turns frames into binary messages and markers into control messages, in the session's
order. Everything goes out through one ``Outbox``; a context with more than
``max_buffered_frames`` frames waiting there (a client that stopped reading) ends with a
``slow_reader`` error and its frames are dropped, so one client never grows the server's
memory and no other connection notices. A ``cancel`` stops the context's compute as it is
handled (no scheduler tick starts for it afterwards; one in flight ends), and the outbox drops
what it still holds of that context before the ``cancelled`` acknowledgement goes in.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import numpy as np
from starlette.websockets import WebSocket

from .. import wire as p
from ..engine import (
    SAMPLE_RATE,
    AdmissionWait,
    AudioFrame,
    Marker,
    PocketTTS,
    PocketTTSError,
    Session,
    UnknownVoiceError,
)
from ..engine.contract import OFF_LOOP_CHARS, SpeechProbe
from .dialect import CloseAfter, Dialect, Outgoing, Reply, SampleEncoder
from .metrics import ContextPacer, ServerMetrics
from .security import Limits
from .voices import ServerVoices

logger = logging.getLogger(__name__)

INTERNAL_ERROR = 1011  # the websocket close code of a server fault
_ENDED_REMEMBERED = 1024  # ended context ids whose late messages are ignored, not refused
_PROBES_KEPT = 16  # streamed texts being checked on one connection (the oldest is forgotten)


@dataclass(frozen=True)
class _UtteranceEnd:
    utterance: int


@dataclass(frozen=True)
class _ClientMark:
    id: int


class _ContextEnded(Exception):
    """Raised inside the connection when a context must end with an error."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class Context:
    """One client context: its session, encoder, pacing and the frames it has waiting."""

    def __init__(
        self, context_id: str, session: Session, encoder: SampleEncoder, pacer: ContextPacer
    ):
        self.id = context_id
        self.session = session
        self.encoder = encoder
        self.pacer = pacer
        self.utterances: dict[int, int] = {}  # engine utterance index → client utterance
        self.text_chars = 0
        self.buffered = 0  # frames in the outbox
        self.dropped = False  # ended early: nothing more of it goes out
        self.reader: asyncio.Task | None = None


class Outbox:
    """A connection's outgoing messages, sent in order by one task; a context's can be dropped."""

    def __init__(self, websocket: WebSocket) -> None:
        self._websocket = websocket
        self._items: deque[tuple[Outgoing, Context | None, bool]] = deque()
        self._ready = asyncio.Event()
        self._closed = False

    def put(self, data: Outgoing, context: Context | None = None, *, audio: bool = False) -> None:
        if self._closed or (context is not None and context.dropped):
            return
        if audio and context is not None:
            context.buffered += 1
        self._items.append((data, context, audio))
        self._ready.set()

    def drop(self, context: Context) -> None:
        """Nothing more of ``context`` goes out (what is queued is forgotten now)."""
        context.dropped = True
        self._items = deque(item for item in self._items if item[1] is not context)
        context.buffered = 0

    def close(self) -> None:
        self._closed = True
        self._ready.set()

    def close_after(self, code: int, reason: str, *, drop: bool = False) -> None:
        """Close the websocket once what is queued went out (``drop``: every context's
        queued output is forgotten first); nothing more is queued after this."""
        if drop:
            self._items = deque(item for item in self._items if item[1] is None)
        self.put(CloseAfter(code, reason))
        self.close()

    @property
    def empty(self) -> bool:
        return not self._items

    async def run(self) -> None:
        while True:
            while not self._items:
                if self._closed:
                    return
                self._ready.clear()
                await self._ready.wait()
            data, context, audio = self._items.popleft()
            if context is not None:
                if context.dropped:
                    continue
                if audio:
                    context.buffered -= 1
            if isinstance(data, CloseAfter):
                with contextlib.suppress(Exception):
                    reason = data.reason.encode()[:120].decode(errors="ignore")
                    await self._websocket.close(data.code, reason)
                return
            try:
                if isinstance(data, bytes):
                    await self._websocket.send_bytes(data)
                else:
                    await self._websocket.send_text(data)
            except Exception as e:  # never a sender that died silently
                logger.warning("closing a connection whose send failed: %s", e)
                with contextlib.suppress(Exception):
                    await self._websocket.close(INTERNAL_ERROR, "send failed")
                return


class Connection:
    """The contexts of one websocket, on the server's one model."""

    def __init__(
        self,
        websocket: WebSocket,
        tts: PocketTTS,
        voices: ServerVoices,
        limits: Limits,
        metrics: ServerMetrics,
        dialect: Dialect | None = None,
        public: Callable[[str], str] = str,
    ) -> None:
        """``public``: an error's message as a client may read it (the server's paths hidden)."""
        self._websocket = websocket
        self._dialect = dialect or Dialect()
        self._public = public
        self._tts = tts
        self._voices = voices
        self._limits = limits
        self._metrics = metrics
        self._contexts: dict[str, Context] = {}
        self._ended: OrderedDict[str, None] = OrderedDict()
        self._outbox = Outbox(websocket)
        self._text_chars = 0
        self._probes: OrderedDict[int, SpeechProbe] = OrderedDict()  # by the client's number
        self._draining = False
        self._handling = False  # a request's handler is running (it may await)

    async def run(self) -> None:
        """Serve the connection until the client leaves or breaks a rule."""
        tts = self._tts
        ready = p.Ready(
            tts.language, self._voices.names, self._voices.default, tts.sample_rate, 1920
        )
        for data in self._dialect.hello(ready):
            self._outbox.put(data)
        sender = asyncio.create_task(self._outbox.run())
        try:
            await self._receive()
        finally:
            await self._end_all()
            self._outbox.close()
            with contextlib.suppress(Exception):
                await sender

    def drain(self) -> None:
        """The server is stopping: close (going away) once nothing is left to speak."""
        self._draining = True
        self._close_if_drained()

    def abort(self, reason: str) -> None:
        """Close now (going away), dropping what is left to send."""
        self._outbox.close_after(p.CloseCode.GOING_AWAY, reason, drop=True)

    def _close_if_drained(self) -> None:
        """Close (going away) when draining and nothing is left to speak; not while a
        request's handler runs (a cancel awaits its tick before it acknowledges)."""
        if self._handling or not self._draining:
            return
        if all(c.session.is_idle for c in self._contexts.values()):
            reason = "the server is shutting down: reconnect"
            self._outbox.close_after(p.CloseCode.GOING_AWAY, reason)

    async def _receive(self) -> None:
        idle = self._limits.idle_timeout
        while True:
            try:  # a connection with no context open says something within idle_timeout
                waiting = self._websocket.receive()
                message = await asyncio.wait_for(waiting, None if self._contexts else idle)
            except TimeoutError:  # a normal close: clients reconnect quietly when they need to
                reason = f"idle for {idle:g} s with no context open"
                await self._close(p.CloseCode.NORMAL, reason, farewell=False)
                return
            if message["type"] == "websocket.disconnect":
                return
            text = message.get("text")
            if text is None:
                await self._close(p.CloseCode.MALFORMED, "binary messages are not accepted")
                return
            if len(text) > self._limits.max_message_bytes:
                await self._close(p.CloseCode.TOO_BIG, "message too big")
                return
            try:
                for request in self._dialect.decode(text):
                    if isinstance(request, Reply):
                        self._outbox.put(request.data)
                        continue
                    self._handling = True
                    try:
                        await self._handle(request)
                    finally:
                        self._handling = False
                self._close_if_drained()
            except p.ProtocolError as e:
                await self._close(e.code, str(e))
                return

    async def _close(self, code: int, reason: str, *, farewell: bool = True) -> None:
        self._metrics.closes.labels(str(code)).inc()
        for data in self._dialect.farewell(code, reason) if farewell else []:
            self._outbox.put(data)
        self._outbox.close_after(code, reason, drop=True)

    def _say(self, message: p.ServerMessage, context: Context | None = None) -> None:
        text = getattr(message, "message", None)
        if text:  # an error's words, as a client may read them: no path of this machine's
            message = replace(message, message=self._public(text))  # type: ignore[type-var]
        for data in self._dialect.encode(message):
            if isinstance(data, CloseAfter):
                self._outbox.close_after(data.code, data.reason)
            else:
                self._outbox.put(data, context)

    # -- requests ---------------------------------------------------------------------
    async def _handle(self, request: p.ClientMessage) -> None:
        if isinstance(request, p.CheckVoice):
            await self._check_voice(request)
            return
        if isinstance(request, p.CheckText):
            await self._check_text(request)
            return
        if isinstance(request, p.Start):
            await self._start(request)
            return
        context = self._contexts.get(request.context)
        if context is None:
            if request.context in self._ended:
                return  # it ended (an error, a slow read) while the client was still sending
            raise p.ProtocolError(
                p.CloseCode.MALFORMED, f"no context {request.context!r}: send 'start' first"
            )
        try:
            if isinstance(request, p.Cancel):
                await self._cancel(context)
            elif isinstance(request, p.End):
                context.session.finish()
            elif isinstance(request, p.Mark):
                context.session.mark(_ClientMark(request.id), after_fed_text=request.after_fed_text)
            else:
                await self._queue(context, request)
        except PocketTTSError as e:
            code = p.ErrorCode.UNKNOWN_VOICE if isinstance(e, UnknownVoiceError) else None
            await self._fail(context, code or p.ErrorCode.BAD_REQUEST, str(e))
        except _ContextEnded as e:
            await self._fail(context, e.code, str(e))

    async def _start(self, request: p.Start) -> None:
        if request.context in self._contexts:
            self._error(request.context, p.ErrorCode.BAD_REQUEST, "this context is open already")
            return
        if len(self._contexts) >= self._limits.max_contexts_per_connection:
            limit = self._limits.max_contexts_per_connection
            self._error(
                request.context,
                p.ErrorCode.BAD_REQUEST,
                f"at most {limit} open contexts per connection: end or cancel one first",
            )
            return
        self._ended.pop(request.context, None)
        metrics = self._metrics
        try:
            encoder = self._dialect.encoder(request)
            voice = self._voices.resolve(request.voice)
            session = await asyncio.to_thread(
                self._tts.session,
                voice=voice,
                temperature=request.temperature,
                seed=request.seed,
                eos_threshold=request.eos_threshold,
                normalize=request.normalize,
                lexicon=request.lexicon,
                text_language=request.text_language,
                timestamps=request.timestamps,
                speed=request.speed,
                on_admission_wait=self._admission_observer(request.context),
            )
        except (PocketTTSError, TypeError) as e:
            code = p.ErrorCode.UNKNOWN_VOICE if isinstance(e, UnknownVoiceError) else None
            self._error(request.context, code or p.ErrorCode.BAD_REQUEST, str(e))
            return
        context = Context(request.context, session, encoder, metrics.pacer())
        self._contexts[context.id] = context
        metrics.streams.inc()
        self._say(p.Started(context.id), context)
        context.reader = asyncio.create_task(self._read(context))

    async def _queue(self, context: Context, request: p.Text | p.Flush) -> None:
        session = context.session
        voice = self._voices.resolve(request.voice)
        overrides: dict[str, Any] = {
            "voice": voice,
            "temperature": request.temperature,
            "eos_threshold": request.eos_threshold,
            "seed": request.seed,
            "speed": request.speed,
        }
        if isinstance(request, p.Flush):
            indices = session.flush(**overrides)
        else:
            self._count_text(context, request.text)
            overrides["normalize"] = request.normalize
            overrides["lexicon"] = request.lexicon
            call: Callable[[], Any]
            if request.complete:

                def call() -> list[int]:
                    index = session.enqueue(request.text, **overrides)
                    return [] if index is None else [index]
            else:

                def call() -> list[int]:
                    return session.feed(request.text, **overrides)

            long = len(request.text) > OFF_LOOP_CHARS
            indices = await asyncio.to_thread(call) if long else call()
            if context.dropped:
                return
            context.pacer.text()
        for index in indices:
            context.utterances[index] = request.utterance
        session.mark(_UtteranceEnd(request.utterance), after_fed_text=False)

    def _count_connection_text(self, text: str) -> None:
        self._text_chars += len(text)
        limit = self._limits.max_text_per_connection
        if self._text_chars > limit:
            raise p.ProtocolError(
                p.CloseCode.LIMIT, f"more than {limit} characters on one connection"
            )

    def _count_text(self, context: Context, text: str) -> None:
        limits = self._limits
        context.text_chars += len(text)
        self._count_connection_text(text)
        if context.text_chars > limits.max_text_per_context:
            raise _ContextEnded(
                p.ErrorCode.TEXT_LIMIT,
                f"more than {limits.max_text_per_context} characters in one context",
            )

    async def _cancel(self, context: Context) -> None:
        """Stop the context's compute as the cancel arrives (no tick starts for it after
        this); acknowledge once the tick in flight, if any, is over and nothing of it is left
        to send. The ticks computed in between go to the ``cancel_ticks`` metric."""
        self._forget(context)
        self._outbox.drop(context)
        self._metrics.cancel_ticks.observe(await _halt(context.session))
        await self._stop_reader(context)
        self._say(p.Cancelled(context.id))

    async def _check_voice(self, request: p.CheckVoice) -> None:
        try:
            voice = self._voices.resolve(request.voice)
            await asyncio.to_thread(self._tts.voice_state, voice)
        except PocketTTSError as e:
            code = p.ErrorCode.UNKNOWN_VOICE if isinstance(e, UnknownVoiceError) else None
            answer = p.VoiceChecked(request.id, code or p.ErrorCode.BAD_REQUEST, str(e))
        else:
            answer = p.VoiceChecked(request.id)
        self._say(answer)

    async def _check_text(self, request: p.CheckText) -> None:
        """Answer whether the text says anything, as the engine's own check (long text off
        the loop; a plan is kept for the ``text`` that follows). A probe's fragments go to
        the probe the connection keeps for it, so a streamed text is read once."""
        tts = self._tts
        try:
            self._count_connection_text(request.text)
            options = {"normalize": request.normalize, "lexicon": request.lexicon}
            if request.probe is None:
                check = partial(tts.has_speech, request.text, request.text_language, **options)
            else:
                probe = self._probes.pop(request.probe, None)
                if probe is None:
                    probe = tts.speech_probe(request.text_language, **options)
                check = probe.flush if request.complete else partial(probe.push, request.text)
            long = len(request.text) > OFF_LOOP_CHARS
            speech = await asyncio.to_thread(check) if long else check()
            if request.probe is not None and not (speech or request.complete):
                self._probes[request.probe] = probe  # the text goes on
                while len(self._probes) > _PROBES_KEPT:
                    self._probes.popitem(last=False)
        except PocketTTSError as e:
            answer = p.TextChecked(request.id, error_code=p.ErrorCode.BAD_REQUEST, message=str(e))
        else:
            answer = p.TextChecked(request.id, speech=speech)
        self._say(answer)

    # -- output -----------------------------------------------------------------------
    async def _read(self, context: Context) -> None:
        """Send the context's frames and markers in order; ``done`` at its end."""
        limit = self._limits.max_buffered_frames
        last_utterance = -1
        try:
            async for item in context.session:
                if context.dropped:
                    return
                if isinstance(item, Marker):
                    self._marker(context, item.payload)
                    continue
                if context.buffered >= limit:
                    await self._fail(
                        context,
                        p.ErrorCode.SLOW_READER,
                        f"more than {limit} frames waited for the client: it reads too slowly",
                    )
                    return
                last_utterance = self._audio(context, item)
                await asyncio.sleep(0)  # a backlog of frames goes out in slices
            tail = context.encoder.encode(np.zeros(0, np.float32), last=True)
            if tail:
                header = p.AudioHeader(context.id, last_utterance, 0, 0, last=True)
                self._put_audio(context, header, tail)
            self._say(p.Done(context.id), context)
            context.pacer.finish()
            self._forget(context)
            self._close_if_drained()
        except asyncio.CancelledError:
            raise
        except Exception as e:
            logger.warning("context %s failed: %s", context.id, e)
            await self._fail(context, p.ErrorCode.SYNTHESIS, f"{type(e).__name__}: {e}")

    def _marker(self, context: Context, payload: Any) -> None:
        if isinstance(payload, _UtteranceEnd):
            self._say(p.UtteranceEnd(context.id, payload.utterance), context)
            if context.session.is_idle:
                context.pacer.pause()
                self._close_if_drained()
        elif isinstance(payload, _ClientMark):
            self._say(p.MarkerReached(context.id, payload.id), context)

    def _audio(self, context: Context, frame: AudioFrame) -> int:
        utterance = context.utterances.get(frame.utterance_index, -1)
        if frame.is_last_in_utterance:
            context.utterances.pop(frame.utterance_index, None)
        header = p.AudioHeader(
            context.id,
            utterance,
            frame.chunk_index,
            frame.frame_index,
            last=frame.is_last_in_utterance,
            words=[
                p.WordTime(w.text, w.index, w.start, w.session_start, w.estimated)
                for w in frame.words
            ],
            completed_words=[
                p.WordTime(
                    w.text, w.index, w.start, w.session_start, w.estimated, w.end, w.session_end
                )
                for w in frame.completed_words
            ],
        )
        self._put_audio(context, header, context.encoder.encode(frame.samples))
        context.pacer.frame(frame.samples.shape[0] / SAMPLE_RATE)  # shorter at speed
        return utterance

    def _put_audio(self, context: Context, header: p.AudioHeader, samples: bytes) -> None:
        *before, audio = self._dialect.audio(header, samples)
        for data in before:
            self._outbox.put(data, context)
        self._outbox.put(audio, context, audio=True)

    # -- endings ----------------------------------------------------------------------
    def _error(self, context_id: str | None, code: str, message: str) -> None:
        self._metrics.errors.labels(code).inc()
        self._say(p.Error(context_id, code, message))

    async def _fail(self, context: Context, code: str, message: str) -> None:
        """End ``context`` now with an error (its queued frames are dropped)."""
        if context.dropped:
            return
        self._forget(context)
        self._outbox.drop(context)
        await _halt(context.session)
        if context.reader is not asyncio.current_task():
            await self._stop_reader(context)
        self._error(context.id, code, message)
        self._close_if_drained()

    def _forget(self, context: Context) -> None:
        if self._contexts.pop(context.id, None) is not None:
            self._metrics.streams.dec()
        self._ended[context.id] = None
        while len(self._ended) > _ENDED_REMEMBERED:
            self._ended.popitem(last=False)

    async def _stop_reader(self, context: Context) -> None:
        reader = context.reader
        if reader is not None and not reader.done():
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader

    def _admission_observer(self, context_id: str) -> Callable[[AdmissionWait], None]:
        """A session's ``on_admission_wait`` (the scheduler's thread): metrics, and an
        ``admitted`` message to the client once it got a slot after a wait."""
        metrics = self._metrics
        loop = asyncio.get_running_loop()

        def observe(event: AdmissionWait) -> None:
            if event.waited is None:
                metrics.streams_waiting.inc()
                return
            metrics.streams_waiting.dec()
            metrics.admission_waits.observe(event.waited)
            message = p.Admitted(context_id, event.waited, event.active)
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody to tell
                loop.call_soon_threadsafe(self._say, message)

        return observe

    async def _end_all(self) -> None:
        contexts = list(self._contexts.values())
        for context in contexts:  # every context's compute stops now, before any waiting
            self._forget(context)
            self._outbox.drop(context)
            context.session.stop()
        for context in contexts:
            await context.session.acancel()
            await self._stop_reader(context)


async def _halt(session: Session) -> int:
    """Stop ``session``'s compute now (no tick starts for it afterwards), then wait off the
    loop for a tick in flight: the ticks that computed for it in between (at most 1)."""
    stopped_at = session.stop()
    await session.acancel()
    return session.compute_ticks - stopped_at


__all__ = ["Connection", "Context", "Outbox"]
