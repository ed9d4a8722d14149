"""Where the compiled kernels are cached on disk, and whether this install has compiled them.

numba compiles the kernels (``kernels.py``) the first time a process of an install location
(a venv, a clone, a container image) calls them, 20–30 s on two cores, and caches the code
in the folder numba picks for the kernels' source: ``NUMBA_CACHE_DIR`` when set, else the
``__pycache__`` beside the source when it is writable, else a per-user folder. A marker file
there, written once the warm-up has compiled everything, tells the next process the cache is
filled; without it the first compile says so on stderr before it starts, in one line.
"""

from __future__ import annotations

import hashlib
import platform
import sys
from pathlib import Path
from types import ModuleType

#: The source files the compiled code comes from (a change to any of them recompiles).
SOURCES = ("kernel_base.py", "matmul_kernels.py", "layer_kernels.py", "window_kernels.py")
#: How long the first compile takes on two cores (measured here: 15–35 s as the shared cores
#: were busy; the issue's runs: 16–21 s).
COMPILE_ESTIMATE = "20–30 s"


def cache_folder(kernels: ModuleType) -> Path | None:
    """The folder numba caches the kernels in (None if this numba does not say)."""
    cache = getattr(kernels.layer_norm_rows, "_cache", None)  # numba's FunctionCache
    path = getattr(cache, "_cache_path", None)
    return Path(path) if path else None


def _marker(folder: Path) -> Path:
    import numba

    digest = hashlib.sha256(f"{numba.__version__} {sys.version} {platform.machine()}".encode())
    source_folder = Path(__file__).parent
    for name in SOURCES:
        digest.update((source_folder / name).read_bytes())
    return folder / f"pipecat_pocket_tts-kernels-{digest.hexdigest()[:16]}.compiled"


def is_compiled(kernels: ModuleType) -> bool:
    """Whether this install's cache holds the kernels of these sources and this numba."""
    folder = cache_folder(kernels)
    return folder is not None and _marker(folder).exists()


def announce_compile(kernels: ModuleType) -> None:
    """One stderr line: what is compiled, about how long, where it is kept."""
    folder = cache_folder(kernels)
    where = f"cached in {folder}" if folder is not None else "cached by numba"
    print(
        f"compiling the numba kernels for this install ({COMPILE_ESTIMATE}, once; {where}; "
        "`pipecat-pocket-tts warmup` does it ahead, e.g. in an image build)",
        file=sys.stderr,
        flush=True,
    )


def mark_compiled(kernels: ModuleType) -> Path | None:
    """Record that the cache is filled; returns the marker, or None where it cannot be written
    (a read-only cache: the next process announces its compile again, as it compiles again)."""
    folder = cache_folder(kernels)
    if folder is None:
        return None
    marker = _marker(folder)
    try:
        marker.touch()
    except OSError:
        return None
    return marker
