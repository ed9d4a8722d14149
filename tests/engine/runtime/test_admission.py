"""``max_streams="auto"`` from the measured costs (``engine/runtime/slots.py``): costs injected,
no clock and no model."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from pipecat_pocket_tts.engine.runtime.slots import AUTO_LOAD, StreamSlots
from pipecat_pocket_tts.engine.runtime.tick_costs import StageCosts

FRAME = 0.08


@dataclass(eq=False)
class FakeStream:
    """What admission reads and writes of a stream."""

    name: str
    admitted: bool = False
    waiting_since: float | None = None
    on_wait: None = None
    events: list = field(default_factory=list)


def measured_costs(step_fixed: float, step_each: float, decode: float) -> StageCosts:
    """Costs as a run's ticks leave them: steps measured at 1 and 32 streams, decodes per
    stream (the kernels' CPU seconds; a quiet machine until told otherwise)."""
    costs = StageCosts(decode_per_stream=decode, tick_overhead=0.005)
    costs.step_by_batch = {n: step_fixed + step_each * n for n in (1, 32)}
    return costs


def admitted(costs: StageCosts, threads: int, offered: int = 64) -> int:
    """Streams "auto" lets speak at once when ``offered`` arrive one a tick."""
    slots = StreamSlots("auto", costs, threads, FRAME, clock=lambda: 0.0, on_wait=None)
    for tick in range(offered):
        slots.request(FakeStream(f"s{tick}"), tick)  # type: ignore[arg-type]
        slots.admit_waiting(tick)
    return len(slots.active)


def carried(step_fixed: float, step_each: float, decode: float, threads: int) -> int:
    """The most streams whose frame, spread over the threads (never less than the step),
    fits ``AUTO_LOAD`` of a frame with the 5 ms overhead: the rule written out by hand."""
    n = 1
    while True:
        step = step_fixed + step_each * (n + 1)
        work = max(step, (step + decode * (n + 1)) / threads)
        if work + 0.005 > AUTO_LOAD * FRAME:
            return n
        n += 1


@pytest.mark.parametrize(
    ("kernels", "step_fixed", "step_each", "decode"),
    [
        ("AVX2, fp32 Mimi", 0.006, 0.0018, 0.0065),
        ("AVX-512 VNNI, int16 Mimi", 0.005, 0.0017, 0.0033),
    ],
)
@pytest.mark.parametrize("threads", [1, 2, 4])
def test_auto_admits_what_the_measured_cpu_per_frame_carries(
    kernels, step_fixed, step_each, decode, threads
):
    costs = measured_costs(step_fixed, step_each, decode)
    expected = carried(step_fixed, step_each, decode, threads)
    assert admitted(costs, threads) == expected
    # More threads carry more, until the step (on one thread) bounds the tick.
    if threads == 2:
        assert expected > carried(step_fixed, step_each, decode, 1)


def test_the_avx2_case_of_issue_49_admits_the_streams_it_carries():
    # ~12 ms of CPU a stream-frame at 12 streams (step 27.6 ms, decode 6.5 ms a stream) on
    # two threads: 12 streams fill 0.95 of a frame; "auto" keeps 0.85 and admits 10, not 8.
    costs = measured_costs(0.006, 0.0018, 0.0065)
    assert costs.frame_cpu(12) / 2 / FRAME == pytest.approx(0.66, abs=0.01)
    assert admitted(costs, 2) >= 10


def test_a_machine_shared_with_other_work_admits_in_proportion():
    quiet = measured_costs(0.006, 0.0018, 0.0065)
    shared = measured_costs(0.006, 0.0018, 0.0065)
    for _ in range(100):  # every tick of 6 streams took twice its work
        shared.tick_took(shared.work_seconds(6, 2), 2 * shared.work_seconds(6, 2) + 0.005)
    assert shared.tick_stretch == pytest.approx(2.0, rel=1e-3)
    fits = [n for n in range(1, 40) if 2 * shared.work_seconds(n, 2) + 0.005 <= AUTO_LOAD * FRAME]
    assert admitted(shared, 2) == max(fits)
    assert admitted(shared, 2) < admitted(quiet, 2)
    # A tick stretched at 6 streams prices 12 at twice their work, not at their work plus
    # what 6 streams' ticks took beyond theirs: the stretch scales with the work.
    assert shared.tick_seconds(12, 2) == pytest.approx(
        2 * shared.work_seconds(12, 2) + 0.005, rel=1e-3
    )
