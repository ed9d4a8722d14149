"""How a tick's decodes are shared between the pool's threads (``engine/runtime/tick_costs.py``)."""

from __future__ import annotations

import pytest

from pipecat_pocket_tts.engine.runtime.tick_costs import (
    STRETCH_CAP,
    StageCosts,
    decode_shares,
    thread_loads,
)


def test_decodes_fill_the_threads_up_to_one_finishing_time():
    # A step worth 4 decodes on thread 0: of 16 decodes, 6 go with it and 10 to thread 1.
    assert decode_shares([4.0, 0.0], 16, 1.0) == [6, 10]
    # A step longer than all the decodes: every decode goes to the other thread.
    assert decode_shares([20.0, 0.0], 16, 1.0) == [0, 16]
    assert sorted(decode_shares([0.0, 0.0], 5, 1.0)) == [2, 3]
    assert decode_shares([1.0, 0.0, 0.0], 0, 1.0) == [0, 0, 0]


@pytest.mark.parametrize("streams", [1, 2, 7, 12, 16, 24])
@pytest.mark.parametrize("loads", [[0.0], [3.0, 0.0], [2.5, 0.5], [4.0, 1.0, 0.0, 9.0]])
def test_shares_sum_to_the_streams_and_level_the_threads(streams, loads):
    shares = decode_shares(loads, streams, 1.0)
    assert sum(shares) == streams and min(shares) >= 0
    finish = [load + share for load, share in zip(loads, shares, strict=True)]
    busy = [f for f, share in zip(finish, shares, strict=True) if share]
    # Threads given decodes finish within one decode of each other and of any idle one's load.
    assert max(busy) - min(finish) <= 1.0 + 1e-9 or max(busy) <= max(loads) + 1.0


def test_tasks_go_to_the_thread_free_first():
    assert thread_loads([5.0, 1.0, 1.0], 2) == [5.0, 2.0]
    assert thread_loads([], 3) == [0.0, 0.0, 0.0]


def test_costs_follow_the_measurements():
    costs = StageCosts(decode_per_stream=0.010)
    for _ in range(30):
        costs.measured("decode", 0.040, 8)
    assert costs.decode_per_stream == pytest.approx(0.005, rel=1e-3)
    before = costs.step_per_stream
    costs.measured("step", 0.0, 4)  # nothing measured: unchanged
    costs.measured("step", 0.1, 0)
    assert costs.step_per_stream == before
    assert costs.step_by_batch == {}


def test_a_step_is_priced_at_its_batch_size():
    costs = StageCosts(step_per_stream=0.004)
    assert costs.step(5) == pytest.approx(0.020)  # nothing measured yet: per stream
    for _ in range(40):
        costs.measured("step", 0.017, 1)
        costs.measured("step", 0.040, 8)
    assert costs.step(1) == pytest.approx(0.017, rel=1e-3)
    assert costs.step(8) == pytest.approx(0.040, rel=1e-3)
    slope = (0.040 - 0.017) / 7  # a fixed cost and a cost per stream
    assert costs.step(10) == pytest.approx(0.040 + 2 * slope, rel=1e-3)  # beyond 8: the line
    assert costs.step(2) == pytest.approx(0.017 + slope, rel=1e-3)  # between 1 and 8
    assert costs.step(0) == 0.0


def test_a_step_beyond_one_measured_size_adds_the_prior_per_stream():
    costs = StageCosts(step_per_stream=0.004)
    for _ in range(40):
        costs.measured("step", 0.020, 4)
    assert costs.step(6) == pytest.approx(0.020 + 2 * 0.004, rel=1e-3)
    assert costs.step(2) == pytest.approx(0.010, rel=1e-3)  # below: per stream from 4
    for _ in range(40):
        costs.measured("step", 0.019, 5)  # noise: a larger batch measured quicker
    assert costs.step(7) == pytest.approx(0.019, rel=1e-3)  # never a falling line


def test_a_tick_is_priced_in_wall_time_for_admission():
    costs = StageCosts(step_per_stream=0.004, decode_per_stream=0.012, tick_overhead=0.005)
    # Two threads: the work spread over both, plus the overhead.
    assert costs.tick_seconds(8, 2) == pytest.approx((0.032 + 0.096) / 2 + 0.005)
    # One thread, or a step longer than the spread work: never less than the step.
    assert costs.tick_seconds(3, 1) == pytest.approx(0.012 + 0.036 + 0.005)
    slow_step = StageCosts(step_per_stream=0.05, decode_per_stream=0.001, tick_overhead=0.0)
    assert slow_step.tick_seconds(2, 4) == pytest.approx(0.1)
    assert all(costs.tick_seconds(n, 2) < costs.tick_seconds(n + 1, 2) for n in range(1, 24))


def test_the_tick_stretch_follows_the_wall_time_per_second_of_work():
    costs = StageCosts(step_per_stream=0.004, decode_per_stream=0.012, tick_overhead=0.005)
    work = costs.work_seconds(4, 2)
    assert costs.tick_seconds(4, 2) == pytest.approx(work + 0.005)  # a quiet machine: 1
    for _ in range(80):  # the cores shared: every tick twice its work, plus the overhead
        costs.tick_took(work, 2 * work + 0.005)
    assert costs.tick_stretch == pytest.approx(2.0, rel=1e-3)
    # Scaled, not added: a tick of twice the streams is priced at twice the stretched work.
    assert costs.tick_seconds(8, 2) == pytest.approx(2 * costs.work_seconds(8, 2) + 0.005, 1e-3)
    for _ in range(200):
        costs.tick_took(work, work / 2)  # quicker than the estimate: never below 1
    assert costs.tick_stretch == pytest.approx(1.0, abs=1e-6)
    costs.tick_took(work, 60.0)  # a tick stalled by a pause counts for at most the cap
    assert costs.tick_stretch == pytest.approx(1.0 + 0.1 * (STRETCH_CAP - 1.0), rel=1e-3)
    before = costs.tick_stretch
    costs.tick_took(0.0, 1.0)
    costs.tick_took(work, 0.0)
    assert costs.tick_stretch == before
