"""The NumPy backend's pack layout: ``model.safetensors``, a tokenizer and ``embeddings/``.

On the hub (``kyutai/pocket-tts``, gated, with the voice-cloning encoder; else the ungated
``kyutai/pocket-tts-without-voice-cloning``, predefined voices only, a warning says so):
weights and tokenizer at the revisions pinned in the config (``revision`` overrides them),
voices ``languages/<pack>/embeddings/<name>.safetensors`` fetched on first use, all through
the standard HF cache (``HF_TOKEN`` / ``HF_HUB_OFFLINE`` apply). With ``model_dir`` the same
files are read from a local folder and nothing is downloaded; a ``config.json`` there
(upstream schema) replaces the registry config.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from ....errors import (
    GatedRepoError,
    HubUnreachableError,
    PackFilesMissingError,
    UnknownVoiceError,
)
from ....model.config import VOICES_REPO, VOICES_REVISION, HubFile, ModelConfig, get_config
from ....model.config_reference import is_config_reference
from ....model.languages import CATALOGUE_VOICES
from ....model.packs import (
    GATED_REPO_URL,
    PackFiles,
    PackRequest,
    cache_miss,
    hub_download,
    hub_location,
    load_local_config,
    local_voices,
    not_cached,
)
from ....model.upstream_config import load_config_pack
from .checkpoint import expected_shapes, is_cloning_key

logger = logging.getLogger(__name__)

#: Voices upstream ships (every pack carries every name; ``languages`` records which language
#: each was recorded in).
KNOWN_VOICES: tuple[str, ...] = CATALOGUE_VOICES


def select_voices(choice: str) -> list[str] | None:
    """The voices a ``--voices`` value names: None for "all" (every voice of the catalogue),
    [] for "none" or nothing, else the comma-separated names."""
    choice = choice.strip()
    if choice == "all":
        return None
    if choice in ("", "none"):
        return []
    return [name.strip() for name in choice.split(",") if name.strip()]


WEIGHTS_FILE = "model.safetensors"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model")
VOICES_FOLDER = "embeddings"


def find_numpy_pack_files(request: PackRequest) -> PackFiles:
    """The NumPy layout's pack for a request: an upstream config, a local folder, or the hub."""
    if is_config_reference(request.config_name):
        pack = load_config_pack(
            request.config_name, token=request.token, voice_cloning=request.voice_cloning
        )
        cloning = pack.has_voice_cloning and _file_has_cloning_weights(pack.weights, pack.config)
        return replace(pack, has_voice_cloning=cloning)
    if request.model_dir is not None:
        return resolve_local_pack(request.config_name, request.model_dir)
    return resolve_hub_pack(
        request.config_name,
        revision=request.revision,
        token=request.token,
        voice_cloning=request.voice_cloning,
    )


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
    names, fetch = local_voices(voices_dir)
    return PackFiles(
        config=config,
        weights=folder / WEIGHTS_FILE,
        tokenizer=tokenizer,  # type: ignore[arg-type]  (checked above)
        voice_names=names,
        has_voice_cloning=_file_has_cloning_weights(folder / WEIGHTS_FILE, config),
        backend_kind="numpy",
        model_dir=folder,
        voices_dir=voices_dir,
        _fetch_voice=fetch,
    )


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
    try:
        keys = set(_safetensors_keys(path))
    except (OSError, ValueError):
        # Unreadable: the weights loader reports it properly.
        return False
    needed = [k for k in expected_shapes(config) if is_cloning_key(k)]
    return bool(needed) and all(k in keys for k in needed)


def _safetensors_keys(path: Path) -> list[str]:
    with open(path, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        if not 0 < size < 100_000_000:
            raise ValueError(f"{path}: not a safetensors file")
        header = json.loads(f.read(size))
    return [k for k in header if k != "__metadata__"]


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
        if not (not_cached(exc) and not_cached(gated_failure)):
            raise
        tried = (
            f": tried {hub_location(gated, revision)} (with voice cloning), then "
            f"{hub_location(ungated, revision)} (without)"
        )
        unreachable = exc.reason if isinstance(exc, HubUnreachableError) else None
        raise cache_miss("weights are", unreachable, tried) from exc
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
