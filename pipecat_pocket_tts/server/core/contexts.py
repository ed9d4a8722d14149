"""A connection's open contexts: each one's output pumped to the outbox in order, and endings.

A context is one engine ``Session`` opened by a client's ``start``. A task per context reads
the session and turns frames into the dialect's audio messages and markers into control
messages, in the session's order. A context with more than ``max_buffered_frames`` frames
waiting in the outbox (a client that stopped reading) ends with a ``slow_reader`` error and its
frames are dropped, so one client never grows the server's memory and no other connection
notices. A context ends with ``done``, with an error (``fail``), with a ``cancel`` (its compute
stopped as the cancel is handled: no scheduler tick starts for it afterwards, one in flight
ends) or with its connection (``end_all``); its queued output is dropped before the error or
the ``cancelled`` acknowledgement goes in.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ... import wire
from ...engine import SAMPLE_RATE, AdmissionWait, AudioFrame, FrameEncoder, Marker, Session
from .dialect import CloseAfter, Dialect
from .metrics import ContextPacer, ServerMetrics
from .outbox import Outbox

logger = logging.getLogger(__name__)

_ENDED_REMEMBERED = 1024
"""Ended context ids whose late messages are ignored, not refused."""


@dataclass(frozen=True)
class UtteranceEndMark:
    """The marker queued after a client utterance's text: ``utterance_end`` when reached."""

    utterance: int


@dataclass(frozen=True)
class ClientMark:
    """The marker of a client's ``mark``: ``marker`` when reached."""

    id: int


class Context:
    """One client context: its session, encoder, pacing and the frames it has waiting.

    Args:
        context_id: The client's name for it.
        session: Its engine session.
        encoder: How its samples become bytes.
        pacer: Its timing metrics.
    """

    def __init__(
        self, context_id: str, session: Session, encoder: FrameEncoder, pacer: ContextPacer
    ) -> None:
        self.id = context_id
        self.session = session
        self.encoder = encoder
        self.pacer = pacer
        self.utterances: dict[int, int] = {}
        """The client utterance of each engine utterance index."""
        self.text_chars = 0
        self.buffered = 0
        """Frames waiting in the outbox."""
        self.dropped = False
        """It ended early: nothing more of it goes out."""
        self.reader: asyncio.Task | None = None
        self.ends_owed = 0
        """Utterance ends marked in the session that its pump has not reached yet."""

    @property
    def owes_nothing(self) -> bool:
        """Whether everything asked of it is in the outbox: its compute is over, its pump
        reached its last utterance's end, and it was not ended (it would owe its ``done``)."""
        session = self.session
        return session.is_idle and not session.is_closed and self.ends_owed == 0


class Contexts:
    """The open contexts of one connection and everything they send.

    Args:
        outbox: The connection's ordered sender.
        dialect: How the connection's clients read our messages.
        metrics: The server's metrics.
        public: An error's message as a client may read it (the server's paths hidden).
        max_buffered_frames: The frames a context may have waiting before it is a slow reader.
        on_idle: Called when a context went quiet (its queue spoken, or it ended).
    """

    def __init__(
        self,
        outbox: Outbox,
        dialect: Dialect,
        metrics: ServerMetrics,
        public: Callable[[str], str],
        max_buffered_frames: int,
        on_idle: Callable[[], None],
    ) -> None:
        self._outbox = outbox
        self._dialect = dialect
        self._metrics = metrics
        self._public = public
        self._max_buffered = max_buffered_frames
        self._on_idle = on_idle
        self._open: dict[str, Context] = {}
        self._ended: OrderedDict[str, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._open)

    def get(self, context_id: str) -> Context | None:
        """The open context of that id, if any."""
        return self._open.get(context_id)

    def ended(self, context_id: str) -> bool:
        """Whether a context of that id ended lately (its late messages are ignored)."""
        return context_id in self._ended

    def reopening(self, context_id: str) -> None:
        """A ``start`` reuses the id: its late messages are no longer ignored."""
        self._ended.pop(context_id, None)

    @property
    def idle(self) -> bool:
        """Whether no open context has anything left to speak or to send: a frame its
        session computed but its pump has not queued yet is still owed."""
        return all(c.owes_nothing for c in self._open.values())

    def open(self, context_id: str, session: Session, encoder: FrameEncoder) -> Context:
        """Register a new context, tell the client, and start pumping its output.

        Args:
            context_id: The client's name for it.
            session: Its engine session, open.
            encoder: How its samples become bytes.

        Returns:
            The context.
        """
        context = Context(context_id, session, encoder, self._metrics.pacer())
        self._open[context.id] = context
        self._metrics.sessions.inc()
        self.say(wire.Started(context.id), context)
        context.reader = asyncio.create_task(self._pump(context))
        return context

    def mark_utterance_end(self, context: Context, utterance: int) -> None:
        """Queue ``utterance_end`` in the context's session, after its queued text; owed
        until the pump reaches it."""
        context.session.mark(UtteranceEndMark(utterance), after_fed_text=False)
        context.ends_owed += 1

    def say(self, message: wire.ServerMessage, context: Context | None = None) -> None:
        """Send one of our messages in the dialect's words, after what is queued."""
        text = getattr(message, "message", None)
        if text:
            # An error's words as a client may read them: no path of this machine's files.
            message = replace(message, message=self._public(text))  # type: ignore[type-var]
        for data in self._dialect.encode(message):
            if isinstance(data, CloseAfter):
                self._outbox.close_after(data.code, data.reason)
            else:
                self._outbox.put(data, context)

    def error(self, context_id: str | None, code: str, message: str) -> None:
        """Send an ``error`` (of a context, or of the connection) and count it."""
        self._metrics.errors.labels(code).inc()
        self.say(wire.Error(context_id, code, message))

    # -- output -----------------------------------------------------------------------
    async def _pump(self, context: Context) -> None:
        """Send the context's frames and markers in order; ``done`` at its end."""
        limit = self._max_buffered
        last_utterance = -1
        try:
            async for item in context.session:
                if context.dropped:
                    return
                if isinstance(item, Marker):
                    self._marker(context, item.payload)
                    continue
                if context.buffered >= limit:
                    await self.fail(
                        context,
                        wire.ErrorCode.SLOW_READER,
                        f"more than {limit} frames waited for the client: it reads too slowly",
                    )
                    return
                last_utterance = self._audio(context, item)
                # A backlog of frames goes out in slices: other tasks run between frames.
                await asyncio.sleep(0)
            tail = context.encoder.flush()
            if tail:
                header = wire.AudioHeader(context.id, last_utterance, 0, 0, last=True)
                self._put_audio(context, header, tail)
            self.say(wire.Done(context.id), context)
            context.pacer.finish()
            self.forget(context)
            self._on_idle()
        except asyncio.CancelledError:
            raise
        except Exception as e:
            logger.warning("%s context %s failed: %s", self._dialect.name, context.id, e)
            await self.fail(context, wire.ErrorCode.SYNTHESIS, f"{type(e).__name__}: {e}")

    def _marker(self, context: Context, payload: Any) -> None:
        if isinstance(payload, UtteranceEndMark):
            context.ends_owed -= 1
            self.say(wire.UtteranceEnd(context.id, payload.utterance), context)
            if context.session.is_idle:
                context.pacer.pause()
                self._on_idle()
        elif isinstance(payload, ClientMark):
            self.say(wire.MarkerReached(context.id, payload.id), context)

    def _audio(self, context: Context, frame: AudioFrame) -> int:
        utterance = context.utterances.get(frame.utterance_index, -1)
        if frame.is_last_in_utterance:
            context.utterances.pop(frame.utterance_index, None)
        header = wire.AudioHeader(
            context.id,
            utterance,
            frame.chunk_index,
            frame.frame_index,
            last=frame.is_last_in_utterance,
            words=[
                wire.WordTime(w.text, w.index, w.start, w.session_start, w.estimated)
                for w in frame.words
            ],
            completed_words=[
                wire.WordTime(
                    w.text, w.index, w.start, w.session_start, w.estimated, w.end, w.session_end
                )
                for w in frame.completed_words
            ],
        )
        self._put_audio(context, header, context.encoder.encode(frame.samples))
        # The frame's seconds, shorter or longer at a speed other than 1.
        context.pacer.frame(frame.samples.shape[0] / SAMPLE_RATE)
        return utterance

    def _put_audio(self, context: Context, header: wire.AudioHeader, samples: bytes) -> None:
        *before, audio = self._dialect.audio(header, samples)
        for data in before:
            self._outbox.put(data, context)
        self._outbox.put(audio, context, audio=True)

    # -- endings ----------------------------------------------------------------------
    async def cancel(self, context: Context) -> None:
        """Stop the context's compute as the cancel arrives (no tick starts for it after
        this); acknowledge once the tick in flight, if any, is over and nothing of it is left
        to send. The ticks computed in between go to the ``cancel_ticks`` metric."""
        self.forget(context)
        self._outbox.drop(context)
        self._metrics.cancel_ticks.observe(await _halt(context.session))
        await self._stop_reader(context)
        self.say(wire.Cancelled(context.id))

    async def fail(self, context: Context, code: str, message: str) -> None:
        """End ``context`` now with an error (its queued frames are dropped)."""
        if context.dropped:
            return
        self.forget(context)
        self._outbox.drop(context)
        await _halt(context.session)
        if context.reader is not asyncio.current_task():
            await self._stop_reader(context)
        self.error(context.id, code, message)
        self._on_idle()

    def forget(self, context: Context) -> None:
        """The context is no longer open; its id is remembered as ended."""
        if self._open.pop(context.id, None) is not None:
            self._metrics.sessions.dec()
        self._ended[context.id] = None
        while len(self._ended) > _ENDED_REMEMBERED:
            self._ended.popitem(last=False)

    async def _stop_reader(self, context: Context) -> None:
        reader = context.reader
        if reader is not None and not reader.done():
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader

    def admission_observer(self, context_id: str) -> Callable[[AdmissionWait], None]:
        """A session's ``on_admission_wait`` (called on the scheduler's thread): metrics, and
        an ``admitted`` message to the client once it got a slot after a wait.

        Args:
            context_id: The context the session is opened for.

        Returns:
            The observer.
        """
        metrics = self._metrics
        loop = asyncio.get_running_loop()

        def observe(event: AdmissionWait) -> None:
            if event.waited is None:
                metrics.sessions_waiting.inc()
                return
            metrics.sessions_waiting.dec()
            metrics.admission_waits.observe(event.waited)
            message = wire.Admitted(context_id, event.waited, event.active)
            # A closed loop has nobody left to tell.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self.say, message)

        return observe

    async def end_all(self) -> None:
        """The connection ends: every context's compute stops now, before any waiting."""
        contexts = list(self._open.values())
        for context in contexts:
            self.forget(context)
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


__all__ = ["ClientMark", "Context", "Contexts", "UtteranceEndMark"]
