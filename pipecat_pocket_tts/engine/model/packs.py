"""Language packs, whichever backend reads them: what a resolved pack is and what is shared.

A pack is one model config plus its files. Each backend owns its layout (where the files sit
on the hub and in a local folder) in its own ``files.py``: ``backends/numpy/files.py``
(``model.safetensors`` + tokenizer + ``embeddings/``) and ``backends/coreml/files.py``
(FluidInference's CoreML packages). ``backends.find_pack_files`` asks the chosen backend. This
module holds what they share: ``PackFiles`` (the resolved pack), ``PackRequest`` (what was
asked), a local ``config.json`` (``load_local_config``) and one hub file download with our
errors (``hub_download``). It imports no backend.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import (
    GatedRepoError,
    HubUnreachableError,
    PackFilesMissingError,
    UnknownLanguageError,
    UnknownVoiceError,
)
from .config import HubFile, ModelConfig, get_config
from .hub_reachability import hub_unreachable
from .languages import LANGUAGES, config_language, find_language

logger = logging.getLogger(__name__)

GATED_REPO_URL = "https://huggingface.co/kyutai/pocket-tts"
CONFIG_FILE = "config.json"

#: Fixes named in download errors; the command line rewords them in its own terms.
PREFETCH_FIX = "prefetch with `python -m pipecat_pocket_tts download <language>`"
MODEL_DIR_FIX = "pass model_dir=<a folder with the pack's files>"
NOT_CACHED = "not in the Hugging Face cache and cannot be downloaded (offline, or no connection)"
#: Every offline error ends with it: a way to try everything but the voice with no network.
DEVPACK_FIX = (
    "(to try without weights, a random-weight pack: `python -m pipecat_pocket_tts devpack "
    "<folder>`)"
)
NOT_CACHED_FIXES = (
    "Fixes: go online once (unset HF_HUB_OFFLINE; where huggingface.co is blocked, set "
    f"HF_ENDPOINT to a reachable mirror) so it is cached; or {PREFETCH_FIX}; or {MODEL_DIR_FIX} "
    f"{DEVPACK_FIX}."
)
UNREACHABLE_FIXES = (
    "Fixes: connect to the internet (or set HF_ENDPOINT to a reachable mirror; HF_TOKEN for the "
    f"voice-cloning weights) and retry; or {MODEL_DIR_FIX} {DEVPACK_FIX}; set HF_HUB_OFFLINE=1 "
    "to read only the Hugging Face cache, with no request at all."
)
_COMMIT = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class PackFiles:
    """The resolved files of one pack (voices resolved lazily through ``voice_path``)."""

    config: ModelConfig
    weights: Path
    tokenizer: Path
    voice_names: tuple[str, ...]
    has_voice_cloning: bool
    backend_kind: str = "numpy"
    model_dir: Path | None = None
    # The local folder of the voice files, if any.
    voices_dir: Path | None = None
    _fetch_voice: Callable[[str], Path] | None = field(default=None, repr=False, compare=False)

    @property
    def tokenizer_kind(self) -> str:
        """'tokenizers' for tokenizer.json, 'sentencepiece' for tokenizer.model."""
        return "tokenizers" if self.tokenizer.suffix == ".json" else "sentencepiece"

    @functools.cached_property
    def weights_id(self) -> str:
        """A fingerprint of the weights (their size, first and last 64 KB): tells packs of
        one config name apart, as voices cloned with one are refused by another."""
        digest = hashlib.sha256()
        files = sorted(p for p in self.weights.rglob("*") if p.is_file())
        for path in files if self.weights.is_dir() else [self.weights]:
            size = path.stat().st_size
            digest.update(f"{path.name}:{size}".encode())
            with path.open("rb") as f:
                digest.update(f.read(1 << 16))
                f.seek(max(0, size - (1 << 16)))
                digest.update(f.read(1 << 16))
        return digest.hexdigest()[:16]

    @property
    def default_voice(self) -> str | None:
        """The language's default voice if the pack has it, else its first voice."""
        info = find_language(self.config.language)
        preferred = info.default_voice if info is not None else None
        if preferred in self.voice_names:
            return preferred
        return self.voice_names[0] if self.voice_names else None

    def voice_path(self, name: str) -> Path:
        """The local file of voice ``name`` (downloaded on first use for hub packs)."""
        if name not in self.voice_names:
            where = f"in {self.voices_dir or self.model_dir}" if self.model_dir else "on the hub"
            available = ", ".join(self.voice_names) or "(none)"
            raise UnknownVoiceError(
                f"unknown voice {name!r} for pack {self.config.name!r} ({where}); "
                f"choose one of: {available} — or pass the path of a voice .safetensors file"
            )
        if self._fetch_voice is None:
            raise PackFilesMissingError(f"pack {self.config.name!r} has no voice source")
        return self._fetch_voice(name)


@dataclass(frozen=True)
class PackRequest:
    """What ``backends.find_pack_files`` was asked for (handed to the backend's layout)."""

    config_name: str
    model_dir: Path | None = None
    revision: str | None = None
    token: str | bool | None = None
    voice_cloning: bool | None = None


def local_voices(folder: Path) -> tuple[tuple[str, ...], Callable[[str], Path]]:
    """The voice names in a local folder of ``<name>.safetensors`` files (sorted; none when
    the folder is absent) and the function a ``PackFiles`` fetches one with."""
    names = (
        tuple(sorted(p.stem for p in folder.glob("*.safetensors") if p.is_file()))
        if folder.is_dir()
        else ()
    )

    def fetch(name: str) -> Path:
        path = folder / f"{name}.safetensors"
        if not path.is_file():
            raise PackFilesMissingError(f"voice file {path} disappeared; restore it")
        return path

    return names, fetch


def load_local_config(config_name: str, folder: Path) -> ModelConfig:
    """``folder/config.json`` (upstream schema) if present, else the registry config.

    A custom config takes ``config_name`` as its name, which must start with a spoken language
    (``english``, ``english_tiny``, …): the text front end and default voice follow it.
    """
    path = folder / CONFIG_FILE
    if not path.is_file():
        return get_config(config_name)
    languages = spoken_languages()
    if config_language(config_name) not in languages:
        raise UnknownLanguageError(
            f"unknown language {config_name!r} for the custom config in {path}: name it after "
            f"its language, as <language> or <language>_<variant>, with language one of: "
            f"{', '.join(languages)}"
        )
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PackFilesMissingError(
            f"{path} is not readable JSON ({exc}); fix it, or delete it to use the registry "
            f"config {config_name!r}"
        ) from exc
    if not isinstance(raw, dict) or "flow_lm" not in raw or "mimi" not in raw:
        raise PackFilesMissingError(
            f"{path} is not a PocketTTS model config (it needs 'flow_lm' and 'mimi' sections in "
            "upstream's schema); fix it, or delete it to use the registry config"
        )
    try:
        return ModelConfig.from_dict(config_name, raw)
    except NotImplementedError as exc:
        raise NotImplementedError(f"{path}: {exc}") from exc
    except (KeyError, TypeError, ValueError) as exc:
        raise PackFilesMissingError(
            f"{path} is not a valid PocketTTS model config ({type(exc).__name__}: {exc}); "
            "compare it with upstream's config files"
        ) from exc


def spoken_languages() -> list[str]:
    """The spoken languages' keys (english, french, …), sorted: how pack names begin."""
    return sorted(info.key for info in LANGUAGES)


# -- the hub -------------------------------------------------------------------------------


def hub_download(
    file: HubFile,
    *,
    revision: str | None = None,
    token: str | bool | None = None,
    what: str = "file",
    missing_is_unknown_voice: bool = False,
) -> Path:
    """Download (or find in the HF cache) one hub file; hub errors become ours, with the fix.

    ``revision`` overrides the file's pinned revision. Offline with an empty cache raises
    ``PackFilesMissingError``; no access to a gated repository raises ``GatedRepoError``.
    """
    from huggingface_hub import constants, errors, hf_hub_download

    rev = revision or file.revision
    at = hub_location(file, revision)
    cached = _cached_at_commit(file.repo, file.path, rev)
    # A pinned file in the cache needs no request and no probe.
    if cached is not None:
        return cached
    # Probed once per process before the first request; unreachable or offline by choice,
    # only the cache is read (huggingface_hub would still enter its HTTP layer).
    unreachable = hub_unreachable()
    try:
        return Path(
            hf_hub_download(
                file.repo,
                file.path,
                revision=rev,
                token=token,
                local_files_only=unreachable is not None or constants.HF_HUB_OFFLINE,
            )
        )
    except errors.LocalEntryNotFoundError as exc:
        raise cache_miss(f"{what} {at} is", unreachable) from exc
    except errors.GatedRepoError as exc:
        raise GatedRepoError(
            f"{what} {at} is in a gated repository you have no access to. Accept the model "
            f"terms at {GATED_REPO_URL} and set HF_TOKEN (or pass token=) to a token of that "
            "account."
        ) from exc
    except errors.RepositoryNotFoundError as exc:
        raise GatedRepoError(
            f"{what} {at}: repository {file.repo} is not accessible (private, gated or "
            f"missing). If it is gated, accept the terms at https://huggingface.co/{file.repo} "
            "and set HF_TOKEN; check that the token is valid."
        ) from exc
    except errors.RevisionNotFoundError as exc:
        raise PackFilesMissingError(
            f"{what} {at}: revision {rev!r} does not exist in {file.repo}; pass a valid "
            "revision (or none for the pinned one)."
        ) from exc
    except errors.EntryNotFoundError as exc:
        if missing_is_unknown_voice:
            raise UnknownVoiceError(
                f"{what} is not published for this pack ({at} does not exist); pick another "
                "voice (`python -m pipecat_pocket_tts voices`)."
            ) from exc
        raise PackFilesMissingError(f"{what} {at} does not exist on the hub.") from exc
    except (OSError, ConnectionError) as exc:
        # Network failures that were not turned into cache lookups.
        raise PackFilesMissingError(
            f"{what} {at} could not be downloaded ({type(exc).__name__}: {exc}). Check the "
            "connection (and HF_TOKEN, if set: an invalid token fails every request) and retry; "
            f"or {PREFETCH_FIX}; or {MODEL_DIR_FIX} {DEVPACK_FIX}."
        ) from exc


def cache_miss(subject: str, unreachable: str | None, tried: str = "") -> PackFilesMissingError:
    """The error for files missing from the cache: ``HubUnreachableError`` when the probe
    failed (``unreachable``: why), else offline by choice. ``subject`` ends in is/are."""
    if unreachable is not None:
        return HubUnreachableError(
            f"{subject} not in the Hugging Face cache and the hub is unreachable "
            f"({unreachable}){tried}. {UNREACHABLE_FIXES}",
            unreachable,
        )
    return PackFilesMissingError(f"{subject} {NOT_CACHED}{tried}. {NOT_CACHED_FIXES}")


def _cached_at_commit(repo: str, path: str, revision: str | None) -> Path | None:
    """The cached file of a commit-pinned hub file (what the hub would return), else None."""
    from huggingface_hub import try_to_load_from_cache

    if revision is None or not _COMMIT.fullmatch(revision):
        return None
    found = try_to_load_from_cache(repo, path, revision=revision)
    return Path(found) if isinstance(found, str) else None


def hub_location(file: HubFile, revision: str | None = None) -> str:
    """``repo/path@revision`` of a hub file, as error messages name it."""
    return f"{file.repo}/{file.path}@{revision or file.revision or 'main'}"


def not_cached(exc: BaseException) -> bool:
    """Whether a ``hub_download`` failure means: offline (or no connection) and not cached."""
    from huggingface_hub import errors

    return isinstance(exc.__cause__, errors.LocalEntryNotFoundError)
