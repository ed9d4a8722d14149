"""How a tick's decodes are shared between the pool's threads (``engine/tick_costs.py``)."""

from __future__ import annotations

import pytest

from pipecat_pocket_tts.engine.tick_costs import StageCosts, decode_shares, thread_loads


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
    assert costs.step(10) == pytest.approx(0.050, rel=1e-3)  # per stream from 8, the nearest
    assert costs.step(2) == pytest.approx(0.034, rel=1e-3)  # per stream from 1
    assert costs.step(0) == 0.0
