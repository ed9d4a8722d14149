"""Bare numbers: ordinals, decades, years, digits inside words, and every number left over."""

from __future__ import annotations

import re

from .context import FUNCTION_WORDS
from .language import SpokenLanguage
from .numbers import number_pattern, speak_number

_YEAR = re.compile(
    r"(?:(?P<before>[^\W\d_]+)[ \t]+)?(?<![\w.,:/-])(?P<y>\d{4})(?![\w]|[.,:]\d)"
    r"(?=[ \t]+(?P<after>[^\W\d_]+))?"
)
_LEADING_POINT = re.compile(r"(?<![\w.,])[.,](?=\d)")
# Letters then digits or digits then letters ("mp3", "GPT-4", "4K", "COVID-19", "B2B").
_LETTER_DIGIT = re.compile(r"(?<=[^\W\d_])-?(?=\d)|(?<=\d)(?=[^\W\d_])")


class Ordinals:
    """Ordinals written with the language's marks: "21st", "1er", "2ª", "der 3. Platz", "8ste"."""

    def __init__(self, lang: SpokenLanguage) -> None:
        self.lang = lang
        self._re = re.compile(lang.ordinal_pattern)

    def __call__(self, text: str) -> str:
        return self._re.sub(self._ordinal, text) if any(c.isdigit() for c in text) else text

    def _ordinal(self, m: re.Match[str]) -> str:
        words = self.lang.ordinal_match(m)
        return m[0] if words is None else words


class Decades:
    """ "1990s" → "nineteen nineties", "the '80s", "90er" → "neunziger"."""

    def __init__(self, lang: SpokenLanguage) -> None:
        self.lang = lang
        pattern = lang.decade_pattern
        self._re = re.compile(pattern) if pattern else None

    def __call__(self, text: str) -> str:
        if self._re is None or not any(c.isdigit() for c in text):
            return text
        return self._re.sub(self._decade, text)

    def _decade(self, m: re.Match[str]) -> str:
        digits = next(g for g in m.groups() if g)
        return self.lang.decade(int(digits))


class Years:
    """Bare four-digit numbers in the language's year span, read as years ("nineteen ninety")."""

    def __init__(self, lang: SpokenLanguage) -> None:
        self.lang = lang
        self.low, self.high = lang.year_span or (1, 0)

    def __call__(self, text: str) -> str:
        if self.low > self.high or not any(c.isdigit() for c in text):
            return text
        return _YEAR.sub(self._year, text)

    def _year(self, m: re.Match[str]) -> str:
        year = int(m["y"])
        low, high = self.low, self.high
        before = m["before"] or ""
        if not low <= year <= high or not self.lang.year_in_context(before, m["after"] or ""):
            return m[0]
        return m[0][: m.start("y") - m.start()] + self.lang.year(year)


class DigitsInWords:
    """Split digits from letters so both are read: "mp3" → "mp 3", "GPT-4o" → "GPT 4 o"."""

    def __call__(self, text: str) -> str:
        return _LETTER_DIGIT.sub(" ", text) if any(c.isdigit() for c in text) else text


class Cardinals:
    """Every number still written in digits: signs, decimals, grouping, lists, versions."""

    def __init__(self, lang: SpokenLanguage) -> None:
        self.lang = lang
        self._re = re.compile(
            rf"(?:(?<![\w.,])(?P<sign>[-−]))?(?<!\d)(?P<num>{number_pattern(lang)})"
            r"(?=[ \t\u00a0]+(?P<next>[^\W\d_]+))?"
        )

    def __call__(self, text: str) -> str:
        if not any(c.isdigit() for c in text):
            return text
        if "." in text or "," in text:
            # ".5" becomes "0.5".
            text = _LEADING_POINT.sub("0" + self.lang.decimal_sep, text)
        return self._re.sub(self._number, text)

    def _number(self, m: re.Match[str]) -> str:
        after = m["next"]
        gender = self.lang.noun_gender(after) if after and after not in FUNCTION_WORDS else None
        return speak_number(m["num"], self.lang, gender, sign=m["sign"] or "")
