"""One tick of the scheduler: which streams step, decode and prefill; the tasks; the results.

``choose_tick`` picks the work from the streams' state (changing none of them); a ``TickPlan``
turns that choice into tasks and applies their results, both under the scheduler's lock. Its
tasks run outside the lock, on any pool thread, and each touches only the states of the
streams it was given (a stream is in at most one task per stage), so they run side by side:

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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..model.config import FRAME_SECONDS
from .generation import ChunkEnd
from .tick_costs import StageCosts
from .tick_parts import cut_decodes, split_streams, step_groups

if TYPE_CHECKING:
    from ..backends.base import Backend
    from .streams import ChunkRun, ScheduledStream

PREFILL_PIECE_TOKENS = 16
"""Largest prefill piece of one stream in a tick while other streams are stepping."""
PREFILL_TOKENS_PER_TICK = 32
"""Prefill tokens, over all streams, one busy tick takes on."""
PREFILL_SLACK_SECONDS = 0.4
"""Lead every speaking stream has when a new utterance's whole prefill may go in one tick."""
BLOCK_FRAMES = 4
"""Most frames of one stream a decode call takes (a frame block, on backends with
``capabilities.frame_blocks``)."""
BLOCK_LEAD_SECONDS = 0.4
"""Lead from which a stream's decode may wait a tick to grow into a block: below it (and for
an utterance's first frame) every sampled frame is decoded at once."""


def start_next_runs(
    active: list[ScheduledStream],
) -> tuple[
    list[ScheduledStream],
    list[tuple[ScheduledStream, list[Any]]],
    dict[ScheduledStream, BaseException],
]:
    """Set up each active stream's next chunk run (its text embedded) before a tick: the
    streams with work, the notices now due (before any frame of the tick) and the failures."""
    candidates: list[ScheduledStream] = []
    due_outputs: list[tuple[ScheduledStream, list[Any]]] = []
    failures: dict[ScheduledStream, BaseException] = {}
    for stream in active:
        if stream.stopped:
            continue
        try:
            due = stream.next_run()
        except Exception as exc:
            failures[stream] = exc
            continue
        if due:
            due_outputs.append((stream, due))
        if stream.has_work:
            candidates.append(stream)
    return candidates, due_outputs, failures


@dataclass(frozen=True, eq=False)
class TickChoice:
    """Who does what this tick: chosen from the streams' state, changing none of them."""

    stepping: list[ScheduledStream]
    decoding: list[ScheduledStream]
    prefills: list[tuple[ScheduledStream, int]]
    """Each prefilling stream and its prefill tokens this tick."""
    frames: dict[ScheduledStream, int]
    """The frames each decoding stream decodes (a block when above 1)."""
    first_frames: list[tuple[ScheduledStream, int]]
    """Starting streams: their last prefill and first frame, in one task."""
    step_parts: list[list[ScheduledStream]]
    """The streams of each FlowLM step task."""
    decode_parts: list[list[ScheduledStream]]
    """The streams of each Mimi decode task, largest first."""
    #: Streams that each step and decode in a tick with nothing else (0: another tick):
    #: the ticks whose wall time prices admission (``StageCosts.tick_took``).
    full_streams: int

    @property
    def streams(self) -> set[ScheduledStream]:
        """Every stream with work in this tick (busy until it ends)."""
        return {
            *self.stepping,
            *self.decoding,
            *(s for s, _ in self.prefills),
            *(s for s, _ in self.first_frames),
        }


def choose_tick(
    candidates: list[ScheduledStream],
    now: float,
    threads: int,
    max_lead: float,
    costs: StageCosts,
    blocks: bool = False,
) -> TickChoice:
    """The work of one tick for ``candidates`` (streams with work, their next chunk run set up).

    First frames first, then the stream nearest to running dry; a stream more than
    ``max_lead`` ahead sits out while another is behind. ``blocks`` (a backend whose
    ``decode_frames`` is exact in one pass): a stream far enough ahead lets its sampled frames
    gather into a block before their decode (``_block_frames``).
    """
    leads = {stream: stream.lead(now) for stream in candidates}
    ordered = sorted(candidates, key=lambda s: (s.started, leads[s]))
    allowed = _may_compute(ordered, leads, max_lead)
    tick = costs.tick_seconds(len(candidates), threads)
    frames = {
        s: _block_frames(s, leads[s], tick) if blocks else 1 for s in allowed if s.wants_decode
    }
    decoding = [s for s in allowed if frames.get(s)]
    stepping = _stepping(allowed)
    prefills = _prefills([s for s in allowed if s.wants_prefill], stepping, leads)
    first_frames = _first_frames(
        prefills, starting=sum(not s.started for s in ordered), threads=threads
    )
    prefills = [item for item in prefills if item not in first_frames]
    # Seconds of the tick's work beside its steps, or None when there is none.
    other = None
    if decoding or prefills:
        other = costs.decode_per_stream * sum(frames[s] for s in decoding) + sum(
            costs.prefill_per_token * tokens for _, tokens in prefills
        )
    step_parts = split_streams(stepping, step_groups(threads, len(stepping), other, costs))
    frames = {s: frames[s] for s in decoding}
    # frames a block may leave for the next tick: those its lead covers beyond the block lead
    spare = {s: int((leads[s] - BLOCK_LEAD_SECONDS) / FRAME_SECONDS) for s in decoding}
    decode_parts = cut_decodes(
        decoding, frames, first_frames, step_parts, prefills, threads, costs, spare
    )
    full = (
        not prefills
        and not first_frames
        and set(stepping) == set(decoding)
        and all(count == 1 for count in frames.values())
    )
    return TickChoice(
        stepping=stepping,
        decoding=decoding,
        prefills=prefills,
        frames=frames,
        first_frames=first_frames,
        step_parts=step_parts,
        decode_parts=decode_parts,
        full_streams=len(stepping) if stepping and full else 0,
    )


def _block_frames(stream: ScheduledStream, lead: float, tick: float) -> int:
    """Frames ``stream`` decodes this tick (0: its sampled frames wait to grow a block).

    An utterance's first frames, a stream whose lead is under ``BLOCK_LEAD_SECONDS``, and one
    that samples no more frames for now, decode what they have (up to ``BLOCK_FRAMES``). A
    stream further ahead waits until it has as many frames as its lead beyond that allows,
    one a tick of ``tick`` seconds (the estimate of this tick's length), at most
    ``BLOCK_FRAMES``."""
    pending = stream.pending_frames
    whole = min(pending, BLOCK_FRAMES)
    if not stream.started or lead < BLOCK_LEAD_SECONDS or not stream.wants_step:
        return whole
    wanted = min(BLOCK_FRAMES, 1 + int((lead - BLOCK_LEAD_SECONDS) / max(tick, 1e-3)))
    return whole if pending >= wanted else 0


def _may_compute(
    ordered: list[ScheduledStream], leads: dict[ScheduledStream, float], max_lead: float
) -> list[ScheduledStream]:
    """The streams not held back: all, unless some are behind (within ``max_lead``); then the
    ones more than ``max_lead`` ahead both of real time and of the stream furthest behind wait.
    Streams whose leads lie within ``max_lead`` of each other compute together, even past it:
    when every stream runs ahead, holding back whichever crossed ``max_lead`` first would cut
    each batch in two (a step of two streams costs ~1.5× a stream of a step of sixteen) and
    help nobody."""
    if not any(leads[s] <= max_lead for s in ordered):
        return ordered
    furthest_behind = min(leads[s] for s in ordered)
    return [s for s in ordered if leads[s] <= max_lead or leads[s] - furthest_behind <= max_lead]


def _stepping(allowed: list[ScheduledStream]) -> list[ScheduledStream]:
    """Streams that step. A stream decoding its first frame steps again next tick: the
    decodes of the tick's first frames have its threads to themselves (first audio sooner)."""
    return [s for s in allowed if s.wants_step and (s.started or not s.wants_decode)]


def _prefills(
    wanting: list[ScheduledStream],
    stepping: list[ScheduledStream],
    leads: dict[ScheduledStream, float],
) -> list[tuple[ScheduledStream, int]]:
    """Prefill tokens per stream. Idle, or every speaking stream has audio in hand: a new
    utterance's text goes in whole (its first frame sooner); otherwise in small pieces."""
    slack = min((leads[s] for s in stepping if s.started), default=None)
    roomy = slack is None or slack >= PREFILL_SLACK_SECONDS
    budget = None if not stepping else PREFILL_TOKENS_PER_TICK
    prefills: list[tuple[ScheduledStream, int]] = []
    for stream in wanting:
        assert stream.run is not None
        tokens = stream.run.prefill_left
        if budget is not None and not (roomy and not stream.started):
            tokens = min(tokens, PREFILL_PIECE_TOKENS, budget)
            if tokens <= 0:
                break
            budget -= tokens
        prefills.append((stream, tokens))
    return prefills


def _first_frames(
    prefills: list[tuple[ScheduledStream, int]], *, starting: int, threads: int
) -> list[tuple[ScheduledStream, int]]:
    """Starting streams whose prefill ends this tick: they also step, sample and decode their
    first frame in the same task, while no more streams start than there are threads (each is
    a lone step and decode; a crowd starting together batches them instead)."""
    if starting > threads:
        return []
    return [
        (stream, tokens)
        for stream, tokens in prefills
        if not (stream.started or stream.wants_decode) and tokens == stream.run.prefill_left  # type: ignore[union-attr]
    ]


class TickPlan:
    """A chosen tick's tasks, and applying their results to its streams."""

    def __init__(
        self,
        backend: Backend,
        choice: TickChoice,
        costs: StageCosts,
        on_first_frame: Callable[[TickPlan, ScheduledStream], None] | None = None,
    ) -> None:
        """``on_first_frame(plan, stream)``: called on the pool thread that ran a stream's
        first-frame task, once it succeeded (the scheduler applies and delivers it then)."""
        self._backend = backend
        self._on_first_frame = on_first_frame
        self._costs = costs
        self.prefills = choice.prefills
        self.first_frames = choice.first_frames
        self.step_parts = choice.step_parts
        self.decode_parts = choice.decode_parts
        self.frames = choice.frames
        self.streams = choice.streams
        self.full_streams = choice.full_streams
        self._first_applied: set[ScheduledStream] = set()
        self._results: dict[str, Any] = {}
        # By key: the kind of work, its CPU seconds and its count.
        self._spent: dict[str, tuple[str, float, int]] = {}
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
        # The largest part first, so it goes to the idlest thread.
        for i, part in enumerate(self.decode_parts):
            counts = [self.frames[s] for s in part]
            latents = [
                s.next_decodes(count) if count > 1 else s.next_decode()[None]
                for s, count in zip(part, counts, strict=True)
            ]
            work = ("decode", sum(counts))
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

    def _first_frame_task(
        self, stream: ScheduledStream, tokens: int, second: bool
    ) -> Callable[[], None]:
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
        frames = min(2 if second else 1, ChunkEnd.certain_frames(run.frame_limit()))
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

    def apply_first_frame(self, stream: ScheduledStream, now: float) -> list[Any]:
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

    def _decode(self, states: list[Any], latents: list[np.ndarray]) -> list[np.ndarray]:
        """Each stream's frames (latents [frames, latent_dim] each) → samples [frames,
        frame_size] each: one ``decode_batch`` for the streams of one frame, one
        ``decode_frames`` per block size for the others."""
        out: list[Any] = [None] * len(states)
        sizes: dict[int, list[int]] = {}
        for i, block in enumerate(latents):
            sizes.setdefault(len(block), []).append(i)
        backend = self._backend
        for size, members in sizes.items():
            group = [states[i] for i in members]
            if size == 1:
                samples = backend.decode_batch(group, np.stack([latents[i][0] for i in members]))
                samples = samples[:, None]
            else:
                samples = backend.decode_frames(group, np.stack([latents[i] for i in members]))
            for row, i in enumerate(members):
                out[i] = samples[row]
        return out

    def _prefill(self, run: ChunkRun, piece: np.ndarray) -> None:
        self._backend.prefill(run.prefill_state(), piece)

    def release(self) -> None:
        """The tick is over: drop its tasks. They are closures over this plan, so the plan
        (its results: the frames' arrays) would otherwise wait for a garbage collection."""
        self.tasks = []

    def apply(
        self, now: float
    ) -> tuple[list[tuple[ScheduledStream, list[Any]]], dict[ScheduledStream, BaseException]]:
        """Hand each stream its results (dropped for stopped streams) → (outputs to deliver,
        streams that failed with their error)."""
        out: dict[ScheduledStream, list[Any]] = {}
        failed: dict[ScheduledStream, BaseException] = {}
        # Costs are measured only when several tasks ran: a lone task runs BLAS on every
        # core, so its CPU time counts only part of its work.
        if len(self.tasks) > 1:
            for kind, seconds, count in self._spent.values():
                self._costs.measured(kind, seconds, count)
        for i, part in enumerate(self.step_parts):
            result = self._results.get(f"step{i}")
            for j, stream in enumerate(part):
                item = result if isinstance(result, BaseException) else result[j]
                if isinstance(item, BaseException):
                    failed[stream] = item
                elif not stream.stopped:
                    # Word timing runs here: its failure is the stream's own.
                    try:
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
                        frames = [stream.decoded(samples, now) for samples in result[j]]
                    except Exception as exc:
                        failed[stream] = exc
                        continue
                    out.setdefault(stream, []).extend(frames)
                    out[stream] += stream.due_notices()
        for stream, _ in self.first_frames:
            key = f"first-{stream.name}"
            if isinstance(self._results.get(key), BaseException):
                failed[stream] = self._results[key]
                continue
            try:
                # Applied here when no hook applied it as the task ended.
                if stream not in self._first_applied and key in self._results:
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
