"""Word timestamps written to a file: JSON, SubRip (.srt) or WebVTT (.vtt), by extension.

JSON: ``{"words": [{"text", "start", "end", "estimated"}, ...]}`` (seconds, utterance clock).
SRT and VTT: one cue per word (cues shorter than a frame keep one frame, so players show them).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from ..audio import output_file
from ..errors import TimestampsFormatError
from .word_timing import Word

FORMATS = (".json", ".srt", ".vtt")
MIN_CUE_SECONDS = 0.08


def timestamps_text(words: Sequence[Word], suffix: str) -> str:
    """The file content of ``words`` for a file ending in ``suffix`` (.json, .srt or .vtt)."""
    suffix = suffix.lower()
    if suffix == ".json":
        items = [
            {
                "text": w.text,
                "start": round(w.start, 3),
                "end": round(w.end, 3),
                "estimated": w.estimated,
            }
            for w in words
        ]
        return json.dumps({"words": items}, ensure_ascii=False, indent=1) + "\n"
    if suffix not in (".srt", ".vtt"):
        raise TimestampsFormatError(
            f"timestamps file type {suffix or '(none)'!r} is not supported; "
            f"name the file with one of {', '.join(FORMATS)}"
        )
    mark = "," if suffix == ".srt" else "."
    cues = []
    for number, w in enumerate(words, 1):
        end = max(w.end, w.start + MIN_CUE_SECONDS)
        span = f"{_clock(w.start, mark)} --> {_clock(end, mark)}"
        cues.append(f"{number}\n{span}\n{w.text}\n" if suffix == ".srt" else f"{span}\n{w.text}\n")
    head = "WEBVTT\n\n" if suffix == ".vtt" else ""
    return head + "\n".join(cues)


def write_timestamps(words: Sequence[Word], path: str | os.PathLike[str]) -> Path:
    """Write ``words`` to ``path`` in the format its extension names; returns the path.

    ``path`` follows the rules of ``output_file`` (a symlink's target replaced, a device or
    FIFO written through, a regular file atomically, the folder must exist).
    """
    output = output_file.check_output(path)
    text = timestamps_text(words, output.path.suffix)
    output_file.write_output(output, text.encode("utf-8"))
    return output.path


def _clock(seconds: float, mark: str) -> str:
    ms = max(0, round(seconds * 1000))
    h, rest = divmod(ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, ms = divmod(rest, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{mark}{ms:03d}"


__all__ = ["FORMATS", "timestamps_text", "write_timestamps"]
