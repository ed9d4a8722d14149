"""What a tick's work costs, and how it is cut so the pool's threads finish together.

A tick's tasks are taken in order by whichever pool thread is free. ``StageCosts`` keeps
running estimates (thread CPU seconds, measured on the tasks themselves) of a FlowLM step +
sampler call per batch size, a Mimi decode per stream and a prefill per token (the voice copy
of a starting chunk included). ``decode_shares`` then gives each thread the decode streams
that bring it up to the same finishing time as the others (water-filling over the step and
prefill work the threads already have), so a 2-thread pool
runs, per tick, the step and a small decode part on one thread and one large decode part on
the other: the fewest, largest Mimi batches with no thread waiting at the end of the tick.
"""

from __future__ import annotations

from dataclasses import dataclass, field

SMOOTHING = 0.3
"""Weight of the newest measurement in the running estimates."""
WALL_SMOOTHING = 0.1
"""Weight of the newest tick in ``StageCosts.tick_stretch`` (slower: admission follows it)."""
STRETCH_CAP = 8.0
"""Most wall seconds a tick is taken to spend per second of its threads' work (a tick stalled
by a pause counts as this much)."""


@dataclass
class StageCosts:
    """Running estimates of thread CPU seconds (updated under the scheduler's lock). The
    defaults are rough full-size figures; a few ticks replace them.

    ``tick_seconds`` prices a whole tick in wall time, for admission (``max_streams="auto"``):
    the work of its threads (their measured CPU seconds on the kernels the load chose, spread
    over the threads) times ``tick_stretch``, plus ``tick_overhead``. The stretch is learned
    from the wall time of steady ticks (steps and decodes, frame blocks included) against the
    CPU time their busiest thread spent: a machine whose cores other processes share gives the
    pool's threads a fraction of their time, which lengthens every tick in proportion to its
    work (on a quiet machine it stays near 1).

    A FlowLM step reads every weight once per call, so its cost grows far slower than its
    batch (full-size, one thread: ~17 ms for one stream, ~40 ms for eight: about a fixed cost
    plus a cost per stream): it is kept per batch size, and a size not yet measured is priced
    on the line through the sizes that were (``step``). Decodes and prefills are priced per
    stream and per token.
    """

    # The prior only: measured steps go to ``step_by_batch``.
    step_per_stream: float = 0.004
    decode_per_stream: float = 0.012
    prefill_per_token: float = 0.002
    step_by_batch: dict[int, float] = field(default_factory=dict)
    #: Wall seconds of a tick beside its work: planning and applying it, the hand-over between
    #: tasks (measured on a quiet machine: ~5 ms at full size, at 1 to 9 streams alike, so
    #: it is added, not scaled). Fixed: the wall time beyond it goes to ``tick_stretch``.
    tick_overhead: float = 0.005
    #: Wall seconds a tick takes per second of its busiest thread's work, beyond
    #: ``tick_overhead`` (≥ 1: threads waiting on each other, the GIL, cores shared with
    #: other processes), from the ticks the scheduler reports (``tick_took``).
    tick_stretch: float = 1.0

    def step(self, batch: int) -> float:
        """Estimated seconds of one step + sampler call for ``batch`` streams: a measured size
        as measured; between two, on the line through them; beyond the largest, along the
        line through the smallest and the largest (``step_per_stream`` a stream while only one
        is known); below the smallest, per stream from it."""
        if batch <= 0:
            return 0.0
        measured = self.step_by_batch
        if batch in measured:
            return measured[batch]
        if not measured:
            return self.step_per_stream * batch
        below = [size for size in measured if size < batch]
        above = [size for size in measured if size > batch]
        if not below:
            smallest = min(above)
            return measured[smallest] / smallest * batch
        low = max(below)
        if above:
            high = min(above)
            slope = (measured[high] - measured[low]) / (high - low)
        # The widest span gives the steadiest slope.
        elif len(below) > 1:
            smallest = min(below)
            slope = (measured[low] - measured[smallest]) / (low - smallest)
        else:
            slope = self.step_per_stream
        return measured[low] + max(slope, 0.0) * (batch - low)

    def tick_seconds(self, streams: int, threads: int) -> float:
        """Estimated wall seconds of a tick in which ``streams`` streams each step and decode,
        on ``threads`` threads: the work spread over the threads (never less than the step,
        which runs on one of them) times ``tick_stretch``, plus ``tick_overhead``."""
        return self.tick_stretch * self.work_seconds(streams, threads) + self.tick_overhead

    def frame_cpu(self, streams: int) -> float:
        """CPU seconds of one frame of each of ``streams`` streams: a step + sampler call of
        the batch and a decode of each stream, as measured on the kernels in use."""
        return self.step(streams) + streams * self.decode_per_stream

    def work_seconds(self, streams: int, threads: int) -> float:
        """Seconds the busiest of ``threads`` threads works in a tick of ``streams`` streams
        each stepping and decoding: ``frame_cpu`` spread evenly, never less than the step."""
        return max(self.step(streams), self.frame_cpu(streams) / threads)

    def tick_took(self, work: float, seconds: float) -> None:
        """A tick whose busiest thread spent ``work`` CPU seconds on its tasks took ``seconds``
        of wall time: ``tick_stretch`` moves toward its wall time beyond ``tick_overhead`` per
        second of that work (never below 1, at most ``STRETCH_CAP``)."""
        if work <= 0 or seconds <= 0:
            return
        stretch = min(max((seconds - self.tick_overhead) / work, 1.0), STRETCH_CAP)
        self.tick_stretch += WALL_SMOOTHING * (stretch - self.tick_stretch)

    def measured(self, kind: str, seconds: float, count: int) -> None:
        """A task of ``kind`` ("step", "decode", "prefill") took ``seconds`` for ``count``
        streams (a step, a decode) or tokens (a prefill)."""
        if count <= 0 or seconds <= 0:
            return
        if kind == "step":
            old_call = self.step_by_batch.get(count, self.step(count))
            self.step_by_batch[count] = old_call + SMOOTHING * (seconds - old_call)
            return
        name = "decode_per_stream" if kind == "decode" else "prefill_per_token"
        old = getattr(self, name)
        setattr(self, name, old + SMOOTHING * (seconds / count - old))


def decode_shares(loads: list[float], streams: int, per_stream: float) -> list[int]:
    """Streams to decode on each thread, given the work ``loads`` [threads] (seconds) the
    threads already have: the shares level the threads' finishing times; they sum to
    ``streams`` (largest remainders)."""
    if streams <= 0:
        return [0] * len(loads)
    per_stream = max(per_stream, 1e-9)
    ordered = sorted(loads)
    total = streams * per_stream
    level = ordered[-1]
    for count in range(1, len(ordered) + 1):
        # The level when only the `count` least loaded threads take decodes.
        candidate = (total + sum(ordered[:count])) / count
        if count == len(ordered) or candidate <= ordered[count]:
            level = candidate
            break
    exact = [max(0.0, level - load) / per_stream for load in loads]
    shares = [int(share) for share in exact]
    by_remainder = sorted(range(len(loads)), key=lambda i: exact[i] - shares[i], reverse=True)
    for i in by_remainder[: streams - sum(shares)]:
        shares[i] += 1
    return shares


def thread_loads(costs: list[float], threads: int) -> list[float]:
    """The loads of ``threads`` threads taking tasks of ``costs`` in order, each task going
    to the thread that is free first (as the pool takes them)."""
    loads = [0.0] * threads
    for cost in costs:
        loads[loads.index(min(loads))] += cost
    return loads
