"""PocketTTSService in Pipecat pipelines (``run_test``) on small random-weight packs.

The packs are built once per session by the devpack. ``normal`` stops each chunk at the first
frame EOS is allowed (about 0.7 s of audio); ``long`` never emits EOS, so a chunk runs to its
frame limit (seconds of audio) and synthesis is still running when a test interrupts it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest
from frame_recorder import Until, run_script
from loguru import logger
from pipecat.frames.frames import (
    AggregatedTextFrame,
    AggregatedTextProgressFrame,
    CancelFrame,
    ErrorFrame,
    Frame,
    InterruptionFrame,
    LLMAssistantPushAggregationFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    MetricsFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
    TTSTextFrame,
    TTSUpdateSettingsFrame,
)
from pipecat.metrics.metrics import TTFBMetricsData, TTSUsageMetricsData
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.tts_service import TextAggregationMode
from pipecat.tests.utils import SleepFrame, run_test
from pipecat.transcriptions.language import Language

from pipecat_pocket_tts import PocketTTSService
from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict
from pipecat_pocket_tts.engine import PocketTTS, Session, UtteranceOptions
from pipecat_pocket_tts.engine.audio.wav import write_wav
from pipecat_pocket_tts.engine.errors import LexiconError, UnknownLanguageError, VoiceFileError
from pipecat_pocket_tts.engine.text.planner import TextPlanner
from pipecat_pocket_tts.engine.text.prepare import TextStream
from pipecat_pocket_tts.engine.tts import WARMUP_FRAMES, WARMUP_TEXT
from pipecat_pocket_tts.service import engine_load as loading_module
from pipecat_pocket_tts.service import output as output_module

SAMPLE_RATE = 24000
FRAME_SECONDS = 0.08
START = 30.0  # run_test start timeout: setup loads and warms the model up

# Three words first: a sentence of one or two words would wait for the next (speech_stream).
TWO_SENTENCES = "Hello there, friend. How are you doing today?"
LONG_SENTENCES = [
    f"This is sentence number {n} of a long answer that keeps the voice busy for a while."
    for n in range(1, 9)
]
LONG_REPLY = " ".join(LONG_SENTENCES)


@pytest.fixture(scope="session")
def packs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Tiny packs: english (alba, marius), french (estelle), and a never-EOS english."""
    root = tmp_path_factory.mktemp("packs")
    config = tiny_config_dict("standard")
    build_pack(root / "english", config, voices=("alba", "marius"))
    build_pack(root / "french", config, voices=("estelle",), language="french", seed=1)
    build_pack(root / "long" / "english", config, voices=("alba",), eos_logit=-30.0)
    return {"root": root, "english": root / "english", "long": root / "long" / "english"}


def service(model_dir: Path, **kwargs) -> PocketTTSService:
    kwargs.setdefault("settings", PocketTTSService.Settings(seed=7))
    return PocketTTSService(model_dir=model_dir, backend="numpy", **kwargs)


def engine_of(model_dir: Path) -> PocketTTS:
    return PocketTTS.load_shared("english", backend="numpy", model_dir=model_dir)


def llm_turn(text: str) -> list[Frame]:
    """An LLM reply streamed token by token (short pieces, spaces leading)."""
    tokens = [t for word in re.findall(r"\s*\S+", text) for t in _pieces(word)]
    return [LLMFullResponseStartFrame(), *map(LLMTextFrame, tokens), LLMFullResponseEndFrame()]


def _pieces(word: str) -> list[str]:
    return [word[i : i + 4] for i in range(0, len(word), 4)]


def kinds(frames: list[Frame]) -> list[type]:
    """Frame types with runs of audio frames and the words spoken in them (``TTSTextFrame``s
    with their progress frames, released as the words are played) collapsed to one
    ``TTSAudioRawFrame`` entry; ``spoken_texts`` gives the words."""
    out: list[type] = []
    for frame in frames:
        if isinstance(frame, (MetricsFrame, AggregatedTextProgressFrame)):
            continue
        kind = TTSAudioRawFrame if isinstance(frame, TTSTextFrame) else type(frame)
        if kind is TTSAudioRawFrame and out and out[-1] is TTSAudioRawFrame:
            continue
        out.append(kind)
    return out


def audio_of(frames: list[Frame]) -> np.ndarray:
    pcm = b"".join(f.audio for f in frames if isinstance(f, TTSAudioRawFrame))
    return np.frombuffer(pcm, dtype="<i2")


def is_audio(frame: Frame) -> bool:
    return isinstance(frame, TTSAudioRawFrame)


def is_stop(frame: Frame) -> bool:
    return isinstance(frame, TTSStoppedFrame)


def is_interruption(frame: Frame) -> bool:
    return isinstance(frame, InterruptionFrame)


def assert_no_stale_audio(frames: list[Frame]) -> None:
    """No audio of a context started before the latest InterruptionFrame."""
    live: set[str | None] = set()
    for frame in frames:
        if isinstance(frame, InterruptionFrame):
            live.clear()
        elif isinstance(frame, TTSStartedFrame):
            live.add(frame.context_id)
        elif isinstance(frame, TTSAudioRawFrame):
            assert frame.context_id in live, "audio of an interrupted context"


def session_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("pocket-tts-session")]


def watch_interruptions(tts: PocketTTSService) -> list[list[str]]:
    """Engine threads alive at each moment the service pushes an InterruptionFrame on."""
    seen: list[list[str]] = []
    push = tts.push_frame

    async def push_frame(frame: Frame, direction: FrameDirection = FrameDirection.DOWNSTREAM):
        if isinstance(frame, InterruptionFrame) and direction == FrameDirection.DOWNSTREAM:
            seen.append(session_threads())
        await push(frame, direction)

    tts.push_frame = push_frame
    return seen


@pytest.fixture
def enqueued(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """Every ``Session.enqueue`` call: text and per-utterance settings."""
    calls: list[dict] = []
    original = Session.enqueue

    def spy(self, text, options=None, **kwargs):
        if text != WARMUP_TEXT:
            fields = dataclasses.asdict(UtteranceOptions.build(options, **kwargs))
            calls.append({"text": text, "session": id(self), **fields})
        return original(self, text, options, **kwargs)

    monkeypatch.setattr(Session, "enqueue", spy)
    return calls


@pytest.fixture
def spoken_plans(monkeypatch: pytest.MonkeyPatch) -> list:
    """Every chunk the sessions synthesize (warm-up excluded), in order."""
    from pipecat_pocket_tts.engine.runtime import streams

    plans: list = []
    original_run = streams.ChunkRun.__init__

    def spy_run(run, backend, job):
        if job.chunk.text.strip() != WARMUP_TEXT:
            plans.append(job.chunk)
        original_run(run, backend, job)

    monkeypatch.setattr(streams.ChunkRun, "__init__", spy_run)
    return plans


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """Every session opened: its engine's language and the session options."""
    calls: list[dict] = []
    original = PocketTTS.session

    def spy(self, options=None, **kwargs):
        if kwargs.get("max_frames") != WARMUP_FRAMES:
            calls.append({"language": self.pack_name, **kwargs})
        return original(self, options, **kwargs)

    monkeypatch.setattr(PocketTTS, "session", spy)
    return calls


# -- frame order -----------------------------------------------------------------------


async def test_llm_turn_streamed_token_by_token(packs: dict[str, Path]) -> None:
    tts = service(packs["english"])
    down, _ = await run_test(
        tts,
        frames_to_send=llm_turn(TWO_SENTENCES),
        expected_down_frames=None,
        start_timeout=START,
    )
    assert kinds(down) == [
        LLMFullResponseStartFrame,
        AggregatedTextFrame,  # "Hello there, friend." announced
        TTSStartedFrame,
        TTSAudioRawFrame,  # with its words ("Hello", "there.") as they are played
        AggregatedTextFrame,
        TTSAudioRawFrame,
        TTSStoppedFrame,
        LLMFullResponseEndFrame,
    ]
    assert spoken_texts(down) == ["Hello there, friend.", "How are you doing today?"]
    started = next(f for f in down if isinstance(f, TTSStartedFrame))
    audio = [f for f in down if isinstance(f, TTSAudioRawFrame)]
    assert {f.context_id for f in audio} == {started.context_id}
    assert {f.sample_rate for f in audio} == {SAMPLE_RATE}
    assert tts.engine is None  # released at cleanup


async def test_tts_speak_frame(packs: dict[str, Path]) -> None:
    down, _ = await run_test(
        service(packs["english"]),
        frames_to_send=[TTSSpeakFrame("Good morning, how can I help?")],
        start_timeout=START,
    )
    assert kinds(down) == [
        AggregatedTextFrame,
        TTSStartedFrame,
        TTSAudioRawFrame,
        LLMAssistantPushAggregationFrame,  # a speak frame outside an LLM turn commits itself
        TTSStoppedFrame,
    ]


async def test_two_turns_back_to_back(packs: dict[str, Path]) -> None:
    down, _ = await run_test(
        service(packs["english"]),
        frames_to_send=[*llm_turn("First answer."), *llm_turn("Second answer, right away.")],
        start_timeout=START,
    )
    turn = [
        LLMFullResponseStartFrame,
        AggregatedTextFrame,
        TTSStartedFrame,
        TTSAudioRawFrame,
        TTSStoppedFrame,
        LLMFullResponseEndFrame,
    ]
    assert kinds(down) == turn + turn
    starts = [f.context_id for f in down if isinstance(f, TTSStartedFrame)]
    stops = [f.context_id for f in down if isinstance(f, TTSStoppedFrame)]
    assert starts == stops and len(set(starts)) == 2


async def test_token_aggregation_feeds_the_engine_chunker(
    packs: dict[str, Path], spoken_plans: list
) -> None:
    tts = service(packs["english"], text_aggregation_mode=TextAggregationMode.TOKEN)
    reply = "Sure thing. The first train leaves at nine. The second one leaves at ten."
    down, _ = await run_test(tts, frames_to_send=llm_turn(reply), start_timeout=START)
    kinds_seen = kinds(down)
    assert kinds_seen.count(TTSStartedFrame) == kinds_seen.count(TTSStoppedFrame) == 1
    assert kinds_seen[-2:] == [TTSStoppedFrame, LLMFullResponseEndFrame]
    assert kinds_seen.index(TTSStartedFrame) < kinds_seen.index(TTSAudioRawFrame)
    # Fragments in, whole sentences out, the first one alone (the fastest first audio).
    assert [plan.text.strip() for plan in spoken_plans] == [
        "Sure thing.",
        "The first train leaves at nine.",
        "The second one leaves at ten.",
    ]
    spoken = " ".join(f.text for f in down if isinstance(f, TTSTextFrame))
    assert spoken.split() == reply.split()


LONG_TOKEN_REPLY = [
    "When the committee finally met on Tuesday, after weeks of delays, arguments about the "
    "budget, and a long exchange of letters between the two departments, it decided, to the "
    "surprise of almost everyone in the room, that the old bridge would be repaired rather "
    "than replaced, at a cost of $12.50 per person, which nobody expected.",
    "It was late.",
    "Everyone went home at 3:45 pm.",
]


async def test_token_aggregation_prepares_a_long_sentence_as_the_batch_path(
    packs: dict[str, Path], spoken_plans: list
) -> None:
    generated = spoken_plans
    tts = service(packs["english"], text_aggregation_mode=TextAggregationMode.TOKEN)
    reply = " ".join(LONG_TOKEN_REPLY)
    down, _ = await run_test(tts, frames_to_send=llm_turn(reply), start_timeout=START)
    engine = engine_of(packs["english"])
    planner = TextPlanner(engine.config, engine.tokenizer)
    batch = [chunk for sentence in LONG_TOKEN_REPLY for chunk in planner.plan(sentence)]

    def facts(chunks: list) -> list[tuple]:
        return [
            (c.text, c.token_ids.tolist(), c.frames_after_eos, c.is_mid_sentence) for c in chunks
        ]

    assert sum(c.is_mid_sentence for c in batch) >= 3
    assert facts(generated) == facts(batch)  # mid-sentence pieces: no capital, same EOS rule
    kinds_seen = kinds(down)
    assert kinds_seen.count(TTSStartedFrame) == kinds_seen.count(TTSStoppedFrame) == 1
    assert kinds_seen[-2:] == [TTSStoppedFrame, LLMFullResponseEndFrame]
    spoken = " ".join(f.text for f in down if isinstance(f, TTSTextFrame))
    assert spoken.split() == reply.split()


async def test_ttfb_and_usage_metrics(packs: dict[str, Path]) -> None:
    tts = service(packs["english"])
    assert tts.can_generate_metrics()
    down, _ = await run_test(
        tts,
        frames_to_send=llm_turn(TWO_SENTENCES),
        pipeline_params=PipelineParams(enable_metrics=True, enable_usage_metrics=True),
        start_timeout=START,
    )
    data = [d for f in down if isinstance(f, MetricsFrame) for d in f.data]
    ttfb = [d.value for d in data if isinstance(d, TTFBMetricsData) and d.processor == tts.name]
    usage = [d.value for d in data if isinstance(d, TTSUsageMetricsData)]
    assert ttfb and 0 < ttfb[-1] < 5
    assert sum(usage) == len("Hello there, friend.") + len("How are you doing today?")


@pytest.mark.parametrize("warmup", [True, False])
async def test_load_and_warm_up_run_off_the_event_loop_before_the_first_turn(
    packs: dict[str, Path], monkeypatch: pytest.MonkeyPatch, warmup: bool
) -> None:
    loop_thread = threading.get_ident()
    events: list[tuple[str, bool]] = []  # (what, ran on the event loop's thread)
    load, warm = loading_module.load_shared_engine, PocketTTS.warm_up
    enqueue = Session.enqueue

    def recording_load(*args, **kwargs):
        events.append(("load", threading.get_ident() == loop_thread))
        return load(*args, **kwargs)

    def recording_warm(engine, voice=None):
        events.append(("warm", threading.get_ident() == loop_thread))
        return warm(engine, voice)

    def recording_enqueue(self, text, options=None, **kwargs):
        events.append((f"enqueue {text}", threading.get_ident() == loop_thread))
        return enqueue(self, text, options, **kwargs)

    monkeypatch.setattr(loading_module, "load_shared_engine", recording_load)
    monkeypatch.setattr(PocketTTS, "warm_up", recording_warm)
    monkeypatch.setattr(Session, "enqueue", recording_enqueue)
    await run_test(
        service(packs["english"], warmup=warmup),
        frames_to_send=[TTSSpeakFrame("Good day.")],
        start_timeout=START,
    )
    expected = [("load", False)]
    if warmup:  # a real synthesis (every stage once), on a worker thread, before any turn
        expected += [("warm", False), (f"enqueue {WARMUP_TEXT}", False)]
    assert events == [*expected, ("enqueue Good day.", True)]


async def test_slow_load_keeps_the_first_turn_alive(
    packs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pack switch still loading at the next turn (a first download) finishes in the
    background; the turn waits for it without hitting the no-audio timeout, here 0.6 s instead
    of 3 s. The waiting turn's context was kept alive every 1 s whatever the timeout, so
    Pipecat wrote it off ("completed with no audio"); it is kept alive as often as a speech
    stream's (a third of the timeout). The load is held until the context has been kept alive
    five times (longer than the timeout), or until Pipecat gives up on it (the test then
    fails). (The load of the constructor's pack is waited for before any context opens: the
    text gate asks the loaded pack whether there is anything to say.)"""
    refreshed: list[str] = []
    go_on = threading.Event()  # lets the held load go on
    load = loading_module.load_shared_engine
    refresh = output_module.refresh_audio_context

    def held_load(pack, *args, **kwargs):
        if pack == "french":
            go_on.wait()
        return load(pack, *args, **kwargs)

    def counting(tts: PocketTTSService, context_id: str) -> None:
        refreshed.append(context_id)
        if len(refreshed) >= 5:
            go_on.set()
        refresh(tts, context_id)

    monkeypatch.setattr(loading_module, "load_shared_engine", held_load)
    monkeypatch.setattr(output_module, "refresh_audio_context", counting)
    tts = service(packs["root"], stop_frame_timeout_s=0.6)

    @tts.event_handler("on_error")
    async def gave_up(_tts: PocketTTSService, _error: ErrorFrame) -> None:
        go_on.set()

    switch = TTSUpdateSettingsFrame(delta=PocketTTSService.Settings(language=Language.FR))
    try:
        down, up = await run_test(
            tts, frames_to_send=[switch, TTSSpeakFrame("Worth the wait.")], start_timeout=START
        )
    finally:
        go_on.set()  # never leave a worker thread waiting
    assert [f.error for f in up if isinstance(f, ErrorFrame)] == []
    assert len(refreshed) >= 5 and len(set(refreshed)) == 1  # the one turn, kept alive
    assert tts.engine is None and tts.pack == "french"  # switched, then released at cleanup
    assert kinds(down) == [
        AggregatedTextFrame,
        TTSStartedFrame,
        TTSAudioRawFrame,
        LLMAssistantPushAggregationFrame,
        TTSStoppedFrame,
    ]


# -- output rates ------------------------------------------------------------------------


@pytest.mark.parametrize("rate", [8000, 16000, 24000, 48000])
async def test_output_rate_keeps_the_whole_utterance(packs: dict[str, Path], rate: int) -> None:
    text = "The tail of this sentence must survive resampling."
    down, _ = await run_test(
        service(packs["english"]),
        frames_to_send=[TTSSpeakFrame(text)],
        pipeline_params=PipelineParams(audio_out_sample_rate=rate),
        start_timeout=START,
    )
    assert {f.sample_rate for f in down if isinstance(f, TTSAudioRawFrame)} == {rate}
    ours = audio_of(down)
    reference = engine_of(packs["english"]).synthesize(text, seed=7)
    assert abs(ours.size / rate - reference.size / SAMPLE_RATE) <= FRAME_SECONDS
    if rate == SAMPLE_RATE:  # no resampling: the very samples of the engine
        expected = np.rint(np.clip(reference, -1, 1) * 32767).astype(np.int16)
        assert ours.size == expected.size
        assert np.max(np.abs(ours.astype(np.int32) - expected)) <= 1
    else:  # the last 80 ms (the tail a never-flushed resampler loses) still carries the voice
        tail = ours[-int(rate * FRAME_SECONDS) :].astype(np.float64) / 32767
        ref_tail = reference[-int(SAMPLE_RATE * FRAME_SECONDS) :]
        assert np.sqrt(np.mean(tail**2)) > 0.3 * np.sqrt(np.mean(ref_tail**2))


# -- interruptions -----------------------------------------------------------------------


async def test_interruption_mid_turn(packs: dict[str, Path], opened: list[dict]) -> None:
    tts = service(packs["long"])
    threads_at_interruption = watch_interruptions(tts)
    script = [
        *llm_turn(LONG_REPLY)[:-1],  # the LLM is still streaming...
        Until(is_audio),  # ...the reply speaks...
        InterruptionFrame(),  # ...when the user speaks
        Until(is_interruption),
        TTSSpeakFrame("Sorry, go ahead."),
    ]
    down = await run_script(tts, script, start_timeout=START)
    assert_no_stale_audio(down)
    cut = next(i for i, f in enumerate(down) if isinstance(f, InterruptionFrame))
    before, after = down[:cut], down[cut + 1 :]
    assert any(isinstance(f, TTSAudioRawFrame) for f in before)
    # After the interruption: only the next turn, complete.
    assert kinds(after) == [
        AggregatedTextFrame,
        TTSStartedFrame,
        TTSAudioRawFrame,
        LLMAssistantPushAggregationFrame,  # a speak frame outside an LLM turn commits itself
        TTSStoppedFrame,
    ]
    next_turn = next(f.context_id for f in after if isinstance(f, TTSStartedFrame))
    assert all(f.context_id == next_turn for f in after if isinstance(f, TTSAudioRawFrame))
    # The session was cancelled before the InterruptionFrame went on: no engine thread left.
    assert threads_at_interruption == [[]]
    assert len(opened) == 2  # a fresh session for the next turn
    assert session_threads() == []


async def test_twenty_quick_interruptions_leave_nothing_behind(packs: dict[str, Path]) -> None:
    tts = service(packs["long"])
    frames: list[Frame] = []
    for n in range(20):
        frames += [*llm_turn(f"Reply number {n}. {LONG_REPLY}")[:-1], SleepFrame(0.03)]
        frames += [InterruptionFrame(), SleepFrame(0.01)]
    frames += [TTSSpeakFrame("Still here.")]
    threads_at_interruption = watch_interruptions(tts)
    down, _ = await run_test(tts, frames_to_send=frames, start_timeout=START)
    # Frames sent this fast can reach the service after an interruption that overtook them
    # (system frames jump queues), so the checks hold whatever the order: no stale audio,
    # and the last turn plays to the end.
    assert_no_stale_audio(down)
    # The speak frame's turn plays to its end: its words come with its chunk's last frame (this
    # pack has no timestamp heads), then its context stops. (Tokens of the last reply that an
    # interruption overtook may start one more reply, spoken before or after it.)
    assert "Still here." in spoken_texts(down)
    speak = next(f.context_id for f in down if isinstance(f, TTSTextFrame) and f.text == "here.")
    heard = next(i for i, f in enumerate(down) if isinstance(f, TTSTextFrame) and f.text == "here.")
    stop = next(
        i for i, f in enumerate(down) if isinstance(f, TTSStoppedFrame) and f.context_id == speak
    )
    assert heard < stop
    assert threads_at_interruption == [[]] * 20
    assert session_threads() == []
    assert tts.get_audio_contexts() == []
    leftover = [t for t in asyncio.all_tasks() if "pocket_tts" in t.get_name()]
    assert leftover == []


async def test_uninterruptible_speech_survives_an_interruption(packs: dict[str, Path]) -> None:
    tts = service(packs["long"])
    # Still being synthesized when the user speaks.
    text = " ".join(["Please hold.", *LONG_SENTENCES[:2]])
    speak = TTSSpeakFrame(text)
    speak.interruptible = False
    script = [speak, Until(is_audio), InterruptionFrame(), Until(is_stop)]
    down = await run_script(tts, script, start_timeout=START)
    assert kinds(down).count(TTSStoppedFrame) == 1
    reference = engine_of(packs["long"]).synthesize(text, seed=7)
    assert audio_of(down).size == reference.size  # all of it, not cut by the interruption
    assert session_threads() == []


# -- settings ----------------------------------------------------------------------------


async def test_voice_temperature_and_seed_updates(
    packs: dict[str, Path], enqueued: list[dict], opened: list[dict]
) -> None:
    tts = service(packs["english"], settings=PocketTTSService.Settings(voice="alba", seed=1))
    frames = [
        TTSSpeakFrame("One."),
        TTSUpdateSettingsFrame(delta=PocketTTSService.Settings(voice="marius", temperature=0.5)),
        TTSSpeakFrame("Two."),
        TTSUpdateSettingsFrame(delta=PocketTTSService.Settings(seed=99)),
        TTSSpeakFrame("Three."),
        TTSSpeakFrame("Four."),
        TTSUpdateSettingsFrame(delta=PocketTTSService.Settings(seed=None)),
        TTSSpeakFrame("Five."),
    ]
    down, _ = await run_test(tts, frames_to_send=frames, start_timeout=START)
    assert kinds(down).count(TTSStoppedFrame) == 5
    assert [(c["text"], c["voice"], c["temperature"]) for c in enqueued] == [
        ("One.", "alba", None),
        ("Two.", "marius", 0.5),
        ("Three.", "marius", 0.5),
        ("Four.", "marius", 0.5),
        ("Five.", "marius", 0.5),
    ]
    # One persistent session; a new seed restarts its generator at the next utterance only.
    assert [c["seed"] for c in opened] == [1]
    assert len({c["session"] for c in enqueued}) == 1
    seeds = [c["seed"] for c in enqueued]
    assert seeds[:4] == [None, None, 99, None]
    assert isinstance(seeds[4], int)  # back to random: a fresh random seed


async def test_unknown_voice_update_is_refused_and_reported(
    packs: dict[str, Path], enqueued: list[dict]
) -> None:
    tts = service(packs["english"])
    frames = [
        TTSUpdateSettingsFrame(delta=PocketTTSService.Settings(voice="nobody")),
        TTSSpeakFrame("Still alba."),
    ]
    _, up = await run_test(tts, frames_to_send=frames, start_timeout=START)
    assert any(isinstance(f, ErrorFrame) and "nobody" in f.error for f in up)
    assert [c["voice"] for c in enqueued] == ["alba"]  # the pack's default voice, unchanged


async def test_a_voice_the_engine_cannot_load_is_refused_and_the_previous_one_kept(
    packs: dict[str, Path], tmp_path: Path, enqueued: list[dict]
) -> None:
    missing = str(tmp_path / "gone.safetensors")
    settings = PocketTTSService.Settings(seed=7, voice="marius")
    frames = [
        TTSUpdateSettingsFrame(delta=PocketTTSService.Settings(voice=missing)),
        TTSSpeakFrame("Still marius."),
    ]
    down, up = await run_test(
        service(packs["english"], settings=settings), frames_to_send=frames, start_timeout=START
    )
    assert any("gone.safetensors" in e for e in errors_of(up))
    assert [c["voice"] for c in enqueued] == ["marius"]
    assert spoken_texts(down) == ["Still marius."]


async def test_normalize_and_lexicon_settings(
    packs: dict[str, Path], enqueued: list[dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    planned: list[str] = []  # each text planned once: the gate's check, kept for the enqueue
    original_plan = TextPlanner._plan

    def plan(self, text, *args):
        chunks = original_plan(self, text, *args)
        if text != WARMUP_TEXT:
            planned.extend(chunk.text for chunk in chunks)
        return chunks

    monkeypatch.setattr(TextPlanner, "_plan", plan)
    tts = service(
        packs["english"],
        settings=PocketTTSService.Settings(lexicon={"Pipecat": "pipe cat", "sql": "sequel"}),
    )
    frames = [
        TTSSpeakFrame("Pipecat speaks SQL, not SQLite."),
        TTSUpdateSettingsFrame(delta=PocketTTSService.Settings(lexicon={"Pipecat": 7})),
        TTSUpdateSettingsFrame(delta=PocketTTSService.Settings(normalize=False)),
        TTSSpeakFrame("Pipecat costs $5."),
    ]
    _, up = await run_test(tts, frames_to_send=frames, start_timeout=START)
    lexicon = {"Pipecat": "pipe cat", "sql": "sequel"}
    assert [(c["text"], c["normalize"], c["lexicon"]) for c in enqueued] == [
        ("Pipecat speaks SQL, not SQLite.", True, lexicon),
        ("Pipecat costs $5.", False, lexicon),  # normalize off: the lexicon is not applied
    ]
    # The engine applied the lexicon (whole words, case rules) before preparing the chunk
    # (capitalized); with normalize off, "$5" stays unspoken and the tiny test tokenizer,
    # which has no "$", drops the sign.
    assert planned == ["Pipe cat speaks sequel, not SQLite.", "Pipecat costs 5."]
    assert any(isinstance(f, ErrorFrame) and "lexicon" in f.error for f in up)  # 7: refused
    with pytest.raises(LexiconError):
        PocketTTSService(settings=PocketTTSService.Settings(lexicon={"": "nothing"}))


async def test_normalize_is_on_by_default(packs: dict[str, Path], enqueued: list[dict]) -> None:
    await run_test(
        service(packs["english"]),
        frames_to_send=[TTSSpeakFrame("It costs $5.")],
        start_timeout=START,
    )
    assert [(c["text"], c["normalize"]) for c in enqueued] == [("It costs $5.", True)]


async def test_language_switch_loads_in_background_and_applies_next_turn(
    packs: dict[str, Path], opened: list[dict]
) -> None:
    tts = service(packs["root"], language=Language.EN)
    frames = [
        TTSSpeakFrame("In English."),
        TTSUpdateSettingsFrame(delta=PocketTTSService.Settings(language=Language.FR)),
        TTSSpeakFrame("En français."),
    ]
    down, _ = await run_test(tts, frames_to_send=frames, start_timeout=START)
    assert kinds(down).count(TTSStoppedFrame) == 2
    assert [c["language"] for c in opened] == ["english", "french"]
    assert tts.pack == "french" and tts.settings.model == "french"


async def test_failed_language_switch_keeps_the_working_pack(
    packs: dict[str, Path], opened: list[dict]
) -> None:
    tts = service(packs["root"], language=Language.EN)  # root has no german/ pack
    frames = [
        TTSUpdateSettingsFrame(delta=PocketTTSService.Settings(language=Language.DE)),
        TTSSpeakFrame("Still English."),
    ]
    down, up = await run_test(tts, frames_to_send=frames, start_timeout=START)
    assert any(isinstance(f, ErrorFrame) and "german" in f.error for f in up)
    assert kinds(down).count(TTSStoppedFrame) == 1
    assert [c["language"] for c in opened] == ["english"]
    assert tts.pack == "english"


async def test_missing_pack_is_reported_at_start(tmp_path: Path) -> None:
    tts = PocketTTSService(model_dir=tmp_path, backend="numpy")  # an empty folder
    _, up = await run_test(tts, frames_to_send=[], start_timeout=START)
    errors = [f for f in up if isinstance(f, ErrorFrame)]
    assert errors and "could not load pack 'english'" in errors[0].error


def test_constructor_resolves_languages_and_rejects_unknown_ones(packs: dict[str, Path]) -> None:
    assert PocketTTSService(language=Language.PT_BR).pack == "portuguese"
    assert PocketTTSService(language="french_24l").pack == "french_24l"
    assert PocketTTSService(settings=PocketTTSService.Settings(language=Language.DE)).pack == (
        "german"
    )
    with pytest.raises(
        UnknownLanguageError,
        match=r"unknown language or model config 'ja'; choose a language \(en, fr",
    ):
        PocketTTSService(language=Language.JA)


async def test_services_of_one_pack_share_the_model(
    packs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = shutil.copytree(packs["english"], tmp_path / "english")  # not in the cache yet
    loads: list[str] = []
    engines: list[PocketTTS] = []
    load, load_shared = PocketTTS.load.__func__, loading_module.load_shared_engine

    def counting_load(cls, *args, **kwargs):
        loads.append(str(kwargs.get("model_dir")))
        return load(cls, *args, **kwargs)

    def recording_load_shared(*args, **kwargs):
        engines.append(load_shared(*args, **kwargs))
        return engines[-1]

    monkeypatch.setattr(PocketTTS, "load", classmethod(counting_load))
    monkeypatch.setattr(loading_module, "load_shared_engine", recording_load_shared)
    first, second = service(folder), service(folder)
    await run_test(Pipeline([first, second]), frames_to_send=[], start_timeout=START)
    assert len(loads) == 1  # ten calls on one server would load the weights once, too
    assert len(engines) == 2 and engines[0] is engines[1]


# -- failures: text that was never spoken ----------------------------------------------------


@pytest.fixture
def failing_text(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """Texts whose ``Session.enqueue`` raises, or whose chunk fails to queue when streamed
    (as an unusable voice would)."""
    texts: set[str] = set()
    original = Session.enqueue

    def enqueue(self, text, options=None, **kwargs):
        if text in texts:
            raise VoiceFileError(f"cannot speak {text!r}")
        return original(self, text, options, **kwargs)

    def failing_chunks(method):
        def queue(self, *args, **kwargs):
            chunks = method(self, *args, **kwargs)
            for chunk in chunks:
                if chunk.text.strip() in texts:
                    raise VoiceFileError(f"cannot speak {chunk.text.strip()!r}")
            return chunks

        return queue

    monkeypatch.setattr(Session, "enqueue", enqueue)
    monkeypatch.setattr(TextStream, "push", failing_chunks(TextStream.push))
    monkeypatch.setattr(TextStream, "flush", failing_chunks(TextStream.flush))
    return texts


def spoken_texts(frames: list[Frame]) -> list[str]:
    """The text of each sentence (segment) whose words were spoken, words joined by spaces."""
    texts: list[str] = []
    segment: object = None
    for f in frames:
        if isinstance(f, TTSTextFrame):
            if texts and f.segment_id == segment:
                texts[-1] += " " + f.text
            else:
                texts.append(f.text)
            segment = f.segment_id
    return texts


def errors_of(frames: list[Frame]) -> list[str]:
    return [f.error for f in frames if isinstance(f, ErrorFrame)]


async def test_a_sentence_that_fails_is_not_pushed_as_spoken_text(
    packs: dict[str, Path], failing_text: set[str]
) -> None:
    failing_text.add("The middle one fails.")
    tts = service(packs["english"])
    reply = "The first one plays. The middle one fails. The last one plays too."
    down, up = await run_test(tts, frames_to_send=llm_turn(reply), start_timeout=START)
    assert spoken_texts(down) == ["The first one plays.", "The last one plays too."]
    assert any("cannot speak" in e for e in errors_of(up))
    seen = kinds(down)
    assert seen.count(TTSStartedFrame) == seen.count(TTSStoppedFrame) == 1
    assert seen[-2:] == [TTSStoppedFrame, LLMFullResponseEndFrame]
    assert tts.get_audio_contexts() == []


async def test_a_turn_whose_only_sentence_fails_closes_without_spoken_text(
    packs: dict[str, Path], failing_text: set[str]
) -> None:
    failing_text.add("Never spoken.")
    frames = [TTSSpeakFrame("Before."), TTSSpeakFrame("Never spoken.")]
    down, up = await run_test(service(packs["english"]), frames_to_send=frames, start_timeout=START)
    assert spoken_texts(down) == ["Before."]
    assert any("cannot speak" in e for e in errors_of(up))
    seen = kinds(down)
    assert seen.count(TTSStartedFrame) == seen.count(TTSStoppedFrame) == 2
    assert seen[-1] is TTSStoppedFrame


async def test_a_failed_chunk_of_streamed_tokens_is_not_pushed_as_spoken_text(
    packs: dict[str, Path], failing_text: set[str]
) -> None:
    failing_text.add("The first train leaves at nine.")
    tts = service(packs["english"], text_aggregation_mode=TextAggregationMode.TOKEN)
    reply = "Sure thing. The first train leaves at nine. The second one leaves at ten."
    down, up = await run_test(tts, frames_to_send=llm_turn(reply), start_timeout=START)
    spoken = " ".join(spoken_texts(down))
    assert " ".join(spoken.split()) == "Sure thing. The second one leaves at ten."
    assert any("cannot speak" in e for e in errors_of(up))
    seen = kinds(down)
    assert seen.count(TTSStartedFrame) == seen.count(TTSStoppedFrame) == 1
    assert seen[-2:] == [TTSStoppedFrame, LLMFullResponseEndFrame]


@pytest.mark.parametrize("mode", [TextAggregationMode.SENTENCE, TextAggregationMode.TOKEN])
async def test_no_spoken_text_when_the_pack_failed_to_load(
    tmp_path: Path, mode: TextAggregationMode
) -> None:
    tts = PocketTTSService(model_dir=tmp_path, backend="numpy", text_aggregation_mode=mode)
    frames = [*llm_turn(TWO_SENTENCES), TTSSpeakFrame("Nobody hears this.")]
    down, up = await run_test(tts, frames_to_send=frames, start_timeout=START)
    assert spoken_texts(down) == []
    assert any("could not load pack 'english'" in e for e in errors_of(up))
    seen = kinds(down)
    assert TTSAudioRawFrame not in seen
    assert seen.count(TTSStartedFrame) == seen.count(TTSStoppedFrame) == 2


async def test_a_service_without_a_model_says_so_once_per_turn_not_per_token(
    tmp_path: Path,
) -> None:
    tts = PocketTTSService(
        model_dir=tmp_path, backend="numpy", text_aggregation_mode=TextAggregationMode.TOKEN
    )
    warnings: list[str] = []
    sink = logger.add(lambda m: warnings.append(m.record["message"]), level="WARNING")
    try:
        frames = [*llm_turn(TWO_SENTENCES), *llm_turn(TWO_SENTENCES)]
        await run_test(tts, frames_to_send=frames, start_timeout=START)
    finally:
        logger.remove(sink)
    unspoken = [w for w in warnings if "not spoken" in w or "not speaking" in w]
    assert len(unspoken) == 2  # one per reply, however many tokens each had
    assert all("no model to speak with" in w and "english" in w for w in unspoken)


# -- ending --------------------------------------------------------------------------------


async def test_end_frame_drains_queued_audio(packs: dict[str, Path]) -> None:
    text = "Everything queued is spoken before the pipeline ends."
    down, _ = await run_test(
        service(packs["english"]),
        frames_to_send=[TTSSpeakFrame(text)],  # run_test sends the EndFrame right after
        start_timeout=START,
    )
    assert kinds(down)[-3:] == [
        TTSAudioRawFrame,
        LLMAssistantPushAggregationFrame,
        TTSStoppedFrame,
    ]
    assert spoken_texts(down) == [text]
    reference = engine_of(packs["english"]).synthesize(text, seed=7)
    assert audio_of(down).size == reference.size


async def test_cancel_frame_stops_at_once(packs: dict[str, Path]) -> None:
    tts = service(packs["long"])
    script = [TTSSpeakFrame(LONG_REPLY), Until(is_audio), CancelFrame()]
    down = await run_script(tts, script, send_end_frame=False, start_timeout=START)
    engine = engine_of(packs["long"])
    plan = TextPlanner(engine.config, engine.tokenizer).plan(LONG_REPLY)  # never EOS: all frames
    full = sum(chunk.max_frames for chunk in plan) * 1920
    assert 0 < audio_of(down).size < full / 4
    assert TTSStoppedFrame not in kinds(down)
    assert session_threads() == []


async def test_voice_setting_accepts_a_saved_voice_and_a_recording(
    packs: dict[str, Path], tmp_path: Path
) -> None:
    engine = engine_of(packs["english"])
    recording = write_wav(
        tmp_path / "speaker.wav",
        engine.synthesize("Hello there.", seed=1, eos_threshold=100.0, max_frames=30),
        24000,
    )
    saved = engine.clone_voice(recording).save(tmp_path / "speaker.safetensors")
    for voice in (str(saved), str(recording)):
        settings = PocketTTSService.Settings(seed=7, voice=voice)
        down, _ = await run_test(
            service(packs["english"], settings=settings),
            frames_to_send=[TTSSpeakFrame("Good morning.")],
            start_timeout=START,
        )
        assert audio_of(down).size > 0
    # the recording is cloned once and then served from the engine's voice cache
    assert engine.voice_state(str(recording)) is engine.voice_state(recording)


async def test_brazilian_portuguese_reads_numbers_the_brazilian_way(
    tmp_path: Path, opened: list[dict]
) -> None:
    build_pack(tmp_path / "portuguese", tiny_config_dict("standard"), language="portuguese")
    tts = service(tmp_path, language=Language.PT_BR)
    frames = [
        TTSSpeakFrame("São 16 km."),
        TTSUpdateSettingsFrame(delta=PocketTTSService.Settings(language=Language.PT)),
        TTSSpeakFrame("São 16 km."),
    ]
    down, _ = await run_test(tts, frames_to_send=frames, start_timeout=START)
    assert kinds(down).count(TTSStoppedFrame) == 2
    assert tts.pack == "portuguese"
    # same pack, but the first session normalizes as pt-BR and the second as European pt
    assert [(c["language"], c["text_language"]) for c in opened] == [
        ("portuguese", "pt-BR"),
        ("portuguese", None),
    ]


# -- reliability (issue 14) ----------------------------------------------------------------


@pytest.mark.parametrize("mode", [TextAggregationMode.SENTENCE, TextAggregationMode.TOKEN])
async def test_end_frame_while_a_reply_streams_speaks_all_of_it(
    packs: dict[str, Path], mode: TextAggregationMode
) -> None:
    """Issue 14 #6: Pipecat calls stop() before the final flush; nothing given is lost."""
    tts = service(packs["english"], text_aggregation_mode=mode)
    frames = llm_turn(TWO_SENTENCES)[:-1]  # no LLMFullResponseEndFrame: the EndFrame comes
    down, _ = await run_test(tts, frames_to_send=frames, start_timeout=START)
    spoken = " ".join(spoken_texts(down))
    assert spoken.split() == TWO_SENTENCES.split()
    seen = kinds(down)
    assert seen.count(TTSStartedFrame) == seen.count(TTSStoppedFrame) == 1
    first_alone = engine_of(packs["english"]).synthesize("Hello there, friend.", seed=7)
    assert audio_of(down).size > first_alone.size  # the second sentence was spoken too


@pytest.mark.parametrize("update", [Language.EN, "english", Language.FR])
async def test_sentence_splitter_reads_the_pack_language_code_after_an_update(
    packs: dict[str, Path], update: Language | str
) -> None:
    """Issue 14: an update to the language in use set the splitter to "english"."""
    tts = service(packs["root"], language=Language.EN)
    assert tts.text_aggregation_language == "en"
    frames = [TTSUpdateSettingsFrame(delta=PocketTTSService.Settings(language=update))]
    await run_test(tts, frames_to_send=frames, start_timeout=START)
    assert tts.text_aggregation_language == ("fr" if update == Language.FR else "en")


async def test_replies_with_nothing_to_say_open_no_context_and_keep_the_bot_speaking(
    packs: dict[str, Path],
) -> None:
    """Issue 14 #1: three such replies in a row wrote the service off (no-audio guard)."""
    frames: list[Frame] = [TTSSpeakFrame(t) for t in ("👍", "***", "👍👍", "🎉")]
    frames += [*llm_turn("👍"), TTSSpeakFrame("Still speaking.")]
    down, up = await run_test(service(packs["english"]), frames_to_send=frames, start_timeout=START)
    assert errors_of(up) == []
    seen = kinds(down)
    assert seen.count(TTSStartedFrame) == seen.count(TTSStoppedFrame) == 1
    assert spoken_texts(down) == ["Still speaking."]
    assert audio_of(down).size > 0
