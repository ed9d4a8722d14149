"""The caller's words followed through normalization, chunking and tokenization."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from pipecat_pocket_tts.engine.text.normalize import normalize_text
from pipecat_pocket_tts.engine.timing.words import (
    TextSpan,
    WordMapper,
    caller_words,
    chunk_spans,
    lexical_keys,
    lexical_spans,
    overlap_matrix,
    token_spans,
)


def english(word: str) -> str:
    return normalize_text(word, "english")


def owners_of(text: str, spoken: str | None = None, chunks: list[str] | None = None):
    """Caller word text per spoken lexical word, mapping chunk by chunk."""
    words = caller_words(text, english)
    mapper = WordMapper()
    mapper.add(words)
    spoken = spoken if spoken is not None else normalize_text(text, "english")
    pieces = chunks or [spoken]
    out = []
    for piece in pieces:
        keys = lexical_keys(piece)
        mapped = mapper.map(keys)
        out += [
            (k, None if o is None else words[o].text)
            for k, o in zip(keys, mapped.owners, strict=True)
        ]
    return out


def test_lexical_words_join_hyphens_and_apostrophes_only_between_letters():
    text = "don't stop - twenty-six rock'n'roll 3.14 naïve"
    assert [text[b:e] for b, e in lexical_spans(text)] == [
        "don't",
        "stop",
        "twenty-six",
        "rock'n'roll",
        "3",
        "14",
        "naïve",
    ]


def test_money_is_one_caller_word_spanning_its_spoken_form():
    pairs = owners_of("It costs $12.50.")
    assert pairs == [
        ("it", "It"),
        ("costs", "costs"),
        ("twelve", "$12.50."),
        ("dollars", "$12.50."),
        ("and", "$12.50."),
        ("fifty", "$12.50."),
        ("cents", "$12.50."),
    ]


def test_context_dependent_forms_go_to_the_words_between_matches():
    # "2026" alone reads "twenty twenty-six" and "Nov" alone stays "Nov"; in context the
    # date becomes "November thirtieth, twenty twenty-six": still the right caller words.
    pairs = owners_of("Meet at 3:45 pm on Nov 30, 2026 please.")
    owners = dict(pairs)
    assert owners["november"] == "Nov"
    assert owners["thirtieth"] == "30,"
    assert owners["twenty-six"] == "2026"
    assert owners["please"] == "please."
    assert [o for _, o in pairs][-1] == "please."


def test_markdown_and_emoji_are_not_words_and_sub_shows_its_written_form():
    words = caller_words('**Bold** # claim <sub alias="en vidia">NVDA</sub> 😀', english)
    assert [(w.text, w.keys) for w in words] == [
        ("**Bold**", ("bold",)),
        ("#", ()),
        ("claim", ("claim",)),
        ("NVDA", ("en", "vidia")),
        ("😀", ()),
    ]


def test_sub_alias_with_spaces_stays_one_word():
    words = caller_words('say <sub alias="World Wide Web">WWW</sub>, please', english)
    assert [w.text for w in words] == ["say", "WWW,", "please"]
    assert words[1].keys == ("world", "wide", "web")


def test_a_word_cut_between_chunks_keeps_its_owner_on_both_sides():
    pairs = owners_of(
        "It costs $12.50 today.",
        chunks=["It costs twelve dollars", "and fifty cents today."],
    )
    assert [o for _, o in pairs] == ["It", "costs"] + ["$12.50"] * 5 + ["today."]


def test_words_the_tokenizer_dropped_are_reported_unspoken():
    words = caller_words("Hello 日本 world", english)
    mapper = WordMapper()
    mapper.add(words)
    mapped = mapper.map(["hello", "world"])
    assert mapped.owners == (0, 2)
    assert mapped.unspoken == (1,)


def test_streamed_words_map_as_they_arrive():
    mapper = WordMapper()
    mapper.add(caller_words("One two three.", english))
    assert mapper.map(["one", "two", "three"]).owners == (0, 1, 2)
    mapper.add(caller_words("Four five.", english))
    assert mapper.map(["four", "five"]).owners == (3, 4)


def test_units_mark_prepare_s_punctuation_synthetic_and_written_punctuation_not():
    mapper = WordMapper()
    mapper.add(caller_words("hello there", english))
    text = "Hello there."
    spans = chunk_spans(text, [(0, 5), (5, 11), (11, 12)], mapper)
    assert [(u.begin, u.end, u.word, u.synthetic) for u in spans.spans] == [
        (0, 5, 0, False),
        (6, 11, 1, False),
        (11, 12, None, True),
    ]
    mapper = WordMapper()
    mapper.add(caller_words("hello there.", english))
    spans = chunk_spans(text, [(0, 5), (5, 11), (11, 12)], mapper)
    assert spans.spans[-1].synthetic is False


def test_overlap_matrix_shares_a_token_between_the_units_it_covers():
    spans = [TextSpan(0, 4, 0), TextSpan(4, 5, None)]
    matrix = overlap_matrix([(0, 2), (2, 5), (5, 5)], spans)
    np.testing.assert_allclose(matrix, [[1, 0], [2 / 3, 1 / 3], [0, 0]])


@pytest.mark.parametrize(
    "text",
    ["        Hello world.", "It costs 12.50, ok?", "Über café — naïve 3.14!"],
)
def test_token_spans_cover_each_token_s_characters(sp_model_path, text):
    from pipecat_pocket_tts.engine.text.tokenizer import Tokenizer

    tokenizer = Tokenizer.from_file(sp_model_path)
    ids = [int(i) for i in tokenizer.encode(text)]
    spans = token_spans(tokenizer.decode, ids, text)
    assert len(spans) == len(ids)
    covered = "".join(text[b:e] for b, e in spans)
    assert covered == "".join(text.split())  # every visible character once, in order


def test_streamed_caller_words_complete_at_whitespace_and_never_inside_a_sub_element():
    from pipecat_pocket_tts.engine.timing.words import CallerWordFeed

    stream = CallerWordFeed(english)
    pieces = ["Hel", "lo wor", "ld, <", 'sub alias="x y">W', "WW</sub> ok", "ay. It", " costs $3"]
    released = [[w.text for w in stream.push(p)] for p in pieces]
    assert released == [[], ["Hello"], ["world,"], [], ["WWW"], ["okay."], ["It", "costs"]]
    rest = stream.flush()
    assert [w.text for w in rest] == ["$3"]
    assert rest[0].keys == ("three", "dollars")
    whole = "Hello world, " + '<sub alias="x y">WWW</sub> okay. It costs $3'
    assert rest[0].begin == whole.index("$3")


def test_a_closed_sub_element_is_one_word_before_whitespace_follows_it():
    from pipecat_pocket_tts.engine.timing.words import CallerWordFeed

    text = 'say <sub alias="World Wide Web">WWW</sub>'
    stream = CallerWordFeed(english)
    assert [w.text for w in stream.push(text)] == ["say"]
    rest = stream.flush()
    assert [(w.text, w.keys, w.begin) for w in rest] == [("WWW", ("world", "wide", "web"), 4)]
    assert rest == caller_words(text, english)[1:]


# -- whole text path: every caller word with a spoken form comes out once, in order -----------
PIECES = [
    "Hello",
    "world,",
    "$12.50",
    "3:45",
    "pm",
    "Nov",
    "30,",
    "2026",
    "**bold**",
    "#",
    "-",
    "😀",
    "日本",
    "Dr.",
    "U.S.",
    "twenty-six",
    "don't",
    "50%",
    "1,000,000",
    "e.g.",
    "(see",
    "below).",
    '<sub alias="en vidia">NVDA</sub>',
    "—",
    "ok?",
    "supercalifragilisticexpialidociousnessmadelongerstill",
]


@pytest.fixture(scope="module")
def planner(sp_model_path):
    from pipecat_pocket_tts.engine.model.config import get_config
    from pipecat_pocket_tts.engine.text.planner import TextPlanner
    from pipecat_pocket_tts.engine.text.tokenizer import Tokenizer

    return TextPlanner(get_config("english"), Tokenizer.from_file(sp_model_path))


def _timed_words(planner, text: str, attention: bool, seed: int):
    from pipecat_pocket_tts.engine.timing.word_timing import UtteranceWords, WordTimes

    rng = np.random.default_rng(seed)
    mapper = WordMapper()
    mapper.add(planner.words(text))
    words = UtteranceWords(mapper.words)
    out = WordTimes()
    for chunk in planner.plan(text):
        spans = planner.spans(chunk, mapper)
        words.start_chunk(spans, attention=attention)
        frames = int(rng.integers(3, 30))
        for f in range(frames):
            samples = rng.standard_normal(1920).astype(np.float32) * rng.choice([0.0, 0.1])
            logits = rng.standard_normal((2, chunk.num_tokens)).astype(np.float32) * 3
            out += words.frame(samples, logits, last_in_chunk=f == frames - 1)
    return mapper.words, out + words.finish()


@pytest.mark.parametrize("attention", [True, False], ids=["attention", "fallback"])
def test_every_spoken_caller_word_once_in_order_with_monotonic_times(planner, attention):
    rng = np.random.default_rng(7)
    for case in range(40):
        count = int(rng.integers(1, 40))
        text = " ".join(rng.choice(PIECES, count))
        if case % 3 == 0:
            text = text.replace(" ", ". ", 2)
        callers, released = _timed_words(planner, text, attention, case)
        timed = released.words
        # each word started once, in order, with the start its Word has
        assert [(w.text, w.index, w.start) for w in released.starts] == [
            (w.text, w.index, w.start) for w in timed
        ], text
        assert [w.text for w in timed] == [w.text for w in callers if w.keys], text
        assert [w.index for w in timed] == list(range(len(timed)))
        for a, b in itertools.pairwise(timed):
            assert a.start <= a.end <= b.start + 1e-9, text
