"""A pack from an upstream model config YAML: a local path, an ``https://`` URL or an ``hf://``
reference, wherever a pack name is accepted (as upstream pocket-tts takes ``--config``).

Upstream 4.0.1's schema is the registry's own (``config.ModelConfig.from_dict``); the files it
names resolve as upstream resolves them:

- ``hf://owner/repo/path@revision``: through ``huggingface_hub`` (its cache, ``HF_HUB_OFFLINE``,
  ``HF_TOKEN``), pinned to the revision where one is given; an ``https://huggingface.co/…/
  resolve/<revision>/…`` URL the same way;
- another ``http(s)://`` URL: downloaded once into a cache folder under ``HF_HOME``;
- a path: relative to the config's own folder when the file is there, else to the working
  directory (upstream reads it from the working directory only).

The weights are ``weights_path`` (with the voice-cloning encoder) or, when that cannot be had,
``weights_path_without_voice_cloning`` (cloning then raises ``CloningUnavailableError``).
Voice states exported by upstream for the model load by path; a local config's folder may
hold them as ``embeddings/<name>.safetensors`` (named voices). The pack's name is the YAML's
stem ("czech.yaml" → "czech"), prefixed with a language a folder or repository names when the
stem names none; a built-in pack's name gets ``_config`` appended so the two never mix.
"""

from __future__ import annotations

import hashlib
import logging
import re
import urllib.error
import urllib.request
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlparse

from ..errors import GatedRepoError, ModelConfigError, PackFilesMissingError
from .config import HubFile, ModelConfig
from .config_reference import (
    COMMUNITY_LANGUAGES,
    CONFIG_SUFFIXES,
    SCHEMES,
    config_pack_name,
    name_words,
    strip_revision,
    url_path,
)
from .languages import LANGUAGES
from .packs import PackFiles, hub_download, local_voices

logger = logging.getLogger(__name__)

VOICES_FOLDER = "embeddings"
_HUB_RESOLVE = re.compile(r"https://huggingface\.co/([^/]+/[^/]+)/resolve/([^/]+)/(.+)")


def config_language_code(reference: str) -> str | None:
    """The language a config reference's names tell.

    Args:
        reference: an upstream config's path, URL or ``hf://`` reference.

    Returns:
        The ISO 639-1 code of the first language name in its file, folder or repository names
        ("…/czech.yaml": "cs", "hf://someone/pocket-tts-korean/config.yaml": "ko"), or None.
    """
    codes = {info.key: info.code for info in LANGUAGES}
    codes.update({info.name.lower(): info.code for info in LANGUAGES})
    codes.update(COMMUNITY_LANGUAGES)
    for word in name_words(reference):
        if word in codes:
            return codes[word]
    return None


def load_config_pack(
    reference: str, *, token: str | bool | None = None, voice_cloning: bool | None = None
) -> PackFiles:
    """The pack an upstream config names: its config, weights, tokenizer and local voices.

    Args:
        reference: the config's path, ``http(s)://`` URL or ``hf://owner/repo/f.yaml@rev``.
        token: the Hugging Face token for ``hf://`` files (None: ``HF_TOKEN``).
        voice_cloning: None takes ``weights_path`` and falls back to the weights without
            cloning (a warning says so); True requires ``weights_path``; False prefers the
            weights without cloning.

    Returns:
        The pack (NumPy layout; whether the weights hold the cloning encoder is checked by
        the backend's layout).

    Raises:
        ModelConfigError: the file is no upstream config.
        PackFilesMissingError, GatedRepoError: a file cannot be had.
    """
    reference = reference.strip()
    path, raw, config = _read_config(reference, token)
    base = path.parent if not reference.startswith(SCHEMES) else None
    tokenizer_ref = str(raw["flow_lm"]["lookup_table"].get("tokenizer_path") or "")
    if not tokenizer_ref:
        raise ModelConfigError(f"{reference} names no flow_lm.lookup_table.tokenizer_path")
    tokenizer = fetch_file(tokenizer_ref, base=base, token=token, what="tokenizer")
    weights, cloning = _weights(raw, reference, base, token, voice_cloning)
    voices_dir = base / VOICES_FOLDER if base is not None else None
    names, fetch = local_voices(voices_dir) if voices_dir is not None else ((), None)
    return PackFiles(
        config=config,
        weights=weights,
        tokenizer=tokenizer,
        voice_names=names,
        # The backend's layout checks that the file holds the encoder.
        has_voice_cloning=cloning,
        backend_kind="numpy",
        voices_dir=voices_dir,
        _fetch_voice=fetch,
    )


def read_config(reference: str, *, token: str | bool | None = None) -> ModelConfig:
    """The model config an upstream config YAML holds (none of the files it names fetched).

    Args:
        reference: The config's path, ``http(s)://`` URL or ``hf://owner/repo/f.yaml@rev``.
        token: The Hugging Face token for ``hf://`` files (None: ``HF_TOKEN``).

    Returns:
        The config, named as the pack is (``config_pack_name``).

    Raises:
        ModelConfigError: The file is no upstream config.
    """
    return _read_config(reference.strip(), token)[2]


def _read_config(
    reference: str, token: str | bool | None
) -> tuple[Path, dict[str, Any], ModelConfig]:
    """The config file fetched, its YAML and its config (``load_config_pack``'s checks)."""
    if PurePosixPath(strip_revision(url_path(reference))).suffix.lower() not in CONFIG_SUFFIXES:
        raise ModelConfigError(
            f"{reference!r} is not a model config: upstream's configs are YAML files (.yaml); "
            "pass the path, https:// URL or hf://owner/repo/file.yaml@revision of one"
        )
    path = fetch_file(reference, token=token, what="model config")
    raw = _read_yaml(path, reference)
    name = config_pack_name(reference)
    for section in ("flow_lm", "mimi"):
        if raw[section].get("weights_path"):
            raise ModelConfigError(
                f"{reference}: {section}.weights_path (separate FlowLM and Mimi weight files) "
                "is not supported; name one file with both as weights_path"
            )
    try:
        config = ModelConfig.from_dict(name, raw)
    except NotImplementedError as exc:
        raise NotImplementedError(f"{reference}: {exc}") from exc
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ModelConfigError(
            f"{reference} is not a valid PocketTTS model config ({type(exc).__name__}: {exc}); "
            "compare it with upstream's config files"
        ) from exc
    return path, raw, config


def fetch_file(
    reference: str,
    *,
    base: Path | None = None,
    token: str | bool | None = None,
    what: str = "file",
) -> Path:
    """The local file of a reference a config makes (see the module docstring).

    Args:
        reference: a path, ``http(s)://`` URL or ``hf://owner/repo/path[@revision]``.
        base: the config's folder, where a relative path is read first.
        token: the Hugging Face token for ``hf://`` files.
        what: what the file is, for error messages ("weights").

    Returns:
        The file on disk (in the Hugging Face cache for hub files).
    """
    hub = _hub_file(reference)
    if hub is not None:
        return hub_download(hub, token=token, what=what)
    if reference.startswith(("https://", "http://")):
        return _download_url(reference, what)
    path = Path(reference).expanduser()
    if not path.is_absolute() and base is not None and (base / path).is_file():
        path = base / path
    if not path.is_file():
        raise PackFilesMissingError(
            f"{what} {reference} not found (read relative to the config's folder, then to the "
            f"working directory {Path.cwd()}); fix the path in the config"
        )
    return path


def _weights(
    raw: dict[str, Any],
    reference: str,
    base: Path | None,
    token: str | bool | None,
    voice_cloning: bool | None,
) -> tuple[Path, bool]:
    """The weights file and whether it is the one with voice cloning."""
    gated, ungated = raw.get("weights_path"), raw.get("weights_path_without_voice_cloning")
    if not gated and not ungated:
        raise ModelConfigError(
            f"{reference} names no weights (weights_path or weights_path_without_voice_cloning)"
        )
    if voice_cloning and not gated:
        raise GatedRepoError(f"{reference} names no weights with voice cloning (weights_path)")
    if ungated and (voice_cloning is False or not gated):
        return fetch_file(ungated, base=base, token=token, what="weights"), False
    try:
        return fetch_file(gated, base=base, token=token, what="weights"), True
    except (GatedRepoError, PackFilesMissingError) as exc:
        if voice_cloning or not ungated:
            raise
        logger.warning(
            "Voice cloning is unavailable: %s could not be had (%s). Using %s: voice files "
            "work, cloning raises CloningUnavailableError.",
            gated,
            str(exc).split(". ", 1)[0],
            ungated,
        )
        return fetch_file(ungated, base=base, token=token, what="weights"), False


def _read_yaml(path: Path, reference: str) -> dict[str, Any]:
    import yaml

    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ModelConfigError(f"{reference} is not readable YAML ({exc})") from exc
    if not isinstance(raw, dict) or not all(isinstance(raw.get(k), dict) for k in _SECTIONS):
        raise ModelConfigError(
            f"{reference} is not a PocketTTS model config: it needs 'flow_lm' and 'mimi' "
            "sections in upstream's schema"
        )
    return raw


_SECTIONS = ("flow_lm", "mimi")


def _hub_file(reference: str) -> HubFile | None:
    """The hub file of an ``hf://`` reference or a huggingface.co ``resolve`` URL."""
    if reference.startswith("hf://"):
        try:
            return HubFile.parse(reference)
        except ValueError as exc:
            raise ModelConfigError(
                f"{reference!r} is not an hf://owner/repo/path[@revision] reference"
            ) from exc
    match = _HUB_RESOLVE.fullmatch(reference.split("?", 1)[0])
    return HubFile(match[1], match[3], match[2]) if match else None


def _download_url(url: str, what: str) -> Path:
    """A URL's file, downloaded once into ``HF_HOME/pipecat_pocket_tts/urls`` (offline: the
    cached copy only)."""
    from huggingface_hub import constants

    suffix = PurePosixPath(urlparse(url).path).suffix
    target = Path(constants.HF_HOME) / "pipecat_pocket_tts" / "urls"
    target = target / (hashlib.sha256(url.encode()).hexdigest() + suffix)
    if target.is_file():
        return target
    if constants.HF_HUB_OFFLINE:
        raise PackFilesMissingError(
            f"{what} {url} is not cached and HF_HUB_OFFLINE is set; unset it once to fetch it"
        )
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            content = response.read()
    except (urllib.error.URLError, OSError) as exc:
        raise PackFilesMissingError(f"{what} {url} could not be downloaded ({exc})") from exc
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    partial.write_bytes(content)
    partial.replace(target)
    return target


__all__ = ["config_language_code", "fetch_file", "load_config_pack"]
