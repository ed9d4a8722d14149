"""Pipecat ``Language`` → PocketTTS pack, through the engine's one resolver."""

from __future__ import annotations

import pytest
from pipecat.transcriptions.language import Language

from pipecat_pocket_tts.engine.errors import UnknownLanguageError
from pipecat_pocket_tts.engine.model.config_registry import config_names
from pipecat_pocket_tts.engine.model.languages import pack_name, text_variant
from pipecat_pocket_tts.service.settings import (
    LANGUAGE_TO_PACK,
    language_to_pack,
    pack_iso_code,
)


@pytest.mark.parametrize(
    ("language", "pack"),
    [
        (Language.EN, "english"),
        (Language.EN_US, "english"),
        (Language.EN_GB, "english"),
        (Language.FR, "french"),
        (Language.FR_CA, "french"),
        (Language.DE, "german"),
        (Language.DE_AT, "german"),
        (Language.IT, "italian"),
        (Language.PT, "portuguese"),
        (Language.PT_BR, "portuguese"),
        (Language.ES, "spanish"),
        (Language.ES_MX, "spanish"),
        (Language.NL, "dutch"),
        (Language.NL_BE, "dutch"),
    ],
)
def test_languages_and_regional_variants_map_to_packs(language: Language, pack: str) -> None:
    assert language_to_pack(language) == pack
    assert pack_name(language) == pack


def test_every_mapped_pack_exists_in_the_registry() -> None:
    assert set(LANGUAGE_TO_PACK.values()) <= set(config_names())


@pytest.mark.parametrize(
    ("value", "pack"),
    [
        ("french_24l", "french_24l"),
        ("english_7m_2026-10", "english_7m_2026-10"),
        ("de-DE", "german"),
        ("pt", "portuguese"),
        (" english ", "english"),
    ],
)
def test_pack_names_and_codes_as_strings(value: str, pack: str) -> None:
    assert pack_name(value) == pack


@pytest.mark.parametrize("value", [Language.JA, "klingon", "", "ja-JP"])
def test_unsupported_languages_raise_a_clear_error(value: Language | str) -> None:
    assert language_to_pack(Language.JA) is None
    with pytest.raises(UnknownLanguageError, match=r"\(en, fr, .*french_24l"):
        pack_name(value)


def test_custom_pack_names_pass_when_a_model_dir_provides_them() -> None:
    assert pack_name("my_finetune", custom=True) == "my_finetune"
    with pytest.raises(UnknownLanguageError):  # a Language is never a custom pack's name
        pack_name(Language.JA, custom=True)


@pytest.mark.parametrize(
    ("value", "variant"),
    [(Language.PT_BR, "pt-BR"), ("brazilian", "pt-BR"), ("pt_BR", "pt-BR"), (Language.PT, None),
     (Language.EN_GB, None), ("portuguese", None), ("french_24l", None), ("my_finetune", None),
     (None, None)],
)  # fmt: skip
def test_text_variants_of_pipecat_languages_and_pack_names(value: object, variant: str) -> None:
    assert text_variant(value) == variant


@pytest.mark.parametrize(
    ("pack", "code"),
    [
        ("english", "en"),
        ("english_7m_2026-10", "en"),
        ("french_24l", "fr"),
        ("german", "de"),
        ("dutch_24l", "nl"),
        ("my_finetune", "en"),
    ],
)
def test_iso_code_of_a_pack(pack: str, code: str) -> None:
    assert pack_iso_code(pack) == code
