"""Property tests: any Unicode is safe, prose is untouched, digits always become words."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pipecat_pocket_tts.engine.text.normalize import TextNormalizer
from pipecat_pocket_tts.engine.text.spoken.languages import spoken_language
from pipecat_pocket_tts.engine.text.spoken.lexicon import Lexicon
from pipecat_pocket_tts.engine.text.spoken.pipeline import SpokenForm

CODES = ("en", "de", "es", "fr", "it", "pt", "pt-BR", "nl")
# strict: a rule that raises fails the test instead of being skipped with a warning
STRICT = {code: SpokenForm(spoken_language(code), strict=True) for code in CODES}
LEXICON = Lexicon({"NVIDIA": "en-vidia", "gif": "jif", "C++": "see plus plus"})
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Every abbreviation of every language, reduced to its letters: prose words must avoid them.
ABBREVIATION_WORDS = {
    re.sub(r"[\W_]", "", key).casefold()
    for code in CODES
    for table in (spoken_language(code).abbreviations, spoken_language(code).numbered_abbreviations)
    for key in table
}

tricky_text = st.lists(
    st.one_of(
        st.characters(),
        st.sampled_from(list("0123456789.,:;-–/%$€£¥°º+=&@#*_`~^|<>()[]\n½")),
        st.sampled_from(
            [
                "1st",
                "km",
                "°C",
                "https://",
                "@x.com",
                "```",
                "**",
                "Dr.",
                "etc.",
                "1.000",
                "3:45 pm",
                "15h30",
                "| a |",
                "- ",
                "1. ",
                "# ",
                "👍🏽",
                "\u200d",
                "<sub alias='x'>",
                "</sub>",
                "Mio.",
                "z. B.",
            ]
        ),
    ),
    max_size=40,
).map("".join)


@FAST
@given(text=tricky_text, code=st.sampled_from(CODES), lexicon=st.booleans())
def test_any_unicode_never_raises(text: str, code: str, lexicon: bool) -> None:
    out = STRICT[code](text, LEXICON if lexicon else None)
    assert isinstance(out, str)


@FAST
@given(text=st.text(max_size=80), code=st.sampled_from(CODES))
def test_arbitrary_text_never_raises_and_leaves_no_digits(text: str, code: str) -> None:
    assume("<sub" not in text.lower())
    out = STRICT[code](text)
    assert not re.search(r"\d", out), out


@FAST
@given(text=st.text(max_size=80))
def test_public_api_never_raises(text: str) -> None:
    assert isinstance(TextNormalizer("english")(text), str)


letters = st.characters(categories=["Lu", "Ll", "Lo"])


def _no_abbreviation(word: str) -> bool:
    parts = {re.sub(r"[\W_]", "", p).casefold() for p in re.split(r"['-]", word)}
    parts.add(re.sub(r"[\W_]", "", word).casefold())
    return not parts & ABBREVIATION_WORDS


plain_word = st.builds(
    lambda a, joiner, b: a + joiner + b if b else a,
    st.text(letters, min_size=2, max_size=10),
    st.sampled_from(["", "'", "-"]),
    st.text(letters, min_size=0, max_size=6),
).filter(_no_abbreviation)
separator = st.sampled_from(
    [" ", " ", " ", ", ", ". ", "! ", "? ", "; ", ": ", "\n", "\n\n", " (", ") "]
)


@st.composite
def prose(draw: st.DrawFn) -> str:
    words = draw(st.lists(plain_word, min_size=1, max_size=12))
    seps = draw(st.lists(separator, min_size=len(words) - 1, max_size=len(words) - 1))
    text = words[0] + "".join(s + w for s, w in zip(seps, words[1:], strict=True))
    return text + draw(st.sampled_from(["", ".", "!", "?", "…"]))


@FAST
@given(text=prose(), code=st.sampled_from(CODES))
def test_plain_prose_passes_through_byte_identical(text: str, code: str) -> None:
    assert STRICT[code](text) == text


number_token = st.one_of(
    st.integers(-(10**9), 10**12).map(str),
    st.integers(0, 10**6).map(lambda n: f"{n:,}"),
    st.floats(0, 10_000, allow_nan=False).map(lambda x: f"{x:.2f}"),
    st.integers(0, 9999).map(lambda n: f"${n}.{n % 100:02d}"),
    st.integers(0, 500).map(lambda n: f"{n}%"),
    st.integers(0, 500).map(lambda n: f"{n} km"),
    st.integers(1, 28).map(lambda d: f"2026-11-{d:02d}"),
    st.integers(0, 23).map(lambda h: f"{h}:{(h * 7) % 60:02d}"),
    st.integers(1, 99).map(lambda n: f"{n}th"),
    st.integers(1, 12).map(lambda n: f"{n}/{n + 1}"),
)
sentence_word = st.one_of(number_token, st.sampled_from(["the", "price", "is", "and", "at", "of"]))


@FAST
@given(
    words=st.lists(sentence_word, min_size=1, max_size=8),
    end=st.sampled_from([".", "!", "?"]),
    code=st.sampled_from(CODES),
)
def test_numbers_become_words_and_sentence_end_survives(
    words: list[str], end: str, code: str
) -> None:
    out = STRICT[code](" ".join(words) + end)
    assert not re.search(r"\d", out), out
    assert out.endswith(end), out
