"""Chunking: sentence/clause/word cuts, abbreviations, merging, streaming, size limits."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pipecat_pocket_tts.engine.model.config import MAX_TOKENS_PER_CHUNK, get_config
from pipecat_pocket_tts.engine.text import (
    Chunker,
    StreamingChunker,
    TextChunk,
    TextPreparer,
    Tokenizer,
)


def count_words(text: str, mid: bool) -> int:
    """A readable stand-in for token counting: one token per word."""
    return len(text.split())


def chunks_of(text: str, max_words: int, language: str = "english") -> list[tuple[str, bool]]:
    chunker = Chunker(count_words, max_tokens=max_words, language=language)
    return [(c.text, c.is_mid_sentence) for c in chunker.split(text)]


@pytest.fixture(scope="module")
def preparer(sp_model_path: Path) -> TextPreparer:
    return TextPreparer.for_config(Tokenizer.from_file(sp_model_path), get_config("english"))


# ------------------------------------------------------------------------------ sentences
@pytest.mark.parametrize(
    ("language", "text", "sentences"),
    [
        ("english", "Hi there. How are you? Fine!", ["Hi there.", "How are you?", "Fine!"]),
        ("english", "Dr. Smith arrived. He sat.", ["Dr. Smith arrived.", "He sat."]),
        ("english", "Mr. and Mrs. Jones met Ms. Lee.", ["Mr. and Mrs. Jones met Ms. Lee."]),
        ("english", "Apples, pears, etc. are fruit.", ["Apples, pears, etc. are fruit."]),
        ("english", "Use e.g. this or i.e. that. Ok.", ["Use e.g. this or i.e. that.", "Ok."]),
        ("english", "Cats vs. dogs. Go.", ["Cats vs. dogs.", "Go."]),
        ("english", "Pi is 3.14 today. Yes.", ["Pi is 3.14 today.", "Yes."]),
        ("english", "It costs 1,000.50 dollars. Ok.", ["It costs 1,000.50 dollars.", "Ok."]),
        ("english", "J. K. Rowling wrote it. Yes.", ["J. K. Rowling wrote it.", "Yes."]),
        ("english", "The U.S. Army left. Ok.", ["The U.S. Army left.", "Ok."]),
        ("english", "Wait... what?! Really.", ["Wait...", "what?!", "Really."]),
        ("english", "It ends… Then more.", ["It ends…", "Then more."]),
        ("english", 'He said "stop." Then left.', ['He said "stop."', "Then left."]),
        ("english", "(It was late.) We left.", ["(It was late.)", "We left."]),
        ("english", "Visit example.com today. Ok.", ["Visit example.com today.", "Ok."]),
        ("english", "Am 3. Mai.", ["Am 3.", "Mai."]),
        ("english", "no end mark", ["no end mark"]),
        ("english", "Title\nBody text here.", ["Title.", "Body text here."]),
        ("english", "Steps:\n1 go\n2 stop", ["Steps.", "1 go.", "2 stop"]),
        ("english", "a wrapped\nline here.", ["a wrapped line here."]),
        ("english", "Done.\n\nNext part.", ["Done.", "Next part."]),
        ("french", "M. Dupont est là. Il part.", ["M. Dupont est là.", "Il part."]),
        ("french", "Mme. Curie et Mlle. Roux. Oui.", ["Mme. Curie et Mlle. Roux.", "Oui."]),
        ("french", "Voir p. 12 et vol. 3. Merci.", ["Voir p. 12 et vol. 3.", "Merci."]),
        ("german", "Wir essen z.B. Äpfel. Gut.", ["Wir essen z.B. Äpfel.", "Gut."]),
        ("german", "Äpfel, Birnen usw. sind gut. Ja.", ["Äpfel, Birnen usw. sind gut.", "Ja."]),
        ("german", "Dr. Müller kam am 3. Mai. Gut.", ["Dr. Müller kam am 3. Mai.", "Gut."]),
        (
            "spanish",
            "La Sra. García y el Sr. Pérez. Bien.",
            ["La Sra. García y el Sr. Pérez.", "Bien."],
        ),
        (
            "italian",
            "Il Sig. Rossi e il Dott. Bianchi. Ciao.",
            ["Il Sig. Rossi e il Dott. Bianchi.", "Ciao."],
        ),
        ("portuguese", "O Sr. Silva e a Dra. Costa. Oi.", ["O Sr. Silva e a Dra. Costa.", "Oi."]),
        ("dutch", "Dhr. Jansen en mevr. Smit. Goed.", ["Dhr. Jansen en mevr. Smit.", "Goed."]),
        ("klingon", "Dr. Who. Ok.", ["Dr. Who.", "Ok."]),  # unknown language: English table
    ],
)
def test_sentences(language: str, text: str, sentences: list[str]) -> None:
    assert Chunker(count_words, language=language).sentences(text) == sentences


# -------------------------------------------------------------------------- cutting rules
@pytest.mark.parametrize(
    ("text", "max_words", "expected"),
    [
        # Short sentences merge greedily up to the limit; flags stay False.
        ("A b. C d. E f.", 4, [("A b. C d.", False), ("E f.", False)]),
        ("Hi there. How are you? Fine.", 10, [("Hi there. How are you? Fine.", False)]),
        # Clause marks: commas, semicolons, colons; grouped greedily.
        (
            "one two, three four; five six: seven eight",
            4,
            [("one two, three four;", False), ("five six: seven eight", True)],
        ),
        # Spaced dashes and attached em/en dashes are clause cuts; hyphens are not.
        ("one two three - four five six", 4, [("one two three -", False), ("four five six", True)]),
        ("one two three— four five six", 4, [("one two three—", False), ("four five six", True)]),
        ("one two three– four five six", 4, [("one two three–", False), ("four five six", True)]),
        (
            "well-known self-driving long-term cars",
            3,
            [("well-known self-driving", False), ("long-term cars", True)],
        ),
        # A comma between digits is not a clause cut.
        ("add 1, 2 and 3 now", 4, [("add 1, 2 and", False), ("3 now", True)]),
        ("add up, 2 and 3 now", 4, [("add up,", False), ("2 and 3 now", True)]),
        # An overlong clause is cut at its own words, not joined to the clause before.
        ("add up, 2 and 3 now", 3, [("add up,", False), ("2 and", True), ("3 now", True)]),
        # Word cuts; a lone trailing word takes one word from the piece before.
        ("one two three four five", 4, [("one two three", False), ("four five", True)]),
        ("one two three four five six", 4, [("one two three four", False), ("five six", True)]),
        # ... but never across a clause mark.
        ("one two three, four", 3, [("one two three,", False), ("four", True)]),
        # Mid-sentence flags: only chunks that start inside a sentence.
        (
            "one two three four five six. Seven eight.",
            4,
            [("one two three four", False), ("five six. Seven eight.", True)],
        ),
        ("", 4, []),
        ("   \n\t ", 4, []),
    ],
)
def test_cutting_rules(text: str, max_words: int, expected: list[tuple[str, bool]]) -> None:
    assert chunks_of(text, max_words) == expected


def test_first_sentence_alone() -> None:
    chunker = Chunker(count_words, max_tokens=10)
    text = "Hi. How are you? Fine."
    assert [c.text for c in chunker.split(text)] == ["Hi. How are you? Fine."]
    alone = chunker.split(text, first_sentence_alone=True)
    assert [c.text for c in alone] == ["Hi.", "How are you? Fine."]


def test_very_long_word_is_cut_to_fit(preparer: TextPreparer) -> None:
    word = "Supercalifragilisticexpialidocious" * 12
    chunks = preparer.chunker.split(f"It is {word} indeed.")
    assert len(chunks) > 1
    assert "".join(c.text for c in chunks).replace(" ", "") == f"Itis{word}indeed."
    for chunk in chunks:
        assert preparer.prepare(chunk.text, is_mid_sentence=chunk.is_mid_sentence).num_tokens <= 50


def test_streaming_never_inserts_spaces_into_a_cut_word(preparer: TextPreparer) -> None:
    word = "x" * 600
    text = f"Start here {word} and then some more words until the end of it all."
    stream = StreamingChunker(preparer.chunker, lambda t, final: preparer.clean(t, final=final))
    chunks: list[TextChunk] = []
    for i in range(0, len(text), 5):
        chunks += stream.push(text[i : i + 5])
    chunks += stream.flush()
    assert not any("x x" in c.text for c in chunks)
    assert "".join(c.text for c in chunks).count("x") == 600
    assert all(c.is_mid_sentence for c in chunks[1:])


# ----------------------------------------------------------------------- size properties
def _squash(text: str) -> str:
    """Non-blank characters, ignoring what a line break may turn into a full stop."""
    return re.sub(r"[\s.,;:\-–—]", "", text)


def _check_chunks(preparer: TextPreparer, cleaned: str, chunks: list[TextChunk]) -> None:
    assert _squash("".join(c.text for c in chunks)) == _squash(cleaned)
    for chunk in chunks:
        if not any(c.isalnum() for c in chunk.text):
            continue  # bare punctuation: the preparer skips it (nothing to say)
        prepared = preparer.prepare(chunk.text, is_mid_sentence=chunk.is_mid_sentence)
        assert prepared.num_tokens <= MAX_TOKENS_PER_CHUNK, chunk


_TEXT = st.lists(
    st.one_of(
        st.sampled_from(
            [
                " ",
                " ",
                " ",
                ". ",
                ", ",
                "; ",
                ": ",
                "! ",
                "? ",
                " - ",
                " — ",
                "\n",
                "... ",
                "Dr. ",
                "3.14",
                "1,000",
                "e.g. ",
                "J. ",
                '"',
                "(",
                ")",
                "😀",
            ]
        ),
        st.text("abcdefghijklmnopqrstuvwxyzéàü", min_size=1, max_size=12),
        st.text("ABCXYZ0123456789", min_size=1, max_size=4),
    ),
    max_size=120,
).map("".join)


@settings(max_examples=60, deadline=None)
@given(_TEXT)
def test_chunks_fit_and_keep_every_word(preparer: TextPreparer, text: str) -> None:
    cleaned = preparer.clean(text)
    _check_chunks(preparer, cleaned, preparer.chunker.split(cleaned))


@settings(max_examples=40, deadline=None)
@given(_TEXT, st.randoms(use_true_random=False))
# one overlong word at a sentence start: its first slice is capitalized and punctuated
@example(text='éaa3.141,000"""aaaaaaaaaaaaaaaaaaaaaaaaaaaa000000', rng=random.Random(0))
def test_streaming_fits_and_keeps_every_word(
    preparer: TextPreparer, text: str, rng: random.Random
) -> None:
    stream = StreamingChunker(preparer.chunker, lambda t, final: preparer.clean(t, final=final))
    chunks: list[TextChunk] = []
    position = 0
    while position < len(text):
        step = rng.randint(1, 8)
        chunks += stream.push(text[position : position + step])
        position += step
    chunks += stream.flush()
    _check_chunks(preparer, preparer.clean(text), chunks)


def _long_texts() -> dict[str, str]:
    rng = random.Random(7)
    words = str.split("the quick brown fox jumps over a lazy dog while singing songs")

    def sentence() -> str:
        body = " ".join(rng.choice(words) for _ in range(rng.randint(3, 40)))
        if rng.random() < 0.5:
            body = body.replace(" over ", ", over ").replace(" while ", " — while ")
        return body.capitalize() + rng.choice([".", "!", "?"])

    prose = ""
    while len(prose) < 10_000:
        prose += sentence() + " "
    return {
        "prose": prose[:10_000],
        "no_punctuation": " ".join(rng.choice(words) for _ in range(2000))[:10_000],
        "one_word": "x" * 10_000,
        "commas": ", ".join(rng.choice(words) for _ in range(2000))[:10_000],
        "emoji": " ".join(rng.choice([*words, "😀", "🎉👍🏽"]) for _ in range(2000))[:10_000],
    }


@pytest.mark.parametrize("kind", ["prose", "no_punctuation", "one_word", "commas", "emoji"])
def test_ten_thousand_characters(preparer: TextPreparer, kind: str) -> None:
    text = _long_texts()[kind]
    cleaned = preparer.clean(text)
    chunks = preparer.chunker.split(cleaned)
    _check_chunks(preparer, cleaned, chunks)
    # Streaming in LLM-sized pieces gives chunks under the limit too.
    stream = StreamingChunker(preparer.chunker, lambda t, final: preparer.clean(t, final=final))
    streamed: list[TextChunk] = []
    for i in range(0, len(text), 17):
        streamed += stream.push(text[i : i + 17])
    streamed += stream.flush()
    _check_chunks(preparer, cleaned, streamed)


# ---------------------------------------------------------------------------- streaming
def test_stream_releases_first_sentence_as_soon_as_it_is_certain() -> None:
    stream = StreamingChunker(Chunker(count_words, max_tokens=50))
    assert stream.push("Hello there") == []
    assert stream.push(".") == []  # could still be "there.." or followed by a quote
    assert stream.push(" How") == [TextChunk("Hello there.", False)]
    assert stream.push(" are you? I am") == [TextChunk("How are you?", False)]
    assert stream.push(" fine. Really fine. And") == [TextChunk("I am fine. Really fine.", False)]
    assert stream.flush() == [TextChunk("And", False)]
    assert stream.flush() == []


def test_stream_waits_on_abbreviations_and_decimals() -> None:
    stream = StreamingChunker(Chunker(count_words, max_tokens=50))
    assert stream.push("Dr. Smith paid 3.") == []
    assert stream.push("50 dollars. ") == [TextChunk("Dr. Smith paid 3.50 dollars.", False)]


def test_stream_line_break_needs_the_next_line() -> None:
    stream = StreamingChunker(Chunker(count_words, max_tokens=50))
    assert stream.push("Title\n") == []
    assert stream.push("Body") == [TextChunk("Title.", False)]
    assert stream.push(" text\ncontinued here") == []
    assert stream.flush() == [TextChunk("Body text continued here", False)]


def test_stream_cuts_an_overlong_open_sentence() -> None:
    stream = StreamingChunker(Chunker(count_words, max_tokens=4))
    released = stream.push("one two three four five six seven eight nine ten eleven twelve ")
    # Three pieces' worth without an end in sight: all but the last two go now.
    assert released == [TextChunk("one two three four", False)]
    assert stream.pending_text.startswith("five six")
    rest = stream.push("thirteen.") + stream.flush()
    assert rest == [
        TextChunk("five six seven eight", True),
        TextChunk("nine ten eleven", True),
        TextChunk("twelve thirteen.", True),
    ]


def test_stream_after_flush_starts_a_new_first_sentence() -> None:
    stream = StreamingChunker(Chunker(count_words, max_tokens=50))
    assert stream.push("One. Two. Three") == [TextChunk("One.", False), TextChunk("Two.", False)]
    assert stream.flush() == [TextChunk("Three", False)]
    assert stream.push("Four. Five. Six. ") == [
        TextChunk("Four.", False),
        TextChunk("Five. Six.", False),
    ]


def test_stream_matches_batch_for_whole_text(preparer: TextPreparer) -> None:
    text = "First sentence here. Second one, with a clause. Third! And a fourth?"
    stream = StreamingChunker(preparer.chunker)
    # Every end is certain once a blank follows the last mark: the same chunks as a batch
    # split with the first sentence alone.
    assert stream.push(text + " ") + stream.flush() == preparer.chunker.split(
        text, first_sentence_alone=True
    )
