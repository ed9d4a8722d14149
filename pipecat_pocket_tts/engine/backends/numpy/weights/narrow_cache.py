"""A cached copy of a checkpoint's narrowed FlowLM linears, so later loads skip quantizing.

The first narrow load of a checkpoint quantizes its FlowLM attention and feed-forward linears
(``linears.make_linear``) and writes the narrow arrays once, with the safetensors library, to
``<cache root>/narrow/<folder>-<path digest>.<precision>.safetensors``; later loads map that
copy read-only (pages shared between processes) and never read the fp32 bytes of those
tensors. The copy's metadata records what it was made from — resolved source path, size and
mtime, precision, a format version (the layout and quantization rule) — and a copy that does
not match, or does not parse, is ignored and rewritten (logged). Writes go to a temporary
file renamed into place, so concurrent processes only ever see whole copies. An unwritable
cache folder means quantizing in memory at every load (logged once at info).

Cache root: ``$PIPECAT_POCKET_TTS_CACHE``, else ``$XDG_CACHE_HOME/pipecat_pocket_tts``, else
``~/.cache/pipecat_pocket_tts`` (the layout Hugging Face uses for its own cache).
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

from ....errors import WeightsMismatchError
from ..layers.linears import Linear, narrow_layout, restore_linear
from .safetensors_file import map_tensors

logger = logging.getLogger(__name__)

#: Environment variable that moves the cache root.
CACHE_ENV = "PIPECAT_POCKET_TTS_CACHE"
#: Bumped whenever the stored layout or the quantization rule changes.
# Version 2 is int8 with one scale per output row (1: one per 64 inputs).
FORMAT_VERSION = "2"
_unwritable_logged: set[Path] = set()


def cache_root() -> Path:
    """Where this package caches derived files (``CACHE_ENV``, else the XDG / HF-like default)."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base).expanduser() if base else Path.home() / ".cache") / "pipecat_pocket_tts"


class NarrowCache:
    """The cached narrow copy of one checkpoint file at one precision."""

    def __init__(
        self, source: str | os.PathLike[str], precision: str, shapes: Mapping[str, tuple[int, int]]
    ) -> None:
        """``shapes``: the narrowed keys and their [out, in] weight shapes in ``source``."""
        self.source = Path(source).resolve()
        self.precision = precision
        self.shapes = dict(shapes)
        stat = self.source.stat()
        self.identity = {
            "format": FORMAT_VERSION,
            "source": str(self.source),
            "size": str(stat.st_size),
            "mtime_ns": str(stat.st_mtime_ns),
            "precision": precision,
        }
        digest = hashlib.sha256(str(self.source).encode()).hexdigest()[:16]
        folder = cache_root() / "narrow"
        self.path = folder / f"{self.source.parent.name}-{digest}.{precision}.safetensors"

    def load(self) -> dict[str, Linear] | None:
        """The linears mapped from the copy, or None when there is no usable copy."""
        if not self.path.is_file():
            return None
        try:
            metadata, arrays = map_tensors(self.path)
        except (OSError, WeightsMismatchError) as exc:
            logger.warning(
                "the cached narrow weights %s are unreadable (%s): rebuilding", self.path, exc
            )
            return None
        if metadata != self.identity:
            changed = sorted(k for k in self.identity if metadata.get(k) != self.identity[k])
            logger.info(
                "the cached narrow weights %s were made from other weights (%s differ): rebuilding",
                self.path,
                ", ".join(changed),
            )
            return None
        linears = self._restore(arrays)
        if linears is None:
            logger.warning(
                "the cached narrow weights %s do not fit %s: rebuilding", self.path, self.source
            )
        else:
            logger.info("narrow weights (%s) mapped from the cache %s", self.precision, self.path)
        return linears

    def store(self, linears: Mapping[str, Linear]) -> bool:
        """Write the copy (temporary file, then rename); False if the folder is unwritable."""
        tensors = {
            f"{key}.{name}": np.ascontiguousarray(array)
            for key, linear in linears.items()
            for name, array in linear.arrays().items()
        }
        folder = self.path.parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=folder)
            os.close(handle)
            try:
                save_file(tensors, temporary, metadata=self.identity)
                # As readable as the Hugging Face cache's files.
                os.chmod(temporary, 0o644)
                os.replace(temporary, self.path)
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
        except OSError as exc:
            if folder not in _unwritable_logged:
                _unwritable_logged.add(folder)
                logger.info(
                    "narrow weights are quantized in memory at each load: the cache folder %s "
                    "is not writable (%s; set %s to move it)",
                    folder,
                    exc,
                    CACHE_ENV,
                )
            return False
        logger.info("narrow weights (%s) cached in %s", self.precision, self.path)
        return True

    def _restore(self, arrays: Mapping[str, np.ndarray]) -> dict[str, Linear] | None:
        """The linears of ``arrays`` (mapped from the copy), or None if any does not fit."""
        linears: dict[str, Linear] = {}
        used = 0
        for key, shape in self.shapes.items():
            parts = {}
            for name, (dtype, part_shape) in narrow_layout(self.precision, shape).items():
                array = arrays.get(f"{key}.{name}")
                if array is None or array.dtype != dtype or array.shape != part_shape:
                    return None
                parts[name] = array
            used += len(parts)
            linears[key] = restore_linear(self.precision, parts)
        return linears if used == len(arrays) else None
