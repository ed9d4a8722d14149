"""A speaking session: a queue of utterances in, a stream of 80 ms frames out.

One session owns everything that makes its audio one continuous voice: the sampler's random
generator, the Mimi streaming state (never reset, so no seam between chunks or utterances) and
the prefilled voice state every chunk starts from. Its work runs off the caller's thread, on
the model's scheduler (``runtime.session_link.SessionLink``: batched with every other stream):

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

from .audio.shaping import OutputShaper, Shape
from .frames import AudioFrame, GenerationSettings
from .runtime.channel import ChannelOutput, FrameChannel, Marker
from .runtime.scheduler import Scheduler
from .runtime.session_link import SessionLink
from .runtime.slots import AdmissionWait
from .text.breaks import Break, BreakStream, Piece, has_breaks, split_breaks
from .text.planner import FedText, TextPlanner, TimedText
from .timing.heads import Heads
from .timing.word_timing import SessionWords
from .utterance import UtteranceOptions, UtteranceRun

if TYPE_CHECKING:
    from collections.abc import Mapping

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
        """Make a session; callers use ``PocketTTS.session()``.

        Args:
            scheduler: The scheduler that computes the session's frames.
            planner: Prepares the text into chunks.
            resolve_voice: Turns a voice option into a voice state.
            defaults: Every field set (voice, temperature, eos_threshold, normalize); its seed
                seeds the session's random generator.
            max_frames: At most this many frames per chunk, or None.
            timestamps: Frames carry the caller's words (``AudioFrame.words``).
            timestamp_heads: The attention heads that time the words (None: estimated).
            on_admission_wait: Called when the session waited for a scheduler slot.
        """
        self._planner = planner
        self._resolve_voice = resolve_voice
        self._defaults = replace(defaults, seed=None)
        self._voice_state = resolve_voice(defaults.voice)
        self._max_frames = max_frames
        name = f"pocket-tts-session-{next(_session_ids)}"

        self._lock = threading.Lock()
        self._frames: FrameChannel[AudioFrame | Marker] = FrameChannel()
        # Speed and <break/> pauses are applied on the way out (scheduler thread, in order).
        self._shaper = OutputShaper(self._frames)
        # Seconds of pause waiting for the next utterance (after a bare break).
        self._pause = 0.0
        # Set by finish or cancel: no more enqueue.
        self._closed = False
        self._cancelled = False
        self._failure: BaseException | None = None
        self._enqueued = 0
        self._feed_lock = threading.Lock()
        self._feed_stream: FedText | None = None
        self._feed_breaks: BreakStream | None = None
        self._feed_form: tuple[bool, Mapping[str, str] | None] = (True, None)
        self._timestamps = timestamps
        self._heads = timestamp_heads
        self._feed_timed: TimedText | None = None
        # Markers waiting for the fed text's next chunk.
        self._held: list[Marker] = []
        # The session's word clock, fed every frame in output order by its link.
        words = SessionWords(planner.config.mimi.frame_rate) if timestamps else None
        # The link refers back to the session only weakly, so a session dropped without
        # finish() or cancel() is collected, and its finalizer stops the link's work.
        failed = _weakly(self._failed)
        self._link = SessionLink(
            scheduler, defaults.seed, self._shaper, failed, name, words, on_admission_wait
        )
        weakref.finalize(self, self._link.abandon)

    # -- input --------------------------------------------------------------------------
    def enqueue(
        self, text: str, options: UtteranceOptions | None = None, **keywords: Any
    ) -> int | None:
        """Queue a complete text as one utterance.

        ``options`` (or its fields as keywords: ``voice``, ``temperature``, ``eos_threshold``,
        ``seed``, ``normalize``, ``lexicon``, ``speed``) apply to this utterance only; ``seed``
        restarts the session's random generator from that seed here (later utterances continue
        from there). ``<break time="500ms"/>`` tags (``text.breaks``) are pauses of that length,
        never said; a pause with no speech after it in the text comes before the session's next
        utterance.

        Args:
            text: The whole text of the utterance.
            options: This utterance's options; unset fields take the session's defaults.
            **keywords: The options' fields, instead of ``options``.

        Returns:
            The utterance's index, or None when the text has nothing to say.

        Raises:
            SessionClosedError: After ``finish()`` or ``cancel()``.
            BreakTagError: A malformed or overlong break; nothing is queued.
            TypeError: ``text`` is not a str.
        """
        self._check_open()
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        options = UtteranceOptions.build(options, **keywords).over(self._defaults)
        run = self._run(options)
        if has_breaks(text):
            chunks, timed, shape = self._plan_pieces(split_breaks(text), options)
        else:
            utterance = self._planner.prepare(
                text,
                normalize=options.normalize,
                lexicon=options.lexicon,
                timestamps=self._timestamps,
            )
            chunks, timed, shape = utterance.chunks, utterance.timed, Shape(run.speed)
        if not chunks:
            with self._lock:
                self._pause += shape.after
            return None
        return self._submit(chunks, run, timed, shape)

    def _plan_pieces(
        self, pieces: list[Piece], options: UtteranceOptions
    ) -> tuple[list[PreparedChunk], TimedText | None, Shape]:
        """A text's pieces between its breaks → its chunks, its words and where its pauses
        fall (before the chunk after each, or after the last)."""
        normalize, lexicon = bool(options.normalize), options.lexicon
        timed = self._planner.timed_text(normalize, lexicon) if self._timestamps else None
        chunks: list[PreparedChunk] = []
        before: dict[int, float] = {}
        pause = 0.0
        for piece in pieces:
            if isinstance(piece, Break):
                pause += piece.seconds
                if timed is not None:
                    # A space keeps the words on either side apart.
                    timed.add(" ", [], final=False)
                continue
            planned = self._planner.plan(piece, normalize=normalize, lexicon=lexicon)
            if timed is not None:
                timed.add(piece, planned, final=False)
            if planned and pause:
                before[len(chunks)] = pause
                pause = 0.0
            chunks += planned
        if timed is not None:
            timed.add("", [], final=True)
        return chunks, timed, Shape(options.speed or 1.0, before, pause)

    def feed(
        self, text: str, options: UtteranceOptions | None = None, **keywords: Any
    ) -> list[int]:
        """Add streamed text (LLM tokens, any fragments).

        The text stream (normalized by whole sentences, the first sentence alone, an overlong
        sentence cut early, work linear in the text) releases prepared chunks as soon as they
        are certain; each is queued as one utterance, exactly as ``enqueue`` of the whole text
        would prepare it. ``flush()`` ends the text. The options (as in ``enqueue``) apply to
        the utterances this call queues, ``seed`` to the first of them; ``normalize`` and
        ``lexicon`` to the text this call starts (ignored mid-text). A ``<break/>`` tag cuts
        the text there (what came before is queued at once, as if flushed) and pauses.

        Args:
            text: The next fragment of the text.
            options: As in ``enqueue``.
            **keywords: The options' fields, instead of ``options``.

        Returns:
            The indices of the utterances this call queued (often none).

        Raises:
            SessionClosedError: After ``finish()`` or ``cancel()``.
            BreakTagError: A malformed or overlong break.
            TypeError: ``text`` is not a str.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        self._check_open()
        options = UtteranceOptions.build(options, **keywords).over(self._defaults)
        run = self._run(options)
        with self._feed_lock:
            if self._feed_breaks is None:
                self._feed_breaks = BreakStream()
                self._feed_form = (bool(options.normalize), options.lexicon)
            try:
                return self._feed_pieces(self._feed_breaks.push(text), run)
            except BaseException:
                # The chunk their text waited for is never made.
                self._held.clear()
                raise

    def _feed_pieces(self, pieces: list[Piece], run: UtteranceRun) -> list[int]:
        """Fed text between breaks into the text stream, each break a cut and a pause."""
        indices: list[int] = []
        for piece in pieces:
            if isinstance(piece, Break):
                # The text goes on in a new utterance.
                chunks = self._fed_text().flush()
                indices += self._submit_fed(chunks, run, after=piece.seconds)
                self._feed_stream = None
            else:
                indices += self._submit_fed(self._fed_text().push(piece), run)
            if indices:
                # The generator restarts once, at the first utterance queued.
                run = replace(run, restart_seed=None)
        return indices

    def _fed_text(self) -> FedText:
        if self._feed_stream is None:
            normalize, lexicon = self._feed_form
            self._feed_stream = self._planner.fed_text(
                normalize=normalize, lexicon=lexicon, timestamps=self._timestamps
            )
            self._feed_timed = self._feed_stream.timed
        return self._feed_stream

    def flush(self, options: UtteranceOptions | None = None, **keywords: Any) -> list[int]:
        """Mark the fed text complete and queue what the text stream holds.

        Feeding again afterwards starts a new text (its first sentence goes alone again).

        Args:
            options: As in ``feed``; they apply to the utterances this call queues.
            **keywords: The options' fields, instead of ``options``.

        Returns:
            The indices of the utterances this call queued.

        Raises:
            SessionClosedError: After ``finish()`` or ``cancel()``.
        """
        self._check_open()
        run = self._run(UtteranceOptions.build(options, **keywords).over(self._defaults))
        with self._feed_lock:
            breaks, self._feed_breaks = self._feed_breaks, None
            indices = self._feed_pieces(breaks.flush(), run) if breaks is not None else []
            if indices:
                run = replace(run, restart_seed=None)
            stream, self._feed_stream = self._feed_stream, None
            chunks = stream.flush() if stream is not None else []
            indices += self._submit_fed(chunks, run)
            # The fed text is all queued, so what still waits followed no text.
            self._held.clear()
            self._feed_timed = None
            return indices

    def _holds_fed_text(self) -> bool:
        """True while text given to ``feed`` waits in the text stream (not queued yet)."""
        stream, breaks = self._feed_stream, self._feed_breaks
        return (stream is not None and bool(stream.pending_text.strip())) or (
            breaks is not None and breaks.holds_text
        )

    def mark(self, payload: Any, *, after_fed_text: bool = True) -> None:
        """Put ``Marker(payload)`` in the output after the audio of the text given so far.

        While fed text waits in the text stream, the marker waits for the chunk it becomes
        (see the class docstring); ``after_fed_text=False`` places it after what is queued
        now instead. Thread-safe; a marker with nothing queued before it comes out at once (it
        needs no compute, so it never waits for a slot of the scheduler). Dropped by
        ``cancel()``.

        Args:
            payload: What the marker carries back out.
            after_fed_text: Wait for the fed text still held (False: after what is queued).

        Raises:
            SessionClosedError: After ``finish()`` or ``cancel()``.
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
        return UtteranceRun(voice_state, settings, options.seed, options.speed or 1.0)

    def _submit_fed(
        self, chunks: list[PreparedChunk], run: UtteranceRun, *, after: float = 0.0
    ) -> list[int]:
        """Queue fed chunks, one utterance each; markers held for them follow. ``after``: a
        pause after the last (or before the next utterance when there is none)."""
        indices = []
        for i, chunk in enumerate(chunks):
            pause = after if i == len(chunks) - 1 else 0.0
            shape = Shape(run.speed, after=pause)
            indices.append(self._submit([chunk], run, self._feed_timed, shape))
            # The generator restarts once, at the first chunk.
            run = replace(run, restart_seed=None)
        if not chunks and after:
            with self._lock:
                self._pause += after
        if indices:
            held, self._held = self._held, []
            with self._lock:
                for marker in held:
                    self._link.notice(marker)
        return indices

    def _submit(
        self,
        chunks: list[PreparedChunk],
        run: UtteranceRun,
        timed: TimedText | None = None,
        shape: Shape | None = None,
    ) -> int:
        """Queue prepared chunks as one utterance shaped so; its index."""
        shape = shape or Shape(run.speed)
        with self._lock:
            self._check_open()
            index = self._enqueued
            self._enqueued += 1
            # A pause written before this utterance comes first.
            if self._pause:
                before = {**shape.before, 0: shape.before.get(0, 0.0) + self._pause}
                shape = replace(shape, before=before)
                self._pause = 0.0
            self._shaper.expect(index, shape)
            self._link.speak(index, chunks, run, timed, self._heads)
        return index

    def finish(self) -> None:
        """No more text: iteration ends once everything queued has been spoken.

        Text fed but not flushed is flushed first.
        """
        if (self._feed_breaks is not None or self._feed_stream is not None) and not self._closed:
            self.flush()
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._link.finish()

    def cancel(self) -> None:
        """Stop now: drop queued text, markers and unread frames.

        Returns once no computation runs for the session. Idempotent; iteration ends without
        an error.
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
        """Cancel without waiting: the first half of ``cancel()``.

        No scheduler tick starts for the session afterwards, but one in flight may still be
        running (call ``cancel``/``acancel`` next to wait for it).

        Returns:
            The scheduler ticks that computed for the session so far.
        """
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
            # A failed session takes no more text.
            self._closed = True
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
