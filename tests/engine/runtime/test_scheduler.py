"""The scheduler through its stream interface: batched audio equals solo audio per stream,
streams joining and leaving, cancel, failures, the thread pool, parking, admission, deadlines.

Everything waits on events or conditions; the reference is a today's per-session Session.
"""

from __future__ import annotations

import gc
import threading
from dataclasses import dataclass, field, replace

import numpy as np
import pytest
from reference_fixtures import snr_db

from pipecat_pocket_tts.engine import PocketTTS
from pipecat_pocket_tts.engine.errors import ContextOverflowError
from pipecat_pocket_tts.engine.frames import GenerationSettings
from pipecat_pocket_tts.engine.runtime.scheduler import Scheduler
from pipecat_pocket_tts.engine.runtime.slots import AUTO_LOAD, FREE_LOAD, AdmissionWait
from pipecat_pocket_tts.engine.runtime.streams import ChunkJob, ChunkRun, Notice
from pipecat_pocket_tts.engine.runtime.tick_costs import StageCosts
from pipecat_pocket_tts.engine.text.planner import TextPlanner
from pipecat_pocket_tts.engine.utterance import UtteranceRun

MIN_SNR_DB = 60.0
TEXTS = [
    ["Hello there, this is the first stream.", "It says a second thing too."],
    ["A different voice speaks here, rather longer than the others do today."],
    ["Short one."],
    ["The fourth stream talks.", "Then it talks again.", "And a third time."],
]
END = "end"
WAIT = 60.0  # hang guard only: every wait returns as soon as its condition holds


@dataclass
class Collector:
    """A stream's outputs; events for the end, errors and a frame count."""

    frames: list = field(default_factory=list)
    notices: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    ended: threading.Event = field(default_factory=threading.Event)
    lock: threading.Condition = field(default_factory=threading.Condition)

    def output(self, item) -> None:
        with self.lock:
            if isinstance(item, str):
                self.notices.append(item)
                if item == END:
                    self.ended.set()
            else:
                self.frames.append(item)
            self.lock.notify_all()

    def error(self, exc: BaseException) -> None:
        with self.lock:
            self.errors.append(exc)
            self.ended.set()
            self.lock.notify_all()

    def wait_frames(self, n: int) -> None:
        with self.lock:
            assert self.lock.wait_for(lambda: len(self.frames) >= n or self.ended.is_set(), WAIT)

    def audio(self) -> np.ndarray:
        return np.concatenate([f.samples for f in self.frames])


def jobs_for(tts: PocketTTS, texts, *, voice=None, temperature=None, seed=None):
    planner = TextPlanner(tts.config, tts.tokenizer)
    settings = GenerationSettings(
        temperature=tts.config.default_temperature if temperature is None else temperature,
        eos_threshold=tts.config.default_eos_threshold,
    )
    voice_state = tts.voice_state(voice)
    jobs = []
    for u, text in enumerate(texts):
        chunks = planner.plan(text)
        for c, plan in enumerate(chunks):
            first = u == 0 and c == 0
            jobs.append(
                ChunkJob(
                    chunk=plan,
                    run=UtteranceRun(voice_state, settings),
                    utterance_index=u,
                    chunk_index=c,
                    is_last_chunk=c == len(chunks) - 1,
                    restart_seed=seed if first else None,
                )
            )
    return jobs


def solo(tts: PocketTTS, texts, *, voice=None, temperature=None, seed=None):
    """The frames of one session speaking ``texts`` alone on the model's scheduler."""
    session = tts.session(voice=voice, temperature=temperature)
    for u, text in enumerate(texts):
        session.enqueue(text, seed=seed if u == 0 else None)
    session.finish()
    return list(session)


def start(scheduler, tts, texts, *, voice=None, temperature=None, seed=None, end=True, tap=None):
    """A stream speaking ``texts`` (``tap`` sees every output first) and its collector."""
    collector = Collector()

    def output(item) -> None:
        if tap is not None:
            tap(item)
        collector.output(item)

    stream = scheduler.open_stream(output, collector.error)
    for job in jobs_for(tts, texts, voice=voice, temperature=temperature, seed=seed):
        scheduler.submit(stream, job)
    if end:
        scheduler.submit(stream, Notice(END))
    return stream, collector


def assert_same_audio(frames, reference) -> None:
    assert len(frames) == len(reference)
    for got, want in zip(frames, reference, strict=True):
        assert (got.utterance_index, got.chunk_index, got.frame_index) == (
            want.utterance_index,
            want.chunk_index,
            want.frame_index,
        )
        assert got.is_last_in_utterance == want.is_last_in_utterance
    got = np.concatenate([f.samples for f in frames])
    want = np.concatenate([f.samples for f in reference])
    assert snr_db(want, got) >= MIN_SNR_DB


@pytest.fixture
def scheduler(engine_tts):
    scheduler = Scheduler(engine_tts.backend, threads=2)
    yield scheduler
    scheduler.close()


STREAMS = [
    {"texts": TEXTS[0], "seed": 1},
    {"texts": TEXTS[1], "seed": 2, "voice": "marius"},
    {"texts": TEXTS[2], "seed": 3, "temperature": 0.0},
    {"texts": TEXTS[3], "seed": 4},
]


def test_streams_joining_at_different_frames_sound_as_alone(engine_tts, scheduler):
    running = []
    for i, spec in enumerate(STREAMS):
        running.append(start(scheduler, engine_tts, **spec))
        if i < len(STREAMS) - 1:
            running[-1][1].wait_frames(2 + i)  # the next one joins mid-way
    for (_, collector), spec in zip(running, STREAMS, strict=True):
        assert collector.ended.wait(WAIT)
        assert not collector.errors
        assert collector.notices == [END]
        assert_same_audio(collector.frames, solo(engine_tts, **spec))
    assert scheduler.wait_parked(WAIT)


def test_ticks_leave_no_cyclic_garbage(engine_tts, scheduler):
    """A tick's plan (its tasks are closures over it, its results hold the frames) is freed
    when the tick ends: a cycle per tick would wait for the garbage collector, whose full
    passes stall every thread and event loop of the process (issue 34)."""
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        running = [start(scheduler, engine_tts, **spec) for spec in STREAMS[:2]]
        for _, collector in running:
            assert collector.ended.wait(WAIT)
            assert collector.frames and not collector.errors
        assert scheduler.wait_parked(WAIT)
        gc.collect()
        per_tick = [  # the runtime's and the backend's objects: made every tick
            type(o).__qualname__
            for o in gc.garbage
            if type(o).__module__.startswith(
                ("pipecat_pocket_tts.engine.runtime", "pipecat_pocket_tts.engine.backends")
            )
        ]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert per_tick == []


def test_notices_come_out_after_the_frames_before_them(engine_tts, scheduler):
    order = []
    collector = Collector()

    def output(item):
        order.append(item if isinstance(item, str) else "frame")
        collector.output(item)

    stream = scheduler.open_stream(output, collector.error)
    first, second = jobs_for(engine_tts, ["One thing.", "Another thing."], seed=5)
    scheduler.submit(stream, Notice("before"))
    scheduler.submit(stream, first)
    scheduler.submit(stream, Notice("middle"))
    scheduler.submit(stream, second)
    scheduler.submit(stream, Notice(END))
    assert collector.ended.wait(WAIT)
    assert order[0] == "before" and order[-1] == END
    middle = order.index("middle")
    frames_first = sum(1 for f in collector.frames if f.utterance_index == 0)
    assert order[1:middle] == ["frame"] * frames_first


def test_cancelling_one_stream_mid_batch_leaves_the_others_unchanged(engine_tts, scheduler):
    running = [start(scheduler, engine_tts, **spec) for spec in STREAMS[:3]]
    victim, victim_out = running[1]
    victim_out.wait_frames(3)
    scheduler.cancel(victim)
    frames_at_cancel = len(victim_out.frames)
    for i in (0, 2):
        assert running[i][1].ended.wait(WAIT)
        assert_same_audio(running[i][1].frames, solo(engine_tts, **STREAMS[i]))
    assert len(victim_out.frames) == frames_at_cancel  # nothing after cancel returned
    assert not victim_out.ended.is_set()
    assert scheduler.wait_parked(WAIT)


def test_one_streams_failure_does_not_stop_the_others(engine_tts, engine_small_pack_dir):
    other_model = PocketTTS.load("english", backend="numpy", model_dir=engine_small_pack_dir)
    scheduler = Scheduler(engine_tts.backend, threads=2)
    try:
        good = [start(scheduler, engine_tts, **spec) for spec in (STREAMS[0], STREAMS[3])]
        # A voice state of another model: its prefill fails in the scheduler.
        bad_voice = Collector()
        stream = scheduler.open_stream(bad_voice.output, bad_voice.error)
        (job, *_) = jobs_for(engine_tts, ["Words."])
        wrong = replace(job, run=UtteranceRun(other_model.voice_state(), job.settings))
        scheduler.submit(stream, wrong)
        # A voice state with no room left: context overflow.
        full = engine_tts.voice_state().copy()
        full_state = full.copy(capacity=full.position + 2)
        overflow = Collector()
        stream = scheduler.open_stream(overflow.output, overflow.error)
        scheduler.submit(stream, replace(job, run=UtteranceRun(full_state, job.settings)))
        # Token ids the model has no embedding for: the text embedding fails.
        bad_ids = Collector()
        stream = scheduler.open_stream(bad_ids.output, bad_ids.error)
        bad_plan = replace(job.chunk, token_ids=np.array([10**6]))
        scheduler.submit(stream, replace(job, chunk=bad_plan))
        for collector in (bad_voice, overflow, bad_ids):
            assert collector.ended.wait(WAIT)
            assert len(collector.errors) == 1
        assert isinstance(overflow.errors[0], ContextOverflowError)
        for (_, collector), spec in zip(good, (STREAMS[0], STREAMS[3]), strict=True):
            assert collector.ended.wait(WAIT)
            assert not collector.errors
            assert_same_audio(collector.frames, solo(engine_tts, **spec))
    finally:
        scheduler.close()


def test_threads_are_the_pool_and_park_after_the_last_cancel(engine_endless_tts):
    before = {t.ident for t in threading.enumerate()}
    scheduler = Scheduler(engine_endless_tts.backend, threads=2)
    try:
        running = [
            start(scheduler, engine_endless_tts, [text], seed=i, end=False)
            for i, text in enumerate(["A long text that never ends."] * 6)
        ]
        for _, collector in running:
            collector.wait_frames(2)
        new = [t for t in threading.enumerate() if t.ident not in before]
        assert len(new) == 2  # six streams, the pool's two threads
        assert scheduler.stats().threads == 2
        for stream, _ in running:
            scheduler.cancel(stream)
        assert scheduler.wait_parked(WAIT)  # no stream, no tick, no task running
        stats = scheduler.stats()
        assert (stats.active, stats.busy_threads) == (0, 0)
    finally:
        scheduler.close()
    assert all(not t.is_alive() for t in new)


def test_admission_waits_in_order_and_says_so(engine_tts):
    events: list[AdmissionWait] = []
    scheduler = Scheduler(engine_tts.backend, threads=2, max_streams=1, on_wait=events.append)
    try:
        order: list[int] = []
        lock = threading.Lock()
        running = []
        for i, spec in enumerate(STREAMS[:3]):

            def tap(item, i=i):
                with lock:
                    if not order or order[-1] != i:
                        order.append(i)

            running.append(start(scheduler, engine_tts, **spec, tap=tap))
        for _, collector in running:
            assert collector.ended.wait(WAIT)
        assert order == [0, 1, 2]  # one at a time, in arrival order
        waits = [e for e in events if e.waited is None]
        admits = [e for e in events if e.waited is not None]
        assert [e.position for e in waits][:2] == [1, 2]
        assert [e.stream for e in admits] == [running[1][0].name, running[2][0].name]
        for (_, collector), spec in zip(running, STREAMS[:3], strict=True):
            assert_same_audio(collector.frames, solo(engine_tts, **spec))
    finally:
        scheduler.close()


class FixedCosts(StageCosts):
    """Cost estimates that measurements leave as they are."""

    def measured(self, kind: str, seconds: float, units: int) -> None:
        pass

    def tick_took(self, work: float, seconds: float) -> None:
        pass


def test_auto_admission_keeps_the_speaking_streams_in_real_time(engine_tts):
    # A tick of two streams is estimated at 60 ms of an 80 ms frame, of three at 88 ms: two
    # speak at once, never three.
    costs = FixedCosts(step_per_stream=0.005, decode_per_stream=0.05, tick_overhead=0.005)
    assert FREE_LOAD * 0.08 < costs.tick_seconds(2, 2) <= AUTO_LOAD * 0.08
    assert costs.tick_seconds(3, 2) > AUTO_LOAD * 0.08
    events: list[AdmissionWait] = []
    scheduler = Scheduler(
        engine_tts.backend, threads=2, max_streams="auto", on_wait=events.append, costs=costs
    )
    try:
        lock = threading.Lock()
        firsts: list[int] = []
        ended_before: dict[int, list[int]] = {}
        running = []
        for i, spec in enumerate(STREAMS[:3]):

            def tap(item, i=i):
                with lock:
                    if i not in firsts and not isinstance(item, str):
                        firsts.append(i)
                        ended_before[i] = [
                            k for k, (_, c) in enumerate(running) if c.ended.is_set()
                        ]

            running.append(start(scheduler, engine_tts, **spec, tap=tap))
        for _, collector in running:
            assert collector.ended.wait(WAIT)
        # The second stream gets in while the first speaks (at once, or a tick later: one
        # admission a tick near the limit); the third only once one of them is done.
        assert firsts == [0, 1, 2]
        assert ended_before[1] == [] and ended_before[2]
        names = [stream.name for stream, _ in running]
        admits = [e.stream for e in events if e.waited is not None]
        assert admits[-1] == names[2] and set(admits) <= {names[1], names[2]}
        assert [e.stream for e in events if e.waited is None][-1] == names[2]
        for (_, collector), spec in zip(running, STREAMS[:3], strict=True):
            assert_same_audio(collector.frames, solo(engine_tts, **spec))
    finally:
        scheduler.close()


def test_auto_admission_follows_the_measured_costs(engine_endless_tts):
    # The first estimates (50 s a decode) fit one stream only; the tiny model's measured ticks
    # soon say two fit, and the waiting stream starts while the first still speaks.
    tts = engine_endless_tts
    costs = StageCosts(step_per_stream=0.005, decode_per_stream=50.0)
    events: list[AdmissionWait] = []
    scheduler = Scheduler(
        tts.backend, threads=2, max_streams="auto", on_wait=events.append, costs=costs
    )
    try:
        texts = (["A long text that goes on."], ["Another long text here."])
        jobs = [jobs_for(tts, text, seed=seed) for seed, text in enumerate(texts, 1)]
        collectors = [Collector(), Collector()]
        streams = [scheduler.open_stream(c.output, c.error) for c in collectors]
        for stream, stream_jobs in zip(streams, jobs, strict=True):  # back to back
            for job in stream_jobs:
                scheduler.submit(stream, job)
        first, second = collectors
        second.wait_frames(1)
        assert not first.ended.is_set() and not first.errors and first.frames
        assert [(e.stream, e.waited is None) for e in events] == [
            (streams[1].name, True),
            (streams[1].name, False),
        ]
    finally:
        scheduler.close()


def test_max_streams_is_an_integer_auto_or_none(engine_tts):
    for bad in (0, "lots", 1.5, True):
        with pytest.raises(ValueError, match="max_streams must be an integer ≥ 1, 'auto' or None"):
            Scheduler(engine_tts.backend, max_streams=bad)


class FrozenClock:
    """Time stands still: a stream's lead is exactly the audio it has out."""

    def __call__(self) -> float:
        return 100.0


def test_a_stream_far_ahead_waits_while_a_new_one_starts(engine_endless_tts):
    """A stream 1.6 s ahead (frozen clock: every frame adds 80 ms of lead) waits while a new
    one is more than the 1 s limit behind it, then goes on beside it."""
    scheduler = Scheduler(engine_endless_tts.backend, threads=2, clock=FrozenClock())
    new_frames = [0]  # the new stream's frames so far, as each of the first's comes out
    seen: list[int] = []

    def tap(item) -> None:
        if not isinstance(item, str):
            seen.append(new_frames[0])

    def count(item) -> None:
        if not isinstance(item, str):
            new_frames[0] += 1

    try:
        ahead_stream, ahead = start(
            scheduler, engine_endless_tts, ["A long text that goes on."], seed=1, end=False, tap=tap
        )
        ahead.wait_frames(20)  # 1.6 s of lead
        new_stream, new = start(
            scheduler, engine_endless_tts, ["Another long text here."], seed=2, end=False, tap=count
        )
        new.wait_frames(1)
        with ahead.lock:
            frames_when_new_started = len(ahead.frames)
        new.wait_frames(20)  # 1.6 s: within 1 s of the one ahead, which goes on with it
        ahead.wait_frames(frames_when_new_started + 2)
        scheduler.cancel(ahead_stream)
        scheduler.cancel(new_stream)
    finally:
        scheduler.close()
    # Beyond the one frame already in the pipeline when the new stream arrived, none of the
    # first stream's frames came out before the new one had 5 (0.4 s: over 1 s behind).
    later = seen[frames_when_new_started + 1 :]
    assert later and min(later) >= 5


class PrefillSpy:
    """The backend, recording the size of every prefill call."""

    def __init__(self, backend) -> None:
        self._backend = backend
        self.prefills: list[int] = []

    def __getattr__(self, name):
        return getattr(self._backend, name)

    def prefill(self, state, embeddings) -> None:
        self.prefills.append(len(embeddings))
        self._backend.prefill(state, embeddings)


class StepClock:
    """Time moves on a frame's worth at every look: no stream ever gets ahead."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 0.08
        return self.now


LONG_TEXT = "This sentence has a good many words in it, so that its prefill is long."


@pytest.mark.parametrize(("clock", "whole"), [(FrozenClock(), True), (StepClock(), False)])
def test_a_new_utterance_is_prefilled_whole_when_the_others_have_audio_in_hand(
    engine_endless_tts, clock, whole
):
    spy = PrefillSpy(engine_endless_tts.backend)
    scheduler = Scheduler(spy, threads=2, clock=clock)
    try:
        first, first_out = start(scheduler, engine_endless_tts, [LONG_TEXT], seed=1, end=False)
        first_out.wait_frames(10)  # frozen clock: 0.8 s in hand; step clock: none
        (job,) = jobs_for(engine_endless_tts, [LONG_TEXT])
        tokens = job.chunk.num_tokens
        assert tokens > 16
        spy.prefills.clear()
        second, second_out = start(scheduler, engine_endless_tts, [LONG_TEXT], seed=2, end=False)
        second_out.wait_frames(1)
        if whole:
            assert spy.prefills == [tokens]
        else:
            assert len(spy.prefills) > 1 and max(spy.prefills) <= 16
            assert sum(spy.prefills) == tokens
        scheduler.cancel(first)
        scheduler.cancel(second)
    finally:
        scheduler.close()


class _Recorded:
    """Shared record of (event, thread name), in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def add(self, event: str) -> None:
        with self._lock:
            self.events.append((event, threading.current_thread().name))


class _VoiceCopySpy:
    """A voice state that records each copy of it."""

    def __init__(self, state, record: _Recorded) -> None:
        self._state, self._record = state, record

    @property
    def position(self) -> int:
        return self._state.position

    @property
    def capacity(self) -> int:
        return self._state.capacity

    def copy(self):
        self._record.add("copy")
        return self._state.copy()


class _PrefillEventSpy(PrefillSpy):
    def __init__(self, backend, record: _Recorded) -> None:
        super().__init__(backend)
        self._record = record

    def prefill(self, state, embeddings) -> None:
        self._record.add("prefill")
        super().prefill(state, embeddings)


def test_a_chunk_copies_its_voice_in_its_first_prefill_task(engine_tts):
    # The copy (a few ms of fresh pages for a full-size voice) runs in the prefill task on the
    # pool, beside the other streams' work, not while the scheduler plans the tick.
    record = _Recorded()
    scheduler = Scheduler(_PrefillEventSpy(engine_tts.backend, record), threads=2)
    try:
        collectors = []
        for i, texts in enumerate([TEXTS[0], TEXTS[2]]):
            collector = Collector()
            stream = scheduler.open_stream(collector.output, collector.error)
            for job in jobs_for(engine_tts, texts, seed=i):
                spied = _VoiceCopySpy(job.voice_state, record)
                scheduler.submit(stream, replace(job, run=replace(job.run, voice_state=spied)))
            scheduler.submit(stream, Notice(END))
            collectors.append(collector)
        for collector in collectors:
            assert collector.ended.wait(WAIT) and not collector.errors
    finally:
        scheduler.close()
    chunks = len(jobs_for(engine_tts, TEXTS[0])) + len(jobs_for(engine_tts, TEXTS[2]))
    copies = [i for i, (event, _) in enumerate(record.events) if event == "copy"]
    assert len(copies) == chunks
    for i in copies:  # each copy is the start of its chunk's prefill task, on that thread
        thread = record.events[i][1]
        following = [event for event, name in record.events[i + 1 :] if name == thread]
        assert following[:1] == ["prefill"]


def test_a_chunk_run_copies_its_voice_once_for_its_first_prefill(engine_tts):
    record = _Recorded()
    (job,) = jobs_for(engine_tts, TEXTS[2])
    voice = job.voice_state
    spied = replace(job, run=replace(job.run, voice_state=_VoiceCopySpy(voice, record)))
    run = ChunkRun(engine_tts.backend, spied)
    assert record.events == [] and run.prefill_left == job.chunk.num_tokens
    with pytest.raises(RuntimeError, match="first prefill piece"):
        run.state  # noqa: B018
    state = run.prefill_state()
    assert run.prefill_state() is state and run.state is state
    assert len(record.events) == 1 and state.position == voice.position


def test_auto_admission_starts_streams_together_while_far_from_the_limit(engine_tts):
    # Three streams are estimated at 20 ms of a frame: all are admitted at once.
    costs = FixedCosts(step_per_stream=0.001, decode_per_stream=0.01, tick_overhead=0.002)
    assert costs.tick_seconds(3, 2) <= FREE_LOAD * 0.08
    events: list[AdmissionWait] = []
    scheduler = Scheduler(
        engine_tts.backend, threads=2, max_streams="auto", on_wait=events.append, costs=costs
    )
    try:
        running = [start(scheduler, engine_tts, **spec) for spec in STREAMS[:3]]
        assert events == []  # none waited
        for (_, collector), spec in zip(running, STREAMS[:3], strict=True):
            assert collector.ended.wait(WAIT)
            assert_same_audio(collector.frames, solo(engine_tts, **spec))
    finally:
        scheduler.close()


class _DecodeLog:
    """The backend, logging each decode call's streams (by Mimi state) beside the outputs."""

    def __init__(self, backend, log: list) -> None:
        self._backend = backend
        self._log = log

    def __getattr__(self, name):
        return getattr(self._backend, name)

    def decode_batch(self, states, latents):
        out = self._backend.decode_batch(states, latents)
        self._log.append(("decode", [id(state) for state in states]))
        return out


def test_a_starting_streams_first_frame_comes_out_before_the_rest_of_its_tick(
    engine_endless_tts,
):
    # One thread: a tick's tasks run in order. The starting stream's first-frame task goes
    # first and its frame is handed over as soon as that task ends: before the running
    # stream's decode in the same tick, not when the tick is over.
    log: list = []
    scheduler = Scheduler(_DecodeLog(engine_endless_tts.backend, log), threads=1, clock=StepClock())
    try:
        running, running_out = start(scheduler, engine_endless_tts, [LONG_TEXT], seed=1, end=False)
        running_out.wait_frames(3)
        new, new_out = start(
            scheduler,
            engine_endless_tts,
            ["Short one."],
            seed=2,
            end=False,
            tap=lambda item: log.append(("new frame", None)),
        )
        new_out.wait_frames(2)
        scheduler.cancel(running)
        scheduler.cancel(new)
    finally:
        scheduler.close()
    first_decode = next(
        i for i, (event, ids) in enumerate(log) if event == "decode" and id(new.mimi) in ids
    )
    assert log[first_decode][1] == [id(new.mimi)]  # a solo decode, in its first-frame task
    assert log[first_decode + 1] == ("new frame", None)
    # The running stream kept decoding in that tick, after the new stream's frame was out;
    # the new stream's second frame, sampled in its first task, decodes in the next tick.
    later = [ids for event, ids in log[first_decode + 1 :] if event == "decode"]
    assert id(running.mimi) in later[0] and id(new.mimi) not in later[0]
    assert id(new.mimi) in later[1]


@pytest.mark.parametrize("max_frames", [1, 2, 3])
def test_first_frame_tasks_draw_the_noise_of_the_stream_alone(engine_tts, max_frames):
    # Chunks of 1, 2 and 3 frames at temperature > 0: a first-frame task steps a second frame
    # only when its chunk has one, so the generator draws what the stream alone draws.
    from chunk_loop import AudioDecoder, generate_chunk

    jobs = [
        replace(job, run=replace(job.run, settings=replace(job.settings, max_frames=max_frames)))
        for job in jobs_for(engine_tts, TEXTS[3], temperature=0.7, seed=11)
    ]
    backend = engine_tts.backend
    rng, decoder, reference = np.random.default_rng(11), AudioDecoder(backend), []
    for job in jobs:
        for frame in generate_chunk(
            backend, job.voice_state, job.chunk, job.settings, rng, lambda: False
        ):
            reference.append(decoder.decode(frame.latent))
    scheduler = Scheduler(backend, threads=2, clock=StepClock())
    try:
        # Another stream speaking: the first-frame task runs beside its work, where it also
        # samples the second frame (alone it does not: the next tick comes at once).
        other, other_out = start(scheduler, engine_tts, TEXTS[1], seed=3, end=False)
        other_out.wait_frames(2)
        collector = Collector()
        stream = scheduler.open_stream(collector.output, collector.error)
        for job in jobs:  # the first chunk's first frame is a first-frame task's
            scheduler.submit(stream, job)
        scheduler.submit(stream, Notice(END))
        assert collector.ended.wait(WAIT) and not collector.errors
        scheduler.cancel(other)
    finally:
        scheduler.close()
    assert len(collector.frames) == len(reference) == len(jobs) * max_frames
    assert snr_db(np.concatenate(reference), collector.audio()) >= MIN_SNR_DB


# -- frame blocks ------------------------------------------------------------------------------
class BlockSpy:
    """The backend, recording every ``decode_frames`` block size; ``blocks`` False makes it
    say it has no exact blocks (the scheduler then decodes frame by frame)."""

    def __init__(self, backend, blocks: bool = True) -> None:
        self._backend = backend
        self.blocks: list[int] = []
        self.capabilities = replace(
            backend.capabilities, frame_blocks=blocks and backend.capabilities.frame_blocks
        )

    def __getattr__(self, name):
        return getattr(self._backend, name)

    def before_decode(self) -> None:
        """Called before every decode call (a subclass holds or fails it there)."""

    def decode_batch(self, states, latents):
        self.before_decode()
        return self._backend.decode_batch(states, latents)

    def decode_frames(self, states, latents):
        self.before_decode()
        self.blocks.append(latents.shape[1])
        return self._backend.decode_frames(states, latents)


@pytest.fixture(scope="module")
def blocks_tts(tmp_path_factory):
    """A tiny never-EOS pack wide enough that its Mimi decodes frame blocks exactly (int16
    arithmetic: AVX2 or better, or bf16: AVX512_BF16), loaded at int8 (whose default Mimi
    arithmetic is the best the CPU has)."""
    from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict
    from pipecat_pocket_tts.engine.backends.numpy.kernels import arithmetic

    if arithmetic.int16_kernels() is None and arithmetic.bf16_kernels() is None:
        pytest.skip("no AVX2 nor AVX512_BF16 here: Mimi runs fp32, not bit for bit in blocks")
    config = tiny_config_dict("standard")
    config["mimi"]["seanet"]["n_filters"] = 8  # transposed convs wide enough to pack
    folder = tmp_path_factory.mktemp("blocks_pack") / "english"
    pack = build_pack(folder, config, voices=("alba",), eos_logit=-30.0)
    tts = PocketTTS.load("english", backend="numpy", model_dir=pack, precision="int8")
    assert tts.backend.capabilities.frame_blocks
    return tts


def _spoken(tts, spy, texts, seed, threads=1):
    """A lone stream's frames; every frame adds to its lead (a frozen clock)."""
    scheduler = Scheduler(spy, threads=threads, clock=FrozenClock())
    try:
        _stream, out = start(scheduler, tts, texts, seed=seed)
        assert out.ended.wait(WAIT) and not out.errors
    finally:
        scheduler.close()
    return out.frames


def test_a_stream_far_ahead_decodes_in_blocks_with_the_same_audio(blocks_tts):
    texts = ["A long text that goes on for a while.", "And then a second one."]
    blocked = BlockSpy(blocks_tts.backend)
    frames = _spoken(blocks_tts, blocked, texts, seed=4)
    assert blocked.blocks and max(blocked.blocks) > 1  # blocks ran, several frames each
    one_by_one = BlockSpy(blocks_tts.backend, blocks=False)
    reference = _spoken(blocks_tts, one_by_one, texts, seed=4)
    assert not one_by_one.blocks
    assert_same_audio(frames, reference)
    np.testing.assert_array_equal(  # bit for bit
        np.concatenate([f.samples for f in frames]), np.concatenate([f.samples for f in reference])
    )
    assert [frame.frame_index for frame in frames if frame.chunk_index == 0][:3] == [0, 1, 2]


def test_a_stream_without_lead_never_waits_for_a_block(blocks_tts):
    spy = BlockSpy(blocks_tts.backend)
    # Never ahead, on one thread (with a thread to spare, decodes are carried instead).
    scheduler = Scheduler(spy, threads=1, clock=StepClock())
    try:
        _, out = start(scheduler, blocks_tts, ["A long text that goes on for a while."], seed=1)
        assert out.ended.wait(WAIT) and not out.errors
    finally:
        scheduler.close()
    assert not spy.blocks


class HeldDecode(BlockSpy):
    """The backend, holding its first carried decode (its second decode call: the first is the
    first-frame task's) until two more FlowLM steps have run, or ``WAIT`` went by."""

    def __init__(self, backend) -> None:
        super().__init__(backend)
        self.steps = 0
        self.decodes = 0
        self.stepped_on: bool | None = None  # whether the steps came while it was held
        self._changed = threading.Condition()

    def _stepped(self) -> None:
        with self._changed:
            self.steps += 1
            self._changed.notify_all()

    def step(self, *args, **kwargs):
        out = self._backend.step(*args, **kwargs)
        self._stepped()
        return out

    def step_batch(self, *args, **kwargs):
        out = self._backend.step_batch(*args, **kwargs)
        self._stepped()
        return out

    def before_decode(self) -> None:
        with self._changed:
            self.decodes += 1
            if self.decodes == 2:
                held_at = self.steps
                self.stepped_on = self._changed.wait_for(lambda: self.steps >= held_at + 2, WAIT)


def test_a_lone_stream_with_a_thread_to_spare_steps_on_while_its_frame_decodes(blocks_tts):
    """On two threads, a lone stream's decode runs on the thread its step leaves idle and
    its tick does not wait for it: with its first such decode held, two more steps run (a
    tick that waited would never get to them); the frames sampled meanwhile are decoded in
    one block as the decode ends, and the audio is the same, bit for bit, as on one thread."""
    texts = ["A long text that goes on for a while."]
    held = HeldDecode(blocks_tts.backend)
    frames = _spoken(blocks_tts, held, texts, seed=5, threads=2)
    assert held.stepped_on is True
    assert held.blocks and max(held.blocks) >= 2  # the frames sampled while it was held
    alone = BlockSpy(blocks_tts.backend)
    reference = _spoken(blocks_tts, alone, texts, seed=5, threads=1)
    assert len(frames) == len(reference)
    assert [f.frame_index for f in frames] == [f.frame_index for f in reference]
    np.testing.assert_array_equal(
        np.concatenate([f.samples for f in frames]), np.concatenate([f.samples for f in reference])
    )


class GateDecode(BlockSpy):
    """The backend, its first carried decode (its second decode call) held until ``go`` is set
    (``held`` says it is), then failing with ``fail`` when given."""

    def __init__(self, backend, fail: BaseException | None = None) -> None:
        super().__init__(backend)
        self.held, self.go = threading.Event(), threading.Event()
        self.fail = fail
        self.events: list[str] = []
        self._calls = 0

    def before_decode(self) -> None:
        self._calls += 1
        if self._calls == 2:
            self.held.set()
            assert self.go.wait(WAIT)
            self.events.append("decode ended")
            if self.fail is not None:
                raise self.fail


def test_cancel_waits_for_a_carried_decode_and_drops_its_frames(blocks_tts):
    """Cancelled while its carried decode runs, a lone stream's cancel returns only once that
    decode ended, and the frame it decoded never comes out."""
    spy = GateDecode(blocks_tts.backend)
    scheduler = Scheduler(spy, threads=2, clock=FrozenClock())
    try:
        stream, out = start(scheduler, blocks_tts, ["A long text that goes on for a while."])
        assert spy.held.wait(WAIT)
        frames_then = len(out.frames)  # the first frame: the rest wait for the held decode
        stopping = threading.Event()
        stop = stream.stop

        def stop_and_say() -> None:
            stop()
            stopping.set()

        stream.stop = stop_and_say
        canceller = threading.Thread(
            target=lambda: (scheduler.cancel(stream), spy.events.append("cancel returned"))
        )
        canceller.start()
        assert stopping.wait(WAIT)  # cancel is under way, the decode still held
        spy.go.set()
        canceller.join(WAIT)
        assert spy.events == ["decode ended", "cancel returned"]
        assert len(out.frames) == frames_then and not out.errors
        assert scheduler.wait_parked(WAIT)
    finally:
        scheduler.close()


def test_close_waits_for_a_carried_decode_and_leaves_nothing_decoding(blocks_tts):
    """Closed while a carried decode runs, the scheduler's close returns once it ended; no
    stream is left decoding, so a cancel afterwards returns at once."""
    spy = GateDecode(blocks_tts.backend)
    scheduler = Scheduler(spy, threads=2, clock=FrozenClock())
    stream, _ = start(scheduler, blocks_tts, ["A long text that goes on for a while."])
    assert spy.held.wait(WAIT) and stream.decoding
    closer = threading.Thread(target=scheduler.close)
    closer.start()
    spy.go.set()
    closer.join(WAIT)
    assert not closer.is_alive() and not stream.decoding and stream.stopped
    scheduler.cancel(stream)


def test_no_notice_overtakes_the_frames_of_a_carried_decode(engine_tts):
    """A notice that reaches the head of a stream's queue while a carried decode of its
    frames runs (those frames already taken off the queue, not yet handed over) waits: the
    decode's own thread hands over its frames, then the scheduler the notice."""
    scheduler = Scheduler(engine_tts.backend, threads=2)
    try:
        stream = scheduler.open_stream(lambda item: None, lambda error: None)
        stream.decoding = True
        stream.jobs.append(Notice("marker"))
        assert stream.next_run() == [] and not stream.ready
        stream.decoding = False
        assert stream.ready and stream.next_run() == ["marker"]
    finally:
        scheduler.close()


def test_a_carried_decode_that_fails_stops_its_stream_alone(blocks_tts):
    """A carried decode's failure is its stream's error; the scheduler serves on."""
    spy = GateDecode(blocks_tts.backend, fail=RuntimeError("decode broke"))
    spy.go.set()
    scheduler = Scheduler(spy, threads=2, clock=FrozenClock())
    try:
        _, broken = start(scheduler, blocks_tts, ["A long text that goes on for a while."])
        assert broken.ended.wait(WAIT)
        assert [str(e) for e in broken.errors] == ["decode broke"]
        _, after = start(scheduler, blocks_tts, ["And then a second one."], seed=2)
        assert after.ended.wait(WAIT) and not after.errors and after.frames
    finally:
        scheduler.close()


class SlowBlocks(BlockSpy):
    """Frame blocks whose decode takes a wall second on ``clock`` (no CPU time): as a block
    tick on a machine whose cores other processes hold."""

    def __init__(self, backend, clock) -> None:
        super().__init__(backend)
        self.clock = clock

    def decode_frames(self, states, latents):
        self.clock.now += 1.0
        return super().decode_frames(states, latents)


class HeldClock:
    """Time stands still but for what ``SlowBlocks`` adds."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_tick_stretch_is_learned_from_ticks_of_frame_blocks_too(blocks_tts):
    """Admission prices a tick by the wall time ticks took per second of their threads' work.
    Two streams far ahead decode in blocks, whose ticks are the slow ones here: the stretch
    learns from them (it once learned only from ticks of single-frame decodes)."""
    clock = HeldClock()
    spy = SlowBlocks(blocks_tts.backend, clock)
    costs = StageCosts()
    scheduler = Scheduler(spy, threads=2, clock=clock, costs=costs)
    try:
        outs = [
            start(scheduler, blocks_tts, ["A long text that goes on for a while."], seed=s)
            for s in (1, 2)
        ]
        for _, out in outs:
            assert out.ended.wait(WAIT) and not out.errors
    finally:
        scheduler.close()
    assert spy.blocks and max(spy.blocks) > 1
    assert costs.tick_stretch > 1.5
