"""One scheduler per loaded model: a fixed pool of compute threads running batched ticks.

Every session (and ``synthesize``/``stream``) on a model is a ``Stream`` of its scheduler.
Each tick the scheduler takes every stream that needs work and runs each stage once for all:

    FlowLM step_batch [B, d] → sample_batch [B, 32]   (streams that need their next latent)
    decode_batch [B', 32]                              (latents of the previous tick)
    prefill pieces                                     (text of streams starting a chunk)

The three kinds of work are independent, so they run side by side on the pool's threads (BLAS
single-threaded in each: no BLAS thread spins once the work ends). Streams join and leave at
tick boundaries; ``Stream.cancel`` returns once the tick holding the stream is over (≤ one
frame) and never delays the others.

Deadlines: each stream's lead is the audio it has out ahead of a consumer playing in real time
from its first frame. A stream more than ``max_lead`` seconds ahead sits out a tick while
another is behind it; a stream's first frame goes first (its prefill is served before the
others'); prefills are cut into pieces of at most ``PREFILL_PIECE_TOKENS`` while other streams
are stepping, and run whole when nothing else does or every speaking stream has audio in
hand. Admission: at most ``max_streams`` streams have work at once; later ones wait in order
(logged; ``on_wait`` of the scheduler, and of the waiting stream, is called with each wait,
under the scheduler's lock: keep it short and do not call the scheduler from it).
``max_streams="auto"`` sets that limit from what the work measurably costs: a stream is
admitted while a tick with it added is estimated (``StageCosts.tick_seconds``) to take at most
``AUTO_LOAD`` of a frame, so the streams already speaking stay in real time; above
``FREE_LOAD`` of a frame at most one stream is admitted a tick (each priced with the one before
it at work). The waiting streams are looked at again after every tick, as the estimates move.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .channel import usable_cores
from .streams import FRAME_SECONDS, ChunkJob, Notice, Stream
from .tick_costs import StageCosts
from .ticks import PREFILL_PIECE_TOKENS, PREFILL_TOKENS_PER_TICK, TickPlan

if TYPE_CHECKING:
    from .backends.base import Backend
    from .synthesis import TimedText
    from .timestamps import Heads
    from .word_timing import SessionWords

logger = logging.getLogger(__name__)

MAX_LEAD_SECONDS = 1.0
"""Lead beyond which a stream waits while another stream is behind it."""
AUTO = "auto"
"""``max_streams`` value: the limit follows the measured cost of a tick."""
AUTO_LOAD = 0.85
"""Share of a frame's time that ticks may fill under ``max_streams="auto"`` (the rest is the
margin for prefills, the machine's other work and estimates that lag behind)."""
FREE_LOAD = 0.7
"""Below this share of a frame, "auto" admits any number of streams in one tick (above it, one
a tick: streams arriving together near the limit start one after another)."""

_stream_ids = itertools.count()


@dataclass(frozen=True)
class AdmissionWait:
    """A stream waiting for a slot (``waited`` None) or admitted after a wait (seconds)."""

    stream: str
    position: int  # 1 = next in line (0 once admitted)
    active: int
    waited: float | None = None


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
        """``max_streams``: None (no limit), an integer ≥ 1 or ``"auto"`` (module docstring);
        ``costs``: the running cost estimates to start from (default: ``StageCosts()``)."""
        if threads is not None and threads < 1:
            raise ValueError(f"scheduler threads must be at least 1, got {threads}")
        if max_streams not in (None, AUTO) and not (
            isinstance(max_streams, int) and not isinstance(max_streams, bool) and max_streams >= 1
        ):
            raise ValueError(
                f"max_streams must be an integer ≥ 1, 'auto' or None, got {max_streams!r}"
            )
        self.backend = backend
        self.threads = threads or usable_cores()
        self.max_streams = max_streams
        self.max_lead = max_lead
        self._on_wait = on_wait
        self._clock = clock
        self._cond = threading.Condition()
        self._active: list[Stream] = []
        self._waiting: deque[Stream] = deque()
        self._ticks = 0
        self._admitted_at = -1  # the tick count when a stream was last admitted
        self._busy = 0  # pool threads running a task
        self._in_tick = False
        self._closed = False
        self._pool: list[threading.Thread] = []
        self._tasks: queue.SimpleQueue[_Tick | None] = queue.SimpleQueue()
        self._blas_limit: Any = None
        self._costs = costs or StageCosts()  # what each kind of work costs: ticks, admission

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
    ) -> Stream:
        """A new stream (idle until its first job) with its own random generator; ``words``:
        the word timing its timed utterances' frames go through, in order; ``on_wait``: told
        when it waits for a slot and when it is admitted (see the module docstring)."""
        name = name or f"pocket-tts-stream-{next(_stream_ids)}"
        stream = Stream(self.backend, name, on_output, on_error, seed=seed, words=words)
        stream.on_wait = on_wait
        return stream

    def submit(self, stream: Stream, job: ChunkJob | Notice) -> None:
        """Queue a chunk or a notice on a stream (thread-safe); it runs in order."""
        with self._cond:
            if self._closed:
                raise RuntimeError("this scheduler is closed")
            if stream.stopped:
                return
            stream.jobs.append(job)
            self._request_slot(stream)
            self._start_pool()
            self._cond.notify_all()

    def cancel(self, stream: Stream) -> None:
        """Drop the stream's work; return once no computation of it runs (≤ one tick)."""
        with self._cond:
            self._stop(stream)
            if threading.current_thread() not in self._pool:
                while stream.busy:
                    self._cond.wait()
        with stream.delivery:  # an output being handed over finishes first; no more follow
            pass

    def stats(self) -> SchedulerStats:
        with self._cond:
            return SchedulerStats(
                len(self._active), len(self._waiting), self._ticks, self._busy, len(self._pool)
            )

    def wait_parked(self, timeout: float | None = None) -> bool:
        """Wait until no stream has work and every pool thread is parked (True), or timeout."""
        with self._cond:
            return self._cond.wait_for(
                lambda: not self._active and not self._in_tick and self._busy == 0, timeout
            )

    def close(self) -> None:
        """Stop the pool threads (streams with work are cancelled)."""
        with self._cond:
            self._closed = True
            for stream in [*self._active, *self._waiting]:
                self._stop(stream)
            self._cond.notify_all()
            pool = list(self._pool)
        for _ in pool[1:]:
            self._tasks.put(None)
        for thread in pool:
            if thread is not threading.current_thread():
                thread.join()
        if self._blas_limit is not None:
            self._blas_limit.restore_original_limits()
            self._blas_limit = None

    # -- admission (under the lock) -------------------------------------------------------
    def _request_slot(self, stream: Stream) -> None:
        if stream.admitted or stream in self._waiting:
            return
        if not self._waiting and self._slot_free():
            self._admit(stream)
            return
        stream.waiting_since = self._clock()
        self._waiting.append(stream)
        event = AdmissionWait(stream.name, len(self._waiting), len(self._active))
        logger.info(
            "%s waits for a slot: %d streams speak (max_streams=%s), %d in line",
            stream.name,
            len(self._active),
            self._limit_text(),
            len(self._waiting),
        )
        self._notify_wait(stream, event)

    def _slot_free(self) -> bool:
        """Whether one more stream may have work now (under "auto", near the limit, one stream
        a tick, so each admission is priced with the one before it at work)."""
        active = len(self._active)
        if self.max_streams is None or active == 0:
            return True
        if self.max_streams == AUTO:
            estimate = self._costs.tick_seconds(active + 1, self.threads)
            if estimate <= FREE_LOAD * FRAME_SECONDS:
                return True
            return self._ticks > self._admitted_at and estimate <= AUTO_LOAD * FRAME_SECONDS
        return active < self.max_streams

    def _limit_text(self) -> str:
        if self.max_streams != AUTO:
            return str(self.max_streams)
        return (
            f"auto: a tick of {len(self._active) + 1} streams is estimated at "
            f"{1e3 * self._costs.tick_seconds(len(self._active) + 1, self.threads):.0f} ms"
        )

    def _release_slot(self, stream: Stream) -> None:
        if stream in self._waiting:
            self._waiting.remove(stream)
        if stream.admitted:
            stream.admitted = False
            self._active.remove(stream)
        self._admit_waiting()

    def _admit_waiting(self) -> None:
        """Admit the streams first in line while there is a slot for them."""
        while self._waiting and self._slot_free():
            admitted = self._waiting.popleft()
            self._admit(admitted)
            waited = self._clock() - (admitted.waiting_since or self._clock())
            logger.info("%s admitted after waiting %.2f s", admitted.name, waited)
            event = AdmissionWait(admitted.name, 0, len(self._active), waited)
            self._notify_wait(admitted, event)

    def _admit(self, stream: Stream) -> None:
        stream.admitted = True
        self._active.append(stream)
        self._admitted_at = self._ticks

    def _notify_wait(self, stream: Stream, event: AdmissionWait) -> None:
        for hook in (self._on_wait, stream.on_wait):
            if hook is not None:
                try:
                    hook(event)
                except Exception:
                    logger.exception("an on_wait hook of the scheduler failed")

    def _stop(self, stream: Stream) -> None:
        stream.stop()
        self._release_slot(stream)
        self._cond.notify_all()

    # -- the pool -----------------------------------------------------------------------
    def _start_pool(self) -> None:
        if self._pool:
            return
        self._limit_blas()
        self._pool = [
            threading.Thread(target=self._coordinate, name="pocket-tts-scheduler", daemon=True)
        ]
        self._pool += [
            threading.Thread(target=self._serve, name=f"pocket-tts-compute-{i}", daemon=True)
            for i in range(1, self.threads)
        ]
        for thread in self._pool:
            thread.start()

    def _limit_blas(self) -> None:
        """One BLAS thread per call: the pool's threads are the parallelism."""
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:  # pragma: no cover - a dependency; BLAS then keeps its threads
            logger.warning("threadpoolctl is missing: BLAS keeps its own threads")
            return
        self._blas = ThreadpoolController()
        self._blas_limit = self._blas.limit(limits=1, user_api="blas")

    def _wide_blas(self) -> contextlib.AbstractContextManager[Any]:
        """BLAS on every pool thread's core for one call, while the other threads are idle."""
        if self._blas_limit is None:
            return contextlib.nullcontext()
        return self._blas.limit(limits=self.threads, user_api="blas")

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
        """The first pool thread: plan a tick, run it with the others, apply its results."""
        while True:
            with self._cond:
                while not self._closed and not any(s.has_work for s in self._active):
                    self._cond.wait()
                if self._closed:
                    return
                plan = TickPlan(
                    self.backend,
                    self._active,
                    self._clock(),
                    self.threads,
                    self.max_lead,
                    self._costs,
                )
                self._in_tick = True
            outputs: list[tuple[Stream, list[Any]]] = list(plan.early_outputs)
            failed = dict(plan.early_failures)
            try:
                started = self._clock()
                self._run_tick(plan)
                with self._cond:
                    if plan.full_streams:
                        took = self._clock() - started
                        self._costs.tick_took(plan.full_streams, self.threads, took)
                    results, tick_failures = plan.apply(self._clock())
                outputs += results
                failed.update(tick_failures)
            except Exception as exc:  # a scheduler bug: fail the tick's streams, keep serving
                logger.exception("a scheduler tick failed")
                failed.update((stream, exc) for stream in plan.streams)
            with self._cond:
                for stream, error in failed.items():
                    if not stream.stopped:
                        self._stop(stream)
                        outputs.append((stream, [error]))
                self._ticks += 1
                for stream in plan.streams:
                    stream.busy = False
                for stream in list(self._active):
                    if not stream.has_work:
                        stream.went_idle()
                        self._release_slot(stream)
                self._admit_waiting()  # under "auto", the estimates moved with this tick
                self._in_tick = False
                self._cond.notify_all()
            _deliver(outputs)

    def _run_tick(self, plan: TickPlan) -> None:
        """Run the plan's tasks on the pool (this thread included); return when all are done."""
        if len(plan.tasks) == 1 and self.threads > 1:
            with self._wide_blas():  # a lone task (a first prefill or step): every core
                self._run_tasks(_Tick(plan.tasks))
        elif plan.tasks:
            tick = _Tick(plan.tasks)
            for _ in range(min(len(plan.tasks), len(self._pool)) - 1):
                self._tasks.put(tick)
            self._run_tasks(tick)
            tick.wait()


def _deliver(outputs: list[tuple[Stream, list[Any]]]) -> None:
    """Hand frames, notices and errors to their streams' callbacks (outside the lock)."""
    for stream, items in outputs:
        with stream.delivery:
            for item in items:
                if stream.stopped and not isinstance(item, BaseException):
                    continue  # cancelled meanwhile (or failed): no more frames come out
                try:
                    if isinstance(item, BaseException):
                        stream.on_error(item)
                    else:
                        stream.on_output(item)
                except Exception:
                    logger.exception("the output callback of %s failed", stream.name)


class SessionLink:
    """A session's end of its model's scheduler: utterances in, frames and markers out.

    Frames and notices go into the session's frame channel in order (``finish`` closes it
    after the last frame); ``on_failure`` gets the error that stopped the stream, which then
    also ends the channel. The random generator (``seed``) belongs to the stream, as it
    belongs to a session. ``done``: utterances whose last frame is out.
    """

    def __init__(
        self,
        scheduler: Scheduler,
        seed: int | None,
        channel: Any,
        on_failure: Callable[[BaseException], None],
        name: str | None = None,
        words: SessionWords | None = None,
        on_wait: Callable[[AdmissionWait], None] | None = None,
    ) -> None:
        self._scheduler = scheduler
        self._channel = channel
        self._on_failure = on_failure
        self.done = 0
        self._stream = scheduler.open_stream(
            self._output, self._failed, seed=seed, name=name, words=words, on_wait=on_wait
        )

    def speak(
        self,
        utterance_index: int,
        chunks: list[Any],
        voice_state: Any,
        settings: Any,
        seed: Any,
        timed: TimedText | None = None,
        heads: Heads | None = None,
    ) -> None:
        """Queue an utterance's prepared chunks (``seed``: restart the generator first;
        ``timed``: its caller words, timed from ``heads`` or estimated without)."""
        last = len(chunks) - 1
        for i, plan in enumerate(chunks):
            job = ChunkJob(
                plan,
                voice_state,
                settings,
                utterance_index,
                i,
                i == last,
                seed if i == 0 else None,
                timed,
                heads,
            )
            self._scheduler.submit(self._stream, job)

    def notice(self, item: Any) -> None:
        """Put ``item`` (a marker) in the channel after every frame queued before it."""
        self._scheduler.submit(self._stream, Notice(item))

    def finish(self) -> None:
        """Close the channel after every frame queued so far."""
        self._scheduler.submit(self._stream, Notice(_FINISH))

    def cancel(self) -> None:
        """Drop everything; return once no computation of this stream runs."""
        self._scheduler.cancel(self._stream)

    def abandon(self) -> None:
        """Its session was dropped without finish() or cancel(): drop its stream.

        Called by a finalizer, possibly while this thread holds the scheduler's lock (a
        garbage collection anywhere): the cancel runs on a thread of its own.
        """
        threading.Thread(target=self.cancel, name="pocket-tts-abandon", daemon=True).start()

    def _output(self, item: Any) -> None:
        if item is _FINISH:
            self._channel.close()
        elif self._channel.put(item) and getattr(item, "is_last_in_utterance", False):
            self.done += 1

    def _failed(self, error: BaseException) -> None:
        self._on_failure(error)
        self._channel.close(error)


_FINISH: Any = object()


__all__ = [
    "MAX_LEAD_SECONDS",
    "PREFILL_PIECE_TOKENS",
    "PREFILL_TOKENS_PER_TICK",
    "AdmissionWait",
    "ChunkJob",
    "Notice",
    "Scheduler",
    "SchedulerStats",
    "SessionLink",
    "Stream",
]
