"""Dates ("2026-11-30", "30/11/2026", "Nov 30, 2026", "30. November") and clock times."""

from __future__ import annotations

import re

from .context import FUNCTION_WORDS, next_word
from .language import SpokenLanguage

_ISO = re.compile(r"(?<![\w./-])(?P<y>\d{4})([-/])(?P<m>\d{1,2})\2(?P<d>\d{1,2})(?![\w/-]|[.,]\d)")
_NUMERIC = re.compile(
    r"(?<![\w./-])(?P<a>\d{1,2})(?P<sep>[./-])(?P<b>\d{1,2})(?P=sep)(?P<y>\d{4})(?![\w/-]|[.,]\d)"
)
_DAY_MONTH_SLASH = re.compile(
    r"(?<![\w./:,-])(?P<a>\d{1,2})/(?P<b>\d{1,2})(?![\w/]|[.,]\d|\s?[-–]\s?\d)"
)
_DAYS_IN_MONTH = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
# Ratios and idioms that look like a day and a month ("open 24/7", a "16/9" screen)
_NOT_DATES = frozenset({"24/7", "16/9", "16/10", "21/9"})
_INCH_MARKS = ('"', "″", "”")
_DAY_DOT_MONTH_DOT = re.compile(r"(?<![\w./-])(?P<d>\d{1,2})\.(?P<m>\d{1,2})\.(?=\s|$)")
_PREVIOUS_WORD = re.compile(r"(\w+)\W*$")

_MERIDIEM = r"(?:\s?(?P<mer>[AaPp])\.?\s?[Mm](?:\.(?!\w))?(?![\w]))"
_CLOCK = re.compile(
    r"(?<![\w:.,])(?P<h>\d{1,2}):(?P<min>\d{2})(?::(?P<s>\d{2}))?(?![\d:]|[.,]\d)"
    rf"{_MERIDIEM}?"
)
_HOUR_MERIDIEM = re.compile(rf"(?<![\w:.,])(?P<h>\d{{1,2}}){_MERIDIEM}")
# A clock time such as "15h45".
_H_CLOCK = re.compile(r"(?<![\w:.,])(?P<h>\d{1,2})\s?h\s?(?P<min>\d{2})(?!\w)")
# An hour alone, such as "15h".
_H_ONLY = re.compile(r"(?<![\w:.,])(?P<h>\d{1,2})\s?h(?!\w)")


def previous_word(text: str, end: int) -> str:
    """The word just before position ``end`` ("" if none)."""
    m = _PREVIOUS_WORD.search(text, max(0, end - 40), end)
    return m[1] if m else ""


def keeps_period(text: str, end: int) -> bool:
    """Whether a "." consumed at ``end`` also ended a sentence (text ends or a capital follows)."""
    rest = text[end:]
    stripped = rest.lstrip(" \t")
    return not stripped or stripped[0] in "\r\n" or (rest != stripped and stripped[0].isupper())


def _is_cue(text: str, start: int, before: str, cues: frozenset[str]) -> bool:
    """Whether ``before`` is a date cue standing right before ``start`` (spaces only)."""
    return before.lower() in cues and text[:start].rstrip().endswith(before)


class Dates:
    """Numeric and written dates, read by the language's conventions."""

    def __init__(self, lang: SpokenLanguage) -> None:
        self.lang = lang
        names = {name.lower(): i + 1 for i, name in enumerate(lang.months)}
        self._months = {**lang.month_abbreviations, **names}
        alternatives = sorted(self._months, key=len, reverse=True)
        if lang.months_need_capital:
            month = "|".join(re.escape(a[0].upper() + a[1:]) for a in alternatives)
        else:
            month = "(?i:" + "|".join(re.escape(a) for a in alternatives) + ")"
        fill = {
            "mon": rf"(?P<mon>{month})(?:\.(?=\s*\d))?",
            "year": r"(?P<y>\d{4})(?![\w]|[.,]\d)",
        }
        self._day_month = re.compile(r"(?<![\w.,])" + lang.day_month_pattern.format(**fill))
        month_day = lang.month_day_pattern
        self._month_day = (
            re.compile(r"(?<![\w.])" + month_day.format(**fill)) if month_day else None
        )
        self._month_only = re.compile(rf"(?<![\w.]){month}")
        units = {key.lower() for key in lang.units}
        units.update(w.lower() for noun in lang.units.values() for w in (noun.one, noun.many))
        self._not_after = FUNCTION_WORDS | units | lang.fraction_nouns

    def month_starts(self, text: str) -> bool:
        """Whether ``text`` starts with a month name (so "1. Mai" is no list item)."""
        return bool(self._month_only.match(text))

    def __call__(self, text: str) -> str:
        if not any(c.isdigit() for c in text):
            return text
        text = _ISO.sub(self._iso, text)
        text = _NUMERIC.sub(self._numeric, text)
        if self.lang.day_dot_dates:
            text = _DAY_DOT_MONTH_DOT.sub(self._day_dot_month, text)
        if "/" in text:
            text = _DAY_MONTH_SLASH.sub(self._day_month_slash, text)
        if self._month_day is not None:
            text = self._month_day.sub(self._written, text)
        return self._day_month.sub(self._written, text)

    def _say(self, text: str, start: int, day: int | None, month: int, year: int | None) -> str:
        return self.lang.date(day, month, year, before=previous_word(text, start))

    def _iso(self, m: re.Match[str]) -> str:
        year, month, day = int(m["y"]), int(m["m"]), int(m["d"])
        if not (1 <= month <= 12 and 1 <= day <= 31):
            return m[0]
        return self._say(m.string, m.start(), day, month, year)

    def _numeric(self, m: re.Match[str]) -> str:
        a, b, year = int(m["a"]), int(m["b"]), int(m["y"])
        if m["sep"] == "." or a > 12 or (self.lang.date_order == "DMY" and b <= 12):
            day, month = a, b
        else:
            day, month = b, a
        if not (1 <= month <= 12 and 1 <= day <= 31):
            return m[0]
        return self._say(m.string, m.start(), day, month, year)

    def _day_month_slash(self, m: re.Match[str]) -> str:
        """A date without a year, "11/30" (en, month first) or "30/11" (day first).

        Read as a date only when the pair is a real day of a real month in the language's
        order, no fraction noun or function word follows ("3/4 cup", "3/4 de litre"), it is
        no known ratio ("24/7", "16/9"), and either a date cue is the word before ("on 3/4",
        "le 30/11") or the day is 13 or more (no fraction is written that way) and no
        lowercase word follows ("made 12/15 shots" is a count out of a total).
        Everything else is left to the fraction and ratio rules.
        """
        a, b = int(m["a"]), int(m["b"])
        month, day = (a, b) if self.lang.date_order == "MDY" else (b, a)
        if not (1 <= month <= 12 and 1 <= day <= _DAYS_IN_MONTH[month - 1]):
            return m[0]
        if f"{a}/{b}" in _NOT_DATES or m.string.startswith(_INCH_MARKS, m.end()):
            return m[0]
        after = next_word(m.string, m.end())
        if after.lower() in self._not_after:
            return m[0]
        before = previous_word(m.string, m.start())
        cued = _is_cue(m.string, m.start(), before, self.lang.date_cues)
        # In "12/15 shots" the numbers are a count, not a date.
        if not cued and (day < 13 or after[:1].islower()):
            return m[0]
        return self.lang.date(day, month, None, before=before)

    def _day_dot_month(self, m: re.Match[str]) -> str:
        day, month = int(m["d"]), int(m["m"])
        if not (1 <= month <= 12 and 1 <= day <= 31):
            return m[0]
        words = self._say(m.string, m.start(), day, month, None)
        return words + "." if keeps_period(m.string, m.end()) else words

    def _written(self, m: re.Match[str]) -> str:
        day = int(m["d"])
        month = self._months[m["mon"].lower()]
        year = int(m["y"]) if m["y"] else None
        if not 1 <= day <= 31:
            return m[0]
        before = previous_word(m.string, m.start())
        if m.re is self._day_month:
            return self.lang.day_first_date(day, month, year, before=before)
        return self.lang.date(day, month, year, before=before)


class Times:
    """Clock times: "3:45 pm", "15:45", "15h45", "3pm"; a clock word after them is absorbed."""

    def __init__(self, lang: SpokenLanguage) -> None:
        self.lang = lang
        suffix = f"(?:{lang.clock_suffix})?" if lang.clock_suffix else ""
        self._clock_re = re.compile(_CLOCK.pattern + suffix)

    def __call__(self, text: str) -> str:
        if not any(c.isdigit() for c in text):
            return text
        if ":" in text:
            text = self._clock_re.sub(self._clock, text)
        if self.lang.h_clock and "h" in text:
            text = _H_CLOCK.sub(self._clock, text)
            if self.lang.h_only_clock:
                text = _H_ONLY.sub(self._clock, text)
        if self.lang.meridiem_hours:
            text = _HOUR_MERIDIEM.sub(self._clock, text)
        return text

    def _clock(self, m: re.Match[str]) -> str:
        groups = m.groupdict()
        hour = int(m["h"])
        minute = int(groups.get("min") or 0)
        second = int(groups["s"]) if groups.get("s") else None
        mer = groups.get("mer")
        meridiem = None if not mer else ("am" if mer in "Aa" else "pm")
        if hour > 24 or minute > 59 or (second or 0) > 59 or (meridiem and not 1 <= hour <= 12):
            return m[0]
        words = self.lang.time(hour, minute, second, meridiem)
        if m[0].endswith(".") and keeps_period(m.string, m.end()):
            words += "."
        return words
