"""The engine refuses bad settings where they are given and keeps working (issue 14 #2, #8),
and a session nobody finishes or cancels does not keep its thread (#10)."""

from __future__ import annotations

import gc
import math
import threading

import numpy as np
import pytest

from pipecat_pocket_tts.engine import PocketTTS
from pipecat_pocket_tts.engine.errors import InvalidSettingError, SettingTypeError

BAD_TEMPERATURES = [1e6, -1, math.nan, math.inf, True, "0.5", "hot"]
BAD_SEEDS = [-1, 2**64, 1.5, "abc", True]


def spoken(session) -> np.ndarray:
    session.finish()
    return np.concatenate([frame.samples for frame in session])


@pytest.mark.parametrize("seed", BAD_SEEDS)
def test_a_bad_seed_is_refused_at_enqueue_and_the_session_keeps_speaking(
    engine_tts: PocketTTS, seed: object
) -> None:
    session = engine_tts.session(seed=3)
    with pytest.raises(InvalidSettingError, match="seed"):
        session.enqueue("Hello there.", seed=seed)
    assert session.enqueue("Hello there.") == 0
    assert spoken(session).size > 0
    assert np.array_equal(spoken_once(engine_tts, seed=3), spoken_once(engine_tts, seed=3))


def spoken_once(tts: PocketTTS, **options) -> np.ndarray:
    session = tts.session(**options)
    session.enqueue("Hello there.")
    return spoken(session)


@pytest.mark.parametrize("seed", BAD_SEEDS)
def test_a_bad_seed_is_refused_when_opening_a_session(engine_tts: PocketTTS, seed: object) -> None:
    with pytest.raises(InvalidSettingError, match="seed"):
        engine_tts.session(seed=seed)


@pytest.mark.parametrize("temperature", BAD_TEMPERATURES)
def test_a_bad_temperature_is_refused_everywhere(
    engine_tts: PocketTTS, temperature: object
) -> None:
    with pytest.raises(InvalidSettingError, match="temperature"):
        engine_tts.session(temperature=temperature)
    with pytest.raises(InvalidSettingError, match="temperature"):
        engine_tts.synthesize("Hello.", temperature=temperature)
    session = engine_tts.session(seed=1)
    with pytest.raises(InvalidSettingError, match="temperature"):
        session.enqueue("Hello.", temperature=temperature)
    assert session.enqueue("Hello.") == 0  # still open, still speaking
    assert spoken(session).size > 0


def test_type_errors_are_type_errors(engine_tts: PocketTTS) -> None:
    with pytest.raises(TypeError):
        engine_tts.session(temperature="0.5")
    with pytest.raises(SettingTypeError):
        engine_tts.session(seed=1.5)


def test_numpy_numbers_are_settings_like_any_other(engine_tts: PocketTTS) -> None:
    plain = spoken_once(engine_tts, seed=5, temperature=0.5)
    numpy = spoken_once(engine_tts, seed=np.int64(5), temperature=np.float32(0.5))
    assert np.array_equal(plain, numpy)
    session = engine_tts.session(seed=0)
    session.enqueue("Hello there.", seed=np.uint64(5), temperature=np.float64(0.5))
    assert np.array_equal(spoken(session), plain)


def test_eos_threshold_and_normalize_are_checked(engine_tts: PocketTTS) -> None:
    with pytest.raises(InvalidSettingError, match="eos_threshold"):
        engine_tts.session(eos_threshold=math.nan)
    with pytest.raises(SettingTypeError, match="normalize"):
        engine_tts.session(normalize="yes")
    session = engine_tts.session(seed=1)
    with pytest.raises(InvalidSettingError, match="eos_threshold"):
        session.enqueue("Hello.", eos_threshold="-4")
    with pytest.raises(SettingTypeError, match="normalize"):
        session.enqueue("Hello.", normalize=1)
    session.cancel()


def test_an_abandoned_session_leaves_the_scheduler(engine_endless_tts: PocketTTS) -> None:
    """On the scheduler (no thread of its own), a dropped session's stream is dropped too."""
    session = engine_endless_tts.session(seed=1, max_frames=10_000)
    session.enqueue("Hello there, this goes on and on.")
    scheduler = engine_endless_tts.scheduler
    assert scheduler.stats().active >= 1
    del session
    gc.collect()
    cancels = [t for t in threading.enumerate() if t.name == "pocket-tts-abandon"]
    for thread in cancels:
        thread.join(timeout=30)
    assert scheduler.stats().active == 0
