"""The assistant's context after a barge-in holds the words the user heard (word timestamps).

A real pipeline — PocketTTSService → an output transport playing in real time →
LLMAssistantAggregator — on a virtual clock (``pipecat_playback``): the transport plays each
10 ms of audio as 10 ms of pipeline time and releases each word frame when the playback reaches
the word's time, so the test needs no wall-clock waits. The playback holds at a point in the
middle of a long sentence, the test waits until the service has produced the audio (and so
the words) well past that point, then interrupts.
"""

from __future__ import annotations

import asyncio
import math
import re
from pathlib import Path

import numpy as np
import pytest
from pipecat.frames.frames import (
    EndFrame,
    Frame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    OutputAudioRawFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMAssistantAggregator,
    LLMContextAggregatorPair,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.tts_service import TextAggregationMode
from pipecat.workers.runner import WorkerRunner
from pipecat_playback import NS, PlaybackClock, PlaybackOutput, timed_frames_on
from polling import poll_until

from pipecat_pocket_tts import PocketTTSService
from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict
from pipecat_pocket_tts.engine import FrameEncoder
from pipecat_pocket_tts.engine.model.config import FRAME_SIZE, SAMPLE_RATE
from pipecat_pocket_tts.service import speech_stream as handover

FRAME_SECONDS = 0.08
HEADS = ((1, 2), (0, 1))  # the tiny pack's config names no checkpoint: read these heads
LONG_SENTENCE = (
    "This reply is one long sentence with many short words in it so that the voice keeps "
    "talking for a good while before it ever reaches its final word and stops"
)
EXACT_REPLY = 'Sure — it costs $12.50, (about 3 apples) and "more" is fine! Okay? 2026-11-30.'
# Double spaces and newlines between words, and two spaces inside untimed text ("—  it").
SPACED_REPLY = (
    'Sure  —  it costs $12.50,\n(about 3 apples)  and "more" is fine!\n\nOkay?  2026-11-30.'
)
# What Pipecat 1.14 keeps of it: its word-timestamp sequencer strips the whitespace around each
# word's share of the LLM text (TTSTextFrame.raw_text: the word and the untimed text before
# it) and the assistant aggregator joins the frames with one space. Whitespace next to a timed
# word becomes one space; whitespace inside the untimed text before a word is kept ("—  it").
SPACED_KEPT = 'Sure —  it costs $12.50, (about 3 apples) and "more" is fine! Okay? 2026-11-30.'


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny pack whose EOS never fires: every chunk runs its whole frame budget."""
    root = tmp_path_factory.mktemp("ts_service")
    return build_pack(root / "english", tiny_config_dict("standard"), eos_logit=-30.0)


class WordTap(FrameProcessor):
    """Records the word frames the TTS service pushes (before the transport holds them), and
    how much audio the service had pushed before each (``audio_before``, seconds)."""

    def __init__(self, clock: PlaybackClock) -> None:
        super().__init__()
        self.words: list[TTSTextFrame] = []
        self.audio_before: list[float] = []
        self.audio_seconds = 0.0
        self.first_audio_ns: int | None = None  # the clock at the first audio: words' zero
        self.context_starts: dict[str, float] = {}  # audio seconds before each context's
        self.context_clock: dict[str, int] = {}  # the clock at each context's first audio
        self.audio = bytearray()  # every audio byte, in order
        self.audio_frames: list[int] = []  # the size of each audio frame (bytes)
        self._clock = clock

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, TTSTextFrame):
            self.words.append(frame)
            self.audio_before.append(self.audio_seconds)
        elif isinstance(frame, TTSAudioRawFrame):
            if self.first_audio_ns is None:
                self.first_audio_ns = self._clock.get_time()
            self.context_starts.setdefault(frame.context_id, self.audio_seconds)
            self.context_clock.setdefault(frame.context_id, self._clock.get_time())
            self.audio_seconds += len(frame.audio) / 2 / frame.sample_rate
            self.audio += frame.audio
            self.audio_frames.append(len(frame.audio))
        await self.push_frame(frame, direction)


class DepartureTap(FrameProcessor):
    """Records when each word frame leaves the output transport (the clock then, ns): the
    transport lets a word out once the playback reaches its presentation time."""

    def __init__(self, clock: PlaybackClock) -> None:
        super().__init__()
        self.words: list[tuple[str, int]] = []
        self._clock = clock

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, TTSTextFrame):
            self.words.append((frame.text, self._clock.get_time()))
        await self.push_frame(frame, direction)


def tokens(text: str) -> list[Frame]:
    pieces = [p for word in re.findall(r"\s*\S+", text) for p in (word[:4], word[4:]) if p]
    return [LLMFullResponseStartFrame(), *map(LLMTextFrame, pieces), LLMFullResponseEndFrame()]


async def run_pipeline(
    pack,
    frames,
    *,
    rate,
    mode,
    pause_at=None,
    heads=HEADS,
    lag=None,
    settings=None,
    then=(),
    then_lag=None,
):
    """Play ``frames`` through service → playback → aggregator; interrupt at ``pause_at``,
    then queue ``then`` (the reply to the user who barged in); ``then_lag``: the playback
    goes on only once that much more audio has arrived (the reply is made while what the
    interruption left plays on)."""
    clock = PlaybackClock()
    output = PlaybackOutput(clock, rate)
    tts = PocketTTSService(
        model_dir=pack,
        backend="numpy",
        settings=settings or PocketTTSService.Settings(seed=3),
        text_aggregation_mode=mode,
    )
    tap = WordTap(clock)
    tap.departures = DepartureTap(clock)  # after the transport
    context = LLMContext()
    assistant = LLMAssistantAggregator(context)
    worker = PipelineWorker(
        Pipeline([tts, tap, output, tap.departures, assistant]),
        clock=clock,
        params=PipelineParams(audio_out_sample_rate=rate),
        cancel_on_idle_timeout=False,
    )
    started = asyncio.Event()

    @tts.event_handler("on_model_loaded")  # the pipeline runs and the model is loaded
    async def _started(_tts):
        started.set()

    if pause_at is not None:
        output.pause_at(pause_at)
    if lag is not None:
        output.start_after(lag)

    async def drive() -> None:
        await asyncio.wait_for(started.wait(), timeout=120)
        tts.engine.timestamp_heads = heads  # before the first turn opens its session
        await worker.queue_frames(frames)
        if pause_at is not None:
            await output.reached.wait()
            # the service has made the audio (and so the words) well past the pause point
            await output.received_at_least(pause_at + 2.0)
            await poll_until(  # words due by now are out
                lambda: not clock.sleepers_due_by(clock.get_time()),
                what="the words due by now to be out",
                tries=100_000,
                interval=0,
            )
            if then_lag is not None:
                output.start_after(output.received_samples / rate + then_lag)
            await worker.queue_frame(InterruptionFrame())
            await output.quiet()
            await worker.queue_frames(list(then))
        await worker.queue_frame(EndFrame())

    with timed_frames_on(clock):
        runner = WorkerRunner()
        await runner.add_workers(worker)
        await asyncio.gather(runner.run(), drive())
    messages = [m for m in context.get_messages() if m.get("role") == "assistant"]
    return output, tap, messages


def _content(message) -> str:
    content = message["content"]
    if isinstance(content, list):
        content = "".join(part.get("text", "") for part in content)
    return content


@pytest.mark.parametrize("rate", [8000, 24000])
@pytest.mark.parametrize("mode", [TextAggregationMode.SENTENCE, TextAggregationMode.TOKEN])
async def test_after_a_barge_in_the_context_holds_the_words_played(pack, rate, mode):
    pause = 3.0
    output, tap, messages = await run_pipeline(
        pack, tokens(LONG_SENTENCE), rate=rate, mode=mode, pause_at=pause
    )
    assert output.interrupted_at == pytest.approx(pause, abs=0.011)
    written = LONG_SENTENCE.split()
    # the words whose audio had begun when the user spoke (their release time ≤ the pause)
    heard = [f.text for f in tap.words if f.pts is not None and f.pts <= output.interrupted_clock]
    assert 2 <= len(heard) < len(written) - 2  # interrupted in the middle of the sentence
    assert len(messages) == 1
    got = _content(messages[0]).split()
    assert got == written[: len(got)]  # a prefix of the reply, as written
    # Exactly the words heard, the one being spoken included: each word reaches Pipecat on
    # the frame where it starts, stamped with its start, and the transport releases it when
    # the playback reaches that start. No tolerance: the pause point and the releases are on
    # the same virtual clock, and every word due by the pause is out before the interruption.
    assert got == heard


async def test_estimated_words_after_a_barge_in_are_the_words_begun(pack):
    """Without heads the words are estimated, released as the frames go: the context still
    holds exactly the words whose (estimated) start the playback had reached."""
    pause = 3.0
    output, tap, messages = await run_pipeline(
        pack,
        tokens(LONG_SENTENCE),
        rate=24000,
        mode=TextAggregationMode.SENTENCE,
        pause_at=pause,
        heads=None,
    )
    heard = [f.text for f in tap.words if f.pts is not None and f.pts <= output.interrupted_clock]
    written = LONG_SENTENCE.split()
    assert 2 <= len(heard) < len(written) - 2
    assert _content(messages[0]).split() == heard == written[: len(heard)]


@pytest.mark.parametrize("mode", [TextAggregationMode.SENTENCE, TextAggregationMode.TOKEN])
@pytest.mark.parametrize(
    ("reply", "kept"),
    [(EXACT_REPLY, EXACT_REPLY), (SPACED_REPLY, SPACED_KEPT)],
    ids=["one", "spaced"],
)
async def test_not_interrupted_the_context_holds_the_reply_as_written(pack, mode, reply, kept):
    _, tap, messages = await run_pipeline(pack, tokens(reply), rate=24000, mode=mode)
    assert len(messages) == 1
    assert _content(messages[0]) == kept  # words, punctuation, numbers exactly as written
    assert all(f.pts is not None for f in tap.words)
    assert [f.pts for f in tap.words] == sorted(f.pts for f in tap.words)


async def test_a_speak_frame_s_words_go_to_the_context(pack):
    _, tap, messages = await run_pipeline(
        pack, [TTSSpeakFrame("Good morning, it is 9:30.")], rate=16000, mode=None
    )
    assert [f.text for f in tap.words] == ["Good", "morning,", "it", "is", "9:30."]
    assert _content(messages[-1]).strip() == "Good morning, it is 9:30."


async def test_audio_is_all_played_before_the_words_of_its_end(pack):
    output, tap, _ = await run_pipeline(
        pack, [TTSSpeakFrame("One two three.")], rate=24000, mode=None
    )
    assert output.played_seconds > 0
    assert max(f.pts for f in tap.words) <= output.clock.get_time()
    assert not any(isinstance(f, TTSAudioRawFrame) for f in tap.words)


@pytest.fixture
def frame_by_frame(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every engine frame is handed to Pipecat on its own, however far ahead the output is
    or however many frames wait (the loop was busy)."""
    monkeypatch.setattr(handover, "BATCH_AHEAD_S", math.inf)
    monkeypatch.setattr(handover, "LIMIT", 1)


@pytest.fixture
def batches_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Far ahead of the playback, a batch waits for its frames however long they take (no
    wall-clock deadline in the test)."""
    monkeypatch.setattr(handover, "LOW_WATER_S", -math.inf)


@pytest.mark.parametrize("mode", [TextAggregationMode.SENTENCE, TextAggregationMode.TOKEN])
async def test_each_word_reaches_pipecat_with_the_audio_it_starts_in(pack, mode, frame_by_frame):
    """A word is added on the engine frame where it starts, not once it is complete: before
    a word's frame, the service has pushed the audio up to the word's start and at most the
    rest of that 80 ms frame (24 kHz: no resampler delay)."""
    _, tap, _ = await run_pipeline(pack, tokens(LONG_SENTENCE), rate=24000, mode=mode)
    assert [f.text for f in tap.words] == LONG_SENTENCE.split()
    assert tap.first_audio_ns is not None
    for frame, audio in zip(tap.words, tap.audio_before, strict=True):
        start = (frame.pts - tap.first_audio_ns) / 1e9  # the word's start in the turn's audio
        assert start <= audio + 1e-6  # its audio had begun
        assert audio <= start + FRAME_SECONDS + 1e-6  # and not a frame more of it


@pytest.mark.parametrize("rate", [16000, 24000])
async def test_far_ahead_of_the_playback_frames_reach_pipecat_in_batches(
    pack, rate, monkeypatch, batches_only
):
    """With seconds of audio queued for playback, the engine's frames wake the loop and reach
    Pipecat several at a time: the same audio (resampled as one stream), the same words at
    the same times, in a fraction of the audio frames; each word still arrives with the
    batch that holds its start."""
    held = 1e6  # the playback starts at the end: everything pushed stays queued
    runs = {}
    for how in ("frame by frame", "batched"):
        with monkeypatch.context() as patch:
            if how == "frame by frame":
                patch.setattr(handover, "BATCH_AHEAD_S", math.inf)
                patch.setattr(handover, "LIMIT", 1)
            runs[how] = await run_pipeline(
                pack, tokens(LONG_SENTENCE), rate=rate, mode=TextAggregationMode.SENTENCE, lag=held
            )
    (_, single, said), (_, batched, batched_said) = runs["frame by frame"], runs["batched"]
    assert batched.audio == single.audio  # every sample, in order
    assert [(f.text, f.pts) for f in batched.words] == [(f.text, f.pts) for f in single.words]
    assert _content(batched_said[0]) == _content(said[0]) == LONG_SENTENCE
    # Past the first second (taken frame by frame), frames come six or more at a time.
    assert len(batched.audio_frames) < len(single.audio_frames) / 3
    held = resampler_hold_s(rate)  # resampled audio comes out up to this much later
    for start, audio in zip(
        [(f.pts - batched.first_audio_ns) / 1e9 for f in batched.words],
        batched.audio_before,
        strict=True,
    ):
        assert start <= audio + held + 1e-6  # its audio had begun
        assert audio <= start + handover.LIMIT * FRAME_SECONDS + 1e-6  # in that batch


def resampler_hold_s(rate: int, batches: int = 300) -> float:
    """The most audio the service's resampler (24 kHz → ``rate``) holds back after a batch of
    engine frames (its filter's delay and output granularity: 0 at 24 kHz, about 37 ms at
    16 kHz): a word starting in that stretch of a batch arrives before its audio is pushed."""
    resampler = FrameEncoder(rate, source_rate=SAMPLE_RATE, quality="HQ")
    given = pushed = worst = 0.0
    for index in range(batches):
        frames = 1 + index % handover.LIMIT  # batches of every size up to the limit
        pcm = resampler.encode(np.zeros(frames * FRAME_SIZE, np.float32))
        given += frames * FRAME_SECONDS
        pushed += len(pcm) / 2 / rate
        worst = max(worst, given - pushed)
    return worst


GREETING = "Hello there, welcome back to the show today."


async def run_greeting_and_reply(
    pack,
    *,
    pause_at=None,
    lag=None,
    greeting=GREETING,
    reply=LONG_SENTENCE,
    heads=None,
    mode=TextAggregationMode.SENTENCE,
    greeting_in_context=True,
):
    """A greeting (``TTSSpeakFrame``) straight before an LLM reply; the engine's own word
    times (seconds into each context's audio) recorded as the service hands them over.

    Estimated word times by default (no heads); a greeting whose last word is timed at the
    end of its audio is the case of the test of a reply that is not lost below. ``lag``: the
    playback starts once that much audio has arrived (the reply is pushed while the greeting
    plays)."""
    given: dict[str, list[tuple[str, float]]] = {}
    real = PocketTTSService.add_word_timestamps

    async def recording(self, word_times, context_id=None, **kwargs):
        given.setdefault(context_id, []).extend(word_times)
        await real(self, word_times, context_id, **kwargs)

    PocketTTSService.add_word_timestamps = recording
    try:
        speak = TTSSpeakFrame(greeting, append_to_context=greeting_in_context)
        frames = [speak, *tokens(reply)]
        output, tap, messages = await run_pipeline(
            pack,
            frames,
            rate=24000,
            mode=mode,
            pause_at=pause_at,
            heads=heads,
            lag=lag,
        )
    finally:
        PocketTTSService.add_word_timestamps = real
    greeting_id, reply_id = list(given)
    greeting_seconds = tap.context_starts[reply_id]  # the greeting's audio, all of it
    if lag is not None:  # the reply's audio was pushed before the greeting played at all
        assert tap.context_clock[reply_id] == tap.first_audio_ns
    return output, tap, messages, greeting_seconds, given[greeting_id], given[reply_id]


async def test_a_reply_after_a_greeting_has_its_words_timed_on_the_audio_s_clock(pack):
    """Each word is released when the playback reaches it: the reply's words are timed from
    the end of the greeting's audio, not from the greeting's last word."""
    greeting_seconds = (await run_greeting_and_reply(pack))[3]
    run = await run_greeting_and_reply(pack, lag=greeting_seconds + 2.0)
    _, tap, messages, _, greeting, reply = run
    assert [w for w, _ in greeting] + [w for w, _ in reply] == [f.text for f in tap.words]
    start = tap.first_audio_ns
    expected = [start + round(t * 1e9) for _, t in greeting]
    expected += [start + round((greeting_seconds + t) * 1e9) for _, t in reply]
    assert [f.pts for f in tap.words] == pytest.approx(expected, abs=1e3)  # 1 µs of rounding
    assert [_content(m).strip() for m in messages] == [GREETING, LONG_SENTENCE]


@pytest.mark.parametrize("into_reply", [0.5, 1.7, 3.3])
async def test_a_barge_in_inside_a_reply_after_a_greeting_keeps_exactly_the_words_heard(
    pack, into_reply
):
    greeting_seconds = (await run_greeting_and_reply(pack))[3]
    pause = round(greeting_seconds + into_reply, 2)
    lag = greeting_seconds + 2.0  # the reply's first 2 s are made before the greeting plays
    run = await run_greeting_and_reply(pack, pause_at=pause, lag=lag)
    output, _, messages, _, _, reply = run
    assert pause <= output.interrupted_at <= pause + 0.05  # the transport's chunk
    heard = [w for w, t in reply if greeting_seconds + t <= output.interrupted_at]
    assert 1 <= len(heard) < len(LONG_SENTENCE.split())
    assert _content(messages[0]).strip() == GREETING
    assert len(messages) == 2
    assert _content(messages[1]).split() == heard


# Said in the first 0.4 s of its audio; the pack's EOS never fires and the audio goes on to
# 3.7 s, as a voice's pause after a greeting does (heads: the words' times are read).
TAILED_GREETING = "Hi there."
SHORT_REPLY = "Sure, at nine. Or ten."


async def run_tailed_greeting_and_reply(pack, *, pause_into_reply=None):
    """``TAILED_GREETING`` then ``SHORT_REPLY``, the reply's first 2 s made before the playback
    starts (a real-time output lags the engine; Pipecat's transports do not hold the pipeline
    back while their queue fills); pause ``pause_into_reply`` seconds into the reply."""
    texts = {"greeting": TAILED_GREETING, "reply": SHORT_REPLY, "heads": HEADS}
    greeting_seconds = (await run_greeting_and_reply(pack, **texts))[3]
    pause = None if pause_into_reply is None else round(greeting_seconds + pause_into_reply, 2)
    run = await run_greeting_and_reply(pack, pause_at=pause, lag=greeting_seconds + 2.0, **texts)
    output, tap, messages, _, greeting, reply = run
    # The gap the reply's words came early by when they were timed from the greeting's last word
    assert greeting_seconds - greeting[-1][1] > 3.0
    return output, tap, messages, greeting_seconds, greeting, reply


async def test_a_reply_behind_a_greeting_s_long_pause_is_timed_from_the_greeting_s_audio_end(pack):
    """The greeting's words end long before its audio does: the reply's words are timed from
    the end of the greeting's audio (issue 34: they came 3.3 s early, from its last word)."""
    _, tap, messages, greeting_seconds, greeting, reply = await run_tailed_greeting_and_reply(pack)
    assert [f.text for f in tap.words] == [w for w, _ in greeting + reply]
    start = tap.first_audio_ns
    expected = [start + round((greeting_seconds + t) * 1e9) for _, t in reply]
    assert [f.pts for f in tap.words[len(greeting) :]] == pytest.approx(expected, abs=1e3)
    assert [_content(m).strip() for m in messages] == [TAILED_GREETING, SHORT_REPLY]


@pytest.mark.parametrize("into_reply", [0.1, 4.0])
async def test_a_barge_in_after_a_greeting_s_long_pause_keeps_exactly_the_words_heard(
    pack, into_reply
):
    """Interrupted inside the reply at a point where timing from the greeting's last word would
    have released words not yet played: the context holds exactly the words begun."""
    run = await run_tailed_greeting_and_reply(pack, pause_into_reply=into_reply)
    output, _, messages, greeting_seconds, _, reply = run
    heard = [w for w, t in reply if greeting_seconds + t <= output.interrupted_at]
    assert 1 <= len(heard) < len(SHORT_REPLY.split())
    assert [_content(m).strip() for m in messages[:1]] == [TAILED_GREETING]
    assert len(messages) == 2
    assert _content(messages[1]).split() == heard


# The English pack cannot say the last word: it is timed at the very end of the greeting's
# audio (words the chunks did not say start where the word before them ends).
UNSAID_END_GREETING = "Hi there 你好"


@pytest.fixture(scope="module")
def eos_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny pack whose EOS fires at the first frame allowed: a short greeting's audio ends
    where its last words are timed (they pile onto its last frame)."""
    root = tmp_path_factory.mktemp("ts_service_eos")
    return build_pack(root / "english", tiny_config_dict("standard"), eos_logit=0.0)


@pytest.mark.parametrize("lagged", [False, True], ids=["playing", "lagged"])
@pytest.mark.parametrize("mode", [TextAggregationMode.SENTENCE, TextAggregationMode.TOKEN])
async def test_a_reply_after_a_greeting_whose_last_word_ends_its_audio_is_not_lost(
    eos_pack, mode, lagged
):
    """Pipecat commits a greeting when the playback reaches its last word (the commit frame is
    timed just after it), but lets the reply's start frames out when the greeting's audio is
    played. With the last word at the end of the audio the reply started first: its start fell
    inside the greeting's turn, the commit closed that turn, and the reply's end found none
    open, so the reply never reached the context (lagged: its first word went into the
    greeting's message). The reply's start frames wait for the greeting's commit."""
    texts = {"greeting": UNSAID_END_GREETING, "reply": SHORT_REPLY, "mode": mode}
    greeting_seconds = (await run_greeting_and_reply(eos_pack, **texts))[3]
    lag = greeting_seconds + 2.0 if lagged else None
    run = await run_greeting_and_reply(eos_pack, lag=lag, **texts)
    _, tap, messages, greeting_seconds, greeting, reply = run
    assert greeting[-1] == ("你好", pytest.approx(greeting_seconds))  # at the audio's end
    assert [f.text for f in tap.words] == [w for w, _ in greeting + reply]
    assert [_content(m).strip() for m in messages] == [UNSAID_END_GREETING, SHORT_REPLY]


# Issue 43 item 3: a greeting whose audio outlasts its words by seconds, then a 32-word reply
# of two sentences, in both aggregation modes, on a real-time output (virtual clock).
REPLY_32 = (
    "Sure, I can help with that today and tell you what I know about it. "
    "Here is the first part of the answer, and then we can go on with the rest."
)


@pytest.mark.parametrize("mode", [TextAggregationMode.SENTENCE, TextAggregationMode.TOKEN])
async def test_every_word_of_a_reply_behind_a_long_greeting_is_released_when_it_plays(pack, mode):
    """Each reply word is released when the playback reaches its audio: counted from the end
    of the greeting's audio, whatever the greeting's last word says."""
    texts = {"greeting": TAILED_GREETING, "reply": REPLY_32, "heads": HEADS, "mode": mode}
    greeting_seconds = (await run_greeting_and_reply(pack, **texts))[3]
    run = await run_greeting_and_reply(pack, lag=greeting_seconds + 2.0, **texts)
    _, tap, messages, greeting_seconds, greeting, reply = run
    assert len(REPLY_32.split()) == 32
    assert greeting_seconds - greeting[-1][1] > 2.0  # the audio outlasts the words
    start = tap.first_audio_ns
    reply_frames = tap.words[len(greeting) :]
    assert [f.text for f in reply_frames] == [w for w, _ in reply]
    for frame, (_, t) in zip(reply_frames, reply, strict=True):
        heard = start + round((greeting_seconds + t) * 1e9)
        assert frame.pts >= start + round(greeting_seconds * 1e9)  # never before the greeting ends
        assert frame.pts == pytest.approx(heard, abs=1e3)
    assert [_content(m).strip() for m in messages] == [TAILED_GREETING, REPLY_32]


@pytest.mark.parametrize("in_context", [True, False], ids=["greeting_kept", "greeting_not_kept"])
@pytest.mark.parametrize("lagged", [False, True], ids=["playing", "lagged"])
@pytest.mark.parametrize("mode", [TextAggregationMode.SENTENCE, TextAggregationMode.TOKEN])
async def test_reply_words_leave_a_real_time_transport_when_their_audio_plays(
    pack, mode, lagged, in_context
):
    """Issue 48 item 11: a greeting whose audio outlasts its last word by seconds
    (``append_to_context=False``, as a bot's greeting is, or kept), straight followed by a
    reply, into an output that plays in real time, no interruption. Every reply word leaves
    the transport when the playback reaches its audio: after the greeting's audio, never
    right after the greeting's last word."""
    texts = {"greeting": TAILED_GREETING, "reply": REPLY_32, "heads": HEADS, "mode": mode}
    texts["greeting_in_context"] = in_context
    greeting_seconds = (await run_greeting_and_reply(pack, **texts))[3]
    lag = greeting_seconds + 2.0 if lagged else None
    run = await run_greeting_and_reply(pack, lag=lag, **texts)
    _, tap, messages, greeting_seconds, greeting, reply = run
    assert greeting_seconds - greeting[-1][1] > 2.0  # the audio outlasts the words
    start = tap.first_audio_ns
    left = tap.departures.words[len(greeting) :]
    assert [w for w, _ in left] == [w for w, _ in reply]
    for (word, clock), (_, t) in zip(left, reply, strict=True):
        heard = start + round((greeting_seconds + t) * 1e9)
        assert clock >= heard - 1e6, (word, (heard - clock) / 1e9)  # not before it plays
        assert clock <= heard + round(0.1e9), (word, (clock - heard) / 1e9)  # nor long after
    kept = [TAILED_GREETING] if in_context else []
    assert [_content(m).strip() for m in messages] == [*kept, REPLY_32]


@pytest.mark.parametrize("mode", [TextAggregationMode.SENTENCE, TextAggregationMode.TOKEN])
@pytest.mark.parametrize("into_reply", [0.05, 0.9, 2.5, 6.0])
async def test_barge_ins_inside_a_reply_behind_a_long_greeting_keep_exactly_the_words_heard(
    pack, mode, into_reply
):
    texts = {"greeting": TAILED_GREETING, "reply": REPLY_32, "heads": HEADS, "mode": mode}
    greeting_seconds = (await run_greeting_and_reply(pack, **texts))[3]
    pause = round(greeting_seconds + into_reply, 2)
    run = await run_greeting_and_reply(pack, pause_at=pause, lag=greeting_seconds + 2.0, **texts)
    output, _, messages, greeting_seconds, _, reply = run
    heard = [w for w, t in reply if greeting_seconds + t <= output.interrupted_at]
    assert [_content(m).strip() for m in messages[:1]] == [TAILED_GREETING]
    kept = _content(messages[1]).split() if len(messages) > 1 else []
    assert kept == heard


@pytest.mark.parametrize("mode", [TextAggregationMode.SENTENCE, TextAggregationMode.TOKEN])
async def test_a_reply_after_a_barge_in_on_an_uninterruptible_greeting_waits_for_its_audio(
    pack, mode
):
    """The user barges in while an uninterruptible greeting (its words said in its first
    0.4 s, its audio 3.7 s) still plays; the reply that answers them comes after the rest of
    the greeting's audio, which the transport keeps playing: its words are timed from the end
    of that audio, not from the interruption or the greeting's last word (issue 43 item 3)."""
    greeting = TTSSpeakFrame(TAILED_GREETING)
    greeting.interruptible = False
    pause = 1.0  # inside the greeting's trailing audio, after its words
    _, tap, messages = await run_pipeline(
        pack,
        [greeting],
        rate=24000,
        mode=mode,
        pause_at=pause,
        then=tokens(SHORT_REPLY),
        then_lag=1.0,  # the reply's first second is made while the greeting plays on
    )
    greeting_seconds = tap.context_starts[list(tap.context_starts)[1]]
    assert greeting_seconds > 3.0  # the greeting's audio was all played: it outlasts the pause
    reply_words = [f for f in tap.words if f.context_id == list(tap.context_starts)[1]]
    assert [f.text for f in reply_words] == SHORT_REPLY.split()
    greeting_end = tap.first_audio_ns + round(greeting_seconds * 1e9)
    early = [(f.text, (greeting_end - f.pts) / 1e9) for f in reply_words if f.pts < greeting_end]
    assert early == []  # no reply word is timed inside the greeting's audio
    assert _content(messages[-1]).strip() == SHORT_REPLY


class ChunkLog(PlaybackOutput):
    """``PlaybackOutput`` writing ``chunk_ms`` chunks that notes where each context's audio
    begins in the played stream and when (on the clock) each chunk starts playing."""

    def __init__(self, clock: PlaybackClock, sample_rate: int, chunk_ms: int) -> None:
        super().__init__(clock, sample_rate)
        self._params.audio_out_10ms_chunks = chunk_ms // 10
        self.context_offsets: dict[str, int] = {}  # samples into the stream
        self.stream_samples = 0  # as the transport plays them: each context padded to chunks
        self.chunks: list[tuple[int, int]] = []  # (first sample, clock at its start)

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        if isinstance(frame, TTSAudioRawFrame) and frame.context_id:
            self.context_offsets.setdefault(frame.context_id, self.stream_samples)
            self.stream_samples += len(frame.audio) // 2
        if isinstance(frame, TTSStoppedFrame):  # the transport pads the last chunk
            self.stream_samples += -self.stream_samples % (self.audio_chunk_size // 2)
        await super().process_frame(frame, direction)

    async def write_audio_frame(self, frame: OutputAudioRawFrame) -> bool:
        self.chunks.append((self.played_samples, self.clock.get_time()))
        return await super().write_audio_frame(frame)

    def heard_at(self, context_id: str, seconds: float) -> int:
        """The clock when ``seconds`` into a context's audio played."""
        sample = self.context_offsets[context_id] + round(seconds * self.sample_rate)
        first, start = max(c for c in self.chunks if c[0] <= sample)
        return start + round((sample - first) * NS / self.sample_rate)


STALL_AT_S = 1.2  # into the greeting's audio: the engine stalls after its words
STALL_S = 1.0  # the clock runs on while nothing plays
LLM_DELAY_S = 0.3  # the greeting has played this long when the reply's first token comes
REPLY_AHEAD_S = 4.0  # audio made after the stall before the playback goes on


@pytest.mark.parametrize("mode", [TextAggregationMode.SENTENCE, TextAggregationMode.TOKEN])
async def test_reply_words_play_on_time_on_a_clock_that_runs_while_nothing_plays(
    pack, monkeypatch, mode
):
    """Issue 48 item 11, the real-time variant the virtual playback clock does not show: the
    clock runs on while nothing plays, as Pipecat's system clock does. A greeting queued at
    start (``append_to_context=False``, the model still loading), its words said in its first
    0.2 s of 3.7 s of audio; the reply's tokens come after the greeting has played 0.3 s; the
    engine stalls 1.2 s into the greeting until the output has played all it had and the clock
    has run on 1 s, then runs ahead again: the reply's first audio is made with 2.5 s of the
    greeting still to play. 16 kHz output in 20 ms chunks (resampled, estimated word times), the
    context aggregators around the service. Every reply word leaves the transport when its
    audio plays: after the whole greeting, stall included (timed after the greeting's last
    word, as Pipecat does, the first left 2.5 s early; on a word clock blind to the stall, 1 s)."""
    rate = 16000
    clock = PlaybackClock()
    output = ChunkLog(clock, rate, chunk_ms=20)
    tts = PocketTTSService(
        model_dir=pack,
        backend="numpy",
        settings=PocketTTSService.Settings(seed=3),
        text_aggregation_mode=mode,
    )
    tap = WordTap(clock)
    departures = DepartureTap(clock)
    context = LLMContext()
    aggregators = LLMContextAggregatorPair(context)
    worker = PipelineWorker(
        Pipeline([aggregators.user(), tts, tap, output, departures, aggregators.assistant()]),
        clock=clock,
        params=PipelineParams(audio_out_sample_rate=rate),
        cancel_on_idle_timeout=False,
    )
    stalled, resume = asyncio.Event(), asyncio.Event()
    first_turn: list[str] = []
    handed: dict[str, float] = {}
    real_play = handover.SpeechStream._play

    async def stalling_play(self, turn, frames):
        """The first turn's frames from ``STALL_AT_S`` on wait for ``resume``."""
        for frame in frames:
            if turn is not None and not first_turn:
                first_turn.append(turn.context_id)
            if turn is not None and turn.context_id == first_turn[0]:
                if handed.get(turn.context_id, 0.0) >= STALL_AT_S and not resume.is_set():
                    stalled.set()
                    await resume.wait()
                handed[turn.context_id] = handed.get(turn.context_id, 0.0) + FRAME_SECONDS
            await real_play(self, turn, [frame])

    monkeypatch.setattr(handover.SpeechStream, "_play", stalling_play)
    given: dict[str, list[tuple[str, float]]] = {}  # the engine's word times per context
    real_add = PocketTTSService.add_word_timestamps

    async def recording(self, word_times, context_id=None, **kwargs):
        given.setdefault(context_id, []).extend(word_times)
        await real_add(self, word_times, context_id, **kwargs)

    monkeypatch.setattr(PocketTTSService, "add_word_timestamps", recording)
    pushed = [0]  # audio samples the service pushed (some may still be on their way)
    real_push = PocketTTSService.push_frame

    async def counting(self, frame, direction=FrameDirection.DOWNSTREAM):
        if isinstance(frame, TTSAudioRawFrame):
            pushed[0] += len(frame.audio) // 2
        await real_push(self, frame, direction)

    monkeypatch.setattr(PocketTTSService, "push_frame", counting)
    loaded = asyncio.Event()

    @tts.event_handler("on_model_loaded")
    async def _loaded(_tts):
        loaded.set()

    def output_dry() -> bool:
        chunk = output.audio_chunk_size // 2
        arrived = output.received_samples >= pushed[0]
        return arrived and output.played_samples >= pushed[0] - chunk + 1

    async def drive() -> None:
        await asyncio.wait_for(loaded.wait(), timeout=120)
        await poll_until(
            lambda: output.played_seconds >= LLM_DELAY_S,
            what="the greeting to play a while",
            tries=100_000,
            interval=0,
        )
        await worker.queue_frames(tokens(REPLY_32))
        await stalled.wait()
        await poll_until(
            lambda: output_dry() and not clock.sleepers_due_by(clock.get_time()),
            what="the output to play all it had",
            tries=100_000,
            interval=0,
        )
        clock.advance(round(STALL_S * NS))  # nothing plays: the clock runs on
        # The engine runs ahead of the playback again: the reply's first audio is made
        # while the rest of the greeting (2.5 s) is still to play.
        output.start_after(output.received_samples / rate + REPLY_AHEAD_S)
        resume.set()
        await worker.queue_frame(EndFrame())

    await worker.queue_frame(TTSSpeakFrame(TAILED_GREETING, append_to_context=False))
    with timed_frames_on(clock):
        runner = WorkerRunner()
        await runner.add_workers(worker)
        await asyncio.gather(runner.run(), drive())

    greeting_id, reply_id = list(output.context_offsets)
    greeting = [f for f in tap.words if f.context_id == greeting_id]
    words = zip(departures.words, tap.words, strict=True)
    reply_left = [(w, c) for (w, c), f in words if f.context_id == reply_id]
    greeting_end = output.heard_at(reply_id, 0.0)
    stall_start = output.heard_at(greeting_id, STALL_AT_S) - round(STALL_S * NS)
    assert greeting_end - stall_start > 2.0 * NS  # the greeting's audio outlasts the stall
    assert tap.context_clock[reply_id] < greeting_end - 2 * NS  # made while it is to play
    assert [f.text for f in greeting] == TAILED_GREETING.split()
    assert max(f.pts for f in greeting) < stall_start  # its words are said before it
    assert [w for w, _ in reply_left] == REPLY_32.split()
    reply_times = [t for _, t in given[reply_id]]
    chunk_ns = round(0.02 * NS)
    for (word, left), t in zip(reply_left, reply_times, strict=True):
        heard = output.heard_at(reply_id, t)
        assert heard - chunk_ns <= left <= heard + chunk_ns, (word, (left - heard) / NS)
    messages = [m for m in context.get_messages() if m.get("role") == "assistant"]
    assert [_content(m).strip() for m in messages] == [REPLY_32]
