"""Word timestamps: head tables, the attention probe, the pointer, the fallback, caller words."""

from __future__ import annotations

import dataclasses
import itertools
import json

import numpy as np
import pytest
from reference_fixtures import load_family

from pipecat_pocket_tts.engine.backends.base import AttentionProbe, Backend, VoiceKV
from pipecat_pocket_tts.engine.backends.numpy import NumpyBackend
from pipecat_pocket_tts.engine.errors import TimestampsFormatError
from pipecat_pocket_tts.engine.model.config import get_config
from pipecat_pocket_tts.engine.model.config_registry import config_names
from pipecat_pocket_tts.engine.timing.heads import (
    FRAMES_PER_CHARACTER,
    SILENCE_RMS,
    ChunkAligner,
    RateAligner,
    SpanStart,
    SpanTiming,
    SpeakingRate,
    WordPointer,
    heads_fit,
    heads_for,
    is_voiced,
    span_scores,
)
from pipecat_pocket_tts.engine.timing.subtitles import timestamps_text, write_timestamps
from pipecat_pocket_tts.engine.timing.word_timing import UtteranceWords, Word, WordStart, WordTimes
from pipecat_pocket_tts.engine.timing.words import ChunkSpans, TextSpan, WordMapper, caller_words

FRAME = 1920


def units_for(words: list[int | None], *, punct_end: bool = True) -> ChunkSpans:
    """Spans laid out one per 5 characters; word i owned by caller word words[i]."""
    spans = [TextSpan(5 * i, 5 * i + 4, w) for i, w in enumerate(words)]
    if punct_end:
        spans.append(TextSpan(5 * len(words), 5 * len(words) + 1, None, synthetic=True))
    return ChunkSpans(tuple(spans), np.eye(len(spans), dtype=np.float32), ())


# -- head tables ---------------------------------------------------------------------------
def test_every_shipped_pack_but_one_has_heads_and_they_fit_its_model():
    registry = config_names()
    with_heads = [name for name in registry if heads_for(get_config(name))]
    assert set(registry) - set(with_heads) == {"english_2026-10"}  # the peer names none
    assert heads_for(get_config("english")) == ((3, 8), (2, 0))
    assert heads_for(get_config("french_24l")) == ((17, 13), (16, 9), (18, 5), (17, 11))


def test_a_custom_config_or_heads_outside_the_model_get_no_heads():
    config, *_ = load_family("tiny_lsd")
    assert config.weights is None
    assert heads_for(config) is None  # no hub weights: unknown checkpoint
    shipped_name = dataclasses.replace(
        config, name="english", weights=get_config("english").weights
    )
    assert heads_for(shipped_name) is None  # english's (3, 8) does not exist in 2 layers × 4
    assert not heads_fit(((3, 8),), config)
    assert heads_fit(((1, 3), (0, 0)), config)


# -- the probe -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_small():
    config, weights, _, arrays = load_family("tiny_small")  # grouped-query attention
    backend = NumpyBackend.from_files(config, weights)
    voice = VoiceKV(keys=list(arrays["voice_k"]), values=list(arrays["voice_v"]))
    return backend, backend.flow_state_from_voice(voice), arrays


def test_probing_changes_nothing_the_step_returns(tiny_small):
    backend, voice, arrays = tiny_small
    ids = arrays["text_ids"]
    plain, probed = voice.copy(), voice.copy()
    for state in (plain, probed):
        backend.prefill(state, backend.embed_text(ids))
    probe = AttentionProbe(((2, 3), (0, 1), (2, 0)), voice.position, voice.position + len(ids))
    latent = None
    for _ in range(4):
        a = backend.step(plain, latent)
        b = backend.step(probed, latent, probe)
        assert np.array_equal(a.hidden, b.hidden) and a.eos_logit == b.eos_logit
        assert a.attention is None and b.attention.shape == (3, len(ids))
        assert np.isfinite(b.attention).all()
        latent = np.random.default_rng(0).standard_normal(32).astype(np.float32)


def test_probe_logits_are_query_dot_keys_over_the_text_positions(tiny_small):
    backend, voice, arrays = tiny_small
    flow = backend.flow_lm
    state = voice.copy()
    ids = arrays["text_ids"]
    backend.prefill(state, backend.embed_text(ids))
    start, end = voice.position, voice.position + len(ids)
    # query head h of layer l reads kv head h // group: heads 2 and 3 share kv head 1
    out = backend.step(state, None, AttentionProbe(((1, 2), (1, 3)), start, end)).attention
    keys = state.keys[1, 1, start:end]
    # the two queries differ, the keys are shared: the logits are not equal...
    assert not np.allclose(out[0], out[1])
    # ...and each row is some query · those keys / √Dh: solvable exactly for the query
    for row in out:
        q, *_ = np.linalg.lstsq(keys, row / flow.scale, rcond=None)
        np.testing.assert_allclose(keys @ q * flow.scale, row, atol=1e-4)


def test_step_batch_probes_each_sequence_as_step_does(tiny_small):
    backend, voice, arrays = tiny_small
    ids = arrays["text_ids"]
    solo, batched = [voice.copy(), voice.copy()], [voice.copy(), voice.copy(), voice.copy()]
    for state in (*solo, *batched):
        backend.prefill(state, backend.embed_text(ids))
    start, end = voice.position, voice.position + len(ids)
    probes = [AttentionProbe(((2, 3), (0, 1)), start, end), AttentionProbe(((1, 0),), start, end)]
    latent = np.random.default_rng(1).standard_normal(32).astype(np.float32)
    for step_input in (None, latent):
        before = [s.copy() for s in solo]
        want = [backend.step(s, step_input, p) for s, p in zip(solo, probes, strict=True)]
        got = backend.step_batch(batched, [step_input] * 3, [probes[0], None, probes[1]])
        assert got[1].attention is None
        for g, w in zip((got[0], got[2]), want, strict=True):
            np.testing.assert_allclose(g.attention, w.attention, rtol=1e-4, atol=1e-4)
            np.testing.assert_allclose(g.hidden, w.hidden, rtol=1e-4, atol=1e-5)
        # the looping default of the base class passes each probe to step
        looped = Backend.step_batch(backend, before, [step_input] * 2, probes)
        for a, w in zip(looped, want, strict=True):
            np.testing.assert_array_equal(a.attention, w.attention)
    with pytest.raises(ValueError, match="probes"):
        backend.step_batch(batched[:2], [None, None], probes[:1])


def test_a_probe_outside_the_model_is_refused(tiny_small):
    backend, voice, _ = tiny_small
    state = voice.copy()
    with pytest.raises(ValueError, match="outside this model"):
        backend.step(state, None, AttentionProbe(((3, 0),), 0, 1))


# -- scores, voicing, pointer -------------------------------------------------------------
def test_scores_are_the_text_only_softmax_spread_on_units_and_averaged_over_heads():
    logits = np.array([[0.0, 1.0, 2.0], [3.0, 0.0, 0.0]], np.float32)
    mapping = np.array([[1, 0], [0.5, 0.5], [0, 1]], np.float32)
    soft = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(span_scores(logits, mapping), (soft @ mapping).mean(axis=0), 1e-6)


def test_quiet_means_rms_at_most_the_threshold():
    assert not is_voiced(np.full(FRAME, SILENCE_RMS * 0.99, np.float32))
    assert is_voiced(np.full(FRAME, SILENCE_RMS * 1.01, np.float32))
    assert not is_voiced(np.zeros(FRAME, np.float32))
    assert not is_voiced(np.zeros(0, np.float32))


def test_pointer_follows_attention_and_closes_the_last_word_at_a_quiet_frame():
    spans = units_for([0, 1, 2])
    pointer = WordPointer(spans)
    # frame scores over [w0, w1, w2, "."]
    frames = [
        ([0.9, 0.1, 0.0, 0.0], True),  # opens w0 at 0
        ([0.6, 0.4, 0.0, 0.0], True),
        ([0.3, 0.7, 0.0, 0.0], True),  # w1 dominates: w0 0–2, w1 opens at 2
        ([0.0, 0.2, 0.8, 0.0], True),  # w2 dominates: w1 2–3
        ([0.0, 0.0, 0.9, 0.1], True),
        ([0.0, 0.0, 0.9, 0.1], False),  # quiet, last word, only synthetic "." after: close
        ([0.0, 0.0, 0.9, 0.1], False),
    ]
    events = []
    for index, (scores, voiced) in enumerate(frames):
        events += [(index, e) for e in pointer.frame(np.array(scores, np.float32), voiced, index)]
    events += [(len(frames), e) for e in pointer.finish(len(frames))]
    closed = [t for _, t in events if isinstance(t, SpanTiming)]
    assert [(t.span, t.start, t.end, t.estimated) for t in closed] == [
        (0, 0, 2, False),
        (1, 2, 3, False),
        (2, 3, 5, False),
    ]
    # each word is reported on the frame that opens it, after the one before it closed
    opened = [(n, t.span, t.start) for n, t in events if isinstance(t, SpanStart)]
    assert opened == [(0, 0, 0), (2, 1, 2), (3, 2, 3)]
    assert [type(t).__name__ for _, t in events][:3] == ["SpanStart", "SpanTiming", "SpanStart"]


def test_words_the_pointer_never_reaches_are_estimated_not_missing():
    pointer = WordPointer(units_for([0, 1, 2]))
    events = pointer.frame(np.array([1, 0, 0, 0], np.float32), True, 0)
    events += pointer.finish(10)
    assert [(t.span, t.start, t.end, t.estimated) for t in events if isinstance(t, SpanTiming)] == [
        (0, 0, 10, False),
        (1, 10, 10, True),
        (2, 10, 10, True),
    ]
    starts = [(t.span, t.start, t.estimated) for t in events if isinstance(t, SpanStart)]
    assert starts == [(0, 0, False), (1, 10, True), (2, 10, True)]


def _two_words() -> ChunkSpans:
    """Words of spoken lengths 2 ("a" and its space) and 8 ("bcdefgh" and its space)."""
    return ChunkSpans(
        (TextSpan(0, 1, 0), TextSpan(2, 9, 1), TextSpan(9, 10, None)),
        np.zeros((0, 3), np.float32),
        (),
    )


def _run_fallback(aligner: RateAligner, voiced: list[bool]) -> list[tuple[int, object]]:
    events = [(n, e) for n, v in enumerate(voiced) for e in aligner.frame(v)]
    return events + [(len(voiced), e) for e in aligner.finish()]


def test_fallback_starts_words_at_the_speaking_rate_as_the_frames_go():
    voiced = [False, True, True, True, True, True, True, True, True, True, True, False]
    events = _run_fallback(RateAligner(_two_words(), frames_per_character=0.5), voiced)
    starts = [(n, e.span, e.start) for n, e in events if isinstance(e, SpanStart)]
    assert starts == [(1, 0, 1.0), (2, 1, 2.0)]  # first voiced frame; then 2 characters × 0.5
    ends = [(n, e.span, e.start, e.end) for n, e in events if isinstance(e, SpanTiming)]
    assert ends == [(2, 0, 1.0, 2.0), (12, 1, 2.0, 11.0)]  # the last ends with the voice
    assert all(e.estimated for _, e in events)


def test_fallback_speech_faster_than_the_rate_shares_what_is_left_by_length():
    aligner = RateAligner(_two_words(), frames_per_character=2.0)
    events = _run_fallback(aligner, [False, True, True, True])
    assert [(n, type(e).__name__, e.span) for n, e in events] == [
        (1, "SpanStart", 0),
        (4, "SpanTiming", 0),
        (4, "SpanStart", 1),
        (4, "SpanTiming", 1),
    ]
    assert events[1][1].end == pytest.approx(1 + 3 * 2 / 10) == events[2][1].start
    assert events[3][1].end == 4
    assert (aligner.characters, aligner.voiced_frames) == (10, 3)


def test_fallback_on_silence_spreads_the_words_over_the_chunk():
    events = _run_fallback(RateAligner(_two_words(), 0.8), [False] * 5)
    assert all(n == 5 for n, _ in events)  # nothing heard: all at the end
    assert [(e.span, e.start, e.end) for _, e in events if isinstance(e, SpanTiming)] == [
        (0, 0.0, 1.0),
        (1, 1.0, 5.0),
    ]


def test_speaking_rate_moves_from_its_prior_to_the_voice_s():
    rate = SpeakingRate()
    assert rate.frames_per_character == FRAMES_PER_CHARACTER
    for _ in range(50):
        rate.observe(100, 50)  # a fast voice: 0.5 frames per character
    assert 0.5 < rate.frames_per_character < 0.51
    rate.observe(10, 0)  # nothing voiced: no evidence
    assert 0.5 < rate.frames_per_character < 0.51


def test_aligner_without_attention_releases_words_as_the_frames_go():
    rate = SpeakingRate(frames_per_character=0.5)  # 5-character words: 2.5 frames each
    aligner = ChunkAligner(units_for([0, 1]), attention=False, rate=rate)
    loud = np.full(FRAME, 0.1, np.float32)
    assert [(e.span, e.start) for e in aligner.frame(loud, None)] == [(0, 0.0)]
    assert aligner.frame(loud, None) == []
    assert [type(e).__name__ for e in aligner.frame(loud, None)] == ["SpanTiming", "SpanStart"]
    assert [(e.span, e.start, e.end) for e in aligner.finish()] == [(1, 2.5, 3.0)]
    assert aligner.estimated
    assert rate.frames_per_character < 0.5  # 10 characters in 3 frames: learned


# -- caller words ------------------------------------------------------------------------------
def _feed_all(
    words: UtteranceWords, chunks, frames_per_chunk: int
) -> tuple[list[Word], list[tuple[int, WordStart]]]:
    """Loud frames through ``words`` → its Words, and each WordStart with its frame."""
    loud = np.full(FRAME, 0.1, np.float32)
    done: list[Word] = []
    starts: list[tuple[int, WordStart]] = []
    n = 0
    for spans in chunks:
        words.start_chunk(spans, attention=False)
        for f in range(frames_per_chunk):
            got = words.frame(loud, None, last_in_chunk=f == frames_per_chunk - 1)
            done += got.words
            starts += [(n, w) for w in got.starts]
            n += 1
    got = words.finish()
    return done + list(got.words), starts + [(n, w) for w in got.starts]


def _feed(words: UtteranceWords, chunks, frames_per_chunk: int) -> list[Word]:
    return _feed_all(words, chunks, frames_per_chunk)[0]


def test_a_caller_word_spans_its_units_across_a_chunk_boundary():
    text = "It costs $12.50 today."
    mapper = WordMapper()
    mapper.add(caller_words(text, lambda w: w.replace("$12.50", "twelve dollars and fifty cents")))
    first = mapper.map(["it", "costs", "twelve", "dollars"])
    second = mapper.map(["and", "fifty", "cents", "today"])
    chunks = [
        ChunkSpans(
            tuple(TextSpan(5 * i, 5 * i + 4, o) for i, o in enumerate(m.owners)),
            np.zeros((0, 4), np.float32),
            m.unspoken,
            m.open_word,
        )
        for m in (first, second)
    ]
    assert chunks[0].open_word == 2
    words, starts = _feed_all(
        UtteranceWords(mapper.words, session_offset=10.0), chunks, frames_per_chunk=8
    )
    assert [w.text for w in words] == ["It", "costs", "$12.50", "today."]
    assert [(w.text, w.start) for _, w in starts] == [(w.text, w.start) for w in words]
    money = words[2]
    # 5-character spans at 0.8 frames per character: "it" 0, "costs" 4, then the chunk ends
    # (8 frames): "costs", "twelve", "dollars" share 4–8. The second chunk, at the learned
    # rate (0.8·60 + 8) / (60 + 20) = 0.7: "and" 8, "fifty" 11.5, "cents" 15–15.5.
    assert money.start == pytest.approx(16 / 3 * 0.08) and money.end == pytest.approx(15.5 * 0.08)
    assert money.session_start == pytest.approx(10.0 + money.start)
    assert [w.index for w in words] == [0, 1, 2, 3]
    assert all(w.estimated for w in words)
    assert all(a.end <= b.start + 1e-9 for a, b in itertools.pairwise(words))


def test_markup_is_not_a_word_and_unspoken_words_keep_their_place():
    words = caller_words("# Hello 日本 world", lambda w: w)
    mapper = WordMapper()
    mapper.add(words)
    mapped = mapper.map(["hello", "world"])
    spans = ChunkSpans(
        tuple(TextSpan(6 * i, 6 * i + 5, o) for i, o in enumerate(mapped.owners)),
        np.zeros((0, 2), np.float32),
        mapped.unspoken,
    )
    out = _feed(UtteranceWords(mapper.words), [spans], frames_per_chunk=6)
    assert [(w.text, w.estimated) for w in out] == [
        ("Hello", True),
        ("日本", True),
        ("world", True),
    ]
    assert out[1].start == out[1].end == out[0].end


def test_timestamp_files_by_extension(tmp_path):
    words = [Word("Hi,", 0, 0.0, 0.4, 1.0, 1.4, False), Word("$5.", 1, 0.4, 1.25, 1.4, 2.25, True)]
    data = json.loads(write_timestamps(words, tmp_path / "t.json").read_text())
    assert data["words"][1] == {"text": "$5.", "start": 0.4, "end": 1.25, "estimated": True}
    srt = timestamps_text(words, ".srt")
    assert srt.startswith("1\n00:00:00,000 --> 00:00:00,400\nHi,\n")
    assert "00:00:00,400 --> 00:00:01,250\n$5." in srt
    vtt = timestamps_text(words, ".VTT")
    assert vtt.startswith("WEBVTT\n\n00:00:00.000 --> 00:00:00.400\nHi,")
    with pytest.raises(TimestampsFormatError, match=r"\.json, \.srt, \.vtt"):
        write_timestamps(words, tmp_path / "t.txt")


def test_session_words_put_each_utterance_on_the_session_clock():
    from pipecat_pocket_tts.engine.timing.word_timing import FrameWords, SessionWords, WordLedger

    loud = np.full(FRAME, 0.1, np.float32)
    session = SessionWords()
    out = WordTimes()
    carried = []
    for utterance, text in enumerate(["one two", "three"]):
        words = caller_words(text)
        mapper = WordMapper()
        mapper.add(words)
        mapped = mapper.map([w.text for w in words])
        spans = ChunkSpans(
            tuple(TextSpan(6 * i, 6 * i + 5, o) for i, o in enumerate(mapped.owners)),
            np.eye(len(words), dtype=np.float32),
            (),
        )
        for f in range(5):
            logits = np.full((1, len(words)), -9.0, np.float32)
            logits[0, min(f // 2, len(words) - 1)] = 9.0  # attention walks one word / 2 frames
            got = session.frame(
                loud,
                FrameWords(
                    utterance, WordLedger(mapper.words), spans, logits, f == 0, f == 4, f == 4
                ),
            )
            carried += [(utterance, f, w.text) for w in got.starts]
            out += got
    assert carried == [(0, 0, "one"), (0, 2, "two"), (1, 0, "three")]  # on their first frame
    assert [w.session_start for w in out.starts] == [w.session_start for w in out.words]
    out = out.words
    assert [(w.text, w.start, w.end) for w in out] == [
        ("one", 0.0, pytest.approx(0.16)),
        ("two", pytest.approx(0.16), pytest.approx(0.40)),
        ("three", 0.0, pytest.approx(0.40)),
    ]
    assert out[2].session_start == pytest.approx(0.40)
    assert out[2].session_end == pytest.approx(0.80)
    assert not any(w.estimated for w in out)
