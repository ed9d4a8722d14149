"""The spoken languages and how a caller names one ("english_24l", "fr", "pt-BR", Language.DE)."""

from __future__ import annotations

from functools import cache

from ....errors import UnknownLanguageError
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

# Pack names (the part of a model config name before the first "_") and native names.
_NAMES = {
    "english": "en",
    "german": "de",
    "deutsch": "de",
    "spanish": "es",
    "español": "es",
    "espanol": "es",
    "french": "fr",
    "français": "fr",
    "francais": "fr",
    "italian": "it",
    "italiano": "it",
    "portuguese": "pt",
    "português": "pt",
    "portugues": "pt",
    "brazilian": "pt-BR",
    "dutch": "nl",
    "nederlands": "nl",
}

SUPPORTED_LANGUAGES: tuple[str, ...] = ("en", "de", "es", "fr", "it", "pt", "nl")


def language_code(name: object) -> str:
    """The code of the spoken language ``name`` means ("english_7m_2026-10" → "en").

    Accepts pack / model config names, ISO 639-1 codes with an optional region ("en-US",
    "pt_BR"), English and native language names, and Pipecat ``Language`` values.
    Raises ``UnknownLanguageError`` for anything else.
    """
    raw = str(getattr(name, "value", name)).strip()
    key = raw.lower()
    head = key.split("_", 1)[0]
    if head in _NAMES:
        return _NAMES[head]
    parts = key.replace("_", "-").split("-")
    base = parts[0]
    if base == "pt" and len(parts) > 1 and parts[1] == "br":
        return "pt-BR"
    if base in SUPPORTED_LANGUAGES:
        return base
    raise UnknownLanguageError(
        f"no text normalization for language {raw!r}; use a pack name (english, french_24l, ...) "
        f"or one of the codes {', '.join(SUPPORTED_LANGUAGES)} (pt-BR for Brazilian Portuguese), "
        "or pass normalize=False to speak the text as written"
    )


@cache
def spoken_language(code: str) -> SpokenLanguage:
    """The one shared ``SpokenLanguage`` instance for a code returned by ``language_code``."""
    return _CLASSES[code]()
