"""Pauses written in the text: SSML ``<break/>`` tags, found before normalization.

``<break time="800ms"/>``, ``<break time="1.5s"/>`` or ``<break strength="strong"/>`` (SSML 1.1's
strengths: none, x-weak, weak, medium, strong, x-strong; a bare ``<break/>`` is medium) become a
``Break`` of that many seconds between the text around it, which is spoken as if the tag were
not there; the tag itself is never said. Durations of the strengths are those Azure's SSML
documents (0, 0.25, 0.5, 0.75, 1.0, 1.25 s); SSML leaves them to the engine.

A tag that cannot be read (an unknown unit or attribute, a negative time) or asks for more than
``MAX_BREAK_SECONDS`` raises ``BreakTagError``. ``BreakStream`` does the same for text arriving
in fragments (LLM tokens): it holds back only a possible tag still open, never more.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import BreakTagError

MAX_BREAK_SECONDS = 10.0
# An open "<break" longer than this is not a tag being streamed.
MAX_TAG_CHARS = 200

STRENGTHS = {
    "none": 0.0,
    "x-weak": 0.25,
    "weak": 0.5,
    "medium": 0.75,
    "strong": 1.0,
    "x-strong": 1.25,
}

_TAG = re.compile(r"<\s*break\b([^<>]*?)/?\s*>", re.IGNORECASE)
_ATTRIBUTE = re.compile(r"""\s*([A-Za-z_-]+)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'/>]+))""")
_TIME = re.compile(r"^\s*([+-]?\d+(?:\.\d+)?|[+-]?\.\d+)\s*(ms|s)\s*$", re.IGNORECASE)
_OPENING = "<break"


@dataclass(frozen=True)
class Break:
    """A pause of ``seconds`` at this point of the text."""

    seconds: float


Piece = str | Break


def has_breaks(text: str) -> bool:
    """Whether ``text`` holds a ``<break`` tag (cheap: no parsing)."""
    return "<" in text and _TAG.search(text) is not None


def split_breaks(text: str) -> list[Piece]:
    """``text`` → its text pieces and ``Break``s in order (no empty strings; a text without
    tags is ``[text]``). Raises ``BreakTagError`` for a tag it cannot honour."""
    pieces: list[Piece] = []
    position = 0
    for match in _TAG.finditer(text):
        if match.start() > position:
            pieces.append(text[position : match.start()])
        pieces.append(Break(break_seconds(match.group(0), match.group(1))))
        position = match.end()
    if position < len(text):
        pieces.append(text[position:])
    return pieces


def strip_breaks(text: str) -> str:
    """``text`` without its break tags (what is said and what the words are read from)."""
    return "".join(p for p in split_breaks(text) if isinstance(p, str))


def break_seconds(tag: str, attributes: str) -> float:
    """The pause one tag asks for, in seconds."""
    values: dict[str, str] = {}
    rest = attributes
    while rest.strip():
        match = _ATTRIBUTE.match(rest)
        if match is None:
            raise BreakTagError(f"cannot read the attributes of {tag!r}: {_USE}")
        name = match.group(1).lower()
        values[name] = next(v for v in match.group(2, 3, 4) if v is not None)
        rest = rest[match.end() :]
    unknown = sorted(set(values) - {"time", "strength"})
    if unknown:
        raise BreakTagError(f"{tag!r}: unknown attribute(s) {', '.join(unknown)}; {_USE}")
    if "time" in values:
        seconds = _time_seconds(tag, values["time"])
    else:
        strength = values.get("strength", "medium").strip().lower()
        if strength not in STRENGTHS:
            raise BreakTagError(
                f"{tag!r}: strength must be one of {', '.join(STRENGTHS)}, got {strength!r}"
            )
        seconds = STRENGTHS[strength]
    if seconds > MAX_BREAK_SECONDS:
        raise BreakTagError(
            f"{tag!r} asks for {seconds:g} s of silence; a break is at most "
            f"{MAX_BREAK_SECONDS:g} s (use several sentences for longer gaps)"
        )
    return seconds


def _time_seconds(tag: str, value: str) -> float:
    match = _TIME.match(value)
    if match is None:
        raise BreakTagError(f"{tag!r}: time must be a number with ms or s, got {value!r}; {_USE}")
    number = float(match.group(1))
    if number < 0:
        raise BreakTagError(f"{tag!r}: a break cannot be negative ({value!r})")
    return number / 1000.0 if match.group(2).lower() == "ms" else number


_USE = 'write <break time="500ms"/>, <break time="1s"/> or <break strength="strong"/>'


class BreakStream:
    """``split_breaks`` for text arriving in fragments: each ``push`` returns the pieces that
    are certain, holding back only a ``<`` that may open a break tag not yet closed."""

    def __init__(self) -> None:
        self._held = ""

    @property
    def holds_text(self) -> bool:
        """True while it holds back the start of a possible tag."""
        return bool(self._held)

    def push(self, fragment: str) -> list[Piece]:
        text = self._held + fragment
        cut = _open_tag_start(text)
        self._held = text[cut:]
        if len(self._held) > MAX_TAG_CHARS:
            raise BreakTagError(f"a break tag is not closed: {self._held[:40]!r}...; {_USE}")
        return split_breaks(text[:cut]) if cut else []

    def flush(self) -> list[Piece]:
        """The text ended: what is held (a tag left open is an error)."""
        held, self._held = self._held, ""
        if held.lower().startswith(_OPENING) and (len(held) == 6 or not held[6].isalnum()):
            raise BreakTagError(f"a break tag is not closed at the end of the text: {held!r}")
        return split_breaks(held) if held else []


def _open_tag_start(text: str) -> int:
    """Where a possible unclosed break tag starts at the end of ``text`` (len(text): none)."""
    start = text.rfind("<")
    if start < 0 or ">" in text[start:]:
        return len(text)
    opened = re.sub(r"\s+", "", text[start : start + len(_OPENING) + 2]).lower()
    if _OPENING.startswith(opened) or opened.startswith(_OPENING):
        return start
    return len(text)


__all__ = [
    "MAX_BREAK_SECONDS",
    "STRENGTHS",
    "Break",
    "BreakStream",
    "Piece",
    "break_seconds",
    "has_breaks",
    "split_breaks",
    "strip_breaks",
]
