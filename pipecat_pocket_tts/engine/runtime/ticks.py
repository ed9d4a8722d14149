"""One tick of the scheduler: which streams step, decode and prefill; the tasks; the results.

A ``TickPlan`` is built and applied under the scheduler's lock. Its tasks run outside the lock,
on any pool thread, and each touches only the states of the streams it was given (a stream is
in at most one task per stage), so they run side by side:

    first-*:     a starting stream's last prefill piece, its first step, sample and decode
    step{i}:     FlowLM step_batch + sample_batch for a group of streams
    decode{i}:   Mimi decode_batch of the latents the previous tick sampled
    prefill-*:   one stream's next prefill piece

A first-frame task's first frame is applied and handed over as soon as it is decoded (the
``on_first_frame`` hook), so a starting stream's first audio comes out of one task of one tick,
not at the end of its third tick.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..synthesis import MIN_FRAMES_BEFORE_EOS
from .tick_costs import StageCosts, decode_shares, thread_loads

if TYPE_CHECKING:
    from ..backends.base import Backend
    from .streams import ChunkRun, Stream

PREFILL_PIECE_TOKENS = 16
"""Largest prefill piece of one stream in a tick while other streams are stepping."""
PREFILL_TOKENS_PER_TICK = 32
"""Prefill tokens, over all streams, one busy tick takes on."""
PREFILL_SLACK_SECONDS = 0.4
"""Lead every speaking stream has when a new utterance's whole prefill may go in one tick."""


class TickPlan:
    """Which streams step, decode and prefill this tick; its tasks; applying their results."""

    def __init__(
        self,
        backend: Backend,
        active: list[Stream],
        now: float,
        threads: int,
        max_lead: float,
        costs: StageCosts,
        on_first_frame: Callable[[TickPlan, Stream], None] | None = None,
    ) -> None:
        """``on_first_frame(plan, stream)``: called on the pool thread that ran a stream's
        first-frame task, once it succeeded (the scheduler applies and delivers it then)."""
        self._backend = backend
        self._on_first_frame = on_first_frame
        self.early_outputs: list[tuple[Stream, list[Any]]] = []
        self.early_failures: dict[Stream, BaseException] = {}
        candidates = []
        for stream in active:
            if stream.stopped:
                continue
            try:
                due = stream.next_run()  # embeds the next chunk's text
            except Exception as exc:
                self.early_failures[stream] = exc
                continue
            if due:
                self.early_outputs.append((stream, due))
            if stream.has_work:
                candidates.append(stream)
        leads = {stream: stream.lead(now) for stream in candidates}
        # First frames first, then the stream nearest to running dry.
        candidates.sort(key=lambda s: (s.started, leads[s]))
        anyone_behind = any(leads[s] <= max_lead for s in candidates)

        def may_compute(stream: Stream) -> bool:
            return leads[stream] <= max_lead or not anyone_behind

        decoding = [s for s in candidates if s.wants_decode and may_compute(s)]
        # A stream decoding its first frame steps again next tick: the decodes of the
        # tick's first frames have its threads to themselves (first audio a step sooner).
        stepping = [
            s
            for s in candidates
            if s.wants_step and may_compute(s) and (s.started or not s.wants_decode)
        ]
        # Idle, or every speaking stream has audio in hand: a new utterance's text is
        # prefilled whole (its first frame sooner). Otherwise prefills go in small pieces.
        slack = min((leads[s] for s in stepping if s.started), default=None)
        roomy = slack is None or slack >= PREFILL_SLACK_SECONDS
        budget = None if not stepping else PREFILL_TOKENS_PER_TICK
        self.prefills: list[tuple[Stream, int]] = []
        for stream in candidates:
            if not (stream.wants_prefill and may_compute(stream)):
                continue
            assert stream.run is not None
            tokens = stream.run.prefill_left
            if budget is not None and not (roomy and not stream.started):
                tokens = min(tokens, PREFILL_PIECE_TOKENS, budget)
                if tokens <= 0:
                    break
                budget -= tokens
            self.prefills.append((stream, tokens))
        # A starting stream whose prefill ends this tick also steps, samples and decodes its
        # first frame in the same task: while no more streams start than there are threads
        # (each is a solo step and decode; a crowd starting together batches them instead).
        starting = [s for s in candidates if not s.started]
        self.first_frames = [
            (stream, tokens)
            for stream, tokens in self.prefills
            if len(starting) <= threads
            and not (stream.started or stream.wants_decode)
            and tokens == stream.run.prefill_left
        ]
        self.prefills = [item for item in self.prefills if item not in self.first_frames]
        # One FlowLM step per tick for up to 2 threads (it reads every weight once per call);
        # the Mimi decodes fill the threads up to the same finishing time (``tick_costs``).
        # A tick with nothing but steps (the first frames of streams that start together)
        # gives every thread a part: its threads would otherwise wait.
        groups = 1 if threads <= 2 else threads // 2
        if not decoding and not self.prefills:
            groups = threads
        self.step_parts = _split(stepping, groups)
        self._costs = costs
        first_frame = 2 * costs.step(1) + costs.decode_per_stream
        loads = thread_loads(
            [costs.prefill_per_token * tokens + first_frame for _, tokens in self.first_frames]
            + [costs.step(len(part)) for part in self.step_parts]
            + [costs.prefill_per_token * tokens for _, tokens in self.prefills],
            threads,
        )
        shares = sorted(decode_shares(loads, len(decoding), costs.decode_per_stream), reverse=True)
        self.decode_parts = _cut(decoding, [share for share in shares if share])
        self.streams = {
            *stepping,
            *decoding,
            *(s for s, _ in self.prefills),
            *(s for s, _ in self.first_frames),
        }
        #: Streams that each step and decode in a tick with nothing else (0: another tick):
        #: the ticks whose wall time prices admission (``StageCosts.tick_took``).
        self.full_streams = (
            len(stepping)
            if stepping
            and set(stepping) == set(decoding)
            and not self.prefills
            and not self.first_frames
            else 0
        )
        self._first_applied: set[Stream] = set()
        for stream in self.streams:
            stream.busy = True
        self._results: dict[str, Any] = {}
        self._spent: dict[str, tuple[str, float, int]] = {}  # key → (kind, CPU s, units)
        self.tasks = self._tasks()

    def _tasks(self) -> list[Callable[[], None]]:
        tasks: list[Callable[[], None]] = []
        for i, part in enumerate(self.step_parts):
            inputs = [(s.run.state, s.run.previous, s.noise(), s.run.probe) for s in part]  # type: ignore[union-attr]
            tasks.append(self._task(f"step{i}", ("step", len(part)), self._step, inputs))
        for stream, tokens in self.prefills:
            run = stream.run
            assert run is not None
            piece = run.prefill_piece(tokens)
            key = f"prefill-{stream.name}"
            tasks.append(self._task(key, ("prefill", tokens), self._prefill, run, piece))
        for i, part in enumerate(self.decode_parts):  # largest first: the idlest thread's
            latents = np.stack([s.next_decode() for s in part])
            work = ("decode", len(part))
            mimi = [s.mimi for s in part]
            tasks.append(self._task(f"decode{i}", work, self._decode, mimi, latents))
        # First in line: a thread takes each at once. Beside other work, each also samples
        # its stream's second frame; alone, the next tick comes at once and does it.
        busy = bool(tasks) or len(self.first_frames) > 1
        first = [self._first_frame_task(s, tokens, busy) for s, tokens in self.first_frames]
        return first + tasks

    def _task(
        self, key: str, work: tuple[str, int], function: Callable[..., Any], *args: Any
    ) -> Callable[[], None]:
        def task() -> None:
            start = time.thread_time()
            try:
                self._results[key] = function(*args)
            except Exception as exc:
                self._results[key] = exc
            else:
                self._spent[key] = (work[0], time.thread_time() - start, work[1])

        return task

    def _first_frame_task(self, stream: Stream, tokens: int, second: bool) -> Callable[[], None]:
        """Prefill the rest of ``stream``'s chunk, step (BOS), sample and decode its first
        frame, then (``second``, and when the chunk has one) step and sample its second:
        what four ticks would do, in one task. ``on_first_frame`` is told once the first
        frame is decoded; the second latent is applied with the tick and decoded in the
        next, so the frame after an early first frame comes out a tick later, not two."""
        run = stream.run
        assert run is not None
        piece, probe, mimi = run.prefill_piece(tokens), run.final_probe(), stream.mimi
        # The second frame only when the chunk surely has one (no EOS can end it sooner):
        # the noise is drawn as the stream alone draws it, in order.
        frames = 2 if second and run.frame_limit() >= 2 and MIN_FRAMES_BEFORE_EOS >= 1 else 1
        noises = [stream.noise() for _ in range(frames)]
        key = f"first-{stream.name}"
        backend = self._backend

        def task() -> None:
            start = time.thread_time()
            try:
                state = run.prefill_state()
                backend.prefill(state, piece)
                prefilled = time.thread_time()
                out = _step_one(backend, state, None, probe)
                latent = backend.sample(out.hidden, noises[0])
                stepped = time.thread_time()
                samples = backend.decode_batch([mimi], latent[None])[0]
            except Exception as exc:
                self._results[key] = exc
                return
            self._results[key] = (out, latent, samples)
            # A solo decode costs more than a batched one's share: not a decode estimate.
            self._spent[f"{key}-prefill"] = ("prefill", prefilled - start, tokens)
            self._spent[f"{key}-step"] = ("step", stepped - prefilled, 1)
            if self._on_first_frame is not None:
                self._on_first_frame(self, stream)
            if len(noises) < 2:
                return
            try:
                next_out = _step_one(backend, state, latent, probe)
                next_latent = backend.sample(next_out.hidden, noises[1])
                self._results[f"{key}-second"] = (next_out, next_latent)
            except Exception as exc:
                self._results[f"{key}-second"] = exc

        return task

    def apply_first_frame(self, stream: Stream, now: float) -> list[Any]:
        """Hand ``stream`` its first-frame task's first frame (under the scheduler's lock, once
        decoded) → the frame and the notices now due (nothing once it stopped)."""
        self._first_applied.add(stream)
        if stream.stopped or stream.run is None:
            return []
        tokens = dict(self.first_frames)[stream]
        out, latent, samples = self._results[f"first-{stream.name}"]
        stream.run.prefilled(tokens)
        stream.stepped(out, latent)
        return [stream.decoded(samples, now), *stream.due_notices()]

    def _step(self, inputs: list[tuple[Any, Any, np.ndarray, Any]]) -> list[Any]:
        """FlowLM step then sampler for a group → per stream (StepOutput, latent) or error.

        When the batched call fails, each stream is retried alone, so only the streams
        whose own step fails get the error (a failed step changes no state).
        """
        backend = self._backend
        try:
            probes = [i[3] for i in inputs]
            outs = backend.step_batch(
                [i[0] for i in inputs],
                [i[1] for i in inputs],
                probes if any(p is not None for p in probes) else None,
            )
            hidden = np.stack([out.hidden for out in outs])
            latents = backend.sample_batch(hidden, np.stack([i[2] for i in inputs]))
            return list(zip(outs, latents, strict=True))
        except Exception:
            if len(inputs) == 1:
                raise
        results: list[Any] = []
        for state, previous, noise, probe in inputs:
            try:
                out = _step_one(backend, state, previous, probe)
                results.append((out, backend.sample(out.hidden, noise)))
            except Exception as exc:
                results.append(exc)
        return results

    def _decode(self, states: list[Any], latents: np.ndarray) -> np.ndarray:
        return self._backend.decode_batch(states, latents)

    def _prefill(self, run: ChunkRun, piece: np.ndarray) -> None:
        self._backend.prefill(run.prefill_state(), piece)

    def apply(
        self, now: float
    ) -> tuple[list[tuple[Stream, list[Any]]], dict[Stream, BaseException]]:
        """Hand each stream its results (dropped for stopped streams) → (outputs to deliver,
        streams that failed with their error)."""
        out: dict[Stream, list[Any]] = {}
        failed: dict[Stream, BaseException] = {}
        if len(self.tasks) > 1:  # a lone task runs BLAS on every core: its CPU time is partial
            for kind, seconds, units in self._spent.values():
                self._costs.measured(kind, seconds, units)
        for i, part in enumerate(self.step_parts):
            result = self._results.get(f"step{i}")
            for j, stream in enumerate(part):
                item = result if isinstance(result, BaseException) else result[j]
                if isinstance(item, BaseException):
                    failed[stream] = item
                elif not stream.stopped:
                    try:  # word timing runs here: its failure is the stream's own
                        stream.stepped(*item)
                    except Exception as exc:
                        failed[stream] = exc
        for i, part in enumerate(self.decode_parts):
            result = self._results.get(f"decode{i}")
            for j, stream in enumerate(part):
                if isinstance(result, BaseException):
                    failed[stream] = result
                elif not stream.stopped:
                    try:
                        frame = stream.decoded(result[j], now)
                    except Exception as exc:
                        failed[stream] = exc
                        continue
                    out.setdefault(stream, []).append(frame)
                    out[stream] += stream.due_notices()
        for stream, _ in self.first_frames:
            key = f"first-{stream.name}"
            if isinstance(self._results.get(key), BaseException):
                failed[stream] = self._results[key]
                continue
            try:
                if stream not in self._first_applied and key in self._results:  # no hook
                    out.setdefault(stream, []).extend(self.apply_first_frame(stream, now))
                second = self._results.get(f"{key}-second")
                if isinstance(second, BaseException):
                    failed[stream] = second
                elif second is not None and not stream.stopped and stream.run is not None:
                    stream.stepped(*second)
            except Exception as exc:
                failed[stream] = exc
        for stream, tokens in self.prefills:
            result = self._results.get(f"prefill-{stream.name}")
            if isinstance(result, BaseException):
                failed[stream] = result
            elif not stream.stopped and stream.run is not None:
                stream.run.prefilled(tokens)
        return list(out.items()), failed


def _step_one(backend: Backend, state: Any, previous: Any, probe: Any) -> Any:
    """One stream's ``step`` (with its attention probe when it has one)."""
    if probe is None:
        return backend.step(state, previous)
    return backend.step(state, previous, probe=probe)  # type: ignore[call-arg]


def _cut(streams: list[Stream], sizes: list[int]) -> list[list[Stream]]:
    """Streams cut into consecutive parts of the given sizes (summing to their number)."""
    parts, start = [], 0
    for size in sizes:
        parts.append(streams[start : start + size])
        start += size
    return parts


def _split(streams: list[Stream], groups: int) -> list[list[Stream]]:
    """Streams cut into at most ``groups`` contiguous, non-empty parts."""
    if not streams:
        return []
    groups = min(groups, len(streams))
    size = -(-len(streams) // groups)
    return [streams[i : i + size] for i in range(0, len(streams), size)]
