"""A chosen tick's tasks, and applying their results to its streams.

A ``TickPlan`` turns a ``TickChoice`` (``ticks.py``) into tasks and applies their results,
both under the scheduler's lock. Its tasks run outside the lock, on any pool thread, and each
touches only the states of the streams it was given (a stream is in at most one task per
stage), so they run side by side:

    first-*:     a starting stream's last prefill piece, its first step, sample and decode
    step{i}:     FlowLM step_batch + sample_batch for a group of streams
    decode{i}:   Mimi decode_batch of the latents the previous tick sampled
    prefill-*:   one stream's next prefill piece

A first-frame task's first frame is applied and handed over as soon as it is decoded (the
``on_first_frame`` hook), so a starting stream's first audio comes out of one task of one tick,
not at the end of its third tick. A carried tick's decodes (``TickChoice.carried``) are tasks
apart, ``carried``, that the tick does not wait for: each is applied and handed over as it
ends (the ``on_carried`` hook), while the next ticks step on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from .generation import ChunkEnd
from .tick_costs import StageCosts

if TYPE_CHECKING:
    from ..backends.base import Backend
    from .streams import ChunkRun, ScheduledStream
    from .ticks import TickChoice


class TickPlan:
    """A chosen tick's tasks, and applying their results to its streams."""

    def __init__(
        self,
        backend: Backend,
        choice: TickChoice,
        costs: StageCosts,
        on_first_frame: Callable[[TickPlan, ScheduledStream], None] | None = None,
        on_carried: Callable[[TickPlan, int], None] | None = None,
    ) -> None:
        """``on_first_frame(plan, stream)``: called on the pool thread that ran a stream's
        first-frame task, once it succeeded (the scheduler applies and delivers it then);
        ``on_carried(plan, i)``: called on the pool thread that ran carried decode part ``i``,
        once it ended (the scheduler applies it with ``apply_carried``)."""
        self._backend = backend
        self._on_first_frame = on_first_frame
        self._on_carried = on_carried
        self._costs = costs
        self.prefills = choice.prefills
        self.first_frames = choice.first_frames
        self.step_parts = choice.step_parts
        self.decode_parts = choice.decode_parts
        self.is_carried = choice.carried
        self.frames = choice.frames
        self.streams = choice.streams
        self._first_applied: set[ScheduledStream] = set()
        self._results: dict[str, Any] = {}
        # By key: the kind of work, its CPU seconds and its count.
        self._spent: dict[str, tuple[str, float, int]] = {}
        # Thread CPU seconds of each task that ran, by key.
        self._task_cpu: dict[str, float] = {}
        # Each carried decode part's frames (or error) and CPU seconds, by part.
        self._carried: dict[int, tuple[Any, float]] = {}
        #: The carried decode tasks (none unless ``is_carried``), apart from ``tasks``.
        self.carried: list[Callable[[], None]] = []
        self.tasks = self._tasks()
        #: Only steps and decodes (frame blocks included), as most ticks of streams that
        #: speak: the ticks whose wall time against their work prices admission. A starting
        #: stream's tick (prefill, first frame) is not one, nor one whose decodes run on
        #: beyond it, nor a lone task, which spreads BLAS over every core (its CPU time is not
        #: its wall work).
        self.steady = (
            not choice.prefills
            and not choice.first_frames
            and not choice.carried
            and len(self.tasks) > 1
        )

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
            mimi = [s.mimi for s in part]
            if self.is_carried:
                self.carried.append(self._carried_task(i, mimi, latents))
                continue
            work = ("decode", sum(counts))
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
            finally:
                self._task_cpu[key] = time.thread_time() - start

        return task

    def _carried_task(
        self, part: int, states: list[Any], latents: list[np.ndarray]
    ) -> Callable[[], None]:
        """Decode part ``part`` beyond the tick, then tell ``on_carried``."""

        def task() -> None:
            start = time.thread_time()
            try:
                result: Any = self._decode(states, latents)
            except Exception as exc:
                result = exc
            self._carried[part] = (result, time.thread_time() - start)
            if self._on_carried is not None:
                self._on_carried(self, part)

        return task

    def apply_carried(
        self, part: int, now: float
    ) -> tuple[list[tuple[ScheduledStream, list[Any]]], dict[ScheduledStream, BaseException]]:
        """Hand carried decode part ``part``'s frames to its streams, once it ended (under the
        scheduler's lock) → (outputs to deliver, streams that failed with their error)."""
        result, seconds = self._carried[part]
        if not isinstance(result, BaseException):
            frames = sum(self.frames[s] for s in self.decode_parts[part])
            self._costs.measured("decode", seconds, frames)
        out: dict[ScheduledStream, list[Any]] = {}
        failed: dict[ScheduledStream, BaseException] = {}
        self._apply_decode(self.decode_parts[part], result, now, out, failed)
        return list(out.items()), failed

    def _apply_decode(
        self,
        part: list[ScheduledStream],
        result: Any,
        now: float,
        out: dict[ScheduledStream, list[Any]],
        failed: dict[ScheduledStream, BaseException],
    ) -> None:
        """One decode part's ``result`` (samples per stream, or the error) to its streams:
        their frames and the notices then due into ``out``, failures into ``failed``."""
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
            if len(noises) > 1:
                try:
                    next_out = _step_one(backend, state, latent, probe)
                    next_latent = backend.sample(next_out.hidden, noises[1])
                    self._results[f"{key}-second"] = (next_out, next_latent)
                except Exception as exc:
                    self._results[f"{key}-second"] = exc
            self._task_cpu[key] = time.thread_time() - start

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

    def busiest_thread_cpu(self, threads: int) -> float:
        """Thread CPU seconds of the busiest of ``threads`` pool threads in this tick, as
        far as its tasks' CPU times tell (each task runs whole on one thread): the dearest
        task, or the tasks' sum spread evenly, whichever is more (0 before the tick ran)."""
        spent = list(self._task_cpu.values())
        if not spent:
            return 0.0
        return max(max(spent), sum(spent) / threads)

    def release(self) -> None:
        """The tick is over: drop its tasks. They are closures over this plan, so the plan
        (its results: the frames' arrays) would otherwise wait for a garbage collection."""
        self.tasks = []
        self.carried = []

    def apply(
        self, now: float
    ) -> tuple[list[tuple[ScheduledStream, list[Any]]], dict[ScheduledStream, BaseException]]:
        """Hand each stream its results (dropped for stopped streams) → (outputs to deliver,
        streams that failed with their error)."""
        out: dict[ScheduledStream, list[Any]] = {}
        failed: dict[ScheduledStream, BaseException] = {}
        # Costs are measured only when several tasks ran: a lone task runs BLAS on every
        # core (unless decodes are carried beside it), so its CPU time counts only part of
        # its work.
        if len(self.tasks) > 1 or self.is_carried:
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
        if not self.is_carried:  # carried decodes are applied as each ends (apply_carried)
            for i, part in enumerate(self.decode_parts):
                self._apply_decode(part, self._results.get(f"decode{i}"), now, out, failed)
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


__all__ = ["TickPlan"]
