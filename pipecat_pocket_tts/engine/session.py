"""A speaking session: a queue of utterances in, a stream of 80 ms frames out.

One session owns everything that makes its audio one continuous voice: the sampler's random
generator, the Mimi streaming state (never reset, so no seam between chunks or utterances) and
the prefilled voice state every chunk starts from. Its work runs off the caller's thread:

    enqueue ─▶ [utterance queue] ─▶ FlowLM thread: prefill, step, sample ─▶ [latents]
          ─▶ Mimi thread: decode ─▶ [frame channel] ─▶ for / async for

With ``overlap_decode`` the Mimi decode of frame n runs beside the FlowLM step of frame n+1
(NumPy releases the GIL in BLAS); without it one thread does both in turn. Both threads check
the cancel flag before every frame, and ``cancel()`` returns only after both have stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import os
import queue
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import SessionClosedError
from .scheduler import SessionLink
from .synthesis import (
    AudioDecoder,
    AudioFrame,
    GenerationSettings,
    TextPlanner,
    generate_chunk,
)
from .text.normalize import checked_lexicon

if TYPE_CHECKING:
    from .backends.base import Backend, FlowState
    from .scheduler import Scheduler
    from .text.chunking import TextChunk
    from .text.prepare import ChunkStream, PreparedChunk

_END: Any = object()  # end of the frame stream
_FINISH: Any = object()  # no more utterances
_session_ids = itertools.count()


@dataclass(frozen=True, eq=False)
class _Utterance:
    index: int
    chunks: list[PreparedChunk]
    voice_state: FlowState
    settings: GenerationSettings
    seed: int | None = None  # restart the session's random generator from it first


@dataclass(frozen=True, eq=False)
class _DecodeJob:
    latent: np.ndarray  # [latent_dim]
    frame_index: int
    chunk_index: int
    utterance_index: int
    is_last_in_utterance: bool


class _FrameChannel:
    """A thread-safe FIFO of frames with blocking and asyncio consumers.

    Producers never block. Async consumers wait on a future that producers resolve through
    ``loop.call_soon_threadsafe``, so the event loop is never blocked.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._items: deque[AudioFrame] = deque()
        self._closed = False
        self._error: BaseException | None = None
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def put(self, item: AudioFrame) -> bool:
        """Append a frame; False (dropped) once the channel is closed."""
        with self._cond:
            if self._closed:
                return False
            self._items.append(item)
            self._cond.notify_all()
            waiters, self._waiters = self._waiters, []
        _wake(waiters)
        return True

    def close(self, error: BaseException | None = None, *, discard: bool = False) -> None:
        """End the stream after the queued frames (all dropped with ``discard``)."""
        with self._cond:
            if discard:
                self._items.clear()
            if not self._closed:
                self._closed = True
                self._error = error
            self._cond.notify_all()
            waiters, self._waiters = self._waiters, []
        _wake(waiters)

    @property
    def closed(self) -> bool:
        return self._closed

    def get(self) -> AudioFrame:
        """The next frame, waiting for it; ``_END`` at the end (raises a worker's error)."""
        with self._cond:
            while not self._items and not self._closed:
                self._cond.wait()
            return self._take()

    async def aget(self) -> AudioFrame:
        """Like ``get`` without blocking the running event loop."""
        loop = asyncio.get_running_loop()
        while True:
            with self._cond:
                if self._items or self._closed:
                    return self._take()
                waiter: asyncio.Future[None] = loop.create_future()
                self._waiters.append((loop, waiter))
            try:
                await waiter
            finally:
                with self._cond:
                    if (loop, waiter) in self._waiters:
                        self._waiters.remove((loop, waiter))

    def _take(self) -> AudioFrame:
        if self._items:
            return self._items.popleft()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        return _END


def _wake(waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]]) -> None:
    for loop, waiter in waiters:
        with contextlib.suppress(RuntimeError):  # the loop was closed meanwhile
            loop.call_soon_threadsafe(_resolve, waiter)


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class _InlineDecode:
    """Decode on the FlowLM thread, right after each sample."""

    def __init__(self, handle: Callable[[_DecodeJob], None]) -> None:
        self._handle = handle

    def submit(self, job: _DecodeJob) -> None:
        self._handle(job)

    def close(self) -> None:
        pass


class _ThreadedDecode:
    """Decode on a thread of its own, so it overlaps the next FlowLM step."""

    def __init__(
        self, handle: Callable[[_DecodeJob], None], on_error: Callable[[], None], name: str
    ) -> None:
        self._handle = handle
        self._on_error = on_error
        self._jobs: queue.SimpleQueue[_DecodeJob | None] = queue.SimpleQueue()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, job: _DecodeJob) -> None:
        self._jobs.put(job)

    def close(self) -> None:
        """Wait until every submitted job is decoded (or dropped); re-raise a decode error."""
        self._jobs.put(None)
        self._thread.join()
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            if self.error is not None:
                continue
            try:
                self._handle(job)
            except BaseException as exc:
                self.error = exc
                self._on_error()


class Session:
    """Utterances in, frames out, with one voice, RNG and decoder state throughout.

    Made by ``PocketTTS.session()``. ``enqueue`` and ``finish`` never block; iterate with
    ``for frame in session`` or ``async for frame in session``; ``cancel()`` (or ``await
    acancel()``) stops within one frame. Use it as a (async) context manager to cancel on exit.
    """

    def __init__(
        self,
        *,
        backend: Backend,
        planner: TextPlanner,
        voice_state: FlowState,
        resolve_voice: Callable[[Any], FlowState],
        settings: GenerationSettings,
        seed: int | None = None,
        normalize: bool = True,
        lexicon: Mapping[str, str] | None = None,
        overlap_decode: bool = True,
        scheduler: Scheduler | None = None,
    ) -> None:
        """``scheduler``: run on the model's shared scheduler (batched with every other
        session); None runs this session on threads of its own."""
        self._backend = backend
        self._planner = planner
        self._voice_state = voice_state
        self._resolve_voice = resolve_voice
        self._settings = settings
        self._normalize = normalize
        self._lexicon = checked_lexicon(lexicon)
        self._overlap = overlap_decode
        self._rng = np.random.default_rng(seed)
        self._decoder = AudioDecoder(backend)
        self._name = f"pocket-tts-session-{next(_session_ids)}"

        self._lock = threading.Lock()
        self._utterances: queue.SimpleQueue[_Utterance | Any] = queue.SimpleQueue()
        self._frames = _FrameChannel()
        self._stop = threading.Event()  # cancel() or a failure: stop computing now
        self._closed = False  # no more enqueue (finish or cancel)
        self._cancelled = False
        self._failure: BaseException | None = None
        self._worker: threading.Thread | None = None
        self._enqueued = 0
        self._done = 0
        self._feed_lock = threading.Lock()
        self._feed_stream: ChunkStream | None = None
        self._link: SessionLink | None = None
        if scheduler is not None:
            self._link = SessionLink(
                scheduler,
                seed=seed,
                on_frame=self._scheduled_frame,
                on_notice=self._scheduled_notice,
                on_error=self._scheduled_error,
                name=self._name,
            )

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
        continues_sentence: bool = False,
    ) -> int | None:
        """Queue an utterance; its index, or None when the text has nothing to say.

        The overrides apply to this utterance only (``lexicon`` replaces the session's);
        ``seed`` restarts the session's random generator from that seed at this utterance
        (later utterances continue from there). ``continues_sentence``: the text goes on
        with a sentence the previous utterance began (a chunk of ``text_stream`` marked
        mid-sentence), so it is not prepared as a sentence start. Raises
        ``SessionClosedError`` after ``finish()`` or ``cancel()``.
        """
        self._check_open()
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
            raise TypeError(f"seed must be an int or None, got {type(seed).__name__}")
        chunks = self._planner.plan(
            text,
            normalize=self._normalize if normalize is None else normalize,
            lexicon=self._lexicon if lexicon is None else lexicon,
            continues_sentence=continues_sentence,
        )
        if not chunks:
            return None
        settings = self._settings
        if temperature is not None:
            settings = replace(settings, temperature=check_temperature(temperature))
        if eos_threshold is not None:
            settings = replace(settings, eos_threshold=check_eos_threshold(eos_threshold))
        voice_state = self._voice_state if voice is None else self._resolve_voice(voice)
        with self._lock:
            self._check_open()
            index = self._enqueued
            self._enqueued += 1
            if self._link is not None:
                self._link.speak(index, chunks, voice_state, settings, seed)
                return index
            self._utterances.put(_Utterance(index, chunks, voice_state, settings, seed))
            if self._worker is None:
                self._worker = threading.Thread(
                    target=self._run, name=f"{self._name}-flow", daemon=True
                )
                self._worker.start()
        return index

    def feed(
        self,
        text: str,
        *,
        voice: Any = None,
        temperature: float | None = None,
        eos_threshold: float | None = None,
    ) -> list[int]:
        """Add streamed text (LLM tokens, any fragments); the indices of utterances it queued.

        The session's text stream (``text_stream()``: normalized by whole sentences, the first
        sentence alone, an overlong sentence cut early) releases chunks as soon as they are
        certain; each is queued as one utterance, prepared exactly as ``enqueue`` of the whole
        text would prepare it. ``flush()`` ends the text. The overrides apply to the
        utterances this call queues.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        self._check_open()
        with self._feed_lock:
            if self._feed_stream is None:
                self._feed_stream = self.text_stream()
            chunks = self._feed_stream.push(text)
            return self._enqueue_chunks(chunks, voice, temperature, eos_threshold)

    def flush(
        self,
        *,
        voice: Any = None,
        temperature: float | None = None,
        eos_threshold: float | None = None,
    ) -> list[int]:
        """The fed text is complete: queue what the text stream holds; the new indices.

        Feeding again afterwards starts a new text (its first sentence goes alone again).
        """
        self._check_open()
        with self._feed_lock:
            stream, self._feed_stream = self._feed_stream, None
            chunks = stream.flush() if stream is not None else []
            return self._enqueue_chunks(chunks, voice, temperature, eos_threshold)

    def text_stream(
        self, *, normalize: bool | None = None, lexicon: Mapping[str, str] | None = None
    ) -> ChunkStream:
        """A text stream of this session's pack and normalization (overrides possible).

        ``push`` fragments and ``flush`` at the end; queue each chunk it releases with
        ``enqueue(chunk.text, normalize=False, continues_sentence=chunk.is_mid_sentence)``
        (what ``feed`` does). For a consumer keeping several texts apart on one session.
        """
        return self._planner.stream(
            normalize=self._normalize if normalize is None else normalize,
            lexicon=self._lexicon if lexicon is None else lexicon,
        )

    def _enqueue_chunks(
        self,
        chunks: list[TextChunk],
        voice: Any,
        temperature: float | None,
        eos_threshold: float | None,
    ) -> list[int]:
        indices = []
        for chunk in chunks:
            index = self.enqueue(
                chunk.text,
                voice=voice,
                temperature=temperature,
                eos_threshold=eos_threshold,
                normalize=False,  # the text stream normalized whole sentences
                continues_sentence=chunk.is_mid_sentence,
            )
            if index is not None:
                indices.append(index)
        return indices

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
            if self._link is not None:
                self._link.notice(_FINISH)
                return
            self._utterances.put(_FINISH)
            if self._worker is None:
                self._frames.close()

    def cancel(self) -> None:
        """Stop now: drop queued text and unread frames; return once no computation runs.

        Idempotent; iteration ends without an error.
        """
        with self._lock:
            self._closed = True
            self._cancelled = True
            self._halt()
            worker = self._worker
        if self._link is not None:
            self._link.cancel()
        self._frames.close(discard=True)
        if worker is not None and worker is not threading.current_thread():
            worker.join()

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
        return self._enqueued - self._done

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
    def __iter__(self) -> Iterator[AudioFrame]:
        while (frame := self._frames.get()) is not _END:
            yield frame

    def __aiter__(self) -> AsyncIterator[AudioFrame]:
        return self

    async def __anext__(self) -> AudioFrame:
        frame = await self._frames.aget()
        if frame is _END:
            raise StopAsyncIteration
        return frame

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.cancel()

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.acancel()

    # -- the worker ---------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            state = "cancelled" if self._cancelled else "finished"
            if self._failure is not None and not self._cancelled:
                state = f"stopped by an error ({type(self._failure).__name__}: {self._failure})"
            raise SessionClosedError(
                f"this session was {state}: no more text can be enqueued. "
                "Start a new session with tts.session()."
            )

    def _stopping(self) -> bool:
        return self._stop.is_set()

    def _halt(self) -> None:
        """Stop computing now, and wake the worker if it waits for text."""
        self._stop.set()
        self._utterances.put(_FINISH)

    def _run(self) -> None:
        """FlowLM thread: utterance after utterance, chunk after chunk, frame after frame."""
        error: BaseException | None = None
        sink: _InlineDecode | _ThreadedDecode
        if self._overlap:
            sink = _ThreadedDecode(self._decode_job, self._halt, f"{self._name}-mimi")
        else:
            sink = _InlineDecode(self._decode_job)
        try:
            while not self._stopping():
                utterance = self._utterances.get()
                if utterance is _FINISH or self._stopping():
                    break
                self._produce(utterance, sink)
        except BaseException as exc:
            error = exc
            self._stop.set()
        finally:
            try:
                sink.close()
            except BaseException as exc:
                error = error or exc
            if error is not None:
                with self._lock:
                    self._closed = True  # a failed session takes no more text
                    self._failure = error
            self._frames.close(error)

    def _produce(self, utterance: _Utterance, sink: _InlineDecode | _ThreadedDecode) -> None:
        last_chunk = len(utterance.chunks) - 1
        if utterance.seed is not None:  # only this thread draws from the generator
            self._rng = np.random.default_rng(utterance.seed)
        for chunk_index, plan in enumerate(utterance.chunks):
            if self._stopping():
                return
            for frame in generate_chunk(
                self._backend,
                utterance.voice_state,
                plan,
                utterance.settings,
                self._rng,
                self._stopping,
            ):
                sink.submit(
                    _DecodeJob(
                        latent=frame.latent,
                        frame_index=frame.frame_index,
                        chunk_index=chunk_index,
                        utterance_index=utterance.index,
                        is_last_in_utterance=frame.is_last and chunk_index == last_chunk,
                    )
                )

    # -- on the scheduler ---------------------------------------------------------------
    def _scheduled_frame(self, frame: AudioFrame) -> None:
        if self._frames.put(frame) and frame.is_last_in_utterance:
            self._done += 1

    def _scheduled_notice(self, payload: Any) -> None:
        if payload is _FINISH:
            self._frames.close()

    def _scheduled_error(self, error: BaseException) -> None:
        with self._lock:
            self._closed = True  # a failed session takes no more text
            self._failure = error
        self._frames.close(error)

    def _decode_job(self, job: _DecodeJob) -> None:
        """Mimi side: decode one latent and hand the frame to the consumers."""
        if self._stopping():
            return
        samples = self._decoder.decode(job.latent)
        if self._stopping():
            return
        self._frames.put(
            AudioFrame(
                samples=samples,
                frame_index=job.frame_index,
                chunk_index=job.chunk_index,
                utterance_index=job.utterance_index,
                is_last_in_utterance=job.is_last_in_utterance,
            )
        )
        if job.is_last_in_utterance:
            self._done += 1


def usable_cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def blas_threads() -> int:
    """Threads one BLAS call uses: the usual environment variables, else every core."""
    for name in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        value = os.environ.get(name, "").strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    return usable_cores()


def overlap_decode_by_default() -> bool:
    """Whether a session should decode on its own thread, beside the next FlowLM step.

    Only when two BLAS callers fit on the cores side by side: when one BLAS call already uses
    every core, a second concurrent caller makes both spin and wait. Measured on 2 cores
    (full-size English, NumPy): 1 BLAS thread: overlap 5.3× real time vs 3.5× inline; 2 BLAS
    threads: inline 5.0× (and a faster first frame) vs 3.0–3.7× overlapped.
    """
    return 2 * blas_threads() <= usable_cores()


def check_temperature(value: float) -> float:
    """A finite temperature ≥ 0, or ValueError."""
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"temperature must be a finite number ≥ 0, got {value!r}")
    return value


def check_eos_threshold(value: float) -> float:
    """A finite EOS threshold, or ValueError."""
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"eos_threshold must be a finite number, got {value!r}")
    return value


__all__ = [
    "AudioFrame",
    "Session",
    "blas_threads",
    "check_eos_threshold",
    "check_temperature",
    "overlap_decode_by_default",
    "usable_cores",
]
