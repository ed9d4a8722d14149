"""Which pack names are upstream model configs, and what such a reference's names tell.

A pack name is an upstream config when it is an ``hf://`` or ``http(s)://`` reference, or a
path ending in ``.yaml`` / ``.yml`` (``upstream_config`` loads it). Its pack name is the YAML's
stem ("czech.yaml" → "czech"), prefixed with a language that a folder or repository names when
the stem names none ("hf://someone/pocket-tts-korean/config.yaml" → "korean_config"); a
built-in pack's name gets ``_config`` appended, so the two never mix. Its spoken language is
the first language name its file, folders or repository name
(``upstream_config.config_language_code``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from urllib.parse import urlparse

from .config_registry import config_names

CONFIG_SUFFIXES = (".yaml", ".yml")
SCHEMES = ("hf://", "https://", "http://")
_WORD = re.compile(r"[a-z]+")
_COREML_PACK = re.compile(r"hf://([^/@\s]+/[^/@\s]+)/v2\.1/([^/@\s]+)/?(?:@([^/@\s]+))?")

#: Languages of upstream's community models (and others a config may speak), by English name:
#: their ISO 639-1 codes. The built-in languages (``languages.LANGUAGES``) come first.
COMMUNITY_LANGUAGES: dict[str, str] = {
    "czech": "cs",
    "estonian": "et",
    "farsi": "fa",
    "persian": "fa",
    "haitian": "ht",
    "hindi": "hi",
    "indonesian": "id",
    "korean": "ko",
    "turkish": "tr",
    "welsh": "cy",
}


def is_config_reference(value: object) -> bool:
    """Whether a pack name is an upstream config.

    Args:
        value: a pack name as a caller gave it (any type).

    Returns:
        True for a path, ``http(s)://`` URL or ``hf://…[@revision]`` reference of a file
        ending in ``.yaml`` / ``.yml``.
    """
    if not isinstance(value, str):
        return False
    text = strip_revision(url_path(value.strip()))
    return text.lower().endswith(CONFIG_SUFFIXES)


@dataclass(frozen=True)
class CoreMLPackReference:
    """A CoreML pack in FluidInference's v2.1 layout published by any hub repository."""

    # The repository as "owner/name".
    repo: str
    # The registry config the pack converts ("dutch", "english_2026-10").
    pack: str
    revision: str | None


def coreml_pack_reference(value: object) -> CoreMLPackReference | None:
    """A CoreML pack folder reference, read.

    Args:
        value: a pack name as a caller gave it (any type).

    Returns:
        The repository, pack and revision of ``hf://owner/repo/v2.1/<pack>[@revision]`` (a
        folder, not a file), else None.
    """
    if not isinstance(value, str):
        return None
    match = _COREML_PACK.fullmatch(value.strip())
    return CoreMLPackReference(match[1], match[2], match[3]) if match else None


def is_pack_reference(value: object) -> bool:
    """Whether a pack name is a reference rather than a registry name or a language.

    Args:
        value: a pack name as a caller gave it (any type).

    Returns:
        True for an upstream config (``is_config_reference``) or a CoreML pack folder.
    """
    return is_config_reference(value) or coreml_pack_reference(value) is not None


def served_name(pack: str) -> str:
    """The name a loaded pack reports (``PocketTTS.pack_name``, a server's ``ready``).

    Args:
        pack: a resolved pack name (``languages.pack_name``).

    Returns:
        An upstream config's ``config_pack_name``, a CoreML pack folder's config name, any
        other pack's own name.
    """
    coreml = coreml_pack_reference(pack)
    if coreml is not None:
        return coreml.pack
    return config_pack_name(pack) if is_config_reference(pack) else pack


def config_pack_name(reference: str) -> str:
    """The config's name as the engine reports it.

    Args:
        reference: an upstream config's path, URL or ``hf://`` reference.

    Returns:
        The YAML's stem ("czech"), with the rules of the module docstring.
    """
    stem = PurePosixPath(strip_revision(url_path(reference.strip()))).stem or "config"
    known = set(config_names()) | {name.split("_", 1)[0] for name in config_names()}
    head = stem.lower().split("_", 1)[0]
    if head not in known and head not in COMMUNITY_LANGUAGES:
        language = next(
            (w for w in name_words(reference) if w in COMMUNITY_LANGUAGES or w in known), None
        )
        if language is not None:
            stem = f"{language}_{stem}"
    return f"{stem}_config" if stem in config_names() else stem


def strip_revision(reference: str) -> str:
    """An ``hf://`` reference without its ``@revision`` (any other reference as it is)."""
    return reference.rsplit("@", 1)[0] if reference.startswith("hf://") else reference


def url_path(reference: str) -> str:
    """The path of an ``http(s)://`` URL (any other reference as it is)."""
    return urlparse(reference).path if reference.startswith(("https://", "http://")) else reference


def name_words(reference: str) -> list[str]:
    """The lower-case words of a reference's names, the file's stem first, then its folders
    (and repository) from the nearest."""
    parts = PurePosixPath(strip_revision(url_path(reference.strip()))).parts
    names = [PurePosixPath(parts[-1]).stem, *reversed(parts[:-1])] if parts else []
    return [word for name in names for word in _WORD.findall(name.lower())]


__all__ = [
    "COMMUNITY_LANGUAGES",
    "CONFIG_SUFFIXES",
    "CoreMLPackReference",
    "config_pack_name",
    "coreml_pack_reference",
    "is_config_reference",
    "is_pack_reference",
    "name_words",
    "served_name",
    "strip_revision",
    "url_path",
]
