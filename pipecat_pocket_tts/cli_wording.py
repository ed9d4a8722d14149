"""Engine messages in the terms of a command line: the API's argument names (``model_dir=``)
as that command's options, flags (``--model-dir X``) or environment variables
(``POCKET_TTS_MODEL_DIR=X``). Used by the CLI and by the example bots."""

from __future__ import annotations

import re
from collections.abc import Mapping

#: Argument names that are no English word, replaced even without ``=``: ``model_dir /x …``.
_BARE = ("model_dir", "compute_units", "eos_threshold", "max_frames")
# The command lines have no token option: HF_TOKEN is the way.
_TOKEN_ARGUMENT = re.compile(r" \(or pass token=\)| / token=")


def in_terms_of(message: str, names: Mapping[str, str], *, joiner: str = " ") -> str:
    """``message`` with each API argument of ``names`` replaced by its option name.

    ``backend='numpy'`` becomes ``--backend numpy`` (``joiner`` " ") or ``BACKEND=numpy``
    ("="); ``model_dir=<a folder>`` keeps its placeholder; names inside words and paths stay.
    """
    if not names:
        return message
    message = _TOKEN_ARGUMENT.sub("", message)
    alternatives = "|".join(re.escape(name) for name in names)
    assignment = re.compile(r"(?<![\w/.-])(" + alternatives + r")=(?:'([^']*)'|(<[^>]*>))?")

    def option(match: re.Match[str]) -> str:
        value = match.group(2) if match.group(2) is not None else match.group(3)
        name = names[match.group(1)]
        return name if value is None else f"{name}{joiner}{value}"

    message = assignment.sub(option, message)
    bare = [name for name in _BARE if name in names]
    if bare:
        pattern = re.compile(r"(?<![\w/.-])(" + "|".join(bare) + r")(?![\w/])")
        message = pattern.sub(lambda m: names[m.group(1)], message)
    return message
