"""A session's own threads, when it runs without a scheduler: utterances in, frames out.

``SoloLink`` has the interface of ``scheduler.SessionLink`` (``speak``, ``notice``, ``finish``,
``cancel``, ``done``) so a session runs the same way on either:

    speak/notice ─▶ [queue] ─▶ FlowLM thread: prefill, step, sample ─▶ [latents, markers]
          ─▶ Mimi thread: decode ─▶ [frame channel: frames, markers]

With ``overlap`` the Mimi decode of frame n runs beside the FlowLM step of frame n+1; without
it one thread does both.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .runtime.channel import FrameChannel, InlineDecode, Marker, ThreadedDecode
from .synthesis import AudioDecoder, AudioFrame, GenerationSettings, TimedText, generate_chunk
from .timing.word_timing import FrameWords, SessionWords, WordTimes

if TYPE_CHECKING:
    from .backends.base import Backend, FlowState
    from .text.prepare import PreparedChunk
    from .timing.heads import Heads

_FINISH: Any = object()  # no more utterances


@dataclass(frozen=True, eq=False)
class _Utterance:
    index: int
    chunks: list[PreparedChunk]
    voice_state: FlowState
    settings: GenerationSettings
    seed: int | None = None  # restart the random generator from it first
    timed: TimedText | None = None  # its text's caller words (word timestamps on)
    heads: Heads | None = None  # attention heads the word timing reads (None: estimated)


@dataclass(frozen=True, eq=False)
class _DecodeJob:
    latent: np.ndarray  # [latent_dim]
    frame_index: int
    chunk_index: int
    utterance_index: int
    is_last_in_utterance: bool
    words: FrameWords | None = None  # word timing input (word timestamps on)


class SoloLink:
    """A session's FlowLM (and Mimi) threads, started with its first utterance.

    Frames and markers go into ``channel`` in order; ``on_failure`` gets the error that
    stopped the work, which then also ends the channel. ``done``: utterances whose last frame
    is out. The caller serializes ``speak``/``notice``/``finish`` (the session's lock).
    """

    def __init__(
        self,
        backend: Backend,
        seed: int | None,
        channel: FrameChannel[AudioFrame | Marker],
        on_failure: Callable[[BaseException], None],
        name: str,
        *,
        overlap: bool = True,
        words: SessionWords | None = None,
    ) -> None:
        self._backend = backend
        self._rng = np.random.default_rng(seed)
        self._decoder = AudioDecoder(backend)
        self._channel = channel
        self._on_failure = on_failure
        self._name = name
        self._overlap = overlap
        self._words = words
        self._utterances: queue.SimpleQueue[_Utterance | Marker | Any] = queue.SimpleQueue()
        self._stop = threading.Event()  # cancel() or a failure: stop computing now
        self._worker: threading.Thread | None = None
        self.done = 0

    def speak(
        self,
        utterance_index: int,
        chunks: list[PreparedChunk],
        voice_state: FlowState,
        settings: GenerationSettings,
        seed: int | None,
        timed: TimedText | None = None,
        heads: Heads | None = None,
    ) -> None:
        """Queue an utterance's prepared chunks (``seed``: restart the generator first)."""
        self._utterances.put(
            _Utterance(utterance_index, chunks, voice_state, settings, seed, timed, heads)
        )
        if self._worker is None:
            self._worker = threading.Thread(
                target=self._run, name=f"{self._name}-flow", daemon=True
            )
            self._worker.start()

    def notice(self, marker: Marker) -> None:
        """Put ``marker`` in the channel after every frame queued before it."""
        if self._worker is None:  # nothing was ever queued: nothing to wait for
            self._channel.put(marker)
        else:
            self._utterances.put(marker)

    def finish(self) -> None:
        """Close the channel after every frame queued so far."""
        self._utterances.put(_FINISH)
        if self._worker is None:
            self._channel.close()

    def abandon(self) -> None:
        """Its session was dropped without finish() or cancel(): stop, let the thread end."""
        self._halt()

    def cancel(self) -> None:
        """Drop everything; return once no computation runs."""
        self._halt()
        self._channel.close(discard=True)
        worker = self._worker
        if worker is not None and worker is not threading.current_thread():
            worker.join()

    def _stopping(self) -> bool:
        return self._stop.is_set()

    def _halt(self) -> None:
        """Stop computing now, and wake the worker if it waits for text."""
        self._stop.set()
        self._utterances.put(_FINISH)

    def _run(self) -> None:
        """FlowLM thread: utterance after utterance, chunk after chunk, frame after frame."""
        error: BaseException | None = None
        sink: InlineDecode[_DecodeJob | Marker] | ThreadedDecode[_DecodeJob | Marker]
        if self._overlap:
            sink = ThreadedDecode(self._decode_job, self._halt, f"{self._name}-mimi")
        else:
            sink = InlineDecode(self._decode_job)
        try:
            while not self._stopping():
                item = self._utterances.get()
                if item is _FINISH or self._stopping():
                    break
                if isinstance(item, Marker):
                    sink.submit(item)  # after the decode of every frame submitted before it
                else:
                    self._produce(item, sink)
        except BaseException as exc:
            error = exc
            self._stop.set()
        finally:
            try:
                sink.close()
            except BaseException as exc:
                error = error or exc
            if error is not None:
                self._on_failure(error)
            self._channel.close(error)

    def _produce(
        self,
        utterance: _Utterance,
        sink: InlineDecode[_DecodeJob | Marker] | ThreadedDecode[_DecodeJob | Marker],
    ) -> None:
        last_chunk = len(utterance.chunks) - 1
        if utterance.seed is not None:  # only this thread draws from the generator
            self._rng = np.random.default_rng(utterance.seed)
        timed = utterance.timed
        for chunk_index, plan in enumerate(utterance.chunks):
            if self._stopping():
                return
            timing = timed.chunk(plan, utterance.index) if timed else None
            for frame in generate_chunk(
                self._backend,
                utterance.voice_state,
                plan,
                utterance.settings,
                self._rng,
                self._stopping,
                heads=utterance.heads if timing else None,
            ):
                last = frame.is_last and chunk_index == last_chunk
                words = timing.frame(frame, last_in_utterance=last) if timing else None
                sink.submit(
                    _DecodeJob(
                        latent=frame.latent,
                        frame_index=frame.frame_index,
                        chunk_index=chunk_index,
                        utterance_index=utterance.index,
                        is_last_in_utterance=last,
                        words=words,
                    )
                )

    def _decode_job(self, job: _DecodeJob | Marker) -> None:
        """Mimi side: decode one latent and hand the frame (or a marker) to the consumers."""
        if self._stopping():
            return
        if isinstance(job, Marker):
            self._channel.put(job)
            return
        samples = self._decoder.decode(job.latent)
        if self._stopping():
            return
        words = WordTimes()
        if job.words is not None and self._words is not None:
            words = self._words.frame(samples, job.words)
        self._channel.put(
            AudioFrame(
                samples=samples,
                frame_index=job.frame_index,
                chunk_index=job.chunk_index,
                utterance_index=job.utterance_index,
                is_last_in_utterance=job.is_last_in_utterance,
                words=words.starts,
                completed_words=words.words,
            )
        )
        if job.is_last_in_utterance:
            self.done += 1


__all__ = ["SoloLink"]
