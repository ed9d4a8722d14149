"""Pipecat ``Language`` values → PocketTTS packs: the service's view of the language registry.

The facts and the one resolver of language and pack names live in ``engine.model.languages``;
this module only speaks Pipecat's ``Language`` type. Regional variants resolve through their
base code, so ``Language.PT_BR`` speaks with the ``portuguese`` pack (its text read as
Brazilian) and ``Language.EN_GB`` with ``english``.
"""

from __future__ import annotations

from pipecat.transcriptions.language import Language

from ..engine import LANGUAGES, config_language_code, find_language, is_config_reference

#: One pack per spoken language (the registry's defaults: the 6-layer distilled models, fast
#: enough for real time on a CPU). The 24-layer variants (``french_24l``...) go by pack name.
LANGUAGE_TO_PACK: dict[Language, str] = {
    Language(info.code): info.default_pack for info in LANGUAGES
}


def language_to_pack(language: Language) -> str | None:
    """The pack speaking ``language`` (regional variants by base code), or None."""
    info = find_language(language)
    return None if info is None else info.default_pack


def pack_iso_code(pack: str, stated: dict[str, str] | None = None) -> str:
    """ISO 639-1 code of the language a pack speaks.

    Args:
        pack: a pack name ("english_7m_2026-10", an upstream config's path or URL).
        stated: codes callers stated for upstream configs, by pack (``stated_language``).

    Returns:
        The pack's language code ("en"); an upstream config's: the stated one, else what its
        names tell ("…/czech.yaml": "cs"); "en" when nothing tells a language.
    """
    info = find_language(pack)
    if info is not None:
        return info.code
    if stated and pack in stated:
        return stated[pack]
    return (config_language_code(pack) if is_config_reference(pack) else None) or "en"


def stated_language(language: object, pack: str) -> dict[str, str]:
    """The language a caller states for an upstream config.

    Args:
        language: the constructor's ``language`` (a Pipecat ``Language`` states one).
        pack: the pack the settings name (the ``model`` setting wins over ``language``).

    Returns:
        {pack: code} when ``pack`` is an upstream config and ``language`` a ``Language``, else
        {}.
    """
    if not isinstance(language, Language) or not is_config_reference(pack):
        return {}
    return {pack: str(language.value).split("-", 1)[0].lower()}


def config_speaks(language: object, pack: str, stated: dict[str, str]) -> bool:
    """Whether an upstream config speaks a Pipecat ``Language``.

    Args:
        language: a settings value (only a ``Language`` can match).
        pack: the pack in use.
        stated: codes callers stated for upstream configs (``stated_language``).

    Returns:
        True when ``pack`` is an upstream config whose language has ``language``'s base code.
    """
    if not isinstance(language, Language) or not is_config_reference(pack):
        return False
    return pack_iso_code(pack, stated) == str(language.value).split("-", 1)[0].lower()


def pack_default_voice(pack: str) -> str | None:
    """The voice a pack's language speaks with by default ("english" → "alba"); None when
    the name tells no language (a custom pack: its voices are known once it is loaded)."""
    info = find_language(pack)
    return None if info is None else info.default_voice
