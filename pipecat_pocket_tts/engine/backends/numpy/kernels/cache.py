"""Where numba caches the compiled kernels, and whether this install has compiled them, worked
out without importing numba (its import alone takes about a second).

numba compiles the kernels (``kernels.py``) the first time a process of an install location
(a venv, a clone, a container image) calls them, 10–30 s on two cores, and caches the code in
the first of these folders it can create and write (numba's cache locators, in
``numba/core/caching.py``):

1. ``NUMBA_CACHE_DIR`` (or ``cache_dir`` in a ``.numba_config.yaml`` of the working folder;
   the variable wins) joined with the sources' subfolder name;
2. ``__pycache__`` beside the kernels' sources;
3. numba's per-user cache folder joined with the subfolder name: ``$XDG_CACHE_HOME/numba``
   (default ``~/.cache/numba``) on Linux, ``~/Library/Caches/numba`` on macOS,
   ``%LOCALAPPDATA%\\numba\\Cache`` on Windows.

The subfolder name is the sources' folder name, ``_``, and the SHA-1 hex digest of that
folder's absolute path. With ``NUMBA_CACHE_LOCATOR_CLASSES`` numba follows locators of the
user's own, so the folder is unknown here (None) and no first compile is announced.

A marker file in the folder, written once the warm-up has compiled everything, tells the next
process the cache is filled; without it the first compile says so on stderr, in one line,
before numba is imported (``announce_first_compile``).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import sys
import tempfile
from pathlib import Path

#: The source files the compiled code comes from (a change to any of them recompiles).
SOURCES = (
    "base.py",
    "matmul.py",
    "layer.py",
    "window.py",
    "bf16.py",
    "int16.py",
    "int8_tiles.py",
)
#: How long the first compile takes on two cores (measured here: 12 s in a fresh clone on a
#: quiet machine, 15–35 s as the shared cores were busy; the issue's runs: 16–21 s).
COMPILE_ESTIMATE = "10–30 s"
#: The folder of the kernels' sources, as numba names it (an absolute path, links kept).
SOURCE_FOLDER = os.path.abspath(os.path.dirname(__file__))
#: numba's configuration file, read from the working folder.
NUMBA_CONFIG_FILE = ".numba_config.yaml"

_announced = False  # one line per process, whoever asks first (the CLI or the model load)


def numba_version() -> str | None:
    """The installed numba's version, from its metadata (numba is not imported); None if
    numba is not installed."""
    try:
        return importlib.metadata.version("numba")
    except importlib.metadata.PackageNotFoundError:
        return None


def _configured_cache_dir() -> str | None:
    """numba's CACHE_DIR setting: ``NUMBA_CACHE_DIR``, else the config file's ``cache_dir``,
    else "" (unset); None for a config file this rule cannot read (numba's import reports it)."""
    if "NUMBA_CACHE_DIR" in os.environ:
        return os.environ["NUMBA_CACHE_DIR"]
    if not os.path.isfile(NUMBA_CONFIG_FILE):
        return ""
    try:
        import yaml  # numba reads its config file only when PyYAML is installed
    except ImportError:
        return ""
    try:
        with open(NUMBA_CONFIG_FILE, encoding="utf-8") as file:
            settings = yaml.safe_load(file) or {}
    except (OSError, yaml.YAMLError):
        return None
    if not isinstance(settings, dict):
        return None
    value = next((v for k, v in settings.items() if str(k).upper() == "CACHE_DIR"), None)
    return "" if value is None else str(value)


def _subfolder(source_folder: str) -> str:
    """The name numba gives a source folder inside a shared cache folder."""
    digest = hashlib.sha1(source_folder.encode()).hexdigest()
    return f"{os.path.basename(source_folder)}_{digest}"


def _user_cache_root() -> str:
    """numba's per-user cache folder on this system."""
    if sys.platform == "win32":
        return os.path.join(os.environ.get("LOCALAPPDATA", ""), "numba", "Cache")
    if sys.platform == "darwin":
        return os.path.join(os.path.expanduser("~/Library/Caches"), "numba")
    return os.path.join(os.getenv("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "numba")


def _usable(folder: str) -> bool:
    """numba's test of a cache folder: it can be created and a file written in it."""
    try:
        os.makedirs(folder, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError:
        return False
    return True


def cache_folder(source_folder: str = SOURCE_FOLDER) -> Path | None:
    """The folder numba caches the kernels of ``source_folder`` in (creating it, as numba
    does); None where numba follows locators of the user's own, its config file cannot be
    read, or no folder is usable."""
    configured = _configured_cache_dir()
    if configured is None or os.environ.get("NUMBA_CACHE_LOCATOR_CLASSES"):
        return None
    candidates = [os.path.join(source_folder, "__pycache__")]
    if configured:
        candidates.insert(0, os.path.join(configured, _subfolder(source_folder)))
    candidates.append(os.path.join(_user_cache_root(), _subfolder(source_folder)))
    return next((Path(folder) for folder in candidates if _usable(folder)), None)


def _marker(folder: Path, version: str) -> Path:
    digest = hashlib.sha256(f"{version} {sys.version} {platform.machine()}".encode())
    for name in SOURCES:
        digest.update(Path(SOURCE_FOLDER, name).read_bytes())
    return folder / f"pipecat_pocket_tts-kernels-{digest.hexdigest()[:16]}.compiled"


def _marker_path() -> Path | None:
    """This install's marker (None: numba not installed, or its folder unknown)."""
    version = numba_version()
    folder = cache_folder() if version is not None else None
    return _marker(folder, version) if folder is not None and version is not None else None


def is_compiled() -> bool | None:
    """Whether this install's cache holds the kernels of these sources and this numba (None:
    unknown, numba not installed or following locators of the user's own)."""
    marker = _marker_path()
    return None if marker is None else marker.exists()


def announce_first_compile(*, ahead: bool = False) -> bool:
    """If the kernels are still to be compiled in this install: one stderr line (what, about
    how long, where it is kept; how to do it ahead, unless ``ahead``: the ``warmup`` command
    is doing just that), once per process. Returns whether they are still to be.

    Called where the compile starts (a model's load, after its pack was found), never on
    the chance of one: a command that fails first says nothing of it."""
    global _announced
    marker = _marker_path()
    if marker is None or marker.exists():
        return False
    if not _announced:
        _announced = True
        advice = (
            "" if ahead else "; `pipecat-pocket-tts warmup` does it ahead, e.g. in an image build"
        )
        print(
            f"compiling the numba kernels for this install ({COMPILE_ESTIMATE}, once; cached "
            f"in {marker.parent}{advice})",
            file=sys.stderr,
            flush=True,
        )
    return True


def mark_compiled() -> Path | None:
    """Record that the cache is filled; returns the marker, or None where it cannot be written
    (a read-only cache: the next process announces its compile again, as it compiles again)."""
    marker = _marker_path()
    if marker is None:
        return None
    try:
        marker.touch()
    except OSError:
        return None
    return marker
