"""A speaking session: a queue of utterances in, a stream of 80 ms frames out.

One session owns everything that makes its audio one continuous voice: the sampler's random
generator, the Mimi streaming state (never reset, so no seam between chunks or utterances) and
the prefilled voice state every chunk starts from. Its work runs off the caller's thread:

    enqueue/feed/mark ─▶ [queue] ─▶ FlowLM thread: prefill, step, sample ─▶ [latents, markers]
          ─▶ Mimi thread: decode ─▶ [frame channel: frames, markers] ─▶ for / async for

With ``overlap_decode`` the Mimi decode of frame n runs beside the FlowLM step of frame n+1
(NumPy releases the GIL in BLAS); without it one thread does both in turn. Both threads check
the cancel flag before every frame, and ``cancel()`` returns only after both have stopped.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import queue
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from .channel import (
    END,
    FINISH,
    FrameChannel,
    InlineDecode,
    Marker,
    ThreadedDecode,
    blas_threads,
    halt_worker,
    overlap_decode_by_default,
    serve_weakly,
    usable_cores,
)
from .checks import (
    check_eos_threshold,
    check_lexicon,
    check_normalize,
    check_seed,
    check_temperature,
)
from .errors import SessionClosedError
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
    from .text.prepare import PreparedChunk, TextStream

_session_ids = itertools.count()


@dataclass(frozen=True, eq=False)
class _Utterance:
    index: int
    chunks: list[PreparedChunk]
    voice_state: FlowState
    settings: GenerationSettings
    seed: int | None = None  # restart the session's random generator from it first


@dataclass(frozen=True, eq=False)
class _Overrides:
    """Checked per-utterance settings of one enqueue/feed/flush call."""

    voice_state: FlowState
    settings: GenerationSettings
    seed: int | None


@dataclass(frozen=True, eq=False)
class _DecodeJob:
    latent: np.ndarray  # [latent_dim]
    frame_index: int
    chunk_index: int
    utterance_index: int
    is_last_in_utterance: bool


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
        backend: Backend,
        planner: TextPlanner,
        voice_state: FlowState,
        resolve_voice: Callable[[Any], FlowState],
        settings: GenerationSettings,
        seed: int | None = None,
        normalize: bool = True,
        lexicon: Mapping[str, str] | None = None,
        overlap_decode: bool = True,
    ) -> None:
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
        self._utterances: queue.SimpleQueue[_Utterance | Marker | Any] = queue.SimpleQueue()
        self._frames: FrameChannel[AudioFrame | Marker] = FrameChannel()
        self._stop = threading.Event()  # cancel() or a failure: stop computing now
        self._closed = False  # no more enqueue (finish or cancel)
        self._cancelled = False
        self._failure: BaseException | None = None
        self._worker: threading.Thread | None = None
        self._enqueued = 0
        self._done = 0
        self._feed_lock = threading.Lock()
        self._feed_stream: TextStream | None = None

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
        chunks = self._planner.plan(
            text,
            normalize=self._normalize if normalize is None else check_normalize(normalize),
            lexicon=self._lexicon if lexicon is None else check_lexicon(lexicon),
        )
        if not chunks:
            return None
        return self._submit(chunks, overrides)

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
                self._feed_stream = self._planner.stream(
                    normalize=self._normalize if normalize is None else check_normalize(normalize),
                    lexicon=self._lexicon if lexicon is None else check_lexicon(lexicon),
                )
            chunks = self._feed_stream.push(text)
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
            return self._submit_each(chunks, overrides)

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
            if self._worker is None:  # nothing was ever queued: nothing to wait for
                self._frames.put(marker)
            else:
                self._utterances.put(marker)

    def _overrides(self, voice: Any, temperature: Any, eos_threshold: Any, seed: Any) -> _Overrides:
        """Check a call's overrides before its text is taken (a bad value loses no text)."""
        settings = self._settings
        if temperature is not None:
            settings = replace(settings, temperature=check_temperature(temperature))
        if eos_threshold is not None:
            settings = replace(settings, eos_threshold=check_eos_threshold(eos_threshold))
        voice_state = self._voice_state if voice is None else self._resolve_voice(voice)
        return _Overrides(voice_state, settings, check_seed(seed))

    def _submit_each(self, chunks: list[PreparedChunk], overrides: _Overrides) -> list[int]:
        indices = []
        for chunk in chunks:
            indices.append(self._submit([chunk], overrides))
            overrides = replace(overrides, seed=None)  # the generator restarts once, first
        return indices

    def _submit(self, chunks: list[PreparedChunk], overrides: _Overrides) -> int:
        """Queue prepared chunks as one utterance; its index."""
        with self._lock:
            self._check_open()
            index = self._enqueued
            self._enqueued += 1
            self._utterances.put(
                _Utterance(index, chunks, overrides.voice_state, overrides.settings, overrides.seed)
            )
            if self._worker is None:
                self._worker = threading.Thread(
                    target=serve_weakly,
                    args=(weakref.ref(self), self._utterances, self._stop),
                    name=f"{self._name}-flow",
                    daemon=True,
                )
                # Nobody holds the session any more (never finished nor cancelled): the
                # worker, which holds it only while it works on an item, ends.
                weakref.finalize(self, halt_worker, self._stop, self._utterances)
                self._worker.start()
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
            self._utterances.put(FINISH)
            if self._worker is None:
                self._frames.close()

    def cancel(self) -> None:
        """Stop now: drop queued text, markers and unread frames; return once no computation
        runs. Idempotent; iteration ends without an error.
        """
        with self._lock:
            self._closed = True
            self._cancelled = True
            self._halt()
            worker = self._worker
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
        halt_worker(self._stop, self._utterances)

    def _open_sink(self) -> InlineDecode[_DecodeJob | Marker] | ThreadedDecode[_DecodeJob | Marker]:
        """Where latents go to be decoded; it refers to this session only weakly."""
        session = weakref.ref(self)

        def decode(job: _DecodeJob | Marker) -> None:
            target = session()
            if target is not None:
                target._decode_job(job)

        if self._overlap:
            halt = functools.partial(halt_worker, self._stop, self._utterances)
            return ThreadedDecode(decode, halt, f"{self._name}-mimi")
        return InlineDecode(decode)

    def _serve(
        self,
        item: Any,
        sink: InlineDecode[_DecodeJob | Marker] | ThreadedDecode[_DecodeJob | Marker],
    ) -> None:
        if isinstance(item, Marker):
            sink.submit(item)  # after the decode of every frame submitted before it
        else:
            self._produce(item, sink)

    def _worker_ended(self, error: BaseException | None) -> None:
        if error is not None:
            with self._lock:
                self._closed = True  # a failed session takes no more text
                self._failure = error
        self._frames.close(error)

    def _produce(
        self,
        utterance: _Utterance,
        sink: InlineDecode[_DecodeJob | Marker] | ThreadedDecode[_DecodeJob | Marker],
    ) -> None:
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

    def _decode_job(self, job: _DecodeJob | Marker) -> None:
        """Mimi side: decode one latent and hand the frame (or a marker) to the consumers."""
        if self._stopping():
            return
        if isinstance(job, Marker):
            self._frames.put(job)
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


__all__ = [
    "AudioFrame",
    "Marker",
    "Session",
    "blas_threads",
    "overlap_decode_by_default",
    "usable_cores",
]
