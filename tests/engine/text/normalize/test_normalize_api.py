"""The normalization API: languages, lexicon, <sub> tags, errors and streaming behaviour."""

from __future__ import annotations

import logging
import time

import pytest

from pipecat_pocket_tts.engine.errors import LexiconError, PocketTTSError, UnknownLanguageError
from pipecat_pocket_tts.engine.text.normalize import (
    SUPPORTED_LANGUAGES,
    TextNormalizer,
    language_code,
    normalize_text,
)
from pipecat_pocket_tts.engine.text.spoken.languages import spoken_language
from pipecat_pocket_tts.engine.text.spoken.pipeline import SpokenForm


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("english", "en"),
        ("english_7m_2026-10", "en"),
        ("english_2026-04_24l", "en"),
        ("french_24l", "fr"),
        ("german", "de"),
        ("spanish_24l", "es"),
        ("italian", "it"),
        ("portuguese", "pt"),
        ("dutch_24l", "nl"),
        ("en", "en"),
        ("EN-us", "en"),
        ("fr_FR", "fr"),
        ("pt-BR", "pt-BR"),
        ("pt_br", "pt-BR"),
        ("Deutsch", "de"),
    ],
)
def test_language_names(name: str, code: str) -> None:
    assert language_code(name) == code


def test_pipecat_language_values() -> None:
    from pipecat.transcriptions.language import Language

    assert language_code(Language.DE) == "de"
    assert language_code(Language.EN_US) == "en"
    assert language_code(Language.PT_BR) == "pt-BR"


@pytest.mark.parametrize("name", ["klingon", "zh", "", "xx-YY"])
def test_unknown_language_raises_named_error(name: str) -> None:
    with pytest.raises(UnknownLanguageError, match="normalize=False"):
        normalize_text("5", name)
    with pytest.raises(PocketTTSError):
        TextNormalizer(name)


def test_supported_languages() -> None:
    assert set(SUPPORTED_LANGUAGES) == {"en", "de", "es", "fr", "it", "pt", "nl"}


def test_lexicon_whole_words_and_case_rules() -> None:
    norm = TextNormalizer("en", lexicon={"NVIDIA": "en-vidia", "gif": "jif", "US": "you ess"})
    assert norm("NVIDIA and NVIDIAS") == "en-vidia and NVIDIAS"
    assert norm("nvidia stays") == "nvidia stays"  # a key with capitals matches exactly
    assert norm("A GIF, a gif. Gif!") == "A jif, a jif. Jif!"
    assert norm("Tell us about the US.") == "Tell us about the you ess."


def test_lexicon_runs_first_and_is_protected() -> None:
    norm = TextNormalizer("en", lexicon={"R2-D2": "artoo detoo", "Dr.": "Drive"})
    assert norm("R2-D2 lives at 5 Dr.") == "artoo detoo lives at five Drive"


def test_lexicon_longest_key_wins() -> None:
    norm = TextNormalizer("en", lexicon={"New": "new", "New York": "the big apple"})
    assert norm("New York is big.") == "the big apple is big."


def test_lexicon_errors() -> None:
    with pytest.raises(LexiconError):
        TextNormalizer("en", lexicon={"ok": 3})  # type: ignore[dict-item]
    with pytest.raises(LexiconError):
        TextNormalizer("en", lexicon={"  ": "blank"})
    with pytest.raises(LexiconError):
        normalize_text("x", "en", lexicon=["not", "a", "mapping"])  # type: ignore[arg-type]


def test_sub_alias_tags() -> None:
    text = (
        "Made by <sub alias=\"en-vidia\">NVIDIA</sub> in <sub alias='twenty twenty six'>2026</sub>."
    )
    assert normalize_text(text, "en") == "Made by en-vidia in twenty twenty six."
    # the alias is kept verbatim even where the rules would rewrite it
    assert normalize_text('<sub alias="C3PO & R2">droids</sub>', "en") == "C3PO & R2"


def test_lexicon_through_normalize_text_is_cached() -> None:
    lexicon = {"SQL": "sequel"}
    assert normalize_text("SQL 2x", "en", lexicon=lexicon) == "sequel two times"
    assert normalize_text("SQL", "en", lexicon=lexicon) == "sequel"


def test_non_string_text_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        normalize_text(None, "en")  # type: ignore[arg-type]


def test_empty_and_whitespace() -> None:
    assert normalize_text("", "en") == ""
    assert normalize_text("   ", "en") == "   "
    assert normalize_text(" 👋 ", "en") == " "


def test_fragments_keep_their_edge_whitespace() -> None:
    # the service may normalize token fragments; edges must survive so fragments join
    parts = ["It costs ", "$5 ", "today."]
    assert "".join(normalize_text(p, "en") for p in parts) == "It costs five dollars today."


def test_sentence_by_sentence_equals_whole_text() -> None:
    sentences = [
        "Dr. Smith paid $12.50 on Nov 30, 2026.",
        "Apples, pears, etc.",
        "The meeting is at 3:45 pm.",
        "Growth was 15%, e.g. in 2024.",
        "Call 555-123-4567!",
    ]
    whole = normalize_text(" ".join(sentences), "en")
    assert whole == " ".join(normalize_text(s, "en") for s in sentences)


def test_sentence_ends_are_kept() -> None:
    for text in ["It costs $5.", "It is 3.5.", "Meet at 3 p.m.", "Apples etc.", "Wow 🎉!"]:
        assert normalize_text(text, "en")[-1] in ".!?"


def test_output_is_stable_under_a_second_pass() -> None:
    text = "On 2026-11-30 at 15:45, Dr. Who paid €1,250.50 (15% off) for 3 kg & 2 km."
    once = normalize_text(text, "en")
    assert normalize_text(once, "en") == once


def test_normalizer_is_reusable_and_repr() -> None:
    norm = TextNormalizer("fr", lexicon={"SNCF": "ès ène cé èf"})
    assert norm.language == "fr"
    assert norm("La SNCF à 15h.") == "La ès ène cé èf à quinze heures."
    assert norm("La SNCF à 15h.") == "La ès ène cé èf à quinze heures."
    assert "fr" in repr(norm)
    assert dict(norm.lexicon) == {"SNCF": "ès ène cé èf"}


def test_a_failing_rule_is_skipped_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    form = SpokenForm(spoken_language("en"))

    def broken(text: str) -> str:
        raise RuntimeError("boom")

    form.rules.insert(0, ("broken", broken))
    with caplog.at_level(logging.WARNING):
        assert form("It costs $5.") == "It costs five dollars."
    assert "broken" in caplog.text


def test_long_adversarial_inputs_cost_linear_time() -> None:
    """Unmatched markdown marks, digit runs and tags must not cost quadratic time.

    Judged by how the CPU time of this process grows from 1× to 4× the input (linear: ~4×,
    quadratic: ~16×), a ratio of two measurements side by side, not a wall-clock budget.
    """
    units = [
        ("1", 2_500),
        ("[", 1_250),
        ("](", 625),
        ("_a ", 875),
        ("*a ", 875),
        ("~", 2_500),
        ('<sub alias="', 500),
        ("+1 ", 875),
        ("a.", 1_250),
    ]
    norm = TextNormalizer("en")

    def cost(scale: int) -> float:
        start = time.process_time()
        for unit, count in units:
            for _ in range(3):
                assert isinstance(norm(unit * (count * scale)), str)
        return time.process_time() - start

    cost(1)  # warm caches and regexes
    small, large = min(cost(1) for _ in range(2)), min(cost(4) for _ in range(2))
    assert large < 10 * max(small, 1e-3)
