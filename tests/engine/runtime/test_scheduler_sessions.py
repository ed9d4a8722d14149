"""Sessions batched on the model's scheduler against the same sessions computed alone: same
audio per session when many speak at once, cancel of one mid-batch, no per-session threads,
the pool parked after the last cancel, admission through ``max_streams``."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from reference_fixtures import snr_db

from pipecat_pocket_tts.engine import PocketTTS, SessionClosedError
from pipecat_pocket_tts.engine.model.options import LoadOptions

MIN_SNR_DB = 60.0
TEXTS = [
    "The first session says this.",
    "A second session says something longer than the first one does.",
    "Third.",
    "The fourth one speaks two sentences. Here is the second of them.",
]
WAIT = 60.0  # hang guard only


def _model(tts: PocketTTS, **options) -> PocketTTS:
    """The same loaded model with other scheduling options (a scheduler of its own)."""
    return PocketTTS(
        config=tts.config,
        backend=tts.backend,
        tokenizer=tts.tokenizer,
        pack=tts.pack,
        options=LoadOptions(backend="numpy", **options),
    )


@pytest.fixture
def batched(engine_tts: PocketTTS):
    model = _model(engine_tts, threads=2)
    yield model
    model.scheduler.close()


def _session_audio(session) -> tuple[np.ndarray, list[tuple]]:
    frames = list(session)
    tags = [(f.utterance_index, f.chunk_index, f.frame_index) for f in frames]
    return np.concatenate([f.samples for f in frames]), tags


def _alone(tts: PocketTTS, indices) -> list[tuple[np.ndarray, list[tuple]]]:
    """Each session computed alone (one after the other) on a scheduler of its own."""
    model = _model(tts)
    try:
        return [_session_audio(_speak(model, i)) for i in indices]
    finally:
        model.scheduler.close()


def _speak(model: PocketTTS, i: int):
    session = model.session(seed=10 + i, voice="marius" if i % 2 else "alba")
    session.enqueue(TEXTS[i])
    session.enqueue("And one more.")
    session.finish()
    return session


def test_concurrent_batched_sessions_sound_as_sessions_alone(engine_tts, batched):
    alone = _alone(engine_tts, range(4))
    sessions = [_speak(batched, i) for i in range(4)]  # all queued before any is read
    for session, (want, want_tags) in zip(sessions, alone, strict=True):
        got, tags = _session_audio(session)
        assert tags == want_tags
        assert snr_db(want, got) >= MIN_SNR_DB
    assert batched.scheduler.wait_parked(WAIT)


def test_cancelling_one_session_mid_batch_leaves_the_others_unchanged(engine_tts, batched):
    alone = _alone(engine_tts, (0, 3))
    victim = _speak(batched, 1)
    others = [_speak(batched, i) for i in (0, 3)]
    first = next(iter(victim))  # the victim has started speaking, in a batch with the others
    assert first.frame_index == 0
    victim.cancel()
    assert list(victim) == []  # nothing more comes out
    with pytest.raises(SessionClosedError):
        victim.enqueue("more")
    for session, (want, want_tags) in zip(others, alone, strict=True):
        got, tags = _session_audio(session)
        assert tags == want_tags
        assert snr_db(want, got) >= MIN_SNR_DB


def test_sessions_use_the_pool_and_leave_it_parked(engine_endless_tts):
    model = _model(engine_endless_tts, threads=2)
    before = {t.ident for t in threading.enumerate()}
    try:
        sessions = [model.session(seed=i) for i in range(5)]
        for session in sessions:
            session.enqueue("A text that runs to its frame limit.")
        for session in sessions:
            next(iter(session))
        new = [t for t in threading.enumerate() if t.ident not in before]
        assert sorted(t.name for t in new) == ["pocket-tts-compute-1", "pocket-tts-scheduler"]
        for session in sessions:
            session.cancel()
        assert model.scheduler.wait_parked(WAIT)
        stats = model.scheduler.stats()
        assert (stats.active, stats.waiting, stats.busy_threads) == (0, 0, 0)
    finally:
        model.scheduler.close()


def test_beyond_max_streams_sessions_wait_their_turn(engine_tts):
    model = _model(engine_tts, threads=2, max_streams=1)
    try:
        sessions = [_speak(model, i) for i in range(3)]
        audio = [_session_audio(s) for s in sessions]
        alone = _alone(engine_tts, range(3))
        for (got, tags), (want, want_tags) in zip(audio, alone, strict=True):
            assert tags == want_tags
            assert snr_db(want, got) >= MIN_SNR_DB
        assert model.scheduler.stats().waiting == 0
    finally:
        model.scheduler.close()


def test_a_session_is_told_when_it_waits_for_a_slot_and_when_it_gets_one(engine_tts):
    model = _model(engine_tts, threads=2, max_streams=1)
    told: dict[int, list] = {0: [], 1: []}
    try:
        first = model.session(seed=10, on_admission_wait=told[0].append)
        second = model.session(seed=11, on_admission_wait=told[1].append)
        first.enqueue(TEXTS[3])  # takes the only slot (the longest text)
        second.enqueue(TEXTS[1])  # waits for it
        first.finish()
        second.finish()
        _session_audio(first)
        _session_audio(second)
        assert told[0] == []
        waiting, admitted = told[1]
        assert (waiting.position, waiting.waited) == (1, None)
        assert admitted.position == 0 and admitted.waited is not None and admitted.waited >= 0
        assert waiting.stream == admitted.stream
    finally:
        model.scheduler.close()


def test_a_model_admits_by_measured_cost_unless_told_otherwise(engine_tts):
    model = _model(engine_tts, threads=2)
    assert model.options.max_streams == "auto" and model.scheduler.max_streams == "auto"
    unlimited = _model(engine_tts, threads=2, max_streams=None)
    assert unlimited.scheduler.max_streams is None
    try:
        # The tiny model costs a fraction of a frame: four sessions at once all speak.
        told: list = []
        sessions = [model.session(seed=i, on_admission_wait=told.append) for i in range(4)]
        for session, text in zip(sessions, TEXTS, strict=True):
            session.enqueue(text)
            session.finish()
        for session in sessions:
            assert _session_audio(session)[0].size
        assert told == []
    finally:
        model.scheduler.close()
        unlimited.scheduler.close()
