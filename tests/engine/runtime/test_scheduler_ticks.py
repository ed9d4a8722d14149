"""Which streams a tick steps, decodes and prefills, and in how many parts (``ticks.choose_tick``
and the ``TickPlan`` of its choice), on stand-in streams: choosing only reads what a stream
wants and how far ahead it is."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pipecat_pocket_tts.engine.runtime.tick_costs import StageCosts
from pipecat_pocket_tts.engine.runtime.tick_plan import TickPlan
from pipecat_pocket_tts.engine.runtime.ticks import choose_tick, start_next_runs


@dataclass(eq=False)
class _Run:
    prefill_left: int = 0
    state: object = field(default_factory=object)
    previous: np.ndarray | None = None
    probe: object = None

    def prefill_piece(self, tokens: int) -> np.ndarray:
        return np.zeros((tokens, 4), np.float32)

    def final_probe(self) -> None:
        return None

    def frame_limit(self) -> int:
        return 10


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
    ahead: float = 0.0  # its lead, seconds
    pending: int = 1  # frames sampled, waiting for their decode
    decoding: bool = False  # a carried decode of its frames runs

    def __post_init__(self) -> None:
        self.run = _Run(prefill_left=self.prefill)

    @property
    def wants_prefill(self) -> bool:
        return self.prefill > 0

    @property
    def has_work(self) -> bool:
        return self.wants_step or self.wants_decode or self.wants_prefill

    @property
    def ready(self) -> bool:
        return self.has_work

    @property
    def pending_frames(self) -> int:
        return self.pending

    def next_run(self) -> list:
        return []

    def lead(self, now: float) -> float:
        return self.ahead

    def noise(self) -> np.ndarray:
        return np.zeros(4, np.float32)

    def next_decode(self) -> np.ndarray:
        return np.zeros(4, np.float32)

    def next_decodes(self, frames: int) -> np.ndarray:
        return np.zeros((frames, 4), np.float32)


def _plan(streams: list[_Stream], threads: int = 2, costs: StageCosts | None = None) -> TickPlan:
    costs = costs or StageCosts()
    candidates, _, _ = start_next_runs(streams)  # type: ignore[arg-type]
    choice = choose_tick(candidates, 0.0, threads, 1.0, costs)
    return TickPlan(None, choice, costs)  # type: ignore[arg-type]


def test_choosing_a_tick_changes_no_stream():
    streams = [
        _Stream("new", prefill=40),
        _Stream("speaking", started=True, wants_step=True, wants_decode=True),
        _Stream("ahead", started=True, wants_step=True, ahead=3.0),
        _Stream("decoding", started=True, wants_decode=True),
    ]
    before = [dict(vars(s)) for s in streams]
    choice = choose_tick(streams, 0.0, 2, 1.0, StageCosts())  # type: ignore[arg-type]
    assert [dict(vars(s)) for s in streams] == before
    assert choice.streams == {streams[0], streams[1], streams[3]}  # "ahead" waits
    assert not any(s.busy for s in streams)


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


def test_a_lone_starting_stream_prefills_steps_and_decodes_in_one_first_task():
    new = _Stream("new", prefill=14)
    running = [
        _Stream(f"old{i}", started=True, wants_step=True, wants_decode=True, ahead=0.5)
        for i in range(3)
    ]
    plan = _plan([*running, new])
    assert plan.first_frames == [(new, 14)] and plan.prefills == []
    assert new in plan.streams
    assert len(plan.tasks) == 1 + len(plan.step_parts) + len(plan.decode_parts)
    # Alone, too: one task, not a prefill tick, a step tick and a decode tick.
    plan = _plan([_Stream("alone", prefill=14)])
    assert len(plan.first_frames) == 1 and len(plan.tasks) == 1


def test_a_stream_whose_frame_is_still_decoding_starts_no_first_frame_task():
    """A chunk of one frame, its decode carried: the next chunk's prefill ends while that
    decode runs. Its first frame must not be decoded beside it (the same Mimi state, and out
    of order): the prefill goes as a plain piece and the frame comes by a step and a decode."""
    stream = _Stream("short", prefill=14, decoding=True, pending=0)
    plan = _plan([stream])
    assert plan.first_frames == [] and plan.prefills == [(stream, 14)]
    stream.decoding = False
    assert _plan([stream]).first_frames == [(stream, 14)]


def test_a_crowd_starting_together_prefills_then_steps_and_decodes_in_batches():
    crowd = [_Stream(f"new{i}", prefill=14) for i in range(3)]  # more than the 2 threads
    plan = _plan(crowd)
    assert plan.first_frames == [] and len(plan.prefills) == 3
    assert _plan(crowd[:2]).first_frames == [(crowd[0], 14), (crowd[1], 14)]


def test_a_prefill_that_does_not_end_this_tick_is_a_plain_piece():
    # 40 tokens beside a stream with little audio in hand: pieces of at most 16.
    new = _Stream("new", prefill=40)
    running = _Stream("old", started=True, wants_step=True, wants_decode=True, ahead=0.1)
    plan = _plan([running, new])
    assert plan.first_frames == [] and plan.prefills == [(new, 16)]


def test_a_stream_far_ahead_neither_steps_nor_decodes_while_another_is_behind():
    ahead = _Stream("ahead", started=True, wants_step=True, wants_decode=True, ahead=1.5)
    behind = _Stream("behind", started=True, wants_step=True, wants_decode=True, ahead=0.2)
    plan = _plan([ahead, behind])
    assert {s.name for part in plan.step_parts for s in part} == {"behind"}
    assert {s.name for part in plan.decode_parts for s in part} == {"behind"}
    behind.ahead = 1.2  # nobody behind: both go on
    plan = _plan([ahead, behind])
    assert {s.name for part in plan.decode_parts for s in part} == {"ahead", "behind"}


def test_streams_all_running_ahead_step_together_across_the_lead_limit():
    """Leads of 0.95, 1.1 and 2.1 s (limit 1 s): the two within a second of the one behind
    keep its batch whole (holding them back would only cut the step in two); the one more
    than a second ahead of it waits."""
    streams = [
        _Stream(name, started=True, wants_step=True, wants_decode=True, ahead=lead)
        for name, lead in (("behind", 0.95), ("near", 1.1), ("far", 2.1))
    ]
    plan = _plan(streams)
    assert [sorted(s.name for s in part) for part in plan.step_parts] == [["behind", "near"]]


def test_decode_parts_are_cut_by_frames_when_streams_decode_blocks():
    from pipecat_pocket_tts.engine.runtime.tick_parts import cut_frames

    streams = [_Stream(f"s{i}") for i in range(4)]
    frames = dict(zip(streams, (4, 1, 1, 2), strict=True))
    parts = cut_frames(streams, frames, [4, 4])  # type: ignore[arg-type]
    assert [[s.name for s in part] for part in parts] == [["s0"], ["s1", "s2", "s3"]]
    ones = dict.fromkeys(streams, 1)
    assert [len(p) for p in cut_frames(streams, ones, [3, 1])] == [3, 1]  # type: ignore[arg-type]


def test_block_decodes_go_in_parts_of_a_stream_or_two_so_threads_finish_together():
    """Four streams decoding blocks of 4 beside one step: cut into parts of at most
    ``BLOCK_PART_FRAMES`` frames that the threads take as they come free (two parts of 8 once
    sat behind a 39 ms step on one thread: 20 ms idle a tick); single frames stay whole."""
    from pipecat_pocket_tts.engine.runtime.tick_parts import BLOCK_PART_FRAMES, _finer

    assert _finer([16, 5]) == [4, 4, 4, 4, 3, 2]
    assert all(part <= BLOCK_PART_FRAMES for part in _finer([13, 1]))
    costs = StageCosts(step_by_batch={4: 0.039, 2: 0.030}, decode_per_stream=0.010)
    streams = [
        _Stream(f"s{i}", started=True, wants_step=True, wants_decode=True, pending=4)
        for i in range(4)
    ]
    choice = choose_tick(streams, 0.0, 2, 1.0, costs, blocks=False)  # type: ignore[arg-type]
    assert [len(part) for part in choice.decode_parts] == [4]  # single frames: one call
    for stream in streams:
        stream.ahead = 2.0  # far ahead: its pending frames decode as one block
    choice = choose_tick(streams, 0.0, 2, 1.0, costs, blocks=True)  # type: ignore[arg-type]
    assert [len(part) for part in choice.decode_parts] == [1, 1, 1, 1]
    assert [choice.frames[part[0]] for part in choice.decode_parts[:3]] == [4, 4, 4]


def test_the_last_block_is_shortened_to_level_the_threads_only_with_lead_to_spare():
    """A 36 ms step on one thread, three blocks of 4 frames (4 ms a frame) that the other
    takes one after another: 48 ms against 36. The last stream decodes 1 frame now and 3 a
    tick later, if its lead covers them beyond ``BLOCK_LEAD_SECONDS``; else all 4."""
    from pipecat_pocket_tts.engine.runtime.ticks import BLOCK_LEAD_SECONDS

    costs = StageCosts(step_by_batch={3: 0.036, 2: 0.034}, decode_per_stream=0.004)
    streams = [
        _Stream(f"s{i}", started=True, wants_step=True, wants_decode=True, pending=4, ahead=2.0)
        for i in range(3)
    ]
    choice = choose_tick(streams, 0.0, 2, 3.0, costs, blocks=True)  # type: ignore[arg-type]
    assert [len(part) for part in choice.decode_parts] == [1, 1, 1]
    last = choice.decode_parts[-1][0]
    assert sorted(choice.frames.values()) == [1, 4, 4] and choice.frames[last] == 1
    for stream in streams:
        stream.ahead = BLOCK_LEAD_SECONDS + 0.05  # a block, but no frame to spare
    choice = choose_tick(streams, 0.0, 2, 3.0, costs, blocks=True)  # type: ignore[arg-type]
    assert set(choice.frames.values()) == {4}


def test_a_step_splits_when_the_other_work_cannot_fill_the_other_thread():
    """16 streams step (40 ms as one call, 23 ms as half); the other thread has one stream's
    decode (4 ms): two halves end the tick at ~25 ms where one call took 40."""
    costs = StageCosts(step_by_batch={16: 0.040, 8: 0.023}, decode_per_stream=0.004)
    streams = [_Stream(f"s{i}", started=True, wants_step=True) for i in range(16)]
    streams[0].wants_decode = True
    choice = choose_tick(streams, 0.0, 2, 1.0, costs)  # type: ignore[arg-type]
    assert [len(part) for part in choice.step_parts] == [8, 8]
    for stream in streams:  # every stream decodes (16 · 4 ms): the step stays one call
        stream.wants_decode = True
    choice = choose_tick(streams, 0.0, 2, 1.0, costs)  # type: ignore[arg-type]
    assert [len(part) for part in choice.step_parts] == [16]


def test_a_block_waits_only_for_a_stream_with_lead_and_frames_to_come():
    from pipecat_pocket_tts.engine.runtime.ticks import BLOCK_FRAMES, _block_frames

    tick = 0.05
    behind = _Stream("behind", started=True, wants_step=True, pending=1)
    assert _block_frames(behind, 0.1, tick) == 1  # near its deadline: at once
    starting = _Stream("starting", wants_step=True, pending=1)
    assert _block_frames(starting, 2.0, tick) == 1  # a first frame: at once
    ahead = _Stream("ahead", started=True, wants_step=True, pending=1)
    assert _block_frames(ahead, 2.0, tick) == 0  # far ahead, frames still coming: waits
    ahead.pending = BLOCK_FRAMES
    assert _block_frames(ahead, 2.0, tick) == BLOCK_FRAMES
    done = _Stream("done", started=True, wants_step=False, pending=2)
    assert _block_frames(done, 2.0, tick) == 2  # no more frames to wait for


def test_fewer_streams_than_threads_carry_their_decodes_beside_the_steps():
    """One stream far ahead, frames still coming: on one thread its decode waits to grow a
    block; on two, the thread beside its step decodes what it has at once, carried (the tick
    does not wait for it), a block of every frame sampled while its last decode ran."""
    costs = StageCosts(step_by_batch={1: 0.005}, decode_per_stream=0.004)
    stream = _Stream("s0", started=True, wants_step=True, wants_decode=True, ahead=2.0)
    one = choose_tick([stream], 0.0, 1, 3.0, costs, blocks=True)  # type: ignore[list-item]
    assert one.decoding == [] and one.stepping == [stream] and not one.carried
    two = choose_tick([stream], 0.0, 2, 3.0, costs, blocks=True)  # type: ignore[list-item]
    assert two.decoding == [stream] and two.frames[stream] == 1 and two.carried
    stream.pending = 3
    three = choose_tick([stream], 0.0, 2, 3.0, costs, blocks=True)  # type: ignore[list-item]
    assert three.frames[stream] == 3 and three.carried
    exact = choose_tick([stream], 0.0, 2, 3.0, costs, blocks=False)  # type: ignore[list-item]
    assert exact.frames[stream] == 1 and exact.carried  # no exact blocks: a frame at a time
    pair = [
        _Stream(f"s{i}", started=True, wants_step=True, wants_decode=True, ahead=2.0)
        for i in range(2)
    ]
    both = choose_tick(pair, 0.0, 2, 3.0, costs, blocks=True)  # type: ignore[arg-type]
    assert both.decoding == [] and not both.carried  # as many as threads: blocks, waited for


def test_a_tick_of_nothing_but_decodes_carries_none():
    """Carrying lets the next tick's steps start at once; with no steps, prefills or first
    frames in the tick, its decodes are its work, run as ever."""
    stream = _Stream("done", started=True, wants_decode=True, pending=2, ahead=2.0)
    choice = choose_tick([stream], 0.0, 2, 3.0, StageCosts(), blocks=True)  # type: ignore[list-item]
    assert choice.decoding == [stream] and choice.frames[stream] == 2 and not choice.carried
    plan = TickPlan(None, choice, StageCosts())  # type: ignore[arg-type]
    assert len(plan.tasks) == 1 and plan.carried == []


def test_a_carried_tick_keeps_its_decodes_apart_and_prices_no_admission():
    """Its decode tasks are the plan's ``carried``, not its ``tasks`` (which the tick waits
    for); such a tick is no steady tick for the admission's stretch."""
    stream = _Stream("s0", started=True, wants_step=True, wants_decode=True, ahead=2.0)
    choice = choose_tick([stream], 0.0, 2, 3.0, StageCosts(), blocks=True)  # type: ignore[list-item]
    plan = TickPlan(None, choice, StageCosts())  # type: ignore[arg-type]
    assert len(plan.tasks) == 1 and len(plan.carried) == 1 and not plan.steady
    assert plan.decode_parts == [[stream]]
