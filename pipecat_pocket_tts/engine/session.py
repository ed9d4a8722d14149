"""A speaking session: a queue of utterances in, a stream of 80 ms frames out.

One session owns everything that makes its audio one continuous voice: the sampler's random
generator, the Mimi streaming state (never reset, so no seam between chunks or utterances) and
the prefilled voice state every chunk starts from. Its work runs off the caller's thread, on
the model's scheduler (``runtime.scheduler.SessionLink``: batched with every other stream):

    enqueue/feed/mark ─▶ link: prefill, step, sample, decode ─▶ [frame channel] ─▶ for / async for

With word timestamps on, each frame carries the caller's words that start in it
(``AudioFrame.words``) and those it completes (``AudioFrame.completed_words``).
``cancel()`` returns once no computation of the session runs.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .checks import (
    check_eos_threshold,
    check_lexicon,
    check_normalize,
    check_seed,
    check_temperature,
)
from .errors import SessionClosedError
from .runtime.channel import END, FrameChannel, Marker
from .runtime.scheduler import AdmissionWait, Scheduler, SessionLink
from .synthesis import AudioFrame, GenerationSettings, TextPlanner, TimedText
from .timing.heads import Heads
from .timing.word_timing import SessionWords

if TYPE_CHECKING:
    from .backends.base import FlowState
    from .text.prepare import PreparedChunk, TextStream

_session_ids = itertools.count()


class Session:
    """Utterances in, frames and markers out, with one voice, RNG and decoder state throughout.

    Made by ``PocketTTS.session()``. Text goes in whole (``enqueue``) or streamed (``feed``
    fragments, then ``flush``); none of these block. Iterate with ``for item in session`` or
    ``async for item in session``: ``AudioFrame``s, and a ``Marker`` for each ``mark()``
    (none if ``mark`` is never called). ``cancel()`` (or ``await acancel()``) stops within one
    frame. Use it as a (async) context manager to cancel on exit.

    Order: a marker comes out after every frame of the utterances queued before ``mark()``
    was called, before any frame of later ones; it is dropped on cancel. Text fed but still
    held by the text stream (an unfinished sentence) is not queued yet, so a marker placed
    after ``feed`` does not wait for it: ``flush()`` first to place a marker after all of it.
    """

    def __init__(
        self,
        *,
        scheduler: Scheduler,
        planner: TextPlanner,
        voice_state: FlowState,
        resolve_voice: Callable[[Any], FlowState],
        settings: GenerationSettings,
        seed: int | None = None,
        normalize: bool = True,
        lexicon: Mapping[str, str] | None = None,
        timestamps: bool = False,
        timestamp_heads: Heads | None = None,
        on_admission_wait: Callable[[AdmissionWait], None] | None = None,
    ) -> None:
        self._planner = planner
        self._voice_state = voice_state
        self._resolve_voice = resolve_voice
        self._settings = settings
        self._normalize = normalize
        self._lexicon = check_lexicon(lexicon)
        name = f"pocket-tts-session-{next(_session_ids)}"

        self._lock = threading.Lock()
        self._frames: FrameChannel[AudioFrame | Marker] = FrameChannel()
        self._closed = False  # no more enqueue (finish or cancel)
        self._cancelled = False
        self._failure: BaseException | None = None
        self._enqueued = 0
        self._feed_lock = threading.Lock()
        self._feed_stream: TextStream | None = None
        self._timestamps = timestamps  # frames carry the caller's words (AudioFrame.words)
        self._heads = timestamp_heads  # None: word times are estimated
        self._feed_timed: TimedText | None = None
        # The session's word clock, fed every frame in output order by its link.
        words = SessionWords(planner.config.mimi.frame_rate) if timestamps else None
        # The link refers back to the session only weakly, so a session dropped without
        # finish() or cancel() is collected, and its finalizer stops the link's work.
        failed = _weakly(self._failed)
        self._link = SessionLink(
            scheduler, seed, self._frames, failed, name, words, on_admission_wait
        )
        weakref.finalize(self, self._link.abandon)

    # -- input --------------------------------------------------------------------------
    def enqueue(
        self,
        text: str,
        *,
        voice: Any = None,
        temperature: float | None = None,
        eos_threshold: float | None = None,
        normalize: bool | None = None,
        lexicon: Mapping[str, str] | None = None,
        seed: int | None = None,
    ) -> int | None:
        """Queue a complete text as one utterance; its index, or None when it has nothing to say.

        The overrides apply to this utterance only (``lexicon`` replaces the session's);
        ``seed`` restarts the session's random generator from that seed at this utterance
        (later utterances continue from there). Raises ``SessionClosedError`` after
        ``finish()`` or ``cancel()``.
        """
        self._check_open()
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        overrides = self._overrides(voice, temperature, eos_threshold, seed)
        normalize = self._normalize if normalize is None else check_normalize(normalize)
        lexicon = self._lexicon if lexicon is None else check_lexicon(lexicon)
        chunks = self._planner.plan(text, normalize=normalize, lexicon=lexicon)
        if not chunks:
            return None
        timed = self._timed_text(normalize, lexicon)
        if timed is not None:
            timed.add(text, chunks, final=True)
        return self._submit(chunks, overrides, timed)

    def feed(
        self,
        text: str,
        *,
        voice: Any = None,
        temperature: float | None = None,
        eos_threshold: float | None = None,
        seed: int | None = None,
        normalize: bool | None = None,
        lexicon: Mapping[str, str] | None = None,
    ) -> list[int]:
        """Add streamed text (LLM tokens, any fragments); the indices of utterances it queued.

        The text stream (normalized by whole sentences, the first sentence alone, an overlong
        sentence cut early, work linear in the text) releases prepared chunks as soon as they
        are certain; each is queued as one utterance, exactly as ``enqueue`` of the whole text
        would prepare it. ``flush()`` ends the text. ``voice``, ``temperature`` and
        ``eos_threshold`` apply to the utterances this call queues, ``seed`` to the first of
        them; ``normalize`` and ``lexicon`` to the text this call starts (ignored mid-text).
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        self._check_open()
        overrides = self._overrides(voice, temperature, eos_threshold, seed)
        with self._feed_lock:
            if self._feed_stream is None:
                normalize = self._normalize if normalize is None else check_normalize(normalize)
                lexicon = self._lexicon if lexicon is None else check_lexicon(lexicon)
                self._feed_stream = self._planner.stream(normalize=normalize, lexicon=lexicon)
                self._feed_timed = self._timed_text(normalize, lexicon)
            chunks = self._feed_stream.push(text)
            if self._feed_timed is not None:
                self._feed_timed.add(text, chunks, final=False)
            return self._submit_each(chunks, overrides)

    def flush(
        self,
        *,
        voice: Any = None,
        temperature: float | None = None,
        eos_threshold: float | None = None,
        seed: int | None = None,
    ) -> list[int]:
        """The fed text is complete: queue what the text stream holds; the new indices.

        Feeding again afterwards starts a new text (its first sentence goes alone again).
        """
        self._check_open()
        overrides = self._overrides(voice, temperature, eos_threshold, seed)
        with self._feed_lock:
            stream, self._feed_stream = self._feed_stream, None
            chunks = stream.flush() if stream is not None else []
            if self._feed_timed is not None:
                self._feed_timed.add("", chunks, final=True)
            indices = self._submit_each(chunks, overrides)
            self._feed_timed = None
            return indices

    @property
    def holds_fed_text(self) -> bool:
        """True while text given to ``feed`` waits in the text stream (not queued yet)."""
        stream = self._feed_stream
        return stream is not None and bool(stream.pending_text.strip())

    def mark(self, payload: Any) -> None:
        """Put ``Marker(payload)`` in the output after the audio of everything queued so far.

        Thread-safe; a marker with nothing queued before it comes out at once. Dropped by
        ``cancel()``. Raises ``SessionClosedError`` after ``finish()`` or ``cancel()``.
        """
        marker = Marker(payload)
        with self._lock:
            self._check_open()
            self._link.notice(marker)

    def _overrides(
        self, voice: Any, temperature: Any, eos_threshold: Any, seed: Any
    ) -> tuple[FlowState, GenerationSettings, int | None]:
        """A call's checked overrides, before its text is taken (a bad value loses no text)."""
        seed = check_seed(seed)
        settings = self._settings
        if temperature is not None:
            settings = replace(settings, temperature=check_temperature(temperature))
        if eos_threshold is not None:
            settings = replace(settings, eos_threshold=check_eos_threshold(eos_threshold))
        voice_state = self._voice_state if voice is None else self._resolve_voice(voice)
        return voice_state, settings, seed

    def _submit_each(
        self,
        chunks: list[PreparedChunk],
        overrides: tuple[FlowState, GenerationSettings, int | None],
    ) -> list[int]:
        indices = []
        for chunk in chunks:
            indices.append(self._submit([chunk], overrides, self._feed_timed))
            overrides = (*overrides[:2], None)  # the generator restarts once, at the first
        return indices

    def _submit(
        self,
        chunks: list[PreparedChunk],
        overrides: tuple[FlowState, GenerationSettings, int | None],
        timed: TimedText | None = None,
    ) -> int:
        """Queue prepared chunks as one utterance; its index."""
        voice_state, settings, seed = overrides
        with self._lock:
            self._check_open()
            index = self._enqueued
            self._enqueued += 1
            self._link.speak(index, chunks, voice_state, settings, seed, timed, self._heads)
        return index

    def finish(self) -> None:
        """No more text: iteration ends once everything queued has been spoken.

        Text fed but not flushed is flushed first.
        """
        if self._feed_stream is not None and not self._closed:
            self.flush()
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._link.finish()

    def cancel(self) -> None:
        """Stop now: drop queued text, markers and unread frames; return once no computation
        runs. Idempotent; iteration ends without an error.
        """
        with self._lock:
            self._closed = True
            self._cancelled = True
        self._link.cancel()
        self._frames.close(discard=True)

    async def acancel(self) -> None:
        """``cancel()`` without blocking the event loop."""
        await asyncio.to_thread(self.cancel)

    def close(self) -> None:
        """Same as ``cancel()``."""
        self.cancel()

    # -- state --------------------------------------------------------------------------
    @property
    def pending(self) -> int:
        """Utterances enqueued whose last frame has not been produced yet (0 once stopped)."""
        if self._cancelled or self._failure is not None:
            return 0
        return self._enqueued - self._link.done

    @property
    def is_idle(self) -> bool:
        """True when nothing is queued or being spoken."""
        return self.pending == 0

    @property
    def is_closed(self) -> bool:
        """True after ``finish()`` or ``cancel()``."""
        return self._closed

    @property
    def is_cancelled(self) -> bool:
        return self._cancelled

    # -- output -------------------------------------------------------------------------
    def __iter__(self) -> Iterator[AudioFrame | Marker]:
        while (item := self._frames.get()) is not END:
            yield item

    def __aiter__(self) -> AsyncIterator[AudioFrame | Marker]:
        return self

    async def __anext__(self) -> AudioFrame | Marker:
        item = await self._frames.aget()
        if item is END:
            raise StopAsyncIteration
        return item

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.cancel()

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.acancel()

    # -- helpers ------------------------------------------------------------------------
    def _timed_text(self, normalize: bool, lexicon: Mapping[str, str] | None) -> TimedText | None:
        """A text's caller words for word timestamps (None when they are off)."""
        return self._planner.timed_text(normalize, lexicon) if self._timestamps else None

    def _check_open(self) -> None:
        if self._closed:
            state = "cancelled" if self._cancelled else "finished"
            if self._failure is not None and not self._cancelled:
                state = f"stopped by an error ({type(self._failure).__name__}: {self._failure})"
            raise SessionClosedError(
                f"this session was {state}: no more text can be enqueued. "
                "Start a new session with tts.session()."
            )

    def _failed(self, error: BaseException) -> None:
        with self._lock:
            self._closed = True  # a failed session takes no more text
            self._failure = error


def _weakly(method: Callable[[BaseException], None]) -> Callable[[BaseException], None]:
    """``method`` called through a weak reference to its object (a no-op once it is gone)."""
    ref = weakref.WeakMethod(method)

    def call(error: BaseException) -> None:
        target = ref()
        if target is not None:
            target(error)

    return call


__all__ = ["AudioFrame", "Marker", "Session"]
