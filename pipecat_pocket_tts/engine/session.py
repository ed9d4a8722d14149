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
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .frames import AudioFrame, GenerationSettings
from .planner import FedText, TextPlanner, TimedText
from .runtime.channel import ChannelOutput, FrameChannel, Marker
from .runtime.scheduler import AdmissionWait, Scheduler, SessionLink
from .timing.heads import Heads
from .timing.word_timing import SessionWords
from .utterance import UtteranceOptions, UtteranceRun

if TYPE_CHECKING:
    from .backends.base import FlowState
    from .text.prepare import PreparedChunk

_session_ids = itertools.count()


class Session(ChannelOutput["AudioFrame | Marker"]):
    """Utterances in, frames and markers out, with one voice, RNG and decoder state throughout.

    Made by ``PocketTTS.session()``. Text goes in whole (``enqueue``) or streamed (``feed``
    fragments, then ``flush``); none of these block. Iterate with ``for item in session`` or
    ``async for item in session``: ``AudioFrame``s, and a ``Marker`` for each ``mark()``
    (none if ``mark`` is never called). ``cancel()`` (or ``await acancel()``) stops within one
    frame. Use it as a (async) context manager to cancel on exit.

    Order: a marker comes out after every frame of the text given before ``mark()`` was
    called, before any frame of later text; it is dropped on cancel. Text fed but still held
    by the text stream (an unfinished sentence) is waited for: the marker is held until the
    chunk that text becomes is queued (the next ``feed`` or ``flush`` that queues one), and
    dropped if the text becomes none (a ``flush`` that queues nothing, a ``feed`` that fails).
    """

    def __init__(
        self,
        *,
        scheduler: Scheduler,
        planner: TextPlanner,
        resolve_voice: Callable[[Any], FlowState],
        defaults: UtteranceOptions,
        max_frames: int | None = None,
        timestamps: bool = False,
        timestamp_heads: Heads | None = None,
        on_admission_wait: Callable[[AdmissionWait], None] | None = None,
    ) -> None:
        """``defaults``: every field set (voice, temperature, eos_threshold, normalize); its
        seed seeds the session's random generator."""
        self._planner = planner
        self._resolve_voice = resolve_voice
        self._defaults = replace(defaults, seed=None)
        self._voice_state = resolve_voice(defaults.voice)
        self._max_frames = max_frames
        name = f"pocket-tts-session-{next(_session_ids)}"

        self._lock = threading.Lock()
        self._frames: FrameChannel[AudioFrame | Marker] = FrameChannel()
        self._closed = False  # no more enqueue (finish or cancel)
        self._cancelled = False
        self._failure: BaseException | None = None
        self._enqueued = 0
        self._feed_lock = threading.Lock()
        self._feed_stream: FedText | None = None
        self._timestamps = timestamps  # frames carry the caller's words (AudioFrame.words)
        self._heads = timestamp_heads  # None: word times are estimated
        self._feed_timed: TimedText | None = None
        self._held: list[Marker] = []  # markers waiting for the fed text's next chunk
        # The session's word clock, fed every frame in output order by its link.
        words = SessionWords(planner.config.mimi.frame_rate) if timestamps else None
        # The link refers back to the session only weakly, so a session dropped without
        # finish() or cancel() is collected, and its finalizer stops the link's work.
        failed = _weakly(self._failed)
        self._link = SessionLink(
            scheduler, defaults.seed, self._frames, failed, name, words, on_admission_wait
        )
        weakref.finalize(self, self._link.abandon)

    # -- input --------------------------------------------------------------------------
    def enqueue(
        self, text: str, options: UtteranceOptions | None = None, **keywords: Any
    ) -> int | None:
        """Queue a complete text as one utterance; its index, or None when it has nothing to say.

        ``options`` (or its fields as keywords: ``voice``, ``temperature``, ``eos_threshold``,
        ``seed``, ``normalize``, ``lexicon``) apply to this utterance only; ``seed`` restarts
        the session's random generator from that seed here (later utterances continue from
        there). Raises ``SessionClosedError`` after ``finish()`` or ``cancel()``.
        """
        self._check_open()
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        options = UtteranceOptions.build(options, **keywords).over(self._defaults)
        run = self._run(options)
        utterance = self._planner.prepare(
            text, normalize=options.normalize, lexicon=options.lexicon, timestamps=self._timestamps
        )
        if not utterance.chunks:
            return None
        return self._submit(utterance.chunks, run, utterance.timed)

    def feed(
        self, text: str, options: UtteranceOptions | None = None, **keywords: Any
    ) -> list[int]:
        """Add streamed text (LLM tokens, any fragments); the indices of utterances it queued.

        The text stream (normalized by whole sentences, the first sentence alone, an overlong
        sentence cut early, work linear in the text) releases prepared chunks as soon as they
        are certain; each is queued as one utterance, exactly as ``enqueue`` of the whole text
        would prepare it. ``flush()`` ends the text. The options (as in ``enqueue``) apply to
        the utterances this call queues, ``seed`` to the first of them; ``normalize`` and
        ``lexicon`` to the text this call starts (ignored mid-text).
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        self._check_open()
        options = UtteranceOptions.build(options, **keywords).over(self._defaults)
        run = self._run(options)
        with self._feed_lock:
            if self._feed_stream is None:
                self._feed_stream = self._planner.fed_text(
                    normalize=options.normalize,
                    lexicon=options.lexicon,
                    timestamps=self._timestamps,
                )
                self._feed_timed = self._feed_stream.timed
            try:
                chunks = self._feed_stream.push(text)
            except BaseException:
                self._held.clear()  # the chunk their text waited for is never made
                raise
            return self._submit_fed(chunks, run)

    def flush(self, options: UtteranceOptions | None = None, **keywords: Any) -> list[int]:
        """The fed text is complete: queue what the text stream holds; the new indices.

        The options (as in ``feed``) apply to the utterances this call queues. Feeding again
        afterwards starts a new text (its first sentence goes alone again).
        """
        self._check_open()
        run = self._run(UtteranceOptions.build(options, **keywords).over(self._defaults))
        with self._feed_lock:
            stream, self._feed_stream = self._feed_stream, None
            chunks = stream.flush() if stream is not None else []
            indices = self._submit_fed(chunks, run)
            self._held.clear()  # the fed text is all queued: what still waits followed none
            self._feed_timed = None
            return indices

    def _holds_fed_text(self) -> bool:
        """True while text given to ``feed`` waits in the text stream (not queued yet)."""
        stream = self._feed_stream
        return stream is not None and bool(stream.pending_text.strip())

    def mark(self, payload: Any, *, after_fed_text: bool = True) -> None:
        """Put ``Marker(payload)`` in the output after the audio of the text given so far.

        While fed text waits in the text stream, the marker waits for the chunk it becomes
        (see the class docstring); ``after_fed_text=False`` places it after what is queued
        now instead. Thread-safe; a marker with nothing queued before it comes out at once (it
        needs no compute, so it never waits for a slot of the scheduler). Dropped by
        ``cancel()``. Raises ``SessionClosedError`` after ``finish()`` or ``cancel()``.
        """
        marker = Marker(payload)
        with self._feed_lock, self._lock:
            self._check_open()
            if after_fed_text and self._holds_fed_text():
                self._held.append(marker)
            else:
                self._link.notice(marker)

    def _run(self, options: UtteranceOptions) -> UtteranceRun:
        """Checked options (defaults filled in) resolved, before any text is taken."""
        voice_state = (
            self._voice_state
            if options.voice is self._defaults.voice
            else self._resolve_voice(options.voice)
        )
        settings = GenerationSettings(
            temperature=options.temperature,  # type: ignore[arg-type]  # filled by defaults
            eos_threshold=options.eos_threshold,  # type: ignore[arg-type]
            max_frames=self._max_frames,
        )
        return UtteranceRun(voice_state, settings, options.seed)

    def _submit_fed(self, chunks: list[PreparedChunk], run: UtteranceRun) -> list[int]:
        """Queue fed chunks, one utterance each; markers held for them follow."""
        indices = []
        for chunk in chunks:
            indices.append(self._submit([chunk], run, self._feed_timed))
            run = replace(run, restart_seed=None)  # the generator restarts once, at the first
        if indices:
            held, self._held = self._held, []
            with self._lock:
                for marker in held:
                    self._link.notice(marker)
        return indices

    def _submit(
        self, chunks: list[PreparedChunk], run: UtteranceRun, timed: TimedText | None = None
    ) -> int:
        """Queue prepared chunks as one utterance; its index."""
        with self._lock:
            self._check_open()
            index = self._enqueued
            self._enqueued += 1
            self._link.speak(index, chunks, run, timed, self._heads)
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
        """``cancel()`` without blocking the event loop: no tick starts for the session from
        the call on (``stop``, here), then the wait for a tick in flight runs off the loop."""
        self.stop()
        await asyncio.to_thread(self.cancel)

    def stop(self) -> int:
        """The first half of ``cancel()``, which never waits: the session is cancelled and no
        scheduler tick starts for it afterwards, but one in flight may still be running (call
        ``cancel``/``acancel`` next to wait for it). The ticks that computed for it so far."""
        with self._lock:
            self._closed = True
            self._cancelled = True
        return self._link.stop()

    @property
    def compute_ticks(self) -> int:
        """Scheduler ticks that computed for this session, each counted as it ends (once
        ``cancel()`` returned, the count no longer moves)."""
        return self._link.ticks

    def close(self) -> None:
        """Same as ``cancel()``."""
        self.cancel()

    # -- state (pending, is_idle, is_closed, is_cancelled: ChannelOutput) --------------
    def _unfinished(self) -> int:
        return self._enqueued - self._link.done

    # -- output -------------------------------------------------------------------------
    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.cancel()

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.acancel()

    # -- helpers ------------------------------------------------------------------------
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
