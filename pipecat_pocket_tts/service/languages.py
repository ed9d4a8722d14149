"""Pipecat ``Language`` values ⇄ PocketTTS language packs: a thin layer over the registry.

The facts live in ``engine.languages`` (one record per language) and the one name → pack
resolver is ``engine.config.resolve_config_name``; this module only speaks Pipecat's
``Language`` type. Regional variants resolve through their base code, so ``Language.PT_BR``
speaks with the ``portuguese`` pack (its text read as Brazilian) and ``Language.EN_GB`` with
``english``.
"""

from __future__ import annotations

from pipecat.transcriptions.language import Language

from ..engine.errors import UnknownLanguageError
from ..engine.model import languages as registry
from ..engine.model.config import config_names, resolve_config_name

#: One pack per spoken language (the registry's defaults: the 6-layer distilled models, fast
#: enough for real time on a CPU). The 24-layer variants (``french_24l``...) go by pack name.
LANGUAGE_TO_PACK: dict[Language, str] = {
    Language(info.code): info.default_pack for info in registry.LANGUAGES
}


def language_to_pack(language: Language) -> str | None:
    """The pack speaking ``language`` (regional variants by base code), or None."""
    info = registry.find_language(language)
    return None if info is None else info.default_pack


def resolve_pack(language: Language | str, *, custom_pack: bool = False) -> str:
    """Turn a Pipecat ``Language``, a language code ("pt-BR") or a pack name into a pack name.

    ``custom_pack`` accepts any name (a ``model_dir`` with its own ``config.json``).
    Raises ``UnknownLanguageError`` naming the supported values otherwise.
    """
    try:
        # a Language is never a custom pack name
        custom = custom_pack and not isinstance(language, Language)
        return resolve_config_name(language, custom=custom)
    except UnknownLanguageError:
        shown = str(language) if isinstance(language, Language) else repr(language)
        raise UnknownLanguageError(_unsupported_message(shown)) from None


def pack_iso_code(pack: str) -> str:
    """ISO 639-1 code of the language a pack speaks ("english_7m_2026-10" → "en"; "en" when
    the name tells no language, as a custom pack's may not)."""
    info = registry.find_language(pack)
    return "en" if info is None else info.code


def text_variant(language: Language | str) -> str | None:
    """The regional variant the text normalizer should read (``Language.PT_BR`` → "pt-BR").

    None when the language is a pack name or carries no variant of its own: the pack's
    language is read then.
    """
    if isinstance(language, str) and language.strip() in config_names():
        return None
    try:
        return registry.text_variant(language)
    except UnknownLanguageError:
        return None


def supported_languages() -> list[Language]:
    """The base Pipecat languages some pack speaks."""
    return list(LANGUAGE_TO_PACK)


def _unsupported_message(value: str) -> str:
    codes = ", ".join(f"Language.{lang.name}" for lang in LANGUAGE_TO_PACK)
    return (
        f"PocketTTS has no pack for language {value}. Use one of {codes} (regional variants "
        f"such as Language.PT_BR resolve by base code), or a pack name: "
        f"{', '.join(config_names())}."
    )
