"""The CoreML packs' hub repository: snapshot downloads with our errors, cache housekeeping."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from ...errors import GatedRepoError, PackFilesMissingError
from ...model.hub_reachability import hub_unreachable
from ...model.packs import cache_miss

logger = logging.getLogger(__name__)

REPO = "FluidInference/pocket-tts-coreml"
#: Hub revision the packs are read at (pin a commit for reproducible downloads).
REVISION = "main"
#: The FlowLM model of each precision.
FLOWLM_MODELS = {"fp16": "flowlm_step", "int8": "flowlm_stepv2"}


def download(
    patterns: list[str],
    *,
    revision: str,
    token: str | bool | None,
    what: str,
    repo: str = REPO,
) -> Path:
    """``snapshot_download`` of the files matching ``patterns`` from ``repo`` (FluidInference's
    by default, or another repository in its layout); returns the snapshot folder.

    Hub errors become ``PackFilesMissingError`` / ``GatedRepoError`` saying what to do; with the
    hub unreachable only the cache is read (``HubUnreachableError`` for what it lacks).
    """
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub import errors as hf_errors

    at = f"{repo}@{revision}"
    # Probed once per process before the first request; unreachable or offline by choice,
    # only the cache is read (huggingface_hub would still enter its HTTP layer).
    unreachable = hub_unreachable()
    try:
        return Path(
            snapshot_download(
                repo,
                revision=revision,
                allow_patterns=patterns,
                token=token,
                local_files_only=unreachable is not None or constants.HF_HUB_OFFLINE,
            )
        )
    except hf_errors.LocalEntryNotFoundError as exc:
        raise cache_miss(f"CoreML {what} of {at} are", unreachable) from exc
    except (hf_errors.GatedRepoError, hf_errors.RepositoryNotFoundError) as exc:
        raise GatedRepoError(
            f"{repo} is not accessible ({type(exc).__name__}); check HF_TOKEN / token=, or "
            "pass model_dir=<a local copy of the pack>."
        ) from exc
    except hf_errors.RevisionNotFoundError as exc:
        raise PackFilesMissingError(
            f"revision {revision!r} does not exist in {repo}; pass a valid revision (or none)."
        ) from exc
    except (OSError, ConnectionError) as exc:
        raise PackFilesMissingError(
            f"CoreML {what} of {at} could not be downloaded ({type(exc).__name__}: {exc}). "
            "Check the connection and retry, or pass model_dir=."
        ) from exc


def remove_unused_variant(pack_root: Path, *, keep: str) -> list[Path]:
    """Delete the FlowLM ``.mlmodelc`` of the other precision from a cached pack.

    In the Hugging Face cache the snapshot entries are links to blobs: the links go, and each
    blob no other snapshot entry points to goes with them. Returns the removed folders.
    """
    if keep not in FLOWLM_MODELS:
        raise ValueError(f"precision must be one of {', '.join(FLOWLM_MODELS)}, got {keep!r}")
    removed = []
    for precision, model in FLOWLM_MODELS.items():
        folder = pack_root / f"{model}.mlmodelc"
        if precision == keep or not folder.exists():
            continue
        blobs = {p.resolve() for p in folder.rglob("*") if p.is_symlink()}
        shutil.rmtree(folder, ignore_errors=True)
        snapshots = next((p for p in pack_root.parents if p.name == "snapshots"), None)
        if snapshots is not None and blobs:
            blob_dir = (snapshots.parent / "blobs").resolve()
            still_used = {p.resolve() for p in snapshots.rglob("*") if p.is_symlink()}
            for blob in blobs - still_used:
                if blob.parent == blob_dir and blob.is_file():
                    blob.unlink()
        logger.info("removed the unused FlowLM variant %s", folder)
        removed.append(folder)
    return removed
