"""Sessions: ordering and flags, finish, cancel (within one frame, nothing left running),
decoder continuity, many sessions on one model, async iteration, errors from the worker."""

from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
import pytest
from reference_fixtures import snr_db

from pipecat_pocket_tts.engine import PocketTTS, SessionClosedError
from pipecat_pocket_tts.engine.backends.base import Backend

SENTENCES = [
    "The first sentence is here.",
    "Then a second one follows, a little longer than the first.",
    "And a third.",
]


class SpyBackend(Backend):
    """A real backend behind a counter: every stage call is logged with its start time;
    ``step_delay`` slows the FlowLM step down; ``fail_decode_at`` makes a decode raise."""

    def __init__(
        self,
        inner: Backend,
        step_delay: float = 0.0,
        fail_decode_at: int = -1,
        step_gate: threading.Semaphore | None = None,
    ):
        self.inner = inner
        self.step_gate = step_gate
        self.name = inner.name
        self.config = inner.config
        self.step_delay = step_delay
        self.fail_decode_at = fail_decode_at
        self.calls: list[tuple[str, float]] = []
        self.noises: list[np.ndarray] = []
        self._lock = threading.Lock()

    @property
    def capabilities(self):
        return self.inner.capabilities

    def _log(self, stage: str) -> int:
        with self._lock:
            self.calls.append((stage, time.monotonic()))
            return sum(1 for s, _ in self.calls if s == stage)

    def count(self, stage: str | None = None, after: float = 0.0) -> int:
        with self._lock:
            return sum(1 for s, t in self.calls if (stage in (None, s)) and t > after)

    def embed_text(self, token_ids):
        self._log("embed")
        return self.inner.embed_text(token_ids)

    def new_flow_state(self):
        return self.inner.new_flow_state()

    def prefill(self, state, embeddings):
        self._log("prefill")
        self.inner.prefill(state, embeddings)

    def step(self, state, latent):
        self._log("step")
        if self.step_gate is not None and not self.step_gate.acquire(timeout=120):
            raise RuntimeError("no step permit: the event loop that hands them out is blocked")
        if self.step_delay:
            time.sleep(self.step_delay)
        return self.inner.step(state, latent)

    def sample(self, hidden, noise):
        self._log("sample")
        self.noises.append(np.array(noise))
        return self.inner.sample(hidden, noise)

    def bos_before_voice(self):
        return self.inner.bos_before_voice()

    def flow_state_from_voice(self, voice):
        return self.inner.flow_state_from_voice(voice)

    def voice_from_flow_state(self, state):
        return self.inner.voice_from_flow_state(state)

    def new_mimi_state(self):
        return self.inner.new_mimi_state()

    def decode(self, state, latent):
        if self._log("decode") == self.fail_decode_at:
            raise RuntimeError("decoder exploded")
        return self.inner.decode(state, latent)

    def encode(self, audio):
        return self.inner.encode(audio)


def spied(tts: PocketTTS, **options) -> tuple[PocketTTS, SpyBackend]:
    spy = SpyBackend(tts.backend, **options)
    clone = PocketTTS(config=tts.config, backend=spy, tokenizer=tts.tokenizer, pack=tts.pack)
    return clone, spy


def session_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("pocket-tts-session")]


def audio_of(frames) -> np.ndarray:
    return np.concatenate([f.samples for f in frames])


def test_three_utterances_come_out_in_order_with_their_flags(tts: PocketTTS):
    session = tts.session(seed=1)
    assert [session.enqueue(s) for s in SENTENCES] == [0, 1, 2]
    session.finish()
    frames = list(session)
    assert [f.utterance_index for f in frames] == sorted(f.utterance_index for f in frames)
    for index in range(3):
        mine = [f for f in frames if f.utterance_index == index]
        assert mine, f"utterance {index} yielded no frame"
        assert [f.is_last_in_utterance for f in mine] == [False] * (len(mine) - 1) + [True]
        assert [f.frame_index for f in mine] == list(range(len(mine)))
        assert {f.chunk_index for f in mine} == {0}
    assert all(f.samples.shape == (1920,) and f.samples.dtype == np.float32 for f in frames)
    assert session.is_idle and session.pending == 0
    assert session_threads() == []


def test_empty_text_is_skipped_without_using_an_index(tts: PocketTTS):
    session = tts.session()
    assert session.enqueue("   \n\t") is None
    assert session.enqueue("Hello.") == 0
    assert session.enqueue("") is None
    assert session.enqueue("\u200b🙂") is None  # nothing sayable once filtered
    assert session.enqueue("Bye.") == 1
    session.finish()
    assert {f.utterance_index for f in session} == {0, 1}


def test_finish_drains_then_closes(tts: PocketTTS):
    session = tts.session(seed=3)
    session.enqueue(SENTENCES[0])
    session.finish()
    session.finish()  # idempotent
    with pytest.raises(SessionClosedError, match="finished"):
        session.enqueue("More.")
    frames = list(session)
    assert frames and frames[-1].is_last_in_utterance
    assert list(session) == []  # iteration stays ended

    empty = tts.session()
    empty.finish()
    assert list(empty) == []


def test_per_utterance_overrides(tts: PocketTTS):
    session = tts.session(seed=5, temperature=0.7)
    session.enqueue(SENTENCES[0], temperature=0.0, voice="marius")
    session.enqueue(SENTENCES[0], temperature=0.0, voice="marius")
    session.finish()
    frames = list(session)
    first = audio_of([f for f in frames if f.utterance_index == 0])
    np.testing.assert_array_equal(
        first, tts.synthesize(SENTENCES[0], temperature=0, voice="marius")
    )
    assert not np.array_equal(first, tts.synthesize(SENTENCES[0], temperature=0, voice="alba"))


def test_a_seed_given_with_an_utterance_restarts_the_noise_there(engine_tts: PocketTTS):
    tts, spy = spied(engine_tts)
    session = tts.session(seed=1, temperature=0.7)
    session.enqueue(SENTENCES[2])
    session.enqueue(SENTENCES[2])  # the random stream continues...
    session.enqueue(SENTENCES[2], seed=1)  # ...until a seed restarts it
    session.finish()
    frames = list(session)
    per_utterance = [sum(f.utterance_index == i for f in frames) for i in range(3)]
    assert per_utterance[0] == per_utterance[1] == per_utterance[2] > 0
    n = per_utterance[0]
    noises = np.array(spy.noises)
    assert noises.shape[0] == 3 * n and np.abs(noises).max() > 0
    np.testing.assert_array_equal(noises[:n], noises[2 * n :])
    assert not np.array_equal(noises[:n], noises[n : 2 * n])
    # The first utterance of a session: the same audio as a session opened with that seed.
    reseeded = tts.session(seed=3, temperature=0.7)
    reseeded.enqueue(SENTENCES[0], seed=9)
    reseeded.finish()
    np.testing.assert_array_equal(
        audio_of(reseeded), tts.synthesize(SENTENCES[0], seed=9, temperature=0.7)
    )
    with pytest.raises(TypeError, match="seed"):
        tts.session().enqueue("Hi.", seed=1.5)


def test_cancel_mid_utterance_stops_within_one_frame(engine_endless_tts: PocketTTS):
    tts, spy = spied(engine_endless_tts, step_delay=0.005)
    session = tts.session(seed=1)
    session.enqueue("A long sentence that would go on for many, many frames of audio.")
    session.enqueue("Queued text that must be dropped.")
    received = []
    for frame in session:
        received.append(frame)
        if len(received) == 3:
            cancelled_at = time.monotonic()
            session.cancel()
    assert len(received) == 3  # iteration ended right after the cancel, without error
    assert {f.utterance_index for f in received} == {0}
    assert session_threads() == []
    calls = spy.count()
    for stage in ("step", "sample", "decode", "prefill"):
        assert spy.count(stage, after=cancelled_at) <= 1, stage  # at most one in flight
    assert tts.scheduler.wait_parked(60)  # hang guard only
    assert spy.count() == calls  # nothing ran after cancel() returned
    assert session.pending == 0 and session.is_cancelled
    session.cancel()  # idempotent
    with pytest.raises(SessionClosedError, match="cancelled"):
        session.enqueue("Too late.")


def test_stop_never_waits_and_no_tick_starts_after_it(engine_endless_tts: PocketTTS):
    """``stop()`` (what the TTS server calls as a cancel arrives, on its event loop) cancels
    without waiting: no scheduler tick starts for the session afterwards, so its
    ``compute_ticks`` grows by at most the tick in flight, which ``cancel()`` then waits for."""
    session = engine_endless_tts.session(seed=1)
    session.enqueue("A long sentence that would go on for many, many frames of audio. " * 4)
    frames = iter(session)
    for _ in range(3):
        next(frames)
    stopped_at = session.stop()
    assert session.is_cancelled and session.pending == 0
    with pytest.raises(SessionClosedError, match="cancelled"):
        session.enqueue("Too late.")
    session.cancel()
    assert session.compute_ticks - stopped_at <= 1
    settled = session.compute_ticks
    other = engine_endless_tts.session(seed=2)
    other.enqueue("Another one speaks meanwhile.")
    other.finish()
    assert list(other)
    assert session.compute_ticks == settled  # the scheduler ticked, never for it


async def test_acancel_stops_compute_before_it_leaves_the_loop(engine_endless_tts: PocketTTS):
    """``acancel()`` (what the service awaits on a barge-in) stops the session on the caller's
    thread before it waits off the loop: however long the worker thread takes to come, at most
    the tick already in flight computes for the session."""
    session = engine_endless_tts.session(seed=3)
    session.enqueue("A long sentence that would go on for many, many frames of audio. " * 4)
    frames = aiter(session)
    for _ in range(3):
        await anext(frames)
    cancelling = asyncio.ensure_future(session.acancel())
    await asyncio.sleep(0)  # acancel's first step ran; its worker thread may not have started
    assert session.is_cancelled  # stopped on the loop's thread, not later on the worker's
    ticks_at_stop = session.compute_ticks
    await cancelling
    assert session.compute_ticks - ticks_at_stop <= 1  # the tick in flight, if one was


def test_cancel_from_another_thread_ends_a_blocked_iteration(engine_endless_tts: PocketTTS):
    tts, _spy = spied(engine_endless_tts, step_delay=0.01)
    session = tts.session()
    session.enqueue("Some words to say slowly, one frame after another.")
    got = []

    def consume():
        got.extend(session)

    consumer = threading.Thread(target=consume)
    consumer.start()
    while not got:
        time.sleep(0.005)
    session.cancel()
    consumer.join(timeout=60)  # a failure bound only
    assert not consumer.is_alive()
    assert session_threads() == []

    idle = tts.session()  # never given text: cancel ends its iteration too
    waiting = threading.Thread(target=lambda: list(idle))
    waiting.start()
    idle.cancel()
    waiting.join(timeout=60)
    assert not waiting.is_alive()


def test_context_manager_cancels(engine_endless_tts: PocketTTS):
    tts, _spy = spied(engine_endless_tts, step_delay=0.005)
    with tts.session() as session:
        session.enqueue("Talking for quite a while, frame by frame.")
        next(iter(session))
    assert session.is_cancelled and session_threads() == []


def test_decoder_state_continues_across_utterances(tts: PocketTTS):
    one = tts.session(temperature=0.0)
    one.enqueue(SENTENCES[0])
    one.enqueue(SENTENCES[2])
    one.finish()
    frames = list(one)
    first = audio_of([f for f in frames if f.utterance_index == 0])
    second = audio_of([f for f in frames if f.utterance_index == 1])
    alone_first = tts.synthesize(SENTENCES[0], temperature=0.0)
    alone_second = tts.synthesize(SENTENCES[2], temperature=0.0)
    np.testing.assert_array_equal(first, alone_first)
    assert second.shape == alone_second.shape  # the same latents...
    boundary = slice(0, 1920)
    assert not np.allclose(second[boundary], alone_second[boundary], atol=1e-4)  # ...decoded on
    assert alone_second[0] == 0.0 and second[0] != 0.0  # fade only at a session's start


def test_four_sessions_on_four_threads_match_each_alone(tts: PocketTTS):
    texts = [SENTENCES[i % 3] + " Number " + str(i) + "." for i in range(4)]

    def speak(i: int) -> np.ndarray:
        session = tts.session(seed=100 + i, voice="marius" if i % 2 else "alba")
        session.enqueue(texts[i])
        session.enqueue(SENTENCES[2])
        session.finish()
        return audio_of(session)

    alone = [speak(i) for i in range(4)]
    together: list[np.ndarray | None] = [None] * 4
    barrier = threading.Barrier(4)

    def run(i: int) -> None:
        barrier.wait()
        together[i] = speak(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    for a, b in zip(alone, together, strict=True):  # batched: float32 rounding of batch sizes
        assert a.shape == b.shape
        assert snr_db(a, b) >= 60.0


def test_a_worker_error_reaches_the_consumer_and_closes_the_session(engine_tts: PocketTTS):
    tts, _spy = spied(engine_tts, fail_decode_at=3)
    session = tts.session()
    session.enqueue(SENTENCES[1])
    got = []
    with pytest.raises(RuntimeError, match="decoder exploded"):
        for frame in session:
            got.append(frame)
    assert len(got) == 2
    assert session_threads() == []
    with pytest.raises(SessionClosedError, match="error"):
        session.enqueue("More.")
    assert session.is_idle


async def test_async_iteration_does_not_block_the_event_loop(engine_endless_tts: PocketTTS):
    """Every FlowLM step needs a permit that only a coroutine on the event loop hands out, so
    the generation can only make progress while the loop keeps running: had ``enqueue`` or
    the async iteration computed on the loop's thread, the first step would wait for ever."""
    gate = threading.Semaphore(0)
    tts, spy = spied(engine_endless_tts, step_gate=gate)
    session = tts.session(seed=4, max_frames=30)
    done = asyncio.Event()
    permits = 0

    async def hand_out_permits():
        nonlocal permits
        while not done.is_set():
            gate.release()
            permits += 1
            await asyncio.sleep(0.001)

    task = asyncio.create_task(hand_out_permits())
    assert session.enqueue(SENTENCES[0]) == 0  # from the event loop
    session.finish()
    frames = [frame async for frame in session]
    done.set()
    await task
    assert len(frames) == 30 and frames[-1].is_last_in_utterance
    assert spy.count("step") == 30 and permits >= 30


async def test_acancel_mid_stream(engine_endless_tts: PocketTTS):
    tts, spy = spied(engine_endless_tts, step_delay=0.005)
    session = tts.session()
    session.enqueue(SENTENCES[1])
    received = 0
    async for _frame in session:
        received += 1
        if received == 2:
            await session.acancel()
    assert received == 2
    calls = spy.count()
    await asyncio.sleep(0.2)
    assert spy.count() == calls and session_threads() == []


# -- streamed text: feed / flush ---------------------------------------------------------

FED_SENTENCES = [
    "When the committee finally met on Tuesday, after weeks of delays, arguments about the "
    "budget, and a long exchange of letters between the two departments, it decided, to the "
    "surprise of almost everyone in the room, that the old bridge would be repaired rather "
    "than replaced, at a cost of $12.50 per person, which nobody expected.",
    "It was late.",
    "Everyone went home at 3:45 pm.",
]


def _planned(monkeypatch: pytest.MonkeyPatch) -> list:
    """Every chunk a session starts to generate, in order."""
    from pipecat_pocket_tts.engine.runtime import streams

    plans: list = []
    original_run = streams.ChunkRun.__init__

    def spy_run(run, backend, job):
        plans.append(job.chunk)
        original_run(run, backend, job)

    monkeypatch.setattr(streams.ChunkRun, "__init__", spy_run)
    return plans


def _plan_facts(plans: list) -> list[tuple]:
    return [(p.text, p.token_ids.tolist(), p.frames_after_eos, p.is_mid_sentence) for p in plans]


def test_fed_tokens_are_spoken_as_the_batch_path_plans_them(
    engine_tts: PocketTTS, monkeypatch: pytest.MonkeyPatch
) -> None:
    plans = _planned(monkeypatch)
    batch = engine_tts.session(seed=3)
    for sentence in FED_SENTENCES:
        batch.enqueue(sentence)
    batch.finish()
    batch_frames = list(batch)
    expected, plans[:] = list(plans), []
    assert sum(p.is_mid_sentence for p in expected) >= 3

    session = engine_tts.session(seed=3)
    text = " ".join(FED_SENTENCES)
    indices = []
    for i in range(0, len(text), 4):  # LLM-sized fragments
        indices += session.feed(text[i : i + 4])
    indices += session.flush()
    session.finish()
    frames = list(session)
    assert _plan_facts(plans) == _plan_facts(expected)
    assert indices == list(range(len(expected)))  # one utterance per released chunk
    assert [f.utterance_index for f in frames if f.is_last_in_utterance] == indices
    assert np.array_equal(audio_of(frames), audio_of(batch_frames))  # same seed, same audio


def test_finish_flushes_fed_text_and_feed_after_finish_is_refused(engine_tts: PocketTTS):
    session = engine_tts.session()
    assert session.feed("Hello there.") == []  # could still be "there.." or a quote
    assert session.feed(" How are") == [0]  # certain once the next word begins
    session.finish()
    assert {f.utterance_index for f in session} == {0, 1}
    with pytest.raises(SessionClosedError):
        session.feed("More.")


def test_a_lexicon_that_is_not_a_mapping_is_refused_clearly(engine_tts):
    from pipecat_pocket_tts.engine.errors import LexiconError

    with pytest.raises(LexiconError, match="mapping"):
        engine_tts.session(lexicon=["NVIDIA"])  # type: ignore[arg-type]
    with pytest.raises(LexiconError, match="mapping"):
        engine_tts.synthesize("Hello there.", lexicon=["NVIDIA"])  # type: ignore[arg-type]
