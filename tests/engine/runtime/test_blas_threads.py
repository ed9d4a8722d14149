"""BLAS at one thread per call for as long as any scheduler of the process runs.

Each test starts from BLAS at two threads (``threadpool_limits``), so a setting restored too
early shows as 2 whatever this machine's default is.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
import textwrap

import pytest
from test_scheduler import END, start
from threadpoolctl import threadpool_info, threadpool_limits

from pipecat_pocket_tts.engine.runtime.blas_threads import BLAS_THREADS
from pipecat_pocket_tts.engine.runtime.scheduler import Scheduler


def blas_threads() -> set[int]:
    """The thread counts of the process's BLAS libraries (one entry with one OpenBLAS)."""
    counts = {info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"}
    assert counts, "no BLAS library found by threadpoolctl"
    return counts


@pytest.fixture
def two_threads():
    with threadpool_limits(limits=2, user_api="blas"):
        assert blas_threads() == {2}
        yield


# The setting is one per process, and schedulers left running by earlier tests of this process
# may hold, widen or restore it at any moment: the two tests of BlasThreads alone run in a
# fresh interpreter with no scheduler.
ALONE_PRELUDE = f"""
from threadpoolctl import threadpool_info, threadpool_limits
from pipecat_pocket_tts.engine.runtime.blas_threads import BlasThreads

{inspect.getsource(blas_threads)}
threadpool_limits(limits=2, user_api="blas")
assert blas_threads() == {{2}}
setting = BlasThreads()
"""


def run_alone(body: str) -> None:
    """Run ``body`` after ``ALONE_PRELUDE`` in a fresh interpreter; its failure fails the test."""
    done = subprocess.run(
        [sys.executable, "-c", ALONE_PRELUDE + textwrap.dedent(body)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def test_the_last_holder_restores_the_setting_the_first_found():
    run_alone(
        """
        setting.hold()
        assert blas_threads() == {1}
        setting.hold()
        setting.release()
        assert blas_threads() == {1}  # one pool still runs
        setting.release()
        assert blas_threads() == {2}
        try:
            setting.release()
        except RuntimeError as exc:
            assert "without a matching hold" in str(exc)
        else:
            raise AssertionError("a release without a hold was accepted")
        """
    )


def test_a_lone_call_widens_only_while_one_pool_holds():
    run_alone(
        """
        setting.hold()
        with setting.widened(2):
            assert blas_threads() == {2}
        assert blas_threads() == {1}
        setting.hold()
        with setting.widened(2):
            assert blas_threads() == {1}  # another model's pool may be computing
        setting.release()
        with setting.widened(2):
            assert blas_threads() == {2}
            setting.hold()  # a pool starting during the window narrows BLAS at once
            assert blas_threads() == {1}
        assert blas_threads() == {1}
        setting.release()
        setting.release()
        assert blas_threads() == {2}
        """
    )


def test_closing_one_models_scheduler_keeps_the_others_blas_at_one_thread(engine_tts, two_threads):
    holders = BLAS_THREADS.holders
    first = Scheduler(engine_tts.backend, threads=2)
    second = Scheduler(engine_tts.backend, threads=2)
    try:
        for scheduler in (first, second):
            _, collector = start(scheduler, engine_tts, ["Hello there."], seed=1)
            assert collector.ended.wait(60)
            assert collector.notices == [END] and not collector.errors
        assert BLAS_THREADS.holders == holders + 2
        first.close()
        assert blas_threads() == {1}  # the second pool still runs on one BLAS thread each
        _, collector = start(second, engine_tts, ["It keeps speaking."], seed=2)
        assert collector.ended.wait(60) and collector.frames and not collector.errors
    finally:
        first.close()
        second.close()
    assert BLAS_THREADS.holders == holders
    assert blas_threads() == ({2} if holders == 0 else {1})
