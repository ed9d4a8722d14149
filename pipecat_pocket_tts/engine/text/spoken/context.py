"""The words around a match: what decides whether "112" is a phone number or a count.

Rules that read the same digits two ways (a phone number or a grouped number, a score or a
fraction, a date or a ratio) look at the few words just before or after the digits.
"""

from __future__ import annotations

import re

# Characters looked back: enough for a cue and two words.
_WINDOW = 60
_TOKEN = re.compile(r"[^\W\d_]+(?:[-'’][^\W\d_]+)*|\d+|[^\w\s]")
_NEXT_WORD = re.compile(r"[ \t\u00a0]*([^\W\d_]+)")
# Marks that may stand between a cue and the number ("Tel.: ", "call (", "llame al «")
_BRIDGES = frozenset(":(«“\"'")

# Words that follow an amount but are no noun counted by it ("½ of it", "3/4 de litre").
FUNCTION_WORDS = frozenset(
    [
        "of",
        "the",
        "a",
        "an",
        "and",
        "or",
        "to",
        "in",
        "on",
        "de",
        "del",
        "da",
        "do",
        "du",
        "des",
        "di",
        "della",
        "dello",
        "van",
        "von",
    ]
)


def cue_before(text: str, start: int, cues: frozenset[str], *, gap: int = 2) -> bool:
    """Whether a word of ``cues`` comes just before ``start`` in the same clause.

    At most ``gap`` other words may stand between ("call me at", "ruf die"); a digit or any
    punctuation other than ":", "(" or quotes ends the search, except the dot of an
    abbreviated cue ("Tel. 030..."). Cues are lowercase; the text may be in any case.
    """
    if not cues:
        return False
    tokens = _TOKEN.findall(text, max(0, start - _WINDOW), start)
    words = 0
    after_dot = False
    for token in reversed(tokens):
        if token[0].isalpha():
            if token.lower() in cues:
                return True
            if after_dot:
                return False
            words += 1
            if words > gap:
                return False
        elif token == ".":
            if after_dot or words:
                return False
            after_dot = True
        elif token not in _BRIDGES:
            return False
    return False


def next_word(text: str, end: int) -> str:
    """The word right after position ``end`` (only spaces between), or ""."""
    m = _NEXT_WORD.match(text, end)
    return m[1] if m else ""
