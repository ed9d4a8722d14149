"""Language packs: which files a model needs and where they come from.

A pack is one model config plus its files:

- weights ``model.safetensors``: from the gated ``kyutai/pocket-tts`` repository (accepted terms
  and a token; has the voice-cloning encoder), else from the ungated
  ``kyutai/pocket-tts-without-voice-cloning`` (predefined voices only; a warning says so);
- the tokenizer (``tokenizer.json`` or ``tokenizer.model``);
- voices ``languages/<pack>/embeddings/<name>.safetensors``, fetched on first use.

Hub files come through ``huggingface_hub`` at the revisions pinned in the config (the
``revision`` argument overrides them), land in the standard HF cache, show HF progress bars and
honour ``HF_TOKEN`` / ``HF_HUB_OFFLINE``. With ``model_dir`` everything is read from a local
folder laid out like a pack and nothing is downloaded; a ``config.json`` there (upstream
schema) replaces the registry config.

Backends that need other files (CoreML packages) register their own resolver with
``register_pack_resolver``; ``resolve_pack(..., backend_kind=...)`` dispatches to it.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from .config import (
    VOICES_REPO,
    VOICES_REVISION,
    HubFile,
    ModelConfig,
    canonical_config_name,
    config_names,
    get_config,
)
from .errors import (
    GatedRepoError,
    PackFilesMissingError,
    UnknownBackendError,
    UnknownLanguageError,
    UnknownVoiceError,
)

logger = logging.getLogger(__name__)

#: Voices upstream ships (which exist for each language is unverified: all are listed).
KNOWN_VOICES: tuple[str, ...] = (
    "alba",
    "marius",
    "javert",
    "jean",
    "fantine",
    "cosette",
    "eponine",
    "azelma",
    "anna",
    "vera",
    "charles",
    "paul",
    "george",
    "mary",
    "jane",
    "michael",
    "eve",
    "bill_boerst",
    "peter_yearsley",
    "stuart_bell",
    "caro_davy",
    "estelle",
    "lola",
    "juergen",
    "rafael",
    "giovanni",
    "daan",
)

#: The voice used when none is given, per spoken language.
DEFAULT_VOICE_BY_LANGUAGE: Mapping[str, str] = MappingProxyType(
    {
        "english": "alba",
        "french": "estelle",
        "spanish": "lola",
        "german": "juergen",
        "portuguese": "rafael",
        "italian": "giovanni",
        "dutch": "daan",
    }
)

GATED_REPO_URL = "https://huggingface.co/kyutai/pocket-tts"
WEIGHTS_FILE = "model.safetensors"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model")
CONFIG_FILE = "config.json"
VOICES_FOLDER = "embeddings"

#: Fixes named in download errors; the command line rewords them in its own terms.
PREFETCH_FIX = "prefetch with `python -m pipecat_pocket_tts download <language>`"
MODEL_DIR_FIX = "pass model_dir=<a folder with the pack's files>"
NOT_CACHED = "not in the Hugging Face cache and cannot be downloaded (offline, or no connection)"
NOT_CACHED_FIXES = (
    "Fixes: go online once (unset HF_HUB_OFFLINE; where huggingface.co is blocked, set "
    f"HF_ENDPOINT to a reachable mirror) so it is cached; or {PREFETCH_FIX}; or {MODEL_DIR_FIX}."
)


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
    _fetch_voice: Callable[[str], Path] | None = field(default=None, repr=False, compare=False)

    @property
    def tokenizer_kind(self) -> str:
        """'tokenizers' for tokenizer.json, 'sentencepiece' for tokenizer.model."""
        return "tokenizers" if self.tokenizer.suffix == ".json" else "sentencepiece"

    @property
    def default_voice(self) -> str | None:
        """The language's default voice if the pack has it, else its first voice."""
        preferred = DEFAULT_VOICE_BY_LANGUAGE.get(self.config.language)
        if preferred in self.voice_names:
            return preferred
        return self.voice_names[0] if self.voice_names else None

    def voice_path(self, name: str) -> Path:
        """The local file of voice ``name`` (downloaded on first use for hub packs)."""
        if name not in self.voice_names:
            where = f"in {self.model_dir / VOICES_FOLDER}" if self.model_dir else "on the hub"
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
    """What ``resolve_pack`` was asked for (handed to the backend's resolver)."""

    config_name: str
    model_dir: Path | None = None
    revision: str | None = None
    token: str | bool | None = None
    voice_cloning: bool | None = None


PackResolver = Callable[[PackRequest], PackFiles]
_RESOLVERS: dict[str, PackResolver] = {}


def register_pack_resolver(backend_kind: str, resolver: PackResolver) -> None:
    """Make ``resolve_pack(..., backend_kind=backend_kind)`` use ``resolver``."""
    _RESOLVERS[backend_kind] = resolver


def resolve_pack(
    config_name: str = "english",
    *,
    model_dir: str | os.PathLike[str] | None = None,
    revision: str | None = None,
    token: str | bool | None = None,
    backend_kind: str = "numpy",
    voice_cloning: bool | None = None,
) -> PackFiles:
    """Find (or download) the files of pack ``config_name`` for a backend kind.

    ``voice_cloning``: None tries the gated weights and falls back to the ungated ones with a
    warning; True requires the gated weights (``GatedRepoError`` otherwise); False takes the
    ungated weights directly. Ignored with ``model_dir``.
    """
    resolver = _RESOLVERS.get(backend_kind)
    if resolver is None and backend_kind == "coreml":
        from .backends import coreml  # noqa: F401  (registers the CoreML pack layout)

        resolver = _RESOLVERS.get(backend_kind)
    if resolver is None:
        raise UnknownBackendError(
            f"no pack layout for backend kind {backend_kind!r}; "
            f"known: {', '.join(sorted(_RESOLVERS))}"
        )
    request = PackRequest(
        config_name=canonical_config_name(config_name),
        model_dir=Path(model_dir).expanduser() if model_dir is not None else None,
        revision=revision,
        token=token,
        voice_cloning=voice_cloning,
    )
    return resolver(request)


# -- the NumPy layout (safetensors weights + tokenizer + voices) --------------------------


def _resolve_numpy(request: PackRequest) -> PackFiles:
    if request.model_dir is not None:
        return resolve_local_pack(request.config_name, request.model_dir)
    return resolve_hub_pack(
        request.config_name,
        revision=request.revision,
        token=request.token,
        voice_cloning=request.voice_cloning,
    )


register_pack_resolver("numpy", _resolve_numpy)


def resolve_local_pack(config_name: str, model_dir: str | os.PathLike[str]) -> PackFiles:
    """A pack read from a local folder; nothing is downloaded."""
    folder = Path(model_dir).expanduser()
    if not folder.is_dir():
        raise PackFilesMissingError(
            f"model_dir {folder} does not exist or is not a folder. Pass a folder holding "
            f"{WEIGHTS_FILE}, tokenizer.json or tokenizer.model, and {VOICES_FOLDER}/*.safetensors "
            "(or leave model_dir out to download the pack from Hugging Face)."
        )
    config = load_local_config(config_name, folder)
    tokenizer = _local_tokenizer(folder, config)
    missing = [] if (folder / WEIGHTS_FILE).is_file() else [WEIGHTS_FILE]
    if tokenizer is None:
        missing.append(" or ".join(TOKENIZER_FILES))
    if missing:
        raise PackFilesMissingError(
            f"model_dir {folder} lacks {', '.join(missing)}. A pack folder holds {WEIGHTS_FILE}, "
            f"tokenizer.json or tokenizer.model, and {VOICES_FOLDER}/<voice>.safetensors; "
            f"`python -m pipecat_pocket_tts download {config_name}` fetches them into the HF "
            "cache (then load without model_dir)."
        )
    voices_dir = folder / VOICES_FOLDER
    names = (
        tuple(sorted(p.stem for p in voices_dir.glob("*.safetensors") if p.is_file()))
        if voices_dir.is_dir()
        else ()
    )

    def fetch(name: str) -> Path:
        path = voices_dir / f"{name}.safetensors"
        if not path.is_file():
            raise PackFilesMissingError(f"voice file {path} disappeared; restore it")
        return path

    return PackFiles(
        config=config,
        weights=folder / WEIGHTS_FILE,
        tokenizer=tokenizer,  # type: ignore[arg-type]  (checked above)
        voice_names=names,
        has_voice_cloning=_file_has_cloning_weights(folder / WEIGHTS_FILE, config),
        backend_kind="numpy",
        model_dir=folder,
        _fetch_voice=fetch,
    )


def load_local_config(config_name: str, folder: Path) -> ModelConfig:
    """``folder/config.json`` (upstream schema) if present, else the registry config.

    A custom config takes ``config_name`` as its name, which must start with a spoken language
    (``english``, ``english_tiny``, …): the text front end and default voice follow it.
    """
    path = folder / CONFIG_FILE
    if not path.is_file():
        return get_config(config_name)
    languages = spoken_languages()
    if config_name.split("_", 1)[0] not in languages:
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
    """The spoken languages of the registry configs (english, french, …), sorted."""
    return sorted({name.split("_", 1)[0] for name in config_names()})


def _local_tokenizer(folder: Path, config: ModelConfig) -> Path | None:
    """The tokenizer file present, preferring the kind the config names."""
    preferred = (
        TOKENIZER_FILES
        if config.flow_lm.lookup_table.tokenizer == "tokenizers"
        else tuple(reversed(TOKENIZER_FILES))
    )
    for name in preferred:
        if (folder / name).is_file():
            return folder / name
    return None


def _file_has_cloning_weights(path: Path, config: ModelConfig) -> bool:
    """Whether a checkpoint holds every voice-cloning tensor (by its header; values unread)."""
    from .backends.numpy.weights import expected_shapes, is_cloning_key

    try:
        keys = set(_safetensors_keys(path))
    except (OSError, ValueError):
        return False  # unreadable: the weights loader reports it properly
    needed = [k for k in expected_shapes(config) if is_cloning_key(k)]
    return bool(needed) and all(k in keys for k in needed)


def _safetensors_keys(path: Path) -> list[str]:
    with open(path, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        if not 0 < size < 100_000_000:
            raise ValueError(f"{path}: not a safetensors file")
        header = json.loads(f.read(size))
    return [k for k in header if k != "__metadata__"]


# -- the hub -------------------------------------------------------------------------------


def resolve_hub_pack(
    config_name: str,
    *,
    revision: str | None = None,
    token: str | bool | None = None,
    voice_cloning: bool | None = None,
) -> PackFiles:
    """A registry pack from the Hugging Face hub (cached; voices fetched on first use)."""
    config = get_config(config_name)
    weights, has_cloning = _hub_weights(config, revision, token, voice_cloning)
    tokenizer_file = config.flow_lm.lookup_table.tokenizer_file
    if tokenizer_file is None:
        raise PackFilesMissingError(
            f"config {config_name!r} names no hub tokenizer; pass model_dir with tokenizer.json "
            "or tokenizer.model"
        )
    tokenizer = hub_download(tokenizer_file, revision=revision, token=token, what="tokenizer")
    lock = threading.Lock()
    fetched: dict[str, Path] = {}

    def fetch(name: str) -> Path:
        with lock:
            if name not in fetched:
                fetched[name] = hub_download(
                    voice_hub_file(config, name, revision=revision),
                    token=token,
                    what=f"voice {name!r}",
                    missing_is_unknown_voice=True,
                )
            return fetched[name]

    return PackFiles(
        config=config,
        weights=weights,
        tokenizer=tokenizer,
        voice_names=KNOWN_VOICES,
        has_voice_cloning=has_cloning,
        backend_kind="numpy",
        _fetch_voice=fetch,
    )


def voice_hub_file(config: ModelConfig, name: str, *, revision: str | None = None) -> HubFile:
    """Where voice ``name`` of ``config``'s pack lives on the hub."""
    return HubFile(
        VOICES_REPO,
        f"{config.pack_folder}/{VOICES_FOLDER}/{name}.safetensors",
        revision or VOICES_REVISION,
    )


def _hub_weights(
    config: ModelConfig,
    revision: str | None,
    token: str | bool | None,
    voice_cloning: bool | None,
) -> tuple[Path, bool]:
    """The weights file and whether it has the voice-cloning part."""
    gated, ungated = config.weights, config.weights_without_voice_cloning
    if voice_cloning is False and ungated is not None:
        return hub_download(ungated, revision=revision, token=token, what="weights"), False
    if gated is None:
        if voice_cloning:
            raise GatedRepoError(f"config {config.name!r} has no voice-cloning weights")
        if ungated is None:
            raise PackFilesMissingError(
                f"config {config.name!r} names no hub weights; pass model_dir"
            )
        return hub_download(ungated, revision=revision, token=token, what="weights"), False
    if voice_cloning or ungated is None:
        return hub_download(gated, revision=revision, token=token, what="weights"), True
    try:
        return hub_download(gated, revision=revision, token=token, what="weights"), True
    except (GatedRepoError, PackFilesMissingError) as exc:
        gated_failure = exc
    try:
        path = hub_download(ungated, revision=revision, token=token, what="weights")
    except PackFilesMissingError as exc:
        if not (_not_cached(exc) and _not_cached(gated_failure)):
            raise
        raise PackFilesMissingError(
            f"weights are {NOT_CACHED}: tried {_hub_location(gated, revision)} (with voice "
            f"cloning), then {_hub_location(ungated, revision)} (without). {NOT_CACHED_FIXES}"
        ) from exc
    logger.warning(
        "Voice cloning is unavailable: the weights with voice cloning (%s/%s) could not be "
        "fetched (%s: %s). Using %s/%s instead: predefined voices work, cloning raises "
        "CloningUnavailableError. For cloning, accept the model terms at %s and set HF_TOKEN.",
        gated.repo,
        gated.path,
        type(gated_failure).__name__,
        str(gated_failure).split(". ", 1)[0],
        ungated.repo,
        ungated.path,
        GATED_REPO_URL,
    )
    return path, False


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
    from huggingface_hub import errors, hf_hub_download

    rev = revision or file.revision
    at = _hub_location(file, revision)
    try:
        return Path(hf_hub_download(file.repo, file.path, revision=rev, token=token))
    except errors.LocalEntryNotFoundError as exc:
        raise PackFilesMissingError(f"{what} {at} is {NOT_CACHED}. {NOT_CACHED_FIXES}") from exc
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
    except (OSError, ConnectionError) as exc:  # network failures not turned into cache lookups
        raise PackFilesMissingError(
            f"{what} {at} could not be downloaded ({type(exc).__name__}: {exc}). Check the "
            "connection (and HF_TOKEN, if set: an invalid token fails every request) and retry; "
            f"or {PREFETCH_FIX}; or {MODEL_DIR_FIX}."
        ) from exc


def _hub_location(file: HubFile, revision: str | None = None) -> str:
    """``repo/path@revision`` of a hub file, as error messages name it."""
    return f"{file.repo}/{file.path}@{revision or file.revision or 'main'}"


def _not_cached(exc: BaseException) -> bool:
    """Whether a ``hub_download`` failure means: offline (or no connection) and not cached."""
    from huggingface_hub import errors

    return isinstance(exc.__cause__, errors.LocalEntryNotFoundError)


# -- prefetching ---------------------------------------------------------------------------


def download_pack(
    config_name: str,
    *,
    voices: Iterable[str] | None = None,
    revision: str | None = None,
    token: str | bool | None = None,
    voice_cloning: bool | None = None,
) -> tuple[PackFiles, dict[str, Path]]:
    """Fetch a hub pack's weights, tokenizer and ``voices`` (None: every known voice) now.

    Voices the hub does not have for this pack are skipped when fetching all of them; a named
    voice that is missing raises ``UnknownVoiceError``. Returns the pack and the voice files.
    """
    pack = resolve_hub_pack(
        config_name, revision=revision, token=token, voice_cloning=voice_cloning
    )
    wanted = list(pack.voice_names if voices is None else voices)
    unknown = [v for v in wanted if v not in pack.voice_names]
    if unknown:
        raise UnknownVoiceError(
            f"unknown voice(s) {', '.join(unknown)}; choose from: {', '.join(pack.voice_names)}"
        )
    fetched: dict[str, Path] = {}
    for name in wanted:
        try:
            fetched[name] = pack.voice_path(name)
        except UnknownVoiceError:
            if voices is not None:
                raise
            logger.info("voice %r is not published for %s; skipped", name, config_name)
    return pack, fetched
