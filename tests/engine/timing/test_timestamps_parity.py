"""Word timestamps against pocket-tts-timestamped 1.4.0 on the reference fixtures' weights.

The fixtures (``timestamps.json`` in three families, written by
``tools/reference/make_timestamp_fixtures.py``) hold the peer's chunks, spans, per-frame span
scores, voicing and words for temperature-0 generations (one sentence with numbers, one text of
two chunks), and its pointer on seeded random scores. Here the NumPy engine runs the same
generations and must give the same spans, the same scores (float tolerance) and exactly the same
word start/end frames.
"""

from __future__ import annotations

import json
from functools import cache

import numpy as np
import pytest
from chunk_loop import AudioDecoder, generate_chunk
from reference_fixtures import FIXTURES_DIR, load_family

from pipecat_pocket_tts.engine.backends.base import VoiceKV
from pipecat_pocket_tts.engine.backends.numpy import NumpyBackend
from pipecat_pocket_tts.engine.frames import GenerationSettings
from pipecat_pocket_tts.engine.text.planner import TextPlanner
from pipecat_pocket_tts.engine.text.tokenizer import Tokenizer
from pipecat_pocket_tts.engine.timing.heads import (
    SpanStart,
    SpanTiming,
    WordPointer,
    is_voiced,
    span_scores,
)
from pipecat_pocket_tts.engine.timing.word_timing import UtteranceWords
from pipecat_pocket_tts.engine.timing.words import ChunkSpans, TextSpan, WordMapper

FAMILIES = ("tiny_lsd", "tiny_small", "tiny_inner512")
SCORE_TOLERANCE = 1e-4
FRAME_SECONDS = 0.08


@cache
def peer(family: str) -> dict:
    return json.loads((FIXTURES_DIR / family / "timestamps.json").read_text(encoding="utf-8"))


@cache
def engine(family: str):
    config, weights, tokenizer_path, arrays = load_family(family)
    backend = NumpyBackend.from_files(config, weights)
    voice = VoiceKV(keys=list(arrays["voice_k"]), values=list(arrays["voice_v"]))
    planner = TextPlanner(config, Tokenizer.from_file(tokenizer_path), text_language="english")
    return backend, backend.flow_state_from_voice(voice), planner


def _units_of(case_units: list) -> ChunkSpans:
    spans = tuple(
        TextSpan(begin, end, k if is_word else None, synthetic)
        for k, (begin, end, is_word, synthetic) in enumerate(case_units)
    )
    return ChunkSpans(spans, np.zeros((0, len(spans)), np.float32), ())


@pytest.mark.parametrize("family", FAMILIES)
def test_pointer_moves_as_the_peer_s_on_random_scores(family):
    cases = peer(family)["pointer_cases"]
    assert cases
    for case in cases:
        pointer = WordPointer(_units_of(case["units"]))
        ours = []
        for index, (scores, voiced) in enumerate(zip(case["scores"], case["voiced"], strict=True)):
            ours += pointer.frame(np.asarray(scores, np.float32), voiced, index)
        ours += pointer.finish(len(case["voiced"]))
        # Starts and ends, in the peer's order, on the same frames.
        assert [_event(t) for t in ours if not t.estimated] == [tuple(e) for e in case["events"]]
        reached = {span for _, span, _, _ in case["events"]}
        assert all(t.estimated == (t.span not in reached) for t in ours)  # never missing
        assert [t.span for t in ours if isinstance(t, SpanStart)] == [  # each word starts once
            t.span for t in ours if isinstance(t, SpanTiming)
        ]


def _event(t: SpanStart | SpanTiming) -> tuple:
    if isinstance(t, SpanStart):
        return ("start", t.span, t.start, None)
    return ("end", t.span, t.start, t.end)


def _run(family: str, text: str):
    """Our generation of ``text``: chunks, spans, per-frame scores/voicing, span and word times."""
    backend, voice, planner = engine(family)
    heads = tuple(tuple(h) for h in peer(family)["heads"])
    settings = GenerationSettings(temperature=0.0, eos_threshold=1e9)
    rng = np.random.default_rng(0)
    chunks = planner.plan(text, normalize=False)
    mapper = WordMapper()
    mapper.add(planner.words(text, normalize=False))
    decoder = AudioDecoder(backend)
    words = UtteranceWords(mapper.words)
    out = []
    timed_words = []
    starts = []  # (utterance frame that carried it, WordStart)
    offset = 0
    for chunk in chunks:
        spans = planner.spans(chunk, mapper)
        words.start_chunk(spans, attention=True)
        pointer = WordPointer(spans)
        scores, voicing, timings = [], [], []
        for frame in generate_chunk(
            backend, voice, chunk, settings, rng, lambda: False, heads=heads
        ):
            samples = decoder.decode(frame.latent)
            row = span_scores(frame.attention, spans.token_to_span)
            voiced = is_voiced(samples)
            scores.append(row)
            voicing.append(voiced)
            timings += pointer.frame(row, voiced, frame.frame_index)
            released = words.frame(samples, frame.attention, last_in_chunk=frame.is_last)
            timed_words += released.words
            starts += [(offset + frame.frame_index, w) for w in released.starts]
        timings += pointer.finish(len(voicing))
        out.append((chunk, spans, np.array(scores), voicing, timings, offset))
        offset += len(voicing)
    released = words.finish()
    timed_words += released.words
    starts += [(offset, w) for w in released.starts]
    return out, timed_words, starts


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("which", [0, 1], ids=["numbers", "two_chunks"])
def test_word_frames_match_the_peer(family, which):
    reference = peer(family)["texts"][which]
    ours, timed_words, starts = _run(family, reference["text"])
    assert [c.text for c, *_ in ours] == [c["text"] for c in reference["chunks"]]
    if which == 1:
        assert len(ours) >= 2  # longer than a chunk
    peer_words = []
    our_words = []
    for (chunk, spans, scores, voicing, timings, offset), theirs in zip(
        ours, reference["chunks"], strict=True
    ):
        assert [int(i) for i in chunk.token_ids] == theirs["token_ids"]
        assert [[u.begin, u.end, u.is_word, u.synthetic] for u in spans.spans] == theirs["units"]
        assert voicing == theirs["voiced"]
        np.testing.assert_allclose(scores, theirs["scores"], atol=SCORE_TOLERANCE)
        for t in timings:
            if isinstance(t, SpanTiming) and not t.estimated:
                span = spans.spans[t.span]
                our_words.append(
                    [chunk.text[span.begin : span.end], offset + t.start, offset + t.end]
                )
    peer_words = [[w, s, e] for w, s, e in reference["words"]]
    # The peer names a word by its source spelling, we by the chunk's (capitalized) one.
    assert [[w.lower(), s, e] for w, s, e in our_words] == [
        [w.lower(), s, e] for w, s, e in peer_words
    ]
    # Every caller word is there, in order, reached ones with the peer's times.
    assert [w.text for w in timed_words] == reference["text"].split()
    reached = len(peer_words)
    # Each word came on the frame where it starts, with the start its Word has later.
    assert [w.index for _, w in starts] == [w.index for w in timed_words]
    for (n, start), word in zip(starts, timed_words, strict=True):
        assert (start.text, start.start, start.session_start) == (
            word.text,
            word.start,
            word.session_start,
        )
        if not start.estimated:
            assert start.start == pytest.approx(n * FRAME_SECONDS)
    assert [w.estimated for w in timed_words].count(False) >= 1
    assert reached >= 1
