"""Where output goes, by the rules audio tools follow: the one place that writes output files.

- ``"-"``: standard output (refused for audio when it is a terminal).
- A device or a FIFO (``/dev/stdout``, ``/dev/null``, ``mkfifo``): written through, never
  replaced.
- A symlink stays a link: its target is written by these rules (a regular target atomically).
- A regular file (or a new one): written beside itself and renamed over it when complete.
- A missing folder is an error (none is created); so is a folder as the output.

Audio goes out as WAV (16-bit PCM) or raw (headerless 16-bit little-endian PCM); an extension
naming neither is refused with the formats that are written.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from ..atomic_files import atomic_path
from ..errors import OutputFormatError

STDOUT = "-"

#: The audio formats written, each with the file extensions that name it.
AUDIO_FORMATS: dict[str, tuple[str, ...]] = {"wav": (".wav", ".wave"), "raw": (".raw", ".pcm")}


class OutputKind(Enum):
    STDOUT = "stdout"
    # A device or a FIFO is opened and written, never replaced.
    THROUGH = "through"
    # A regular file gets a temp file beside it, renamed over it.
    ATOMIC = "atomic"


@dataclass(frozen=True)
class Output:
    """A checked output: what to write to and how. ``path`` is what the caller named."""

    path: Path
    kind: OutputKind
    # What is opened or replaced: ``path``, or the target of a link to a file.
    target: Path

    @property
    def name(self) -> str:
        return "stdout" if self.kind is OutputKind.STDOUT else str(self.path)


def check_output(path: str | os.PathLike[str]) -> Output:
    """``path`` checked as an output before any work is spent on its content.

    Raises ``FileNotFoundError`` (folder missing), ``NotADirectoryError``, ``IsADirectoryError``
    or ``PermissionError`` (all ``OSError``) naming the path and what to do.
    """
    if os.fspath(path) == STDOUT:
        return Output(Path(STDOUT), OutputKind.STDOUT, Path(STDOUT))
    path = Path(path)
    try:
        # This follows symlinks (/dev/stdout to a pipe).
        mode: int | None = path.stat().st_mode
    except FileNotFoundError:
        # A new file, or a link to one.
        mode = None
    except OSError as exc:
        raise type(exc)(exc.errno, f"cannot write {path}: {exc.strerror or exc}") from exc
    if mode is not None and stat.S_ISDIR(mode):
        raise IsADirectoryError(f"cannot write {path}: it is a folder")
    if mode is not None and not stat.S_ISREG(mode):
        if stat.S_ISSOCK(mode):
            raise OSError(f"cannot write {path}: it is a socket")
        if not os.access(path, os.W_OK):
            raise PermissionError(f"cannot write {path}: permission denied")
        return Output(path, OutputKind.THROUGH, path)
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    _check_folder(path, target.parent)
    return Output(path, OutputKind.ATOMIC, target)


def _check_folder(path: Path, folder: Path) -> None:
    if not folder.exists():
        raise FileNotFoundError(
            f"cannot write {path}: folder {folder} does not exist (create it first)"
        )
    if not folder.is_dir():
        raise NotADirectoryError(f"cannot write {path}: {folder} is not a folder")
    # The only reliable test (root, read-only mounts, ACLs) is to create a file there.
    try:
        fd, probe = tempfile.mkstemp(prefix=".probe.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise type(exc)(exc.errno, f"cannot write {path}: {exc.strerror or exc}") from exc
    os.close(fd)
    os.unlink(probe)


def audio_format(output: Output, requested: str | None = None) -> str:
    """The audio format to write to ``output``: ``requested``, else its extension's.

    A regular file needs an extension naming a format unless one is requested, and a requested
    format must agree with a known extension; devices, FIFOs and stdout take WAV by default.
    Raises ``OutputFormatError`` naming the formats written.
    """
    if output.kind is OutputKind.STDOUT and sys.stdout.isatty():
        raise OutputFormatError(
            "stdout is a terminal, not a place for audio: pipe it (| aplay, | ffplay -) "
            "or name a file"
        )
    if requested is not None and requested not in AUDIO_FORMATS:
        raise OutputFormatError(f"unknown audio format {requested!r}; use {_formats_named()}")
    suffix = output.path.suffix.lower() if output.kind is not OutputKind.STDOUT else ""
    named = next((fmt for fmt, exts in AUDIO_FORMATS.items() if suffix in exts), None)
    if requested is not None:
        if named is not None and named != requested:
            raise OutputFormatError(
                f"{output.name} names a {named} file but the format asked for is {requested}"
            )
        return requested
    if named is not None:
        return named
    if output.kind is OutputKind.ATOMIC:
        raise OutputFormatError(
            f"cannot write audio as {output.path.name!r}: the formats written are "
            f"{_formats_named()}; name the file by one of them, or pass audio_format="
        )
    return "wav"


def _formats_named() -> str:
    return ", ".join(f"{fmt} ({'/'.join(exts)})" for fmt, exts in AUDIO_FORMATS.items())


def write_output(output: Output, data: bytes) -> None:
    """Write ``data`` to a checked output by its rules (see the module docstring)."""
    if output.kind is OutputKind.STDOUT:
        stream = sys.stdout.buffer
        stream.write(data)
        stream.flush()
    elif output.kind is OutputKind.THROUGH:
        try:
            with open(output.target, "wb") as f:
                f.write(data)
        except OSError as exc:
            raise type(exc)(exc.errno, f"cannot write {output.path}: {exc.strerror}") from exc
    else:
        with atomic_path(output.target) as tmp:
            tmp.write_bytes(data)
