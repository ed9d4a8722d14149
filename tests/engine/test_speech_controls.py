"""Speaking rate and <break/> pauses through the engine: synthesize, stream and sessions."""

from __future__ import annotations

import numpy as np
import pytest
from audio_checks import centroid, silent_run

from pipecat_pocket_tts.engine import PocketTTS
from pipecat_pocket_tts.engine.audio.tempo import TOLERANCE, TimeScaler
from pipecat_pocket_tts.engine.errors import BreakTagError, InvalidSettingError
from pipecat_pocket_tts.engine.model.config import FRAME_SIZE, SAMPLE_RATE

TEXT = "Hello there, how are you today? I am fine."
BROKEN = 'Hello there. <break time="800ms"/> And now more.'


def assert_words_ride_with_their_audio(frames) -> None:
    """No word comes before the frame whose audio it starts in (as at speed 1; a word whose
    start is known late, at its utterance's end, may come after it)."""
    clock = 0.0
    for frame in frames:
        end = clock + frame.samples.shape[0] / SAMPLE_RATE
        assert all(w.session_start < end + 1e-6 for w in frame.words)
        clock = end


@pytest.fixture(scope="module")
def tts(engine_endless_tts: PocketTTS) -> PocketTTS:
    return engine_endless_tts  # chunks run their whole budget: long enough audio to measure


@pytest.mark.parametrize("speed", [0.5, 1.5, 2.0])
def test_duration_follows_one_over_speed_with_the_spectrum_kept(tts: PocketTTS, speed: float):
    plain = tts.synthesize(TEXT, seed=3, max_frames=20)
    fast = tts.synthesize(TEXT, seed=3, max_frames=20, speed=speed)
    assert fast.shape[0] / plain.shape[0] == pytest.approx(1 / speed, rel=0.10)
    assert centroid(fast) == pytest.approx(centroid(plain), rel=0.05)
    # the engine's audio is the model's, time-scaled (pitch kept: tests/engine/test_tempo.py;
    # the tiny pack's random weights speak near-white noise, whose centroid resampling would
    # barely move, so the tone test is where "not resampled" is shown)
    scaler = TimeScaler(speed)
    assert np.array_equal(fast, np.concatenate([scaler.push(plain), scaler.flush()]))


def test_speed_one_is_bit_identical(tts: PocketTTS):
    plain = tts.synthesize(TEXT, seed=3, max_frames=12)
    assert np.array_equal(tts.synthesize(TEXT, seed=3, max_frames=12, speed=1.0), plain)
    frames = list(tts.stream(TEXT, seed=3, max_frames=12, speed=1.0))
    assert all(frame.samples.shape == (FRAME_SIZE,) for frame in frames)


def test_stream_frames_at_speed_hold_back_less_than_a_frame(tts: PocketTTS):
    frames = list(tts.stream(TEXT, seed=3, max_frames=12, speed=1.5))
    assert all(frame.samples.shape[0] > 0 for frame in frames)
    assert frames[-1].is_last_in_utterance
    assert sum(1 for f in frames if f.is_last_in_utterance) == 1
    plain = list(tts.stream(TEXT, seed=3, max_frames=12))
    # every frame brings the audio of its engine frame but under one frame of it
    heard = np.cumsum([f.samples.shape[0] for f in frames[:-1]]) * 1.5
    made = np.arange(1, len(frames)) * FRAME_SIZE
    assert len(frames) == len(plain)
    assert np.all(made - heard < FRAME_SIZE)


def test_bad_speed_is_refused_before_any_text(tts: PocketTTS):
    with pytest.raises(InvalidSettingError, match="speed"):
        tts.synthesize(TEXT, speed=5.0)
    with tts.session() as session, pytest.raises(InvalidSettingError):
        session.enqueue(TEXT, speed=0.1)


def test_word_times_follow_the_speed_on_the_session_clock(tts: PocketTTS):
    """Two utterances, at 1.5 then 1.0: each word is timed where it is heard."""
    with tts.session(seed=3, max_frames=10, timestamps=True) as session:
        session.enqueue("One two three four.", speed=1.5)
        session.enqueue("Five six seven.")
        session.finish()
        frames = list(session)
    with tts.session(seed=3, max_frames=10, timestamps=True) as session:
        session.enqueue("One two three four.")
        session.enqueue("Five six seven.")
        session.finish()
        plain = list(session)
    first = sum(f.samples.shape[0] for f in frames if f.utterance_index == 0) / SAMPLE_RATE
    plain_first = sum(f.samples.shape[0] for f in plain if f.utterance_index == 0) / SAMPLE_RATE
    assert first == pytest.approx(plain_first / 1.5, abs=1 / SAMPLE_RATE)
    words = [w for f in frames for w in f.completed_words]
    plain_words = [w for f in plain for w in f.completed_words]
    assert [w.text for w in words] == [w.text for w in plain_words]
    tolerance = TOLERANCE / SAMPLE_RATE + 1e-9
    for word, reference in zip(words, plain_words, strict=True):
        if reference.session_start < plain_first:  # the first utterance: scaled by 1/1.5
            assert word.start == pytest.approx(reference.start / 1.5, abs=tolerance)
            assert word.session_start == pytest.approx(word.start)
        else:  # the second: as spoken, from where the first really ended
            assert word.start == pytest.approx(reference.start)
            assert word.session_start == pytest.approx(first + reference.start)
    assert_words_ride_with_their_audio(frames)


def test_a_barge_in_at_speed_keeps_word_times_exact(tts: PocketTTS):
    """Cancelled mid-utterance at 1.5: the words received are timed on the audio received
    (the heard prefix is the words whose start the played audio reached)."""
    session = tts.session(seed=3, max_frames=30, timestamps=True)
    session.enqueue("one two three four five six seven eight nine ten.", speed=1.5)
    frames = []
    for frame in session:
        frames.append(frame)
        if len(frames) == 12:
            break
    session.cancel()
    heard = sum(f.samples.shape[0] for f in frames) / SAMPLE_RATE
    starts = [w for f in frames for w in f.words]
    assert 0 < len(starts) < 10
    assert [w.index for w in starts] == list(range(len(starts)))
    assert_words_ride_with_their_audio(frames)
    assert starts[-1].session_start <= heard


def test_a_break_is_silence_of_its_length_and_never_said(tts: PocketTTS):
    result = tts.synthesize(BROKEN, seed=3, max_frames=10, timestamps=True)
    assert silent_run(result.audio) >= round(0.7 * SAMPLE_RATE)
    assert [w.text for w in result.words] == ["Hello", "there.", "And", "now", "more."]
    assert_words_ride_with_their_audio(
        list(tts.stream(BROKEN, seed=3, max_frames=10, timestamps=True, speed=1.5))
    )
    # the same session saying the two sentences with no break: the same speech
    with tts.session(seed=3, max_frames=10, timestamps=True) as session:
        session.enqueue("Hello there.")
        session.enqueue("And now more.")
        session.finish()
        frames = list(session)
    spoken = np.concatenate([f.samples for f in frames])
    pause = round(0.8 * SAMPLE_RATE)
    first = sum(f.samples.shape[0] for f in frames if f.utterance_index == 0)
    assert np.array_equal(result.audio[:first], spoken[:first])
    assert not result.audio[first : first + pause].any()
    assert np.array_equal(result.audio[first + pause :], spoken[first:])
    # word times after the break moved by its length
    plain = [w for f in frames for w in f.completed_words]
    for word, reference in zip(result.words, plain, strict=True):
        shift = 0.8 if reference.session_start >= first / SAMPLE_RATE else 0.0
        assert word.session_start == pytest.approx(reference.session_start + shift)
        assert word.session_end == pytest.approx(reference.session_end + shift)


def test_breaks_and_speed_together(tts: PocketTTS):
    result = tts.synthesize(BROKEN, seed=3, max_frames=10, timestamps=True, speed=2.0)
    plain = tts.synthesize(BROKEN, seed=3, max_frames=10, timestamps=True)
    silence = round(0.8 * SAMPLE_RATE)
    assert silent_run(result.audio) >= silence  # pauses keep their length at any speed
    assert result.audio.shape[0] - silence == pytest.approx(
        (plain.audio.shape[0] - silence) / 2, abs=2
    )
    after = [w for w in result.words if w.text in ("And", "now", "more.")]
    reference = [w for w in plain.words if w.text in ("And", "now", "more.")]
    for word, ref in zip(after, reference, strict=True):
        assert word.start - after[0].start == pytest.approx(
            (ref.start - reference[0].start) / 2, abs=TOLERANCE / SAMPLE_RATE
        )


def test_a_fed_break_cuts_and_pauses_even_split_across_tokens(tts: PocketTTS):
    with tts.session(seed=3, max_frames=8, timestamps=True) as session:
        for piece in ["Hello there ", "<bre", 'ak time="1', 's"/', "> and now more"]:
            session.feed(piece)
        session.flush()
        session.finish()
        frames = list(session)
    audio = np.concatenate([f.samples for f in frames])
    assert silent_run(audio) >= SAMPLE_RATE
    words = [w.text for f in frames for w in f.completed_words]
    assert words == ["Hello", "there", "and", "now", "more"]


def test_a_break_at_the_end_pauses_before_the_next_utterance(tts: PocketTTS):
    with tts.session(seed=3, max_frames=6) as session:
        assert session.enqueue('Bye. <break time="500ms"/>') == 0
        assert session.enqueue('<break time="300ms"/>') is None  # nothing to say: carried
        assert session.enqueue("Hi.") == 1
        session.finish()
        frames = list(session)
    lasts = [f for f in frames if f.is_last_in_utterance]
    assert [f.utterance_index for f in lasts] == [0, 1]
    first = [f for f in frames if f.utterance_index == 0]
    assert not first[-1].samples.any()  # the utterance ends with its pause
    assert silent_run(np.concatenate([f.samples for f in first])) >= round(0.5 * SAMPLE_RATE)
    second = np.concatenate([f.samples for f in frames if f.utterance_index == 1])
    assert silent_run(second[: round(0.3 * SAMPLE_RATE)]) == round(0.3 * SAMPLE_RATE)
    assert max(f.samples.shape[0] for f in frames) <= FRAME_SIZE


@pytest.mark.parametrize("tag", ['<break time="-2s"/>', '<break time="12s"/>', "<break time=x/>"])
def test_a_bad_break_is_refused_and_nothing_is_queued(tts: PocketTTS, tag: str):
    with tts.session(seed=3, max_frames=6) as session:
        with pytest.raises(BreakTagError):
            session.enqueue(f"Hello {tag} there.")
        assert session.pending == 0
        assert session.enqueue("Hello.") == 0


def test_a_break_alone_is_not_speech(tts: PocketTTS):
    assert not tts.has_speech('<break time="1s"/>')
    assert tts.has_speech('Hi <break time="1s"/>')
    assert tts.has_speech('<break time="-1s"/>')  # enqueue will name what is wrong


@pytest.mark.parametrize("speed", [0.5, 1.5, 4.0])
def test_a_barge_in_at_speed_stops_within_a_frame(tts: PocketTTS, speed: float):
    """The scaler runs on the frames' way out: stopping still leaves at most the tick in
    flight, and no frame comes after ``cancel()``."""
    session = tts.session(seed=1, speed=speed)
    session.enqueue("A long sentence that would go on for many, many frames of audio. " * 3)
    frames = iter(session)
    for _ in range(3):
        next(frames)
    stopped_at = session.stop()
    session.cancel()
    assert session.compute_ticks - stopped_at <= 1
    assert list(frames) == []
    assert session.pending == 0 and session.is_cancelled
