"""How a raw line of text begins: a list, heading, quote or table mark, or a date like one.

Markdown ends a line that starts with such a mark with a stop, so the line before it ends its
sentence and the line itself is a sentence of its own; the streaming path has to know that
from the raw text, before normalizing it (``Chunker.certain_end``). A number mark followed by
a month ("1. Mai", "2) Apr.") is a date the normalizer reads as one, not a list item.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache

from .spoken.languages import language_code
from .spoken.pipeline import spoken_form

BLOCK_MARK = re.compile(r"[-*+•‣◦▪>]|#{1,6}|\d{1,2}[.)]")
_NUMBER_MARK = re.compile(r"\d{1,2}[.)]")


@cache
def _month_starts(language: str) -> Callable[[str], bool]:
    """Whether a text starts with a month name in ``language`` (never, for a language the
    normalizer does not know)."""
    try:
        return spoken_form(language_code(language)).markdown.month_starts
    except Exception:
        # A custom pack's language: no dates are read there either.
        return lambda text: False


class LineMarks:
    """The marks that begin a raw line, read as the normalizer of ``language`` reads them."""

    def __init__(self, language: str) -> None:
        self._month_starts = _month_starts(language)

    def opens_a_line(self, words: list[str], i: int, last_complete: bool) -> bool:
        """Whether a raw line that starts with ``words[i]`` starts a sentence once normalized:
        a capital letter, or a block mark (complete: "1" may become "12" or "1." yet; a number
        mark needs the word after it, as a month there makes it a date)."""
        word = words[i]
        if word[0].isalpha():
            return word[0].isupper()
        if word[0] in "|>":
            return True
        complete = i + 1 < len(words) or last_complete
        if not complete or BLOCK_MARK.fullmatch(word) is None:
            return False
        if _NUMBER_MARK.fullmatch(word) is None:
            return True
        following_complete = i + 2 < len(words) or (i + 1 < len(words) and last_complete)
        return following_complete and not self._month_starts(words[i + 1])

    def block_lines(
        self, words: list[str], breaks: list[bool], starts_line: bool, in_block_line: bool
    ) -> list[bool]:
        """Per word: whether its line starts with a block mark (Markdown ends such a line)."""
        out = []
        block = in_block_line and not starts_line
        for i, word in enumerate(words):
            if breaks[i - 1] if i else starts_line:
                block = self._is_block_mark(word, words[i + 1] if i + 1 < len(words) else "")
            out.append(block)
        return out

    def _is_block_mark(self, word: str, following: str) -> bool:
        if _NUMBER_MARK.fullmatch(word) is not None and following:
            return not self._month_starts(following)
        return BLOCK_MARK.fullmatch(word) is not None or word[0] == "|"

    def starts_block_line(self, text: str) -> bool:
        """Whether the line ``text`` begins (raw) starts with a list, heading, quote or table
        mark (a number mark followed by a month is a date)."""
        words = text.split(maxsplit=2)
        return bool(words) and self._is_block_mark(words[0], words[1] if len(words) > 1 else "")


__all__ = ["BLOCK_MARK", "LineMarks"]
