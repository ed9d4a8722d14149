"""The bot never goes mute and never freezes (issue 14): bad replies, bad settings, endings,
languages and constructor arguments, in real ``run_test`` pipelines on tiny random packs.

Everything here goes through Pipecat's public behaviour (frames in, frames out), so it holds
whatever the service's inside looks like.
"""

from __future__ import annotations

import asyncio
import gc
import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from loop_slices import LoopSlices
from pipecat.frames.frames import (
    CancelFrame,
    ErrorFrame,
    Frame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
    TTSTextFrame,
    TTSUpdateSettingsFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineWorker
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.tts_service import TextAggregationMode
from pipecat.tests.utils import run_test
from pipecat.transcriptions.language import Language
from pipecat.workers.runner import WorkerRunner

from pipecat_pocket_tts import PocketTTSService
from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict
from pipecat_pocket_tts.engine import PocketTTS, Session
from pipecat_pocket_tts.engine.contract import OFF_LOOP_CHARS
from pipecat_pocket_tts.engine.errors import (
    InvalidSettingError,
    LexiconError,
    UnknownLanguageError,
)
from pipecat_pocket_tts.engine.text.chunking import TextChunk
from pipecat_pocket_tts.engine.text.prepare import TextStream

START = 30.0
MODES = [TextAggregationMode.SENTENCE, TextAggregationMode.TOKEN]
Settings = PocketTTSService.Settings


@pytest.fixture(scope="module")
def packs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("reliability_packs")
    config = tiny_config_dict("standard")
    build_pack(root / "english", config, voices=("alba", "marius"))
    build_pack(root / "german", config, voices=("anna",), language="german", seed=2)
    return {"root": root, "english": root / "english", "german": root / "german"}


def service(model_dir: Path, **kwargs) -> PocketTTSService:
    kwargs.setdefault("settings", Settings(seed=7))
    return PocketTTSService(model_dir=model_dir, backend="numpy", **kwargs)


def llm_turn(text: str, *, end: bool = True) -> list[Frame]:
    tokens = [w[i : i + 4] for w in re.findall(r"\s*\S+", text) for i in range(0, len(w), 4)]
    frames: list[Frame] = [LLMFullResponseStartFrame(), *map(LLMTextFrame, tokens)]
    return [*frames, LLMFullResponseEndFrame()] if end else frames


def audio_of(frames: list[Frame]) -> np.ndarray:
    return np.frombuffer(
        b"".join(f.audio for f in frames if isinstance(f, TTSAudioRawFrame)), dtype="<i2"
    )


def spoken(frames: list[Frame]) -> str:
    return " ".join(" ".join(f.text for f in frames if isinstance(f, TTSTextFrame)).split())


def errors_of(frames: list[Frame]) -> list[str]:
    return [f.error for f in frames if isinstance(f, ErrorFrame)]


def count(frames: list[Frame], kind: type) -> int:
    return sum(isinstance(f, kind) for f in frames)


# -- #1 replies with nothing to say -----------------------------------------------------------

NOTHING_TO_SAY = ["👍", "***", "``` ```", "🙂🙂", "* * *"]


@pytest.mark.parametrize("mode", MODES)
async def test_replies_with_nothing_to_say_never_mute_the_bot(
    packs: dict[str, Path], mode: TextAggregationMode
) -> None:
    frames: list[Frame] = []
    for n, text in enumerate(NOTHING_TO_SAY):
        frames += llm_turn(text) if n % 2 else [TTSSpeakFrame(text)]
    frames += llm_turn("Still talking after all that.")
    down, up = await run_test(
        service(packs["english"], text_aggregation_mode=mode),
        frames_to_send=frames,
        start_timeout=START,
    )
    assert errors_of(up) == []  # not even one "completed with no audio"
    assert count(down, TTSStartedFrame) == count(down, TTSStoppedFrame) == 1
    assert spoken(down) == "Still talking after all that."
    assert audio_of(down).size > 0


# -- #2 and #8 invalid settings ------------------------------------------------------------------

BAD_UPDATES = [  # fresh Settings each time: the service takes refused fields out of a delta
    {"temperature": math.nan},
    {"temperature": -1},
    {"temperature": "hot"},
    {"temperature": 1e6},
    {"temperature": True},
    {"temperature": "0.5"},
    {"seed": "abc"},
    {"seed": 1.5},
    {"seed": -1},
    {"normalize": "yes"},
    {"lexicon": {"Pipecat": 7}},
]


async def test_invalid_settings_updates_are_refused_and_the_bot_keeps_speaking(
    packs: dict[str, Path], tmp_path: Path
) -> None:
    bad = [*BAD_UPDATES, {"voice": str(tmp_path / "missing.safetensors")}]
    replies = [TTSSpeakFrame("Hello there."), TTSSpeakFrame("And once more.")]
    reference, _ = await run_test(
        service(packs["english"]), frames_to_send=replies, start_timeout=START
    )
    frames = [TTSUpdateSettingsFrame(delta=Settings(**kw)) for kw in bad] + replies
    down, up = await run_test(service(packs["english"]), frames_to_send=frames, start_timeout=START)
    errors = errors_of(up)
    assert len(errors) == len(bad), errors
    assert not any("unexpected error" in e for e in errors)
    for setting, error in zip(bad, errors, strict=True):
        assert next(iter(setting)) in error, (setting, error)
    assert count(down, TTSStoppedFrame) == 2
    # The previous values were kept: the very audio of a run without the bad updates.
    assert np.array_equal(audio_of(down), audio_of(reference))


@pytest.mark.parametrize("setting", BAD_UPDATES, ids=repr)
def test_the_constructor_refuses_invalid_settings(setting: dict) -> None:
    with pytest.raises((InvalidSettingError, LexiconError)):
        PocketTTSService(settings=Settings(**setting))


# -- #5 unknown languages ---------------------------------------------------------------------


@pytest.mark.parametrize("language", ["klingon", Language.JA])
async def test_an_unknown_language_update_is_an_error_frame(
    packs: dict[str, Path], language: object
) -> None:
    frames = [
        TTSUpdateSettingsFrame(delta=Settings(language=language)),
        TTSSpeakFrame("Still English."),
    ]
    tts = service(packs["root"], language=Language.EN)
    down, up = await run_test(tts, frames_to_send=frames, start_timeout=START)
    assert any(str(getattr(language, "value", language)) in e for e in errors_of(up))
    assert count(down, TTSStoppedFrame) == 1 and audio_of(down).size > 0
    assert tts.pack == "english"


@pytest.mark.parametrize("language", ["klingon", Language.JA])
def test_an_unknown_language_is_a_clear_error(language: object) -> None:
    with pytest.raises(UnknownLanguageError):
        PocketTTSService(language=language)
    with pytest.raises(UnknownLanguageError):
        PocketTTS.load(language if isinstance(language, str) else "ja", backend="numpy")


# -- #6 EndFrame while a reply streams ------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_end_frame_speaks_the_whole_reply(
    packs: dict[str, Path], mode: TextAggregationMode
) -> None:
    reply = "The first sentence. The second one. And the last words"
    down, _ = await run_test(  # run_test sends the EndFrame right after the last token
        service(packs["english"], text_aggregation_mode=mode),
        frames_to_send=llm_turn(reply, end=False),
        start_timeout=START,
    )
    assert spoken(down) == reply
    assert count(down, TTSStoppedFrame) == 1


# -- #4 characters no tokenizer takes -------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_a_lone_surrogate_is_dropped_and_the_turn_closes(
    packs: dict[str, Path], mode: TextAggregationMode
) -> None:
    frames = [*llm_turn("Hello \ud83d there. Then more."), TTSSpeakFrame("Next turn.")]
    down, up = await run_test(
        service(packs["english"], text_aggregation_mode=mode),
        frames_to_send=frames,
        start_timeout=START,
    )
    assert errors_of(up) == []
    assert count(down, TTSStartedFrame) == count(down, TTSStoppedFrame) == 2
    assert spoken(down).endswith("Then more. Next turn.")


# -- conventions: constructor arguments, default voice, splitter language --------------------------


@pytest.mark.parametrize(
    ("argument", "advice"),
    [
        ({"temp": 0.5}, r"Settings\(temperature="),
        ({"voice": "alba"}, r"Settings\(voice="),
        ({"lsd_decode_steps": 2}, "sampler_steps"),
        ({"quantize": True}, "precision"),
        ({"tempreature": 0.5}, "tempreature"),
    ],
)
def test_unknown_constructor_arguments_are_refused(argument: dict, advice: str) -> None:
    with pytest.raises(TypeError, match=advice):
        PocketTTSService(**argument)


def test_pipecat_service_arguments_still_pass() -> None:
    tts = PocketTTSService(sample_rate=16000, stop_frame_timeout_s=2.0, name="tts")
    assert tts.name == "tts"


async def test_the_default_voice_is_reported_by_name(packs: dict[str, Path]) -> None:
    tts = service(packs["english"])
    await run_test(tts, frames_to_send=[TTSSpeakFrame("Hi.")], start_timeout=START)
    engine = PocketTTS.load_shared("english", backend="numpy", model_dir=packs["english"])
    assert tts.settings.voice == engine.default_voice == "alba"


async def test_a_same_language_update_keeps_the_sentence_splitter_language(
    packs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # German splitting keeps "usw." inside the sentence; splitting for "german" (no such
    # code: English rules) cuts after it. The sentences are what the session is given.
    sentences: list[str] = []
    enqueue = Session.enqueue

    def recording_enqueue(self, text, options=None, **kwargs):
        sentences.append(text.strip())
        return enqueue(self, text, options, **kwargs)

    monkeypatch.setattr(Session, "enqueue", recording_enqueue)
    reply = "Wir treffen uns usw. morgen. Danke."
    frames = [TTSUpdateSettingsFrame(delta=Settings(language=Language.DE)), *llm_turn(reply)]
    await run_test(
        service(packs["root"], language=Language.DE, warmup=False),
        frames_to_send=frames,
        start_timeout=START,
    )
    assert sentences == ["Wir treffen uns usw. morgen.", "Danke."]


# -- #3 long text without a sentence end -----------------------------------------------------------

LOOP_BUDGET_S = 0.050
"""The longest slice of the event loop, in the loop thread's CPU time (Pipecat's own text
handling subtracted: ``LoopSlices``)."""
REPLY_CHARS = 5_000
"""Long enough that a reply planned whole on the loop would show (over twice
``OFF_LOOP_CHARS``), short enough to run in seconds: Pipecat's own per-token handling grows
with the open sentence (token by token in TOKEN mode, and its word-timestamp sequencer's diff
of the open sentence at the reply's end), minutes at 100 KB. What would stall the loop at
100 KB is shown here by counting the engine's text work on the loop, which is bounded per
call and per character of the reply whatever the reply's length."""
LOOP_CHARS_PER_CALL = OFF_LOOP_CHARS
"""The most text one call of an engine text stage may take on the loop: longer texts go to a
thread. (A bound per slice would depend on how many queued frames one slice handles, which
varies with the machine's load: one slice handled 201,091 characters of 70-character calls
when tokens had queued up.)"""
LOOP_CHARS_PER_REPLY_CHAR = 64
"""Text work on the loop per character of the reply, over the whole reply. Token by token the
text stream normalizes the open sentence's last words again at each word (an early cut needs
them): 42 per character at 2.5, 5, 10 and 20 KB alike. A stream that re-read the whole open
reply at each 4-character token would take over 600 per character and pass at 5 KB (a
character is read again at every later token), and grow with the reply."""
WORDS = [
    "the",
    "old",
    "bridge",
    "would",
    "be",
    "repaired",
    "rather",
    "than",
    "replaced",
    "at",
    "a",
    "cost",
    "nobody",
    "expected",
]


def unpunctuated(size: int) -> str:
    """``size`` characters of words and commas, never a sentence end."""
    words, n = [], 0
    while n < size:
        word = WORDS[len(words) % len(WORDS)] + ("," if len(words) % 17 == 16 else "")
        words.append(word)
        n += len(word) + 1
    return " ".join(words)[:size]


class FirstAudio(FrameProcessor):
    def __init__(self) -> None:
        super().__init__()
        self.heard = asyncio.Event()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, TTSAudioRawFrame):
            self.heard.set()
        await self.push_frame(frame, direction)


@pytest.mark.parametrize("burst", [False, True], ids=["token_by_token", "burst"])
@pytest.mark.parametrize("mode", MODES)
async def test_a_long_reply_without_a_sentence_end_never_stalls_the_loop_and_is_spoken(
    packs: dict[str, Path], monkeypatch: pytest.MonkeyPatch, mode: TextAggregationMode, burst: bool
) -> None:
    text = unpunctuated(REPLY_CHARS)
    frames = llm_turn(text)
    if burst:
        frames = [frames[0], LLMTextFrame(text), frames[-1]]
    slices = LoopSlices(monkeypatch)
    sink = FirstAudio()
    tts = service(packs["english"], text_aggregation_mode=mode)
    worker = PipelineWorker(Pipeline([tts, sink]), cancel_on_idle_timeout=False)
    started = asyncio.Event()

    @tts.event_handler("on_model_loaded")  # the pipeline runs and the model is loaded
    async def _started(*_args) -> None:
        started.set()

    async def drive() -> None:
        await asyncio.wait_for(started.wait(), START)
        # Python's cyclic GC pauses the loop for tens of ms on a heap of thousands of frames,
        # whatever code runs; it waits until the end, so the figure is the code's own.
        gc.disable()
        slices.reset()
        for frame in frames:  # as an LLM's tokens arrive: one loop callback each
            await worker.queue_frame(frame)
            await asyncio.sleep(0)
        await asyncio.wait_for(sink.heard.wait(), 120)  # generous: returns at the first audio
        await worker.queue_frame(CancelFrame())

    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    try:
        await asyncio.gather(runner.run(), drive())
    finally:
        gc.enable()
    assert sink.heard.is_set()
    assert slices.slices > len(frames)  # the loop's slices were measured
    assert 0 < slices.largest_call <= LOOP_CHARS_PER_CALL, slices.largest_call
    assert slices.chars <= LOOP_CHARS_PER_REPLY_CHAR * len(text), slices.chars
    assert slices.longest < LOOP_BUDGET_S, (slices.longest, slices.longest_callback)


# -- #7 ellipses: streaming cuts as the batch path ---------------------------------------------

_ELLIPTIC_TEXT = st.lists(  # words each followed by a mark (a run-on may need cutting)
    st.tuples(
        st.text("abcdefgh", min_size=1, max_size=6),
        st.sampled_from([" ", " ", ". ", "... ", " ... ", "…", " … ", "! ", "? ", "?! ", ", "]),
    ).map("".join),
    max_size=12,
).map("".join)


def _speech_words(chunks: list) -> list[list[str]]:
    """Each chunk's words that say something, letters and digits only, lowercase."""
    return [
        [
            "".join(ch for ch in w if ch.isalnum()).lower()
            for w in c.text.split()
            if any(ch.isalnum() for ch in w)
        ]
        for c in chunks
    ]


@settings(max_examples=80, deadline=None)
@given(text=_ELLIPTIC_TEXT, cuts=st.lists(st.integers(1, 9), min_size=1, max_size=40))
@example(text="a aa aa aa aaaaa aaaaa aaaaa aaaaaa aaaaaa aaaaaa ", cuts=[1])  # cut run-on
@example(text="i\n·n", cuts=[1])  # a symbol the tokenizer drops begins the next line
def test_streaming_cuts_as_the_batch_path_ellipses_included(
    engine_tts: PocketTTS, text: str, cuts: list[int]
) -> None:
    preparer = engine_tts.text_preparer
    stream = TextStream(preparer)
    streamed, position = [], 0
    for step in cuts * (len(text) // max(sum(cuts), 1) + 1):
        streamed += stream.push(text[position : position + step])
        position += step
        if position >= len(text):
            break
    streamed += stream.flush()
    assert all(any(ch.isalnum() for ch in c.text) for c in streamed)  # never a bare "..."
    batch_sentences = preparer.chunker.sentences(preparer.clean(text))
    batch_chunks = preparer.chunker.split(preparer.clean(text))
    # Same words in the same order, and every streamed chunk ends where a batch sentence ends
    # or where the batch path cuts a sentence too long for one chunk.
    words = [w for chunk in _speech_words(streamed) for w in chunk]
    sentence_words = _speech_words([TextChunk(s, False) for s in batch_sentences])
    assert words == [w for sentence in sentence_words for w in sentence]
    ends, total = set(), 0
    for sentence in sentence_words:
        total += len(sentence)
        ends.add(total)
    total = 0
    for chunk in _speech_words(batch_chunks):
        total += len(chunk)
        ends.add(total)
    total = 0
    for chunk in _speech_words(streamed):
        total += len(chunk)
        assert total in ends, (text, [c.text for c in streamed], batch_sentences)


@pytest.mark.parametrize("reply", ["Okay. ... Right then.", "Well ... I think so. Yes.", "... So."])
async def test_token_mode_keeps_an_ellipsis_in_its_sentence(
    packs: dict[str, Path], reply: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    generated: list[str] = []  # each prepared chunk the fed text released: one utterance each
    submit = Session._submit_fed

    def spy(self, chunks, run):
        generated.extend(chunk.text.strip() for chunk in chunks)
        return submit(self, chunks, run)

    monkeypatch.setattr(Session, "_submit_fed", spy)
    _, up = await run_test(
        service(packs["english"], text_aggregation_mode=TextAggregationMode.TOKEN, warmup=False),
        frames_to_send=llm_turn(reply),
        start_timeout=START,
    )
    assert errors_of(up) == []
    assert all(any(ch.isalnum() for ch in text) for text in generated), generated
    assert "".join(generated).replace(" ", "").lower() == reply.replace(" ", "").lower()


def test_the_default_voice_is_named_before_setup() -> None:
    assert PocketTTSService().settings.voice == "alba"  # as Pipecat's built-in service holds
    german = PocketTTSService(language=Language.DE)
    assert german.settings.voice == "juergen"
    assert PocketTTSService(settings=Settings(voice="marius")).settings.voice == "marius"


async def test_an_unknown_voice_in_the_constructor_is_reported_at_start(
    packs: dict[str, Path],
) -> None:
    """Reported as the pipeline starts, before any text; the bot speaks with the pack's
    default voice (said in the error) rather than failing every turn."""
    tts = service(packs["english"], settings=Settings(voice="nobody", seed=7))
    down, up = await run_test(
        tts, frames_to_send=[TTSSpeakFrame("Still here.")], start_timeout=START
    )
    errors = errors_of(up)
    assert len(errors) == 1 and "nobody" in errors[0] and "'alba' instead" in errors[0]
    assert tts.settings.voice == "alba"
    assert audio_of(down).size > 0
