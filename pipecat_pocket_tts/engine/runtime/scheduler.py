"""One scheduler per loaded model: a fixed pool of compute threads running batched ticks.

Every session (and ``synthesize``/``stream``) on a model is a ``ScheduledStream`` of its scheduler.
Each tick the scheduler takes every stream that needs work and runs each stage once for all:

    FlowLM step_batch [B, d] → sample_batch [B, 32]   (streams that need their next latent)
    decode_batch [B', 32]                              (latents of the previous tick)
    prefill pieces                                     (text of streams starting a chunk)

The three kinds of work are independent, so they run side by side on the pool's threads (BLAS
single-threaded in each: no BLAS thread spins once the work ends). Streams join and leave at
tick boundaries; ``ScheduledStream.cancel`` returns once the tick holding the stream is over (≤ one
frame) and never delays the others. With fewer streams than threads, a tick's decodes are
carried: they run on the threads the steps leave idle and the next tick starts without waiting
for them (each hands its frames over as it ends), so a lone stream's step chain never waits on
Mimi.

Deadlines: each stream's lead is the audio it has out ahead of a consumer playing in real time
from its first frame. A stream more than ``max_lead`` seconds ahead, of real time and of the
stream furthest behind, sits out a tick while that one is behind; a stream's first frame goes
first (its prefill is served before the others'); prefills are cut into pieces of at most
``PREFILL_PIECE_TOKENS`` while other streams are stepping, and run whole when nothing else
does or every speaking stream has audio in hand. The tick that ends a starting stream's
prefill also steps and decodes its first frame, in the same task, and hands that frame over as
soon as it is decoded.

Admission (``slots.py``): at most ``max_streams`` streams have work at once (None: no limit;
``"auto"``: as many as the measured cost of a tick keeps in real time); later ones wait in
order.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..model.config import FRAME_SECONDS
from .blas_threads import BLAS_THREADS, usable_cores
from .slots import AdmissionWait, StreamSlots
from .streams import ChunkJob, Notice, ScheduledStream
from .tick_costs import StageCosts
from .tick_plan import TickPlan
from .ticks import choose_tick, start_next_runs

if TYPE_CHECKING:
    from ..backends.base import Backend
    from ..timing.word_timing import SessionWords

logger = logging.getLogger(__name__)

MAX_LEAD_SECONDS = 1.0
"""Lead beyond which a stream waits while another stream is behind it."""
_stream_ids = itertools.count()


@dataclass(frozen=True)
class SchedulerStats:
    """A snapshot: streams with work, streams waiting for a slot, ticks run, threads working."""

    active: int
    waiting: int
    ticks: int
    busy_threads: int
    threads: int


class _Tick:
    """The work of one tick, as tasks any pool thread may run; ``wait`` until all are done."""

    def __init__(self, tasks: list[Callable[[], None]]) -> None:
        self._tasks = deque(tasks)
        self._left = len(tasks)
        self._lock = threading.Lock()
        self._done = threading.Event()
        if not tasks:
            self._done.set()

    def take(self) -> Callable[[], None] | None:
        with self._lock:
            return self._tasks.popleft() if self._tasks else None

    def finished_one(self) -> None:
        with self._lock:
            self._left -= 1
            if self._left == 0:
                self._done.set()

    def wait(self) -> None:
        self._done.wait()


class Scheduler:
    """The compute pool of one backend, shared by all its streams."""

    def __init__(
        self,
        backend: Backend,
        *,
        threads: int | None = None,
        max_streams: int | str | None = None,
        max_lead: float = MAX_LEAD_SECONDS,
        on_wait: Callable[[AdmissionWait], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        costs: StageCosts | None = None,
    ) -> None:
        """``max_streams``: None (no limit), an integer ≥ 1 or ``"auto"`` (``slots.py``);
        ``costs``: the running cost estimates to start from (default: ``StageCosts()``)."""
        if threads is not None and threads < 1:
            raise ValueError(f"scheduler threads must be at least 1, got {threads}")
        self.backend = backend
        self.threads = threads or usable_cores()
        self.max_lead = max_lead
        self._clock = clock
        self._cond = threading.Condition()
        # What each kind of work costs, for planning ticks and for admission.
        self._costs = costs or StageCosts()
        self._slots = StreamSlots(
            max_streams, self._costs, self.threads, FRAME_SECONDS, clock, on_wait
        )
        self._ticks = 0
        self._busy = 0
        # Streams whose carried decode is queued or running (one at most each).
        self._carrying: set[ScheduledStream] = set()
        self._in_tick = False
        self._closed = False
        self._pool: list[threading.Thread] = []
        self._tasks: queue.SimpleQueue[_Tick | None] = queue.SimpleQueue()
        # Notices of streams that hold no slot and have nothing queued: they need no compute,
        # so no slot; the coordinator hands them over before it plans its next tick (after
        # every output of the tick it was running), in submission order.
        self._idle_notices: list[tuple[ScheduledStream, Any]] = []
        # Whether this pool holds BLAS at one thread (``blas_threads``).
        self._holds_blas = False

    @property
    def max_streams(self) -> int | str | None:
        return self._slots.limit

    # -- streams ------------------------------------------------------------------------
    def open_stream(
        self,
        on_output: Callable[[Any], None],
        on_error: Callable[[BaseException], None],
        *,
        seed: int | None = None,
        name: str | None = None,
        words: SessionWords | None = None,
        on_wait: Callable[[AdmissionWait], None] | None = None,
    ) -> ScheduledStream:
        """A new stream (idle until its first job) with its own random generator; ``words``:
        the word timing its timed utterances' frames go through, in order; ``on_wait``: told
        when it waits for a slot and when it is admitted (see the module docstring)."""
        name = name or f"pocket-tts-stream-{next(_stream_ids)}"
        stream = ScheduledStream(self.backend, name, on_output, on_error, seed=seed, words=words)
        stream.on_wait = on_wait
        return stream

    def submit(self, stream: ScheduledStream, job: ChunkJob | Notice) -> None:
        """Queue a chunk or a notice on a stream (thread-safe); it runs in order.

        A notice on a stream with nothing queued and no slot goes out before the next tick,
        without waiting for a slot (``max_streams``): it follows every frame already made.
        """
        with self._cond:
            if self._closed:
                raise RuntimeError("this scheduler is closed")
            if stream.stopped:
                return
            self._start_pool()
            if isinstance(job, Notice) and not stream.admitted and not stream.jobs:
                self._idle_notices.append((stream, job.payload))
                self._cond.notify_all()
                return
            stream.jobs.append(job)
            self._slots.request(stream, self._ticks)
            self._cond.notify_all()

    def cancel(self, stream: ScheduledStream) -> None:
        """Drop the stream's work; return once no computation of it runs (≤ one tick)."""
        with self._cond:
            self._stop(stream)
            if threading.current_thread() not in self._pool:
                while stream.busy or stream.decoding:
                    self._cond.wait()
        # An output being handed over finishes first; no more follow.
        with stream.delivery:
            pass

    def stop(self, stream: ScheduledStream) -> int:
        """Drop the stream's work now, without waiting for a tick in flight (``cancel``
        waits): no tick starts for it afterwards. The ticks that computed for it so far."""
        with self._cond:
            self._stop(stream)
            return stream.ticks

    def stats(self) -> SchedulerStats:
        with self._cond:
            return SchedulerStats(
                len(self._slots.active),
                len(self._slots.waiting),
                self._ticks,
                self._busy,
                len(self._pool),
            )

    def wait_parked(self, timeout: float | None = None) -> bool:
        """Wait until no stream has work and every pool thread is parked (True), or timeout."""
        with self._cond:
            return self._cond.wait_for(
                lambda: (
                    not self._slots.active
                    and not self._in_tick
                    and self._busy == 0
                    and not self._carrying
                ),
                timeout,
            )

    def close(self) -> None:
        """Stop the pool threads (streams with work are cancelled)."""
        with self._cond:
            self._closed = True
            for stream in [*self._slots.active, *self._slots.waiting]:
                self._stop(stream)
            self._cond.notify_all()
            pool = list(self._pool)
            holds_blas, self._holds_blas = self._holds_blas, False
        for _ in pool[1:]:
            self._tasks.put(None)
        for thread in pool:
            if thread is not threading.current_thread():
                thread.join()
        with self._cond:
            # A carried decode queued after the threads' stop never runs: its streams (all
            # stopped) wait for nothing.
            for stream in self._carrying:
                stream.decoding = False
            self._carrying.clear()
            self._cond.notify_all()
        # After the joins, no BLAS call of this pool is left.
        if holds_blas:
            BLAS_THREADS.release()

    def _stop(self, stream: ScheduledStream) -> None:
        stream.stop()
        self._slots.release(stream, self._ticks)
        self._cond.notify_all()

    # -- the pool -----------------------------------------------------------------------
    def _start_pool(self) -> None:
        if self._pool:
            return
        # One BLAS thread per call: the pool's threads are the parallelism.
        BLAS_THREADS.hold()
        self._holds_blas = True
        self._pool = [
            threading.Thread(target=self._coordinate, name="pocket-tts-scheduler", daemon=True)
        ]
        self._pool += [
            threading.Thread(target=self._serve, name=f"pocket-tts-compute-{i}", daemon=True)
            for i in range(1, self.threads)
        ]
        for thread in self._pool:
            thread.start()

    def _serve(self) -> None:
        """A compute thread: run tasks of the current tick until told to stop."""
        while (tick := self._tasks.get()) is not None:
            self._run_tasks(tick)

    def _run_tasks(self, tick: _Tick) -> None:
        while (task := tick.take()) is not None:
            with self._cond:
                self._busy += 1
            try:
                task()
            finally:
                with self._cond:
                    self._busy -= 1
                    self._cond.notify_all()
                tick.finished_one()

    def _coordinate(self) -> None:
        """The first pool thread: plan a tick, run it with the others, apply its results.

        Each round runs in a call of its own, so while the pool waits this thread's frame
        refers to nothing of the last tick: its frames and markers (a caller's marker may
        refer back to its session, and the session to the model) would otherwise keep a
        dropped model alive, and with it this pool.
        """
        while self._await_work():
            self._round()

    def _await_work(self) -> bool:
        """Wait for work; deliver the notices of idle streams. False once closed."""
        with self._cond:
            while (
                not self._closed
                and not self._idle_notices
                and not any(s.ready for s in self._slots.active)
            ):
                self._cond.wait()
            if self._closed:
                return False
            notices, self._idle_notices = self._idle_notices, []
        _deliver([(stream, [item]) for stream, item in notices])
        return True

    def _round(self) -> None:
        """Plan one tick, run it on the pool, apply and deliver its results."""
        with self._cond:
            if not any(s.ready for s in self._slots.active):
                return
            candidates, due_outputs, failed = start_next_runs(self._slots.active)
            choice = choose_tick(
                candidates,
                self._clock(),
                self.threads,
                self.max_lead,
                self._costs,
                blocks=self.backend.capabilities.frame_blocks,
            )
            for stream in choice.streams:
                # Busy until the tick ends; ``cancel`` waits for it.
                stream.busy = True
            if choice.carried:
                for stream in choice.decoding:
                    # Decoding until its carried decode is handed over.
                    stream.decoding = True
                    self._carrying.add(stream)
            plan = TickPlan(
                self.backend, choice, self._costs, self._first_frame_done, self._carried_done
            )
            self._in_tick = True
        # Outputs due now go out before any first frame of the tick.
        _deliver(due_outputs)
        outputs: list[tuple[ScheduledStream, list[Any]]] = []
        try:
            started = self._clock()
            self._run_tick(plan)
            with self._cond:
                if plan.steady:
                    took = self._clock() - started
                    self._costs.tick_took(plan.busiest_thread_cpu(self.threads), took)
                results, tick_failures = plan.apply(self._clock())
            outputs += results
            failed.update(tick_failures)
        except Exception as exc:
            # A scheduler bug: the tick's streams fail, the scheduler keeps serving.
            logger.exception("a scheduler tick failed")
            failed.update((stream, exc) for stream in plan.streams)
        plan.release()
        with self._cond:
            outputs += self._stop_failed(failed)
            self._ticks += 1
            for stream in plan.streams:
                stream.busy = False
                stream.ticks += 1
            self._release_idle(list(self._slots.active))
            self._in_tick = False
            self._cond.notify_all()
        _deliver(outputs)

    def _stop_failed(
        self, failed: dict[ScheduledStream, BaseException]
    ) -> list[tuple[ScheduledStream, list[Any]]]:
        """Stop the ``failed`` streams not stopped yet (under the lock) → their errors, to
        deliver."""
        errors = []
        for stream, error in failed.items():
            if not stream.stopped:
                self._stop(stream)
                errors.append((stream, [error]))
        return errors

    def _release_idle(self, streams: list[ScheduledStream]) -> None:
        """Free the slots of those ``streams`` left without work (under the lock); under
        "auto" the estimates moved, so waiting streams may now fit."""
        for stream in streams:
            if stream.admitted and not stream.has_work:
                stream.went_idle()
                self._slots.release(stream, self._ticks)
        self._slots.admit_waiting(self._ticks)

    def _carried_done(self, plan: TickPlan, part: int) -> None:
        """Carried decode part ``part`` ended (on the pool thread that ran it): its frames go
        out now, then its streams may decode again."""
        streams = plan.decode_parts[part]
        with self._cond:
            try:
                outputs, failed = plan.apply_carried(part, self._clock())
            except Exception as exc:
                logger.exception("a carried decode failed to apply")
                outputs, failed = [], dict.fromkeys(streams, exc)
            outputs += self._stop_failed(failed)
        _deliver(outputs)
        with self._cond:
            for stream in streams:
                stream.decoding = False
                self._carrying.discard(stream)
            if not self._in_tick:
                self._release_idle(streams)
            self._cond.notify_all()

    def _first_frame_done(self, plan: TickPlan, stream: ScheduledStream) -> None:
        """A stream's first-frame task succeeded (on the pool thread that ran it): its frame
        goes out now, not at the end of the tick."""
        with self._cond:
            try:
                items = plan.apply_first_frame(stream, self._clock())
            except Exception as exc:
                # The stream's own failure (its word timing, for one).
                if not stream.stopped:
                    self._stop(stream)
                items = [exc]
        _deliver([(stream, items)])

    def _run_tick(self, plan: TickPlan) -> None:
        """Run the plan's tasks on the pool (this thread included); return when all are done,
        leaving its carried decodes to the other threads, unwaited."""
        if plan.carried:
            carried = _Tick(plan.carried)
            for _ in range(min(len(plan.carried), len(self._pool) - 1)):
                self._tasks.put(carried)
        with self._cond:
            carrying = bool(self._carrying)
        if len(plan.tasks) == 1 and self.threads > 1 and not carrying:
            # A lone task gets every core.
            with BLAS_THREADS.widened(self.threads):
                self._run_tasks(_Tick(plan.tasks))
        elif plan.tasks:
            tick = _Tick(plan.tasks)
            for _ in range(min(len(plan.tasks), len(self._pool)) - 1):
                self._tasks.put(tick)
            self._run_tasks(tick)
            tick.wait()


def _deliver(outputs: list[tuple[ScheduledStream, list[Any]]]) -> None:
    """Hand frames, notices and errors to their streams' callbacks (outside the lock)."""
    for stream, items in outputs:
        with stream.delivery:
            for item in items:
                if stream.stopped and not isinstance(item, BaseException):
                    # Cancelled meanwhile (or failed): no more frames come out.
                    continue
                try:
                    if isinstance(item, BaseException):
                        stream.on_error(item)
                    else:
                        stream.on_output(item)
                except Exception:
                    logger.exception("the output callback of %s failed", stream.name)


__all__ = ["MAX_LEAD_SECONDS", "Scheduler", "SchedulerStats"]
