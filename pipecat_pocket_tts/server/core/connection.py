"""One connection of the server: its messages in, in order, each handled against its contexts.

A ``Connection`` reads the client's messages (through its ``Dialect``), keeps the connection's
limits (message size, text over its life, open contexts, idleness) and handles each of our
messages in order as it arrives: ``start`` opens a context (one engine ``Session``),
``text``/``flush``/``mark``/``end``/``cancel`` go to the context they name, ``voice``,
``check_text`` and ``ping`` are answered at once. A connection is idle while its contexts have
nothing queued: one that stays idle and sends nothing (keepalives included) for
``idle_timeout`` seconds is closed, so a client holds a slot only while it speaks or says
something. Text work beyond ``OFF_LOOP_CHARS`` and opening a session (the voice's prefill)
run off the event loop. What goes out is the
contexts' (``contexts.py``), through one ordered sender (``outbox.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from ... import wire
from ...engine import PocketTTS, PocketTTSError, UnknownVoiceError
from ...engine.contract import OFF_LOOP_CHARS, SpeechProbe
from .contexts import ClientMark, Context, Contexts
from .dialect import Dialect, Reply
from .limits import Limits
from .metrics import ServerMetrics
from .outbox import Outbox, Transport
from .voices import ServerVoices

_PROBES_KEPT = 16
"""Streamed texts being checked on one connection (the oldest is forgotten)."""


class _ContextEnded(Exception):
    """Raised inside the connection when a context must end with an error."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class Connection:
    """The contexts of one connection, on the server's one model.

    Args:
        transport: The connection's socket.
        tts: The server's model.
        voices: The server's voices.
        limits: The server's limits.
        metrics: The server's metrics.
        dialect: How the connection's clients speak.
        public: An error's message as a client may read it (the server's paths hidden).
        announce_idle: ``ready`` says the idle timeout (the client offered to ping).
    """

    def __init__(
        self,
        transport: Transport,
        tts: PocketTTS,
        voices: ServerVoices,
        limits: Limits,
        metrics: ServerMetrics,
        dialect: Dialect,
        public: Callable[[str], str] = str,
        *,
        announce_idle: bool = False,
    ) -> None:
        self._transport = transport
        self._announce_idle = announce_idle
        self._dialect = dialect
        self._tts = tts
        self._voices = voices
        self._limits = limits
        self._metrics = metrics
        self._outbox = Outbox(transport)
        self._contexts = Contexts(
            self._outbox,
            dialect,
            metrics,
            public,
            max_buffered_frames=limits.max_buffered_frames,
            on_idle=self._went_quiet,
        )
        self._quiet_since = 0.0
        """When the client last sent something, or the contexts last went quiet."""
        self._text_chars = 0
        self._probes: OrderedDict[int, SpeechProbe] = OrderedDict()
        """Streamed texts being checked, by the client's probe number."""
        self._draining = False
        self._handling = False
        """A request's handler is running (it may await)."""

    async def run(self) -> None:
        """Serve the connection until the client leaves or breaks a rule."""
        tts = self._tts
        ready = wire.Ready(
            tts.pack_name,
            self._voices.names,
            self._voices.default,
            tts.sample_rate,
            1920,
            self._limits.idle_timeout if self._announce_idle else None,
        )
        for data in self._dialect.hello(ready):
            self._outbox.put(data)
        self._quiet_since = asyncio.get_running_loop().time()
        sender = asyncio.create_task(self._outbox.run())
        try:
            await self._receive()
        finally:
            await self._contexts.end_all()
            self._outbox.close()
            with contextlib.suppress(Exception):
                await sender

    def drain(self) -> None:
        """The server is stopping: close (going away) once nothing is left to speak."""
        self._draining = True
        self._close_if_drained()

    def abort(self, reason: str) -> None:
        """Close now (going away), dropping what is left to send."""
        self._outbox.close_after(wire.CloseCode.GOING_AWAY, reason, drop=True)

    def _went_quiet(self) -> None:
        """A context went quiet: the idle time counts from now."""
        self._quiet_since = asyncio.get_running_loop().time()
        self._close_if_drained()

    def _close_if_drained(self) -> None:
        """Close (going away) when draining and nothing is left to speak; not while a
        request's handler runs (a cancel awaits its tick before it acknowledges)."""
        if self._handling or not self._draining:
            return
        if self._contexts.idle:
            reason = "the server is shutting down: reconnect"
            self._outbox.close_after(wire.CloseCode.GOING_AWAY, reason)

    async def _next_message(self) -> Mapping[str, Any] | None:
        """The client's next message; None once the connection was idle for idle_timeout."""
        idle = self._limits.idle_timeout
        loop = asyncio.get_running_loop()
        receiving = asyncio.ensure_future(self._transport.receive())
        try:
            while True:
                quiet = self._contexts.idle
                wait = self._quiet_since + idle - loop.time() if quiet else idle
                if quiet and wait <= 0 and not receiving.done():
                    return None
                done, _ = await asyncio.wait({receiving}, timeout=max(wait, 0))
                if done:
                    self._quiet_since = loop.time()
                    return receiving.result()
        finally:
            receiving.cancel()

    async def _receive(self) -> None:
        while True:
            message = await self._next_message()
            if message is None:
                # A normal close: clients reconnect quietly when they need to.
                reason = f"idle for {self._limits.idle_timeout:g} s: nothing sent, nothing to say"
                await self._close(wire.CloseCode.NORMAL, reason, farewell=False)
                return
            if message["type"] == "websocket.disconnect":
                return
            text = message.get("text")
            if text is None:
                await self._close(wire.CloseCode.MALFORMED, "binary messages are not accepted")
                return
            if len(text) > self._limits.max_message_bytes:
                await self._close(wire.CloseCode.TOO_BIG, "message too big")
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
            except wire.ProtocolError as e:
                await self._close(e.code, str(e))
                return

    async def _close(self, code: int, reason: str, *, farewell: bool = True) -> None:
        self._metrics.closes.labels(str(code)).inc()
        for data in self._dialect.farewell(code, reason) if farewell else []:
            self._outbox.put(data)
        self._outbox.close_after(code, reason, drop=True)

    # -- requests ---------------------------------------------------------------------
    async def _handle(self, request: wire.ClientMessage) -> None:
        if isinstance(request, wire.Ping):
            self._contexts.say(wire.Pong())
            return
        if isinstance(request, wire.CheckVoice):
            await self._check_voice(request)
            return
        if isinstance(request, wire.CheckText):
            await self._check_text(request)
            return
        if isinstance(request, wire.Start):
            await self._start(request)
            return
        context = self._contexts.get(request.context)
        if context is None:
            # A context that ended (an error, a slow read) while the client was still sending
            # is no fault of the client's.
            if self._contexts.ended(request.context):
                return
            raise wire.ProtocolError(
                wire.CloseCode.MALFORMED, f"no context {request.context!r}: send 'start' first"
            )
        try:
            if isinstance(request, wire.Cancel):
                await self._contexts.cancel(context)
            elif isinstance(request, wire.End):
                context.session.finish()
            elif isinstance(request, wire.Mark):
                context.session.mark(ClientMark(request.id), after_fed_text=request.after_fed_text)
            else:
                await self._queue(context, request)
        except PocketTTSError as e:
            await self._contexts.fail(context, _error_code(e), str(e))
        except _ContextEnded as e:
            await self._contexts.fail(context, e.code, str(e))

    async def _start(self, request: wire.Start) -> None:
        contexts = self._contexts
        if contexts.get(request.context) is not None:
            contexts.error(
                request.context, wire.ErrorCode.BAD_REQUEST, "this context is open already"
            )
            return
        limit = self._limits.max_contexts_per_connection
        if len(contexts) >= limit:
            contexts.error(
                request.context,
                wire.ErrorCode.BAD_REQUEST,
                f"at most {limit} open contexts per connection: end or cancel one first",
            )
            return
        contexts.reopening(request.context)
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
                on_admission_wait=contexts.admission_observer(request.context),
            )
        except (PocketTTSError, TypeError) as e:
            contexts.error(request.context, _error_code(e), str(e))
            return
        contexts.open(request.context, session, encoder)

    async def _queue(self, context: Context, request: wire.Text | wire.Flush) -> None:
        session = context.session
        # A text that names no voice speaks with its context's (the start's) voice.
        voice = None if request.voice is None else self._voices.resolve(request.voice)
        overrides: dict[str, Any] = {
            "voice": voice,
            "temperature": request.temperature,
            "eos_threshold": request.eos_threshold,
            "seed": request.seed,
            "speed": request.speed,
        }
        if isinstance(request, wire.Flush):
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
        self._contexts.mark_utterance_end(context, request.utterance)

    def _count_connection_text(self, text: str) -> None:
        self._text_chars += len(text)
        limit = self._limits.max_text_per_connection
        if self._text_chars > limit:
            raise wire.ProtocolError(
                wire.CloseCode.LIMIT, f"more than {limit} characters on one connection"
            )

    def _count_text(self, context: Context, text: str) -> None:
        limits = self._limits
        context.text_chars += len(text)
        self._count_connection_text(text)
        if context.text_chars > limits.max_text_per_context:
            raise _ContextEnded(
                wire.ErrorCode.TEXT_LIMIT,
                f"more than {limits.max_text_per_context} characters in one context",
            )

    async def _check_voice(self, request: wire.CheckVoice) -> None:
        try:
            voice = self._voices.resolve(request.voice)
            await asyncio.to_thread(self._tts.voice_state, voice)
        except PocketTTSError as e:
            answer = wire.VoiceChecked(request.id, _error_code(e), str(e))
        else:
            answer = wire.VoiceChecked(request.id)
        self._contexts.say(answer)

    async def _check_text(self, request: wire.CheckText) -> None:
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
                # The text goes on: the probe is kept for its next fragment.
                self._probes[request.probe] = probe
                while len(self._probes) > _PROBES_KEPT:
                    self._probes.popitem(last=False)
        except PocketTTSError as e:
            answer = wire.TextChecked(
                request.id, error_code=wire.ErrorCode.BAD_REQUEST, message=str(e)
            )
        else:
            answer = wire.TextChecked(request.id, speech=speech)
        self._contexts.say(answer)


def _error_code(error: Exception) -> str:
    """The ``error`` code of an engine error a request raised."""
    if isinstance(error, UnknownVoiceError):
        return wire.ErrorCode.UNKNOWN_VOICE
    return wire.ErrorCode.BAD_REQUEST


__all__ = ["Connection"]
