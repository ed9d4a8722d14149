"""Spoken forms the caller chose: ``<sub alias="...">...</sub>`` and a user lexicon.

Both run before every other rule, and what they produce is protected from those rules: it is
parked behind a private-use character and put back at the very end.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ...errors import LexiconError

# Bounded lengths keep a stray "<sub" in long text from costing quadratic time.
_SUB = re.compile(r"<sub\s+alias\s*=\s*([\"'])(.{0,500}?)\1\s*>(.{0,2000}?)</sub\s*>", re.I | re.S)
_PRIVATE = re.compile("[\ue000-\uf8ff]")
_FIRST = 0xE000
_LAST = 0xF8FF


class Protected:
    """Spoken text parked during normalization, one private-use character per piece."""

    def __init__(self) -> None:
        self.pieces: list[str] = []

    def hold(self, spoken: str) -> str:
        """A placeholder for ``spoken`` (the text itself once every slot is taken)."""
        if _FIRST + len(self.pieces) > _LAST:
            return spoken
        self.pieces.append(spoken)
        return chr(_FIRST + len(self.pieces) - 1)

    def restore(self, text: str) -> str:
        """Put every parked piece back (placeholders lost by other rules stay lost)."""
        if not self.pieces:
            return text
        return _PRIVATE.sub(lambda m: self._piece(ord(m[0]) - _FIRST), text)

    def _piece(self, index: int) -> str:
        return self.pieces[index] if index < len(self.pieces) else ""


def strip_private_use(text: str) -> str:
    """Remove private-use characters (unspeakable, and reserved for placeholders)."""
    return _PRIVATE.sub("", text) if _PRIVATE.search(text) else text


def substitute_sub_tags(text: str, protected: Protected) -> str:
    """``<sub alias="en-vidia">NVIDIA</sub>`` → the alias, protected from other rules."""
    if "<" not in text:
        return text
    return _SUB.sub(lambda m: protected.hold(m[2]), text)


def sub_tag_written(text: str) -> str:
    """``text`` with each ``<sub alias="…">written</sub>`` element shown as its written form."""
    if "<" not in text:
        return text
    return _SUB.sub(lambda m: m[3], text)


class Lexicon:
    """Whole-word replacements chosen by the user, e.g. ``{"NVIDIA": "en-vidia"}``.

    Case rules: a key with any capital letter matches exactly as written ("US" never matches
    "us"); an all-lowercase key matches in any case ("gif" matches "GIF", "Gif"), and when the
    match starts with a capital followed by lowercase letters, so does the spoken form.
    Longer keys win over shorter ones.
    """

    def __init__(self, entries: Mapping[str, str]) -> None:
        if not isinstance(entries, Mapping):
            raise LexiconError(
                "a lexicon must be a mapping of written → spoken strings, "
                f"not {type(entries).__name__}"
            )
        exact: dict[str, str] = {}
        folded: dict[str, str] = {}
        for written, spoken in entries.items():
            if not isinstance(written, str) or not isinstance(spoken, str):
                raise LexiconError(
                    f"lexicon entry {written!r}: {spoken!r} must map a string to a string"
                )
            if not written.strip():
                raise LexiconError("a lexicon key must contain something besides spaces")
            if written == written.lower():
                folded[written.casefold()] = spoken
            else:
                exact[written] = spoken
        self.exact = exact
        self.folded = folded
        alternatives = sorted(
            [(k, False) for k in exact] + [(k, True) for k in folded],
            key=lambda item: len(item[0]),
            reverse=True,
        )
        parts = [f"(?i:{re.escape(k)})" if fold else re.escape(k) for k, fold in alternatives]
        self._re = re.compile(r"(?<!\w)(?:" + "|".join(parts) + r")(?!\w)") if parts else None

    def __len__(self) -> int:
        return len(self.exact) + len(self.folded)

    def apply(self, text: str, protected: Protected) -> str:
        """Replace every lexicon word in ``text`` with a protected placeholder."""
        if self._re is None:
            return text
        return self._re.sub(lambda m: protected.hold(self._spoken(m[0])), text)

    def _spoken(self, written: str) -> str:
        if written in self.exact:
            return self.exact[written]
        spoken = self.folded.get(written.casefold())
        # A case-insensitive match that casefold() does not map back.
        if spoken is None:
            return written
        if written[:1].isupper() and written[1:] != written[1:].upper() and spoken[:1].islower():
            return spoken[0].upper() + spoken[1:]
        return spoken
