"""The spoken languages and how a caller names one ("english_24l", "fr", "pt-BR", Language.DE)."""

from __future__ import annotations

from functools import cache

from ....errors import UnknownLanguageError
from ....model.languages import codes, text_code
from ..language import SpokenLanguage
from .de import German
from .en import English
from .es import Spanish
from .fr import French
from .it import Italian
from .nl import Dutch
from .pt import BrazilianPortuguese, Portuguese

_CLASSES: dict[str, type[SpokenLanguage]] = {
    cls.code: cls
    for cls in (English, German, Spanish, French, Italian, Portuguese, BrazilianPortuguese, Dutch)
}

SUPPORTED_LANGUAGES: tuple[str, ...] = codes()


def language_code(name: object) -> str:
    """The code of the spoken language ``name`` means ("english_7m_2026-10" → "en", "pt-BR").

    Accepts whatever the language registry (``engine.languages``) reads: pack / model config
    names, ISO 639-1 codes with an optional region ("en-US", "pt_BR"), English and native
    language names, and Pipecat ``Language`` values. Raises ``UnknownLanguageError`` otherwise.
    """
    try:
        return text_code(name)
    except UnknownLanguageError as exc:
        raise UnknownLanguageError(
            f"no text normalization for language {name!r}: {exc}; or pass normalize=False to "
            "speak the text as written"
        ) from None


@cache
def spoken_language(code: str) -> SpokenLanguage:
    """The one shared ``SpokenLanguage`` instance for a code returned by ``language_code``."""
    return _CLASSES[code]()
