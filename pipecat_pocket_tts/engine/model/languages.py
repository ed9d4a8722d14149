"""The one registry of spoken languages: one record per language, read by everything else.

A caller may name a language in many ways — an ISO code with or without a region ("en",
"en-US", "pt_BR"), its English or native name ("English", "Deutsch"), a pack / model config
name ("french_24l", "english_7m_2026-10") or a Pipecat ``Language`` value. This module is
the one resolver of such names, for the engine, the service and the CLI:

- ``language_info``: the language's record (``find_language``: the same, or None);
- ``pack_name``: the pack (model config) meant: a config name as it is, a language its
  ``default_pack``;
- ``text_code`` / ``text_variant``: what the text normalizer reads ("pt-BR" for Brazilian text);
- ``native_language``: the language a catalogue voice was recorded in (``LITERARY_VOICES``:
  English; ``LanguageInfo.native_voices``: each language's own).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UnknownLanguageError
from .config_reference import coreml_pack_reference, is_config_reference, is_pack_reference
from .config_registry import config_names

#: The 21 "literary" voices of the published catalogue, recorded in English. Every language
#: pack carries all of them (and the native voices below), each with that language's own
#: embeddings. Source: FluidInference's PocketTTS packs of kyutai's voices, as recorded in
#: FluidAudio's PocketTTS documentation ("21 English-trained literary voices").
LITERARY_VOICES: tuple[str, ...] = (
    "alba",
    "anna",
    "azelma",
    "bill_boerst",
    "caro_davy",
    "charles",
    "cosette",
    "eponine",
    "eve",
    "fantine",
    "george",
    "jane",
    "javert",
    "jean",
    "marius",
    "mary",
    "michael",
    "paul",
    "peter_yearsley",
    "stuart_bell",
    "vera",
)


@dataclass(frozen=True)
class LanguageInfo:
    """The facts of one spoken language."""

    # ISO 639-1, such as "en".
    code: str
    # The English name, such as "English".
    name: str
    # How model config names begin: "english" (english_24l, english_7m_2026-10, …).
    key: str
    # The pack used when only the language is named.
    default_pack: str
    # The voice used when none is given.
    default_voice: str
    # Other names in lower case, such as native spellings.
    aliases: tuple[str, ...] = ()
    # Regional text variants the normalizer reads ("pt-BR").
    variants: tuple[str, ...] = ()
    # The catalogue's voices recorded in this language.
    native_voices: tuple[str, ...] = ()
    #: Whether the published catalogue records ``native_voices`` (False: only upstream's
    #: voice list does, unverified).
    natives_published: bool = True


LANGUAGES: tuple[LanguageInfo, ...] = (
    LanguageInfo("en", "English", "english", "english", "alba", native_voices=LITERARY_VOICES),
    LanguageInfo(
        "fr",
        "French",
        "french",
        "french",
        "estelle",
        ("français", "francais"),
        native_voices=("estelle",),
    ),
    LanguageInfo(
        "de", "German", "german", "german", "juergen", ("deutsch",), native_voices=("juergen",)
    ),
    LanguageInfo(
        "it",
        "Italian",
        "italian",
        "italian",
        "giovanni",
        ("italiano",),
        native_voices=("giovanni",),
    ),
    LanguageInfo(
        "pt",
        "Portuguese",
        "portuguese",
        "portuguese",
        "rafael",
        ("português", "portugues", "brazilian"),
        ("pt-BR",),
        native_voices=("rafael",),
    ),
    LanguageInfo(
        "es",
        "Spanish",
        "spanish",
        "spanish",
        "lola",
        ("español", "espanol"),
        native_voices=("lola",),
    ),
    # Dutch is in upstream's list (voice daan), not in the published catalogue: unverified.
    LanguageInfo(
        "nl",
        "Dutch",
        "dutch",
        "dutch",
        "daan",
        ("nederlands",),
        native_voices=("daan",),
        natives_published=False,
    ),
)

#: Every voice name of the catalogue: the literary voices, then each language's own.
CATALOGUE_VOICES: tuple[str, ...] = tuple(
    dict.fromkeys(voice for info in LANGUAGES for voice in info.native_voices)
)
#: The 26 names of the published catalogue (FluidInference's packs ship exactly these).
PUBLISHED_VOICES: tuple[str, ...] = tuple(
    dict.fromkeys(v for info in LANGUAGES if info.natives_published for v in info.native_voices)
)
_NATIVE_LANGUAGE = {voice: info for info in LANGUAGES for voice in info.native_voices}

_BY_CODE = {info.code: info for info in LANGUAGES}
_BY_NAME = {
    spelling: info
    for info in LANGUAGES
    for spelling in (info.key, info.name.lower(), *info.aliases)
}
#: Names that mean a regional variant by themselves.
_VARIANT_NAMES = {"brazilian": "pt-BR"}


def _raw(value: object) -> str:
    """The text of a language value (Pipecat ``Language`` members carry it in ``.value``)."""
    # Enum members (Pipecat's Language) give their value.
    raw = value.value if hasattr(value, "value") else value
    if not isinstance(raw, str):
        raise UnknownLanguageError(f"a language is a name or code, not {type(value).__name__}")
    return raw.strip()


def find_language(value: object) -> LanguageInfo | None:
    """The language ``value`` names, or None (see the module docstring for the forms; an
    upstream config's path or URL names none here: ``upstream_config.config_language_code``)."""
    coreml = coreml_pack_reference(value)
    # A CoreML pack folder speaks its config's language.
    if coreml is not None:
        value = coreml.pack
    elif is_config_reference(value):
        return None
    key = _raw(value).lower()
    head = key.split("_", 1)[0]
    if head in _BY_NAME:
        return _BY_NAME[head]
    return _BY_CODE.get(key.replace("_", "-").split("-", 1)[0])


def native_language(voice: str) -> LanguageInfo | None:
    """The language a catalogue voice was recorded in (English for the literary voices), or
    None for a name the catalogue does not have (a voice of the user's own)."""
    return _NATIVE_LANGUAGE.get(voice)


def language_info(value: object) -> LanguageInfo:
    """The language ``value`` names; ``UnknownLanguageError`` listing the choices otherwise."""
    info = find_language(value)
    if info is None:
        raise UnknownLanguageError(
            f"unknown language {_raw(value)!r}; use a code ({', '.join(codes())}, or with a "
            f"region such as pt-BR), a name ({', '.join(i.name for i in LANGUAGES)}) or a pack "
            "name (english, french_24l, …)"
        )
    return info


def text_code(value: object) -> str:
    """The code the text normalizer reads for ``value``: the base code, or a regional variant
    the language has rules for ("pt-BR"); "en-US" → "en"."""
    info = language_info(value)
    key = _raw(value).lower()
    if key.split("_", 1)[0] in _VARIANT_NAMES:
        return _VARIANT_NAMES[key.split("_", 1)[0]]
    wanted = key.replace("_", "-")
    return next((v for v in info.variants if v.lower() == wanted), info.code)


def text_variant(value: object) -> str | None:
    """The regional variant ``value`` asks the normalizer for ("pt-BR", from ``Language.PT_BR``
    or "brazilian"), or None: the pack's language is read as it is. None too for a pack name
    ("portuguese", "french_24l") and for a name no language has (a custom pack's own)."""
    if value is None or (isinstance(value, str) and value.strip() in config_names()):
        return None
    info = find_language(value)
    if info is None:
        return None
    code = text_code(value)
    return code if "-" in code else None


def pack_name(value: object, *, custom: bool = False) -> str:
    """The pack (model config) a caller means: a config name in any case ("English",
    " FRENCH_24L "), or a language ("en", "pt-BR", "Deutsch", Pipecat ``Language.DE``) → its
    ``default_pack``.

    ``custom`` returns any other string unchanged (a ``model_dir`` with its own
    ``config.json``; an enum member such as a Pipecat ``Language`` is never a custom name);
    otherwise an unknown name raises ``UnknownLanguageError`` listing the choices.
    """
    # Pipecat's Language members give their value.
    raw = value.value if hasattr(value, "value") else value
    if not isinstance(raw, str) or not raw.strip():
        raise UnknownLanguageError(
            f"a language or model config name is a non-empty string, not {raw!r}; choose a "
            f"language ({', '.join(codes())}) or a model config: {', '.join(config_names())}"
        )
    # An upstream config or a CoreML pack folder is kept as it is.
    if is_pack_reference(raw):
        return raw.strip()
    names = config_names()
    key = raw.strip().lower()
    if raw in names or key in names:
        return raw if raw in names else key
    # a code with any region ("pt_BR", "en-US"), or a plain language name; "english_tiny" is a
    # (custom) pack name, not the language
    info = find_language(key) if "_" not in key or key[:3].rstrip("_-") in codes() else None
    if info is not None:
        return info.default_pack
    if custom and not hasattr(value, "value"):
        return raw.strip()
    raise UnknownLanguageError(
        f"unknown language or model config {raw.strip()!r}; choose a language "
        f"({', '.join(codes())}, with a region such as pt-BR, or a name such as English) "
        f"or a model config: {', '.join(names)}"
    )


def config_language(config_name: str) -> str:
    """The language key of a model config name ("english_24l" → "english"); a custom name that
    begins with no language keeps its first part (such packs speak no registered language)."""
    info = _BY_NAME.get(config_name.split("_", 1)[0].lower())
    return info.key if info is not None else config_name.split("_", 1)[0]


def codes() -> tuple[str, ...]:
    """Every ISO code the registry holds, in registry order."""
    return tuple(info.code for info in LANGUAGES)


__all__ = [
    "LANGUAGES",
    "LanguageInfo",
    "codes",
    "config_language",
    "find_language",
    "language_info",
    "pack_name",
    "text_code",
    "text_variant",
]
