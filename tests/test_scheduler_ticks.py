"""Which streams a tick steps, decodes and prefills, and in how many parts (``ticks.TickPlan``),
on stand-in streams: the plan only reads what a stream wants and how far ahead it is."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pipecat_pocket_tts.engine.tick_costs import StageCosts
from pipecat_pocket_tts.engine.ticks import TickPlan


@dataclass(eq=False)
class _Run:
    prefill_left: int = 0
    state: object = field(default_factory=object)
    previous: np.ndarray | None = None
    probe: object = None

    def prefill_piece(self, tokens: int) -> np.ndarray:
        return np.zeros((tokens, 4), np.float32)


@dataclass(eq=False)
class _Stream:
    """A stream that wants the given work; ``started``: its first frame is out."""

    name: str
    started: bool = False
    wants_step: bool = False
    wants_decode: bool = False
    prefill: int = 0
    stopped: bool = False
    busy: bool = False
    mimi: object = field(default_factory=object)

    def __post_init__(self) -> None:
        self.run = _Run(prefill_left=self.prefill)

    @property
    def wants_prefill(self) -> bool:
        return self.prefill > 0

    @property
    def has_work(self) -> bool:
        return self.wants_step or self.wants_decode or self.wants_prefill

    def next_run(self) -> list:
        return []

    def lead(self, now: float) -> float:
        return 0.0

    def noise(self) -> np.ndarray:
        return np.zeros(4, np.float32)

    def next_decode(self) -> np.ndarray:
        return np.zeros(4, np.float32)


def _plan(streams: list[_Stream], threads: int = 2, costs: StageCosts | None = None) -> TickPlan:
    return TickPlan(None, streams, 0.0, threads, 1.0, costs or StageCosts())  # type: ignore[arg-type]


def _sizes(parts) -> list[int]:
    return sorted((len(part) for part in parts), reverse=True)


def test_first_steps_alone_in_a_tick_get_a_part_per_thread():
    # Six streams that started together, prefilled, each stepping its first frame.
    streams = [_Stream(f"s{i}", wants_step=True) for i in range(6)]
    assert _sizes(_plan(streams).step_parts) == [3, 3]
    assert _sizes(_plan(streams, threads=4).step_parts) == [2, 2, 2]  # at most one a thread


def test_a_tick_with_decodes_steps_in_one_call_on_two_threads():
    streams = [_Stream(f"s{i}", started=True, wants_step=True, wants_decode=True) for i in range(6)]
    plan = _plan(streams)
    assert _sizes(plan.step_parts) == [6]
    assert sum(len(part) for part in plan.decode_parts) == 6


def test_a_stream_decoding_its_first_frame_steps_the_tick_after():
    first = [_Stream(f"new{i}", wants_step=True, wants_decode=True) for i in range(3)]
    running = [
        _Stream(f"old{i}", started=True, wants_step=True, wants_decode=True) for i in range(2)
    ]
    plan = _plan(first + running)
    stepping = {stream.name for part in plan.step_parts for stream in part}
    decoding = {stream.name for part in plan.decode_parts for stream in part}
    assert stepping == {"old0", "old1"}
    assert decoding == {"new0", "new1", "new2", "old0", "old1"}
    # Alone, the first frames' decodes share the threads.
    plan = _plan(first)
    assert plan.step_parts == [] and _sizes(plan.decode_parts) == [2, 1]


def test_the_decodes_level_against_the_step_cost_measured_at_its_batch_size():
    costs = StageCosts(decode_per_stream=0.010)
    for _ in range(30):  # a lone stream's step is dear per stream, a batch of 6 cheap
        costs.measured("step", 0.017, 1)
        costs.measured("step", 0.036, 6)
    streams = [_Stream(f"s{i}", started=True, wants_step=True, wants_decode=True) for i in range(6)]
    # 36 ms of step on one thread and 60 ms of decodes: one decode goes with the step (priced
    # per stream, the step would look like 6 × ~10 ms and every decode would go to the other).
    assert _sizes(_plan(streams, costs=costs).decode_parts) == [5, 1]
