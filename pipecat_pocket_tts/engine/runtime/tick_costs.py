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
"""Weight of the newest tick in ``StageCosts.tick_overhead`` (slower: admission follows it)."""
OVERHEAD_CAP = 0.2
"""Most that one tick adds to the overhead estimate (seconds: a tick stalled by a pause)."""


@dataclass
class StageCosts:
    """Running estimates of thread CPU seconds (updated under the scheduler's lock). The
    defaults are rough full-size figures; a few ticks replace them.

    ``tick_seconds`` prices a whole tick in wall time, for admission (``max_streams="auto"``).

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
    #: Wall seconds of a tick beyond the CPU work it holds per thread: planning and applying
    #: it, the GIL, the hand-over between tasks (measured: ~5 ms at full size, at 1 to 9
    #: streams alike, so it is added, not scaled).
    tick_overhead: float = 0.005

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
        which runs on one of them), plus ``tick_overhead``."""
        return self._work_seconds(streams, threads) + self.tick_overhead

    def tick_took(self, streams: int, threads: int, seconds: float) -> None:
        """A tick in which ``streams`` streams each stepped and decoded took ``seconds`` of
        wall time: ``tick_overhead`` moves toward what it took beyond the work's estimate."""
        if streams <= 0 or seconds <= 0:
            return
        beyond = min(max(seconds - self._work_seconds(streams, threads), 0.0), OVERHEAD_CAP)
        self.tick_overhead += WALL_SMOOTHING * (beyond - self.tick_overhead)

    def _work_seconds(self, streams: int, threads: int) -> float:
        step = self.step(streams)
        return max(step, (step + streams * self.decode_per_stream) / threads)

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
