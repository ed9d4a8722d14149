"""A model frees itself (issue 34): ``close()``, ``with``, a dropped model, ``clear_shared()``.

A model's scheduler runs a pool of threads; they must never keep the model alive. After 20
load–speak–drop cycles the process has the threads and open files it had after the first.
"""

from __future__ import annotations

import contextlib
import gc
import os
import threading
import weakref
from pathlib import Path

import pytest

from pipecat_pocket_tts.engine import Marker, PocketTTS
from pipecat_pocket_tts.engine.errors import SessionClosedError


def open_files() -> dict[int, str]:
    """The process's open file descriptors and what each points at."""
    files = {}
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor, closed meanwhile
            files[int(name)] = os.readlink(f"/proc/self/fd/{name}")
    return files


def os_threads() -> int:
    return len(os.listdir("/proc/self/task"))


def settle(before: set[threading.Thread]) -> None:
    """Collect garbage and wait for every thread started since ``before`` to end (a freed
    model's pool stops on a thread of its own), until none is left; then collect what those
    threads held."""
    while True:
        gc.collect()
        started = [
            t
            for t in threading.enumerate()
            if t not in before and t is not threading.current_thread()
        ]
        if not started:
            break
        for thread in started:
            thread.join()
    gc.collect()


def speak(tts: PocketTTS) -> None:
    audio = tts.synthesize("Hello there.", max_frames=2, seed=1)
    assert audio.size > 0
    assert tts.scheduler.stats().threads >= 1  # the pool ran


def test_twenty_load_speak_drop_cycles_leave_threads_and_files_as_they_were(
    engine_pack_dir: Path,
) -> None:
    before = set(threading.enumerate())
    speak(PocketTTS.load("english", model_dir=engine_pack_dir, backend="numpy"))
    settle(before)  # the first cycle may start what stays (BLAS's own pool, numba)
    threads, os_level = threading.active_count(), os_threads()
    files = len(open_files())

    def pack_files() -> int:
        return sum(str(engine_pack_dir) in target for target in open_files().values())

    pack_level = pack_files()
    freed, counts = [], []
    for _ in range(20):
        tts = PocketTTS.load("english", model_dir=engine_pack_dir, backend="numpy")
        speak(tts)
        freed.append(weakref.ref(tts))
        del tts
        settle(before)
        counts.append((len(open_files()), pack_files()))
    assert all(ref() is None for ref in freed)
    assert threading.active_count() == threads
    assert os_threads() == os_level
    # Open files, and those of the pack (its mapped weights), are back where they were.
    assert counts[-1] == (files, pack_level), counts
    assert counts[-1] == counts[-10], counts


def test_close_stops_the_pool_at_once_and_refuses_to_speak(engine_pack_dir: Path) -> None:
    before = set(threading.enumerate())
    with PocketTTS.load("english", model_dir=engine_pack_dir, backend="numpy") as tts:
        speak(tts)
        assert set(threading.enumerate()) - before  # the pool threads
    assert tts.closed
    assert set(threading.enumerate()) - before == set()  # ended inside close()
    with pytest.raises(SessionClosedError, match="closed"):
        tts.synthesize("Hello.")
    tts.close()  # twice is fine


def test_clear_shared_frees_the_models_nobody_holds(engine_pack_dir: Path) -> None:
    before = set(threading.enumerate())
    shared = PocketTTS.load_shared("english", model_dir=engine_pack_dir, backend="numpy")
    speak(shared)
    ref = weakref.ref(shared)
    del shared
    PocketTTS.clear_shared()
    settle(before)
    assert ref() is None
    assert set(threading.enumerate()) - before == set()


def test_clear_shared_leaves_a_held_model_speaking(engine_pack_dir: Path) -> None:
    held = PocketTTS.load_shared("english", model_dir=engine_pack_dir, backend="numpy")
    PocketTTS.clear_shared()
    gc.collect()
    speak(held)
    held.close()


def test_a_closed_shared_model_is_loaded_again(engine_pack_dir: Path) -> None:
    first = PocketTTS.load_shared("english", model_dir=engine_pack_dir, backend="numpy")
    first.close()
    again = PocketTTS.load_shared("english", model_dir=engine_pack_dir, backend="numpy")
    assert again is not first and not again.closed
    again.close()


class _RefersBack:
    """A marker payload that refers to its session, as the service's turn markers do."""

    def __init__(self, session: object) -> None:
        self.session = session


def test_a_marker_that_refers_to_its_session_does_not_keep_a_dropped_model(
    engine_pack_dir: Path,
) -> None:
    before = set(threading.enumerate())
    tts = PocketTTS.load("english", model_dir=engine_pack_dir, backend="numpy")
    session = tts.session(seed=1)
    session.enqueue("Hello there.")
    session.mark(_RefersBack(session))  # out in the same tick as the reply's last frame
    items = []
    for item in session:
        items.append(item)
        if isinstance(item, Marker):
            break
    assert isinstance(items[-1].payload, _RefersBack)
    session.close()
    freed = weakref.ref(tts)
    del tts, session, items, item
    gc.collect()
    assert freed() is None  # nothing of the pool's last tick holds it
    settle(before)
    assert set(threading.enumerate()) - before == set()


def _speak_in_ways(tts: PocketTTS, way: str) -> None:
    """One of the ways a caller speaks and lets go (issue 43 item 4's soak used several)."""
    if way == "synthesize":
        speak(tts)
    elif way == "abandoned session":  # dropped mid-reply, neither finished nor cancelled
        session = tts.session(seed=1)
        session.enqueue("Hello there. " * 3)
        next(iter(session))
    elif way == "timed feed":
        session = tts.session(seed=1, timestamps=True)
        session.feed("Hello ")
        session.feed("there. ")
        session.mark("end")
        session.finish()
        assert isinstance(list(session)[-1], Marker)


@pytest.mark.parametrize("way", ["synthesize", "abandoned session", "timed feed"])
def test_four_cycles_closed_or_only_dropped_leave_no_model(engine_pack_dir: Path, way: str) -> None:
    """Issue 43 item 4: two models closed, two only dropped; two collections later, none is
    alive (without waiting for any thread)."""
    freed = []
    for n in range(4):
        tts = PocketTTS.load("english", model_dir=engine_pack_dir, backend="numpy")
        _speak_in_ways(tts, way)
        freed.append(weakref.ref(tts))
        if n % 2 == 0:
            tts.close()
        del tts
    gc.collect()
    gc.collect()
    alive = [n for n, ref in enumerate(freed) if ref() is not None]
    assert alive == [], [type(r).__name__ for r in gc.get_referrers(freed[alive[0]]())]
