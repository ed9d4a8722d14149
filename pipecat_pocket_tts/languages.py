"""Pipecat ``Language`` values ⇄ PocketTTS language packs.

A pack is a model config name of the engine registry (``english``, ``french_24l``,
``english_7m_2026-10``...). Regional variants resolve through their base code, so
``Language.PT_BR`` speaks with the ``portuguese`` pack and ``Language.EN_GB`` with ``english``.
"""

from __future__ import annotations

from pipecat.transcriptions.language import Language

from .engine.config import DEFAULT_PACKS, config_names
from .engine.errors import UnknownLanguageError
from .engine.text.normalize import resolve_language

# One pack per spoken language (the engine's defaults: the 6-layer distilled models, fast enough
# for real time on a CPU). The 24-layer variants (``french_24l``...) are chosen by pack name.
LANGUAGE_TO_PACK: dict[Language, str] = {
    Language(code): pack for code, pack in DEFAULT_PACKS.items()
}


def language_to_pack(language: Language) -> str | None:
    """The pack speaking ``language`` (regional variants by base code), or None."""
    pack = LANGUAGE_TO_PACK.get(language)
    if pack is not None:
        return pack
    base = str(language).split("-")[0].lower()
    try:
        return LANGUAGE_TO_PACK.get(Language(base))
    except ValueError:
        return None


def resolve_pack(language: Language | str, *, custom_pack: bool = False) -> str:
    """Turn a Pipecat ``Language``, a language code ("pt-BR") or a pack name into a pack name.

    ``custom_pack`` accepts any name (a ``model_dir`` with its own ``config.json``).
    Raises ``UnknownLanguageError`` naming the supported values otherwise.
    """
    if isinstance(language, Language):
        pack = language_to_pack(language)
        if pack is None:
            raise UnknownLanguageError(_unsupported_message(str(language)))
        return pack
    if not isinstance(language, str) or not language.strip():
        raise UnknownLanguageError(_unsupported_message(repr(language)))
    name = language.strip()
    if name in config_names() or custom_pack:
        return name
    try:
        code = Language(name)
    except ValueError:
        code = None
    if code is not None and (pack := language_to_pack(code)) is not None:
        return pack
    raise UnknownLanguageError(_unsupported_message(name))


def pack_iso_code(pack: str) -> str:
    """ISO 639-1 code of the language a pack speaks ("english_7m_2026-10" → "en"; "en" when
    the name tells no language)."""
    try:
        return resolve_language(pack).split("-")[0]
    except UnknownLanguageError:
        return "en"


def text_variant(language: Language | str) -> str | None:
    """The regional variant the text normalizer should read (``Language.PT_BR`` → "pt-BR").

    None when the language is a pack name or carries no variant of its own: the pack's
    language is read then.
    """
    if isinstance(language, str) and language.strip() in config_names():
        return None
    try:
        code = resolve_language(language)
    except UnknownLanguageError:
        return None
    return code if "-" in code else None


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
