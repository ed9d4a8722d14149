"""Streamed text speaks what the same text enqueued at once speaks (issue 43, item 2).

``Session.feed`` (TOKEN aggregation, the server's partial text) normalizes each run of
sentences as soon as its end is certain; ``enqueue`` normalizes the whole text. Both must say
the same words, sentence for sentence, and report the same timed words, each of them spoken:
a sentence that is only a number ("Step 1. 2. Done.") is a number, not a list marker, when it
does not start a line. Property test over generated texts in every pack language.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict
from pipecat_pocket_tts.engine import PocketTTS
from pipecat_pocket_tts.engine.text.chunking import ABBREVIATIONS
from pipecat_pocket_tts.engine.text.normalize import normalize_text
from pipecat_pocket_tts.engine.text.planner import TextPlanner

LANGUAGES = ["english", "french", "german", "spanish", "italian", "portuguese", "dutch"]
WORDS = {
    "english": "the cat sat on a mat and then it ran home",
    "french": "le chat est sur la table et puis il part",
    "german": "der Hund ist auf dem Tisch und dann geht er",
    "spanish": "el gato come en la casa y luego se va",
    "italian": "il gatto mangia nella casa e poi se ne va",
    "portuguese": "o gato come na casa e depois vai embora",
    "dutch": "de kat zit op de mat en dan gaat hij weg",
}
#: The failures the issue names, as (text, fragments): one character at a time.
KNOWN = ["Step 1. 2. Done.", "Ok. 42. ", "1. 1. ", "Hi there. …", "Wait… what? …"]


@pytest.fixture(scope="module")
def packs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, PocketTTS]:
    root = tmp_path_factory.mktemp("stream_batch_packs")
    config = tiny_config_dict("standard")
    return {
        language: PocketTTS.load(
            language,
            backend="numpy",
            model_dir=build_pack(root / language, config, language=language, voices=("alba",)),
        )
        for language in LANGUAGES
    }


def spoken_words(chunks) -> list[str]:
    """The words the model is given, sentence marks kept; case aside (a chunk's first letter
    is capitalized wherever the chunks are cut) and blanks before marks too (normalization
    tidies "the ..." to "the..." when it rewrote anything else in the text it was given)."""
    text = " ".join(c.text for c in chunks).casefold()
    return re.sub(r"\s+(?=[.,!?…])", "", text).split()


def planned(tts: PocketTTS, text: str, fragments: list[str] | None):
    planner = TextPlanner(tts.config, tts.tokenizer)
    if fragments is None:
        return planner.plan(text)
    stream = planner.stream()
    return [c for f in fragments for c in stream.push(f)] + stream.flush()


def timed_words(tts: PocketTTS, text: str, fragments: list[str] | None) -> list[str]:
    """The words the session's frames report, with ``enqueue`` (None) or ``feed``."""
    session = tts.session(timestamps=True, max_frames=2, seed=1)
    if fragments is None:
        session.enqueue(text)
    else:
        for fragment in fragments:
            session.feed(fragment)
        session.flush()
    session.finish()
    return [w.text for item in session for w in getattr(item, "words", ())]


def split_at(text: str, cuts: list[int]) -> list[str]:
    bounds = [0, *sorted({min(max(c, 0), len(text)) for c in cuts}), len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]


def check_stream_equals_batch(tts: PocketTTS, text: str, fragments: list[str]) -> None:
    batch = spoken_words(planned(tts, text, None))
    streamed = spoken_words(planned(tts, text, fragments))
    assert streamed == batch, (text, fragments)
    batch_words = timed_words(tts, text, None)
    assert timed_words(tts, text, fragments) == batch_words, (text, fragments)


@pytest.mark.parametrize("text", KNOWN)
def test_the_known_failures_stream_as_they_are_enqueued(
    packs: dict[str, PocketTTS], text: str
) -> None:
    check_stream_equals_batch(packs["english"], text, list(text))


def test_a_number_alone_in_a_streamed_sentence_is_spoken(packs: dict[str, PocketTTS]) -> None:
    tts = packs["english"]
    text = "Step 1. 2. Done."
    assert spoken_words(planned(tts, text, list(text))) == ["step", "one.", "two.", "done."]
    assert timed_words(tts, text, list(text)) == ["Step", "1.", "2.", "Done."]
    # At a line start, "2." is still a list marker: not said, not reported.
    text = "Step 1.\n2. Done."
    assert spoken_words(planned(tts, text, list(text))) == ["step", "one.", "done."]
    assert timed_words(tts, text, list(text)) == ["Step", "1.", "Done."]


def _language_text(language: str) -> st.SearchStrategy[str]:
    words = WORDS[language].split()
    abbreviations = sorted(ABBREVIATIONS[language])
    token = st.one_of(
        st.sampled_from(words),
        st.sampled_from(words).map(str.capitalize),
        st.integers(0, 120).map(str),
        st.integers(0, 30).map(lambda n: f"{n}."),
        st.sampled_from(abbreviations).map(lambda a: a.capitalize() + "."),
        st.sampled_from(["…", "...", "?", "!"]),
    )
    sentence_end = st.sampled_from([". ", "! ", "? ", "… ", "... ", ".\n", "?\n", "\n", " … "])
    line_start = st.sampled_from(["", "", "1. ", "2) ", "- ", "* "])
    sentence = st.tuples(line_start, st.lists(token, min_size=1, max_size=6), sentence_end)
    return st.lists(sentence, min_size=1, max_size=5).map(_join_sentences)


def _join_sentences(sentences: list[tuple[str, list[str], str]]) -> str:
    """Sentences joined; a list marker only where a line starts."""
    text = ""
    for start, body, end in sentences:
        at_line_start = not text or text.endswith("\n")
        text += (start if at_line_start else "") + " ".join(body) + end
    return text


@st.composite
def _case(draw) -> tuple[str, str, list[str]]:
    language = draw(st.sampled_from(LANGUAGES))
    text = draw(_language_text(language))
    cuts = draw(st.lists(st.integers(0, len(text)), max_size=len(text)))
    return language, text, split_at(text, cuts)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@example(("english", "Step 1. 2. Done.", list("Step 1. 2. Done.")))
@example(("english", "Ok. 42. ", list("Ok. 42. ")))
@given(_case())
def test_any_streamed_text_speaks_as_it_does_enqueued(
    packs: dict[str, PocketTTS], case: tuple[str, str, list[str]]
) -> None:
    language, text, fragments = case
    check_stream_equals_batch(packs[language], text, fragments)


def llm_tokens(text: str) -> list[str]:
    """``text`` as an LLM streams it: a word with the whitespace before it, token by token."""
    return re.findall(r"\s*\S+|\s+$", text)


def _speaks(word: str) -> bool:
    return any(c.isalnum() for c in word)


def sentence_starts(tts: PocketTTS, text: str) -> set[int]:
    """Where a sentence begins in ``enqueue``'s reading of ``text``, counted in words that
    speak: the sentences its chunker cuts the normalized text into (before any merging)."""
    planner = TextPlanner(tts.config, tts.tokenizer)
    preparer = planner.preparer
    spoken = preparer.clean(normalize_text(text, planner.text_language))
    starts: set[int] = set()
    position = 0
    for sentence in preparer.chunker.sentences(spoken):
        starts.add(position)
        position += sum(map(_speaks, sentence.split()))
    return starts


def check_streamed_chunks_cut_as_enqueued(tts: PocketTTS, text: str) -> None:
    """Token by token, ``feed``'s chunks say the words ``enqueue``'s say, and begin a
    sentence (capitalized) only where ``enqueue``'s text has one."""
    batch = planned(tts, text, None)
    streamed = planned(tts, text, llm_tokens(text))
    assert spoken_words(streamed) == spoken_words(batch), (text, batch, streamed)
    batch_starts = sentence_starts(tts, text)
    position = 0
    for chunk in streamed:
        if not chunk.is_mid_sentence:
            assert position in batch_starts, (text, [c.text for c in batch], chunk.text)
        position += sum(map(_speaks, chunk.text.split()))


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@example(("english", "2) Sept. Ran Apr. … E.g. the\ncat …! "))
@example(("english", "120 !! 23. 17? 23. 17? cat\n2) Apr. 19.… "))
@example(("german", "Der Hund 3. Mai geht. "))
@given(
    st.sampled_from(LANGUAGES).flatmap(lambda lang: st.tuples(st.just(lang), _language_text(lang)))
)
def test_text_streamed_token_by_token_is_cut_where_enqueue_cuts_it(
    packs: dict[str, PocketTTS], case: tuple[str, str]
) -> None:
    language, text = case
    check_streamed_chunks_cut_as_enqueued(packs[language], text)


def test_all_pack_languages_are_covered(packs: dict[str, PocketTTS], tmp_path: Path) -> None:
    assert sorted(p.config.name for p in packs.values()) == sorted(LANGUAGES)
