"""Prompt preparation as upstream does it: cleanup, capitals, punctuation, padding, frames."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipecat_pocket_tts.engine.errors import EmptyTextError, PocketTTSError
from pipecat_pocket_tts.engine.model.config import TextOptions, get_config
from pipecat_pocket_tts.engine.text import (
    PreparedChunk,
    TextPreparer,
    TextStream,
    Tokenizer,
    max_frames_for,
)


@pytest.fixture(scope="module")
def tokenizer(tokenizer_json_path: Path) -> Tokenizer:
    return Tokenizer.from_file(tokenizer_json_path)


def preparer_for(tokenizer: Tokenizer, name: str) -> TextPreparer:
    return TextPreparer.for_config(tokenizer, get_config(name))


# Expected texts were checked against upstream pocket-tts 4.0.1's prepare_text_prompt with the
# same options (characters the test vocabulary lacks, such as '¿' or '»', differ by design).
@pytest.mark.parametrize(
    ("config", "text", "expected", "frames_after_eos"),
    [
        ("english", "hello world", "Hello world.", 5),
        ("english", "one two three four", "One two three four.", 5),
        ("english", "hello there my good friend", "Hello there my good friend.", 3),
        ("english", "Is it?", "Is it?", 5),
        ("english", "well, then,", "Well, then.", 5),
        ("english", "trailing colon:", "Trailing colon.", 5),
        ("english", "ends with a dash —", "Ends with a dash.", 3),  # the dash counts as a word
        ("english", "ends with ellipsis…", "Ends with ellipsis…", 5),
        ("english", 'He said "hi."', 'He said "hi."', 5),
        ("english", 'He said "hi"', 'He said "hi".', 5),
        ("english", "(parenthesis)", "(parenthesis).", 5),
        ("english", "3 apples", "3 apples.", 5),
        ("english", "  a \n\t b  ", "A b.", 5),
        ("english", "It’s fine", "It's fine.", 5),
        ("english", "semi; colon", "Semi; colon.", 5),
        ("english", "x", "X.", 5),
        ("english", "ß first", "ß first.", 5),  # upstream would write 'SS'
        ("english", ", leading comma here", "Leading comma here.", 5),
        ("english", "Hello 😀 world", "Hello world.", 5),
        ("english_2026-01", "Hi there", "        Hi there.", 5),
        ("english_2026-01", "one two three four", "        One two three four.", 5),
        ("english_2026-01", "one two three four five", "One two three four five.", 3),
        ("french", "l’été « chaud » : oui; non", "L'été chaud , oui, non.", 3),
        ("french", '"Salut?", dit-il', "Salut? dit-il.", 5),
        ("french", "il fait – beau", "Il fait , beau.", 5),
        ("german", "ja — nein; vielleicht", "Ja , nein, vielleicht.", 5),
        ("spanish", "¿Qué tal?", "Qué tal?", 5),
        ("spanish", "¡hola!", "Hola!", 5),
    ],
)
def test_prepare_matches_upstream_rules(
    tokenizer: Tokenizer, config: str, text: str, expected: str, frames_after_eos: int
) -> None:
    prepared = preparer_for(tokenizer, config).prepare(text)
    assert prepared.text == expected
    assert prepared.frames_after_eos == frames_after_eos
    assert prepared.is_mid_sentence is False


def test_mid_sentence_chunk_keeps_its_lowercase(tokenizer: Tokenizer) -> None:
    preparer = preparer_for(tokenizer, "english")
    prepared = preparer.prepare("and then we left", is_mid_sentence=True)
    assert prepared.text == "and then we left."
    assert prepared.is_mid_sentence is True
    assert preparer.prepare("and then we left").text == "And then we left."


def test_options_can_switch_steps_off(tokenizer: Tokenizer) -> None:
    options = TextOptions(capitalize_first_letter=False, append_terminal_punctuation=False)
    prepared = TextPreparer(tokenizer, options).prepare("hello world")
    assert prepared.text == "hello world"
    options = TextOptions(remove_semicolons=True)
    assert TextPreparer(tokenizer, options).prepare("a; b").text == "A, b."


@pytest.mark.parametrize("text", ["", "   ", "\n\t", "😀🎉", "\u200b", ", ;"])
def test_empty_text_raises(tokenizer: Tokenizer, text: str) -> None:
    with pytest.raises(EmptyTextError, match="empty") as info:
        preparer_for(tokenizer, "english").prepare(text)
    assert isinstance(info.value, ValueError) and isinstance(info.value, PocketTTSError)


def test_token_ids_and_frame_budget(tokenizer: Tokenizer) -> None:
    prepared = preparer_for(tokenizer, "english").prepare("The weather is nice today.")
    assert isinstance(prepared, PreparedChunk)
    assert prepared.token_ids.dtype == np.int64
    assert not prepared.token_ids.flags.writeable
    np.testing.assert_array_equal(prepared.token_ids, tokenizer.encode(prepared.text))
    n = prepared.num_tokens
    assert prepared.max_frames == math.ceil((n / 3 + 2) * 12.5)


@pytest.mark.parametrize(("tokens", "frames"), [(0, 25), (1, 30), (3, 38), (10, 67), (50, 234)])
def test_max_frames_for(tokens: int, frames: int) -> None:
    assert max_frames_for(tokens) == frames


def test_padding_counts_in_the_token_budget(tokenizer: Tokenizer, sp_model_path: Path) -> None:
    padded = preparer_for(tokenizer, "english_2026-01").prepare("Hi there")
    plain = preparer_for(tokenizer, "english").prepare("Hi there")
    # tokenizer.json (Metaspace): the eighth space becomes the word's own '▁' prefix.
    assert padded.num_tokens == plain.num_tokens + 7
    assert padded.max_frames > plain.max_frames
    # tokenizer.model adds its dummy prefix on top: one '▁' token per space.
    model = Tokenizer.from_file(sp_model_path)
    padded = preparer_for(model, "english_2026-01").prepare("Hi there")
    plain = preparer_for(model, "english").prepare("Hi there")
    assert padded.num_tokens == plain.num_tokens + 8


def test_frames_after_eos_overrides(tokenizer: Tokenizer) -> None:
    preparer = preparer_for(tokenizer, "english")
    assert preparer.prepare("hi", frames_after_eos=7).frames_after_eos == 7
    config = replace(get_config("english"), model_recommended_frames_after_eos=4)
    recommended = TextPreparer.for_config(tokenizer, config)
    assert recommended.prepare("hi").frames_after_eos == 4
    assert recommended.prepare("hi", frames_after_eos=1).frames_after_eos == 1


def test_clean_is_idempotent_and_keeps_line_breaks(tokenizer: Tokenizer) -> None:
    preparer = preparer_for(tokenizer, "french")
    text = "  « Bonjour » :  M. Dupont;\n\n  il est là 😀  "
    once = preparer.clean(text)
    assert once == "Bonjour , M. Dupont,\nil est là"
    assert preparer.clean(once) == once
    streaming = preparer.clean("il est là 😀", final=False)
    assert streaming.endswith("\x00") and preparer.clean(streaming + " oui") == "il est là oui"


def test_split_whole_pipeline(tokenizer: Tokenizer) -> None:
    preparer = preparer_for(tokenizer, "english")
    assert preparer.split("") == [] and preparer.split("  😀 ") == []
    text = (
        "Hello there! This is a much longer sentence that goes on, and on, and on, with many "
        "clauses in it; it should be cut somewhere sensible — probably at a clause mark, "
        "because it is far too long for one chunk of the model. Short one."
    )
    chunks = preparer.split(text)
    assert len(chunks) >= 3
    assert all(c.num_tokens <= 50 for c in chunks)
    assert chunks[0].is_mid_sentence is False
    assert any(c.is_mid_sentence for c in chunks)
    assert all(c.text[-1] in ".!?…" for c in chunks)
    said = " ".join(c.text for c in chunks).lower()
    for word in text.lower().replace("—", " ").split():
        assert word.strip(",;.!") in said


def test_stream_pipeline_releases_first_sentence_first(tokenizer: Tokenizer) -> None:
    stream = TextStream(preparer_for(tokenizer, "english"))
    pieces = ["Sure", "! I", " can", " help", " with", " that", ". Your", " table", " is", " set"]
    released = [stream.push(p) for p in pieces]
    assert released[2] == []
    first = next(r for r in released if r)
    assert [c.text for c in first] == ["Sure!"]
    assert [c.text for c in stream.flush()] == ["Your table is set."]
    all_texts = [c.text for r in released for c in r]
    assert all_texts == ["Sure!", "I can help with that."]


@settings(max_examples=80, deadline=None)
@given(
    st.sampled_from(["english", "french", "german", "spanish"]),
    st.lists(
        st.sampled_from(
            [
                "a",
                "Bc",
                " ",
                "  ",
                "\n",
                ".",
                ",",
                ";",
                ":",
                "?",
                "!",
                "…",
                "«",
                "»",
                '"',
                "’",
                "–",
                "—",
                "😀",
                "ﬁ",
                "\u200b",
                "\u00a0",
                "日",
                "¿",
                "(",
                ")",
            ]
        ),
        max_size=40,
    ).map("".join),
)
def test_clean_is_idempotent(tokenizer: Tokenizer, config: str, text: str) -> None:
    preparer = preparer_for(tokenizer, config)
    once = preparer.clean(text)
    assert preparer.clean(once) == once
    partial = preparer.clean(text, final=False)
    assert preparer.clean(partial, final=False) == partial
    assert preparer.clean(partial) == once


def _normalized_characters(preparer: TextPreparer, words: int) -> tuple[int, str]:
    """Characters the normalizer reads while one long sentence is streamed in 4-char pieces."""
    from pipecat_pocket_tts.engine.text.normalize import normalize_text

    read = [0]

    def counting(text: str, continues_line: bool) -> str:
        read[0] += len(text)
        return normalize_text(text, "en", continues_line=continues_line)

    names = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
    text = " ".join(names[i % len(names)] for i in range(words)) + ". The end. "
    stream = TextStream(preparer, counting)
    chunks = [c for i in range(0, len(text), 4) for c in stream.push(text[i : i + 4])]
    chunks += stream.flush()
    return read[0], " ".join(c.text for c in chunks)


def test_streamed_long_sentence_is_normalized_in_linear_work(tokenizer: Tokenizer) -> None:
    """Issue 14 #3: the unfinished sentence is not normalized again on every token."""
    preparer = preparer_for(tokenizer, "english")
    short, short_said = _normalized_characters(preparer, 300)
    long, long_said = _normalized_characters(preparer, 600)
    assert len(long_said.split()) == 600 + 2 and len(short_said.split()) == 300 + 2
    chars = len(" ".join(["alpha"] * 600))  # about the long text's length
    assert long < 2.3 * short  # twice the text, about twice the work (was ~4×)
    assert long < 40 * chars  # a bounded number of readings per character
