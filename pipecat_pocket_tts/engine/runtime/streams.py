"""What the scheduler runs for one stream: its queued chunks, FlowLM progress, RNG and Mimi state.

A ``ScheduledStream`` is a session's presence on a model's scheduler. It takes ``ChunkJob``s (one
prepared chunk of an utterance each) and notices (payloads that come out in order with the
frames, such as markers or the end of the session), and hands every result to one output
callback. The scheduler drives it a frame at a time through the methods below, under the
scheduler's lock; the rules of a chunk's frames (EOS, frame limit, noise draws, fade-in) are
those of ``generation``, so a stream's audio equals the audio of the same chunks run alone.

    jobs ─▶ ChunkRun: prefill pieces → step/sample per frame ─▶ pending decodes ─▶ output
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..frames import AudioFrame, GenerationSettings, LatentFrame
from ..model.config import FRAME_SECONDS
from ..timing.word_timing import WordTimes
from .generation import ChunkEnd, FadeIn, attention_probe, draw_noise, frame_limit

if TYPE_CHECKING:
    from ..backends.base import AttentionProbe, Backend, FlowState, MimiState, StepOutput
    from ..text.planner import ChunkTiming, TimedText
    from ..text.prepare import PreparedChunk
    from ..timing.heads import Heads
    from ..timing.word_timing import FrameWords, SessionWords
    from ..utterance import UtteranceRun


@dataclass(frozen=True, eq=False, kw_only=True)
class ChunkJob:
    """One prepared chunk of an utterance, with what its frames are tagged with."""

    chunk: PreparedChunk
    # The voice state it starts from and its sampling settings.
    run: UtteranceRun
    utterance_index: int
    chunk_index: int
    is_last_chunk: bool
    # Restart the stream's random generator from this seed first.
    restart_seed: int | None = None
    # Its utterance's caller words, with word timestamps on.
    timed: TimedText | None = None
    # The attention heads the word timing reads (None: estimated).
    heads: Heads | None = None

    @property
    def voice_state(self) -> FlowState:
        return self.run.voice_state

    @property
    def settings(self) -> GenerationSettings:
        return self.run.settings


@dataclass(frozen=True, eq=False)
class Notice:
    """A payload handed to the output in order, after the frames of every earlier job."""

    payload: Any


@dataclass(frozen=True, eq=False)
class _PendingDecode:
    # Shape [latent_dim], in the normalized space.
    latent: np.ndarray
    job: ChunkJob
    frame_index: int
    is_last_in_chunk: bool
    # The word timing's input, with word timestamps on.
    words: FrameWords | None = None


class ChunkRun:
    """The FlowLM side of one chunk: prefill in pieces, then one step per frame until EOS."""

    def __init__(self, backend: Backend, job: ChunkJob) -> None:
        self.job = job
        # Shape [n, d_model].
        self.embeddings = backend.embed_text(job.chunk.token_ids)
        self._prefilled = 0
        # The voice's K/V are copied by the first prefill piece, on a pool thread: the copy
        # (~8 ms for a full-size voice, mostly first touches of fresh pages) would otherwise
        # run on the scheduler's thread, one starting chunk after another.
        self._state: FlowState | None = None if self.prefill_left else job.voice_state.copy()
        # Chunks start in order on their stream: the timed text maps them in text order.
        self._timing: ChunkTiming | None = None
        if job.timed is not None:
            self._timing = job.timed.chunk(job.chunk, job.utterance_index)
        self._heads = job.heads if self._timing is not None else None
        self._text_start = job.voice_state.position
        self._backend = backend
        # Set once prefilled, with word timestamps on.
        self.probe: AttentionProbe | None = None
        # Its limit is known once the text is prefilled.
        self._end = self._chunk_end(0)
        self.frame_index = 0
        # None means the next step is BOS.
        self.previous: np.ndarray | None = None
        self.finished = False

    @property
    def state(self) -> FlowState:
        """This chunk's FlowLM state (the voice's copy), once its first prefill piece ran."""
        if self._state is None:
            raise RuntimeError("the chunk's state is made by its first prefill piece")
        return self._state

    def prefill_state(self) -> FlowState:
        """The state the next prefill piece writes into: copied from the voice on the first
        call (by that piece's task, on a pool thread)."""
        if self._state is None:
            self._state = self.job.voice_state.copy()
        return self._state

    @property
    def prefill_left(self) -> int:
        return self.embeddings.shape[0] - self._prefilled

    def prefill_piece(self, tokens: int) -> np.ndarray:
        """The next ``tokens`` embeddings to prefill [n, d_model] (``prefilled`` after)."""
        return self.embeddings[self._prefilled : self._prefilled + tokens]

    def prefilled(self, tokens: int) -> None:
        """``tokens`` more embeddings are in the cache; after the last, frames may start."""
        self._prefilled += tokens
        if self.prefill_left == 0:
            self._end = self._chunk_end(self.frame_limit())
            self.probe = self.final_probe()

    def frame_limit(self) -> int:
        """Frames this chunk may produce (the plan's, the settings' and the KV room once its
        whole text is in: known before the prefill ends)."""
        voice = self.job.voice_state
        room = voice.capacity - voice.position - self.embeddings.shape[0]
        return frame_limit(self.job.chunk, self.job.settings, room)

    def _chunk_end(self, limit: int) -> ChunkEnd:
        return ChunkEnd(limit, self.job.settings.eos_threshold, self.job.chunk.frames_after_eos)

    def final_probe(self) -> AttentionProbe | None:
        """The attention probe of this chunk's frames (its whole text: known before the
        prefill ends, so a first-frame task can step with it)."""
        text_end = self._text_start + self.embeddings.shape[0]
        return attention_probe(self._backend, self._heads, self._text_start, text_end)

    def accept_step(self, out: StepOutput) -> None:
        """Apply the EOS rule (``ChunkEnd``) to this frame's step output."""
        self._end.step(self.frame_index, out.eos_logit)

    def accept_latent(self, latent: np.ndarray, attention: np.ndarray | None) -> _PendingDecode:
        """This frame's sampled latent [latent_dim] (and its step's probed attention) → its
        decode job; moves to the next frame."""
        index = self.frame_index
        last = self._end.is_last(index)
        words = None
        if self._timing is not None:
            frame = LatentFrame(latent, index, last, attention)
            words = self._timing.frame(frame, last_in_utterance=last and self.job.is_last_chunk)
        self.previous = latent
        self.frame_index += 1
        self.finished = last
        return _PendingDecode(latent, self.job, index, last, words)


class ScheduledStream:
    """One session's stream on a scheduler. Its methods are called under the scheduler's lock.

    ``on_output`` receives ``AudioFrame``s and notice payloads in order (on a scheduler
    thread, outside its lock; keep it cheap); ``on_error`` the exception that stopped it.
    """

    def __init__(
        self,
        backend: Backend,
        name: str,
        on_output: Callable[[Any], None],
        on_error: Callable[[BaseException], None],
        seed: int | None = None,
        words: SessionWords | None = None,
    ) -> None:
        self.name = name
        # The session's word timing, fed every frame in order.
        self._words = words
        self.on_output = on_output
        self.on_error = on_error
        self._backend = backend
        self._latent_dim = backend.config.flow_lm.latent_dim
        self.rng = np.random.default_rng(seed)
        self.mimi: MimiState = backend.new_mimi_state()
        # Fades in the start of the Mimi state's audio.
        self._fade = FadeIn()
        self.jobs: deque[ChunkJob | Notice] = deque()
        self.run: ChunkRun | None = None
        self.decodes: deque[_PendingDecode | Notice] = deque()
        # Cancelled or failed: everything is dropped.
        self.stopped = False
        # Held while handing outputs over.
        self.delivery = threading.RLock()
        # Part of the tick being computed.
        self.busy = False
        # A carried decode of the frames at the head of ``decodes`` runs (beyond its tick:
        # ``ticks.choose_tick``); they stay queued until it hands them over.
        self.decoding = False
        # Ticks that computed for it, counted as each ends.
        self.ticks = 0
        self.admitted = False
        self.waiting_since: float | None = None
        # Told of its admission waits.
        self.on_wait: Callable[[Any], None] | None = None
        # Deadline: frames emitted since the consumer's clock started (at the first frame).
        self._clock_start: float | None = None
        # Seconds of audio those frames play for, at their speeds.
        self._heard = 0.0

    # -- work ---------------------------------------------------------------------------
    @property
    def has_work(self) -> bool:
        """Work queued or running: it holds a slot."""
        return not self.stopped and bool(
            self.jobs or self.run is not None or self.decodes or self.decoding
        )

    @property
    def ready(self) -> bool:
        """Work a tick can take now (frames whose decode is running wait for it to end), or
        notices to hand over."""
        return not self.stopped and bool(
            self.jobs or self.run is not None or self.wants_decode or self._notice_due
        )

    @property
    def _notice_due(self) -> bool:
        return not self.decoding and bool(self.decodes) and isinstance(self.decodes[0], Notice)

    def next_run(self) -> list[Any]:
        """Start the next chunk if none runs; the notices that became due (to emit now; none
        while a carried decode runs: its frames go first, and it hands over what follows)."""
        while self.run is None and self.jobs:
            job = self.jobs.popleft()
            if isinstance(job, Notice):
                self.decodes.append(job)
                continue
            if job.restart_seed is not None:
                self.rng = np.random.default_rng(job.restart_seed)
            self.run = ChunkRun(self._backend, job)
        return [] if self.decoding else self.due_notices()

    def due_notices(self) -> list[Any]:
        """Notices at the head of the decode queue: every frame before them is out."""
        due = []
        while self.decodes and isinstance(self.decodes[0], Notice):
            due.append(self.decodes.popleft().payload)
        return due

    @property
    def wants_prefill(self) -> bool:
        return self.run is not None and self.run.prefill_left > 0

    @property
    def wants_step(self) -> bool:
        return self.run is not None and self.run.prefill_left == 0 and not self.run.finished

    @property
    def wants_decode(self) -> bool:
        return (
            not self.decoding and bool(self.decodes) and isinstance(self.decodes[0], _PendingDecode)
        )

    def noise(self) -> np.ndarray:
        """Noise [latent_dim] for this frame's sampler (drawn after its step, as alone)."""
        assert self.run is not None
        return draw_noise(self.rng, self.run.job.settings.temperature, self._latent_dim)

    def stepped(self, out: StepOutput, latent: np.ndarray) -> None:
        """This frame's step and latent are computed: queue its decode."""
        assert self.run is not None
        self.run.accept_step(out)
        self.decodes.append(self.run.accept_latent(latent, out.attention))
        if self.run.finished:
            self.run = None

    def next_decode(self) -> np.ndarray:
        """The latent [latent_dim] of the next frame to decode (``decoded`` pops it)."""
        head = self.decodes[0]
        assert isinstance(head, _PendingDecode)
        return head.latent

    @property
    def pending_frames(self) -> int:
        """Frames sampled and waiting for their decode, before any notice (a frame block's
        most frames)."""
        count = 0
        for item in self.decodes:
            if not isinstance(item, _PendingDecode):
                break
            count += 1
        return count

    def next_decodes(self, frames: int) -> np.ndarray:
        """The latents [frames, latent_dim] of the next ``frames`` frames to decode."""
        items = [self.decodes[i] for i in range(frames)]
        assert all(isinstance(item, _PendingDecode) for item in items)
        return np.stack([item.latent for item in items])  # type: ignore[union-attr]

    def decoded(self, samples: np.ndarray, now: float) -> AudioFrame:
        """The next frame's samples [frame_size] are decoded → its AudioFrame."""
        pending = self.decodes.popleft()
        assert isinstance(pending, _PendingDecode)
        samples = self._fade(samples)
        if self._clock_start is None:
            self._clock_start = now
        job = pending.job
        self._heard += FRAME_SECONDS / job.run.speed
        words = WordTimes()
        if pending.words is not None and self._words is not None:
            words = self._words.frame(samples, pending.words)
        return AudioFrame(
            samples=samples,
            frame_index=pending.frame_index,
            chunk_index=job.chunk_index,
            utterance_index=job.utterance_index,
            is_last_in_utterance=pending.is_last_in_chunk and job.is_last_chunk,
            words=words.starts,
            completed_words=words.words,
        )

    def stop(self) -> None:
        """Cancelled or failed: drop all queued work."""
        self.stopped = True
        self.jobs.clear()
        self.decodes.clear()
        self.run = None

    # -- deadline -----------------------------------------------------------------------
    @property
    def started(self) -> bool:
        """True once the current run of frames has produced its first frame."""
        return self._clock_start is not None

    def lead(self, now: float) -> float:
        """Seconds of audio out ahead of a consumer playing in real time since the first frame.

        When the consumer ran dry (lead below 0) it waited: its clock restarts at 0 lead.
        """
        if self._clock_start is None:
            return 0.0
        lead = self._heard - (now - self._clock_start)
        if lead < 0:
            self._clock_start = now - self._heard
            return 0.0
        return lead

    def went_idle(self) -> None:
        """Nothing left to say: the next frame starts a new run (and a new consumer clock)."""
        self._clock_start = None
        self._heard = 0.0
