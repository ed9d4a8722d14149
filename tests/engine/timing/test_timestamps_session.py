"""Word timestamps through the engine's API: synthesize, stream, sessions (enqueue and feed)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from pipecat_pocket_tts.__main__ import main as cli
from pipecat_pocket_tts.engine import AudioFrame, PocketTTS, TimedAudio

FRAME_SECONDS = 0.08
TEXT = "It costs $12.50 today. **Really** cheap, isn't it? 😀"
WRITTEN = ["It", "costs", "$12.50", "today.", "**Really**", "cheap,", "isn't", "it?"]


@pytest.fixture(scope="module")
def tts(engine_pack_dir: Path) -> PocketTTS:
    """The tiny pack with heads set (a custom config has none: estimated otherwise)."""
    engine = PocketTTS.load("english", backend="numpy", model_dir=engine_pack_dir)
    assert engine.timestamp_heads is None  # custom config.json: no head table
    engine.timestamp_heads = ((1, 2), (0, 1))
    return engine


@pytest.fixture(scope="module")
def estimated(engine_pack_dir: Path) -> PocketTTS:
    return PocketTTS.load("english", backend="numpy", model_dir=engine_pack_dir)


def _check_words(words, audio_seconds: float, *, estimated: bool) -> None:
    assert [w.text for w in words] == WRITTEN
    assert [w.index for w in words] == list(range(len(WRITTEN)))
    if estimated:
        assert all(w.estimated for w in words)
    else:  # read from attention; words the pointer never reached in a short chunk: estimated
        assert not words[0].estimated
    for a, b in itertools.pairwise(words):
        assert a.start <= a.end <= b.start + 1e-9
    assert words[0].start >= 0 and words[-1].end <= audio_seconds + 1e-9


@pytest.mark.parametrize("which", ["attention", "estimated"])
def test_synthesize_returns_the_caller_s_words_with_times(tts, estimated, which):
    engine = tts if which == "attention" else estimated
    result = engine.synthesize(TEXT, seed=3, timestamps=True)
    assert isinstance(result, TimedAudio)
    audio, words = result
    _check_words(words, audio.shape[0] / 24000, estimated=which == "estimated")
    # the same audio as without timestamps
    np.testing.assert_array_equal(audio, engine.synthesize(TEXT, seed=3))


def _starts_and_words(frames: list[AudioFrame]) -> tuple[list[tuple[int, object]], list]:
    """(frame number, WordStart) of each start, and the completed words, in order."""
    starts = [(n, w) for n, f in enumerate(frames) for w in f.words]
    return starts, [w for f in frames for w in f.completed_words]


def _check_release(frames: list[AudioFrame]) -> None:
    """Each word starts once, on the frame where it starts (attention) or by then (estimated),
    and completes once, with that same start, by the end of the frame that carries it."""
    starts, words = _starts_and_words(frames)
    assert [(w.text, w.index, w.start, w.session_start) for _, w in starts] == [
        (w.text, w.index, w.start, w.session_start) for w in words
    ]
    for n, w in starts:
        assert w.start < (n + 1) * FRAME_SECONDS + 1e-9  # never announced before it starts
        if not w.estimated:
            assert w.start == pytest.approx(n * FRAME_SECONDS)  # exactly its frame
    for index, frame in enumerate(frames):
        for w in frame.completed_words:
            assert w.end <= (index + 1) * FRAME_SECONDS + 1e-9


def test_stream_frames_carry_each_word_on_its_first_frame_and_when_complete(tts):
    frames = list(tts.stream(TEXT, seed=3, timestamps=True))
    starts, words = _starts_and_words(frames)
    _check_words(words, len(frames) * FRAME_SECONDS, estimated=False)
    assert any(not w.estimated for w in words[1:])
    _check_release(frames)
    assert sum(not w.estimated for _, w in starts) >= 2  # read from attention, on their frame
    off = list(tts.stream("Hello there.", seed=3))  # off by default
    assert not any(f.words or f.completed_words for f in off)


def test_estimated_words_are_released_as_the_frames_go(estimated):
    frames = list(estimated.stream(TEXT, seed=3, timestamps=True))
    starts, words = _starts_and_words(frames)
    _check_words(words, len(frames) * FRAME_SECONDS, estimated=True)
    _check_release(frames)
    assert all(w.estimated for _, w in starts)
    last_frames = {n for n, f in enumerate(frames) if f.completed_words}
    early = [n for n, _ in starts if n not in last_frames]
    assert len({n for n, _ in starts}) >= 4 and early  # spread over frames, not per chunk


def test_session_words_are_on_the_utterance_and_the_session_clock(tts):
    with tts.session(seed=5, timestamps=True) as session:
        session.enqueue("First one here.")
        session.enqueue("Then a second one.")
        session.finish()
        frames = [f for f in session if isinstance(f, AudioFrame)]
    first = sum(1 for f in frames if f.utterance_index == 0) * FRAME_SECONDS
    words = [(f.utterance_index, w) for f in frames for w in f.words]
    assert [w.text for _, w in words] == ["First", "one", "here.", "Then", "a", "second", "one."]
    second = [w for u, w in words if u == 1]
    assert [w.index for w in second] == [0, 1, 2, 3]
    for w in second:
        assert w.session_start == pytest.approx(first + w.start)
    assert all(w.session_start == w.start for u, w in words if u == 0)


def test_fed_text_gives_the_same_words_as_the_whole_text(tts):
    pieces = ["It co", "sts $12", ".50 tod", "ay. **Rea", "lly** cheap, is", "n't it? 😀"]
    with tts.session(seed=3, timestamps=True) as session:
        for piece in pieces:
            session.feed(piece)
        session.flush()
        session.finish()
        frames = [f for f in session if isinstance(f, AudioFrame)]
    starts, words = _starts_and_words(frames)
    assert [w.text for _, w in starts] == WRITTEN
    assert [w.text for w in words] == WRITTEN
    assert [w.index for w in words] == list(range(len(WRITTEN)))
    for a, b in itertools.pairwise(words):
        assert a.session_start <= a.session_end <= b.session_start + 1e-9


def test_heads_outside_the_model_are_refused(estimated):
    with pytest.raises(ValueError, match="do not all exist"):
        estimated.timestamp_heads = ((2, 0),)


@pytest.mark.parametrize("suffix", [".json", ".srt", ".vtt"])
def test_cli_say_writes_timestamps_by_extension(engine_pack_dir, tmp_path, capsys, suffix):
    out = tmp_path / f"words{suffix}"
    code = cli(
        [
            "say",
            "It costs $12.50.",
            "-o",
            str(tmp_path / "a.wav"),
            "--model-dir",
            str(engine_pack_dir),
            "--backend",
            "numpy",
            "--seed",
            "1",
            "--timestamps",
            str(out),
        ]
    )
    assert code == 0
    text = out.read_text(encoding="utf-8")
    if suffix == ".json":
        words = json.loads(text)["words"]
        assert [w["text"] for w in words] == ["It", "costs", "$12.50."]
        assert all(w["estimated"] for w in words)  # a custom pack: spread by length
    else:
        assert "$12.50." in text and "-->" in text
    assert str(out) in capsys.readouterr().err


def test_coreml_declares_no_attention_so_its_words_are_estimated(tmp_path):
    from coreml_standins import Setup, tiny_config

    numpy_engine, coreml_engine = Setup(tmp_path, tiny_config()).engines()
    assert not coreml_engine.backend.capabilities.attention_probe
    assert numpy_engine.backend.capabilities.attention_probe
    assert coreml_engine.timestamp_heads is None
    with pytest.raises(ValueError, match="cannot read attention"):
        coreml_engine.timestamp_heads = ((0, 0),)
    audio, words = coreml_engine.synthesize("It costs $12.50.", seed=1, timestamps=True)
    assert [w.text for w in words] == ["It", "costs", "$12.50."]
    assert all(w.estimated for w in words)
    assert words[-1].end <= audio.shape[0] / 24000 + 1e-9


@pytest.fixture
def alone_model(tts) -> PocketTTS:
    """The ``tts`` fixture's model with a scheduler of its own, for sessions run one at a time."""
    engine = PocketTTS(
        config=tts.config, backend=tts.backend, tokenizer=tts.tokenizer, pack=tts.pack
    )
    engine.timestamp_heads = ((1, 2), (0, 1))
    yield engine
    engine.scheduler.close()


TWO_TEXTS = ["First one here. Then a second sentence follows it.", TEXT]
FED = ["It co", "sts $12", ".50 tod", "ay. **Rea", "lly** cheap, is", "n't it? 😀"]


def _speak_first(session) -> None:
    session.enqueue(TWO_TEXTS[0])
    session.enqueue("And a last one.")
    session.finish()


def _speak_second(session) -> None:
    for piece in FED:
        session.feed(piece)
    session.flush()
    session.finish()


def _words_of(session) -> list[tuple]:
    """Each word a session's frames carry, with the frame that carries it."""
    frames = [f for f in session if isinstance(f, AudioFrame)]
    return [
        (n, f.utterance_index, w) for n, f in enumerate(frames) for w in f.words + f.completed_words
    ]


def _two_sessions_words(engine: PocketTTS, *, together: bool) -> list[list[tuple]]:
    """Two sessions (one enqueued, one fed) speaking at once or one after the other → per
    session, each word with the frame that carries it."""
    if not together:
        words = []
        for speak, seed in ((_speak_first, 5), (_speak_second, 7)):
            with engine.session(seed=seed, timestamps=True) as session:
                speak(session)
                words.append(_words_of(session))
        return words
    with engine.session(seed=5, timestamps=True) as a, engine.session(seed=7, timestamps=True) as b:
        _speak_first(a)
        _speak_second(b)
        return [_words_of(a), _words_of(b)]


def test_sessions_on_the_scheduler_give_the_words_of_sessions_run_alone(tts, alone_model):
    ticks = tts.scheduler.stats().ticks
    batched = _two_sessions_words(tts, together=True)
    assert tts.scheduler.stats().ticks > ticks  # they ran on the scheduler
    alone = _two_sessions_words(alone_model, together=False)
    assert [len(s) for s in batched] == [2 * 13, 2 * len(WRITTEN)]  # starts and completions
    assert any(not w.estimated for _, _, w in batched[0])  # read from the attention
    for got, want in zip(batched, alone, strict=True):
        assert [(n, u, w.text, w.index, w.estimated) for n, u, w in got] == [
            (n, u, w.text, w.index, w.estimated) for n, u, w in want
        ]
        for (_, _, g), (_, _, w) in zip(got, want, strict=True):  # same frames, same times
            assert g == w  # times count frames: exact
