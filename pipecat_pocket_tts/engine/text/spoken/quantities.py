"""Amounts with something attached: phone numbers, ranges, money, units, percentages, fractions."""

from __future__ import annotations

import re
from collections.abc import Iterable

from .context import FUNCTION_WORDS, cue_before, next_word
from .language import Noun, SpokenLanguage
from .numbers import number_pattern, speak_number, split_amount

# Phone numbers every language writes alike: international ("+"), bracketed area codes, the
# North American 3-3-4 with separators, and national numbers with a trunk "0" (fr, de, nl, it,
# en-GB), whose groupings no ordinary number or date uses. National shapes without either
# are each language's ``phones`` data (see ``PhoneStyle``).
_PHONE = re.compile(
    r"(?<![\w+.,/-])(?:"
    # Such as +1 555 123 4567 and +33 6 12 34 56 78.
    r"\+\d{1,3}(?:[ .-]?\(?\d{1,4}\)?){2,6}"
    # Such as (555) 123-4567.
    r"|\(\d{2,5}\)[ .-]?\d{2,4}(?:[ .-]?\d{2,4}){1,3}"
    # Such as 1-800-555-1234.
    r"|1-\d{3}-\d{3}-\d{4}"
    # Such as 555-123-4567.
    r"|\d{3}[.-]\d{3}[.-]\d{4}"
    # Such as 06 12 34 56 78 and 06-12-34-56-78.
    r"|0\d(?:[ .]\d{2}){4}|0\d(?:-\d{2}){4}"
    # Such as 030 12345678, 0171/1234567 and 030 12 34 56 78.
    r"|0\d{2,4}(?:[ /-]\d{2,8}){1,4}"
    # Such as 02 1234 5678 and 06 123 456 78.
    r"|0\d(?: \d{2,4}){2,4}"
    # Such as 02 12345678.
    r"|0\d[ /-]\d{6,8}"
    r")(?![\w-]|[.,]\d)"
)
_PHONE_END = r"(?![\w/-]|[.,]\d)"
_RANGE = re.compile(
    # The first end of a range, such as "9am" in "9am-5pm".
    r"(?<![\w.,/:-])(?P<a>[$€£¥₹]?\d+(?:[.,:]\d+)*(?:%|\s?[ap]\.?m\.?)?)"
    r"(?P<s1>\s?)[-–—](?P<s2>\s?)"
    r"(?P<b>[$€£¥₹]?\d+(?:[.,:]\d+)*)(?![\d]|[-–—]\d|[.,:]\d)"
)
_SYMBOLS = {"US$": "USD", "R$": "BRL", "$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY", "₹": "INR",
            "₿": "BTC"}  # fmt: skip
_VULGAR = {
    "½": (1, 2), "⅓": (1, 3), "⅔": (2, 3), "¼": (1, 4), "¾": (3, 4), "⅕": (1, 5), "⅖": (2, 5),
    "⅗": (3, 5), "⅘": (4, 5), "⅙": (1, 6), "⅚": (5, 6), "⅐": (1, 7), "⅛": (1, 8), "⅜": (3, 8),
    "⅝": (5, 8), "⅞": (7, 8), "⅑": (1, 9), "⅒": (1, 10),
}  # fmt: skip
_NEXT_WORD = r"(?=[ \t]+(?P<next>[^\W\d_]+))?"
_VULGAR_RE = re.compile(
    rf"(?:(?<![\w.,])(?P<whole>\d+)\s?)?(?P<frac>[{''.join(_VULGAR)}]){_NEXT_WORD}"
)
_SLASH_FRACTION = re.compile(
    r"(?<![\w/.:,])(?:(?P<whole>\d+)\s)?(?P<num>\d{1,3})/(?P<den>\d{1,3})(?![\w/]|[.,]\d)"
    + _NEXT_WORD
)
_DENOMINATORS = frozenset(range(2, 11)) | {100}
_MULTIPLIER = re.compile(
    r"(?<![\w.,])(?P<a>\d+(?:[.,]\d+)?)(?P<s>\s?)(?P<x>[x×])(?:\s?(?P<b>\d+(?:[.,]\d+)?))?(?![\w])"
)


def _alternation(keys: Iterable[str]) -> str:
    """A regex alternation of ``keys``, longest first so "km/h" wins over "km"."""
    return "|".join(re.escape(k) for k in sorted(keys, key=len, reverse=True))


class Phones:
    """Phone numbers, digit by digit as grouped, a pause (comma) between groups.

    The shared shapes (``_PHONE``) are read anywhere. Then the language's national shapes
    (``lang.phones``): its ``shapes`` anywhere; its ``cued_shapes`` and ``emergency`` numbers
    only after a cue word ("call 911", "llame al 912 345 678"), since without one they are
    as likely a grouped number ("912 345 678 habitantes"), a range ("555-1234") or a count.
    """

    def __init__(self, lang: SpokenLanguage) -> None:
        self.lang = lang
        style = lang.phones
        self.cues = style.cues
        alternatives = [
            f"(?P<{name}>{'|'.join(shapes)})"
            for name, shapes in (
                ("shape", style.shapes),
                ("cued", style.cued_shapes),
                ("emergency", sorted(style.emergency, key=len, reverse=True)),
            )
            if shapes
        ]
        self._national = (
            re.compile(rf"(?<![\w+.,/-])(?:{'|'.join(alternatives)}){_PHONE_END}")
            if alternatives
            else None
        )

    def __call__(self, text: str) -> str:
        if not any(c.isdigit() for c in text):
            return text
        text = _PHONE.sub(self._phone, text)
        if self._national is not None:
            text = self._national.sub(self._national_phone, text)
        return text

    def _say(self, raw: str) -> str:
        groups = [self.lang.digits(g) for g in re.findall(r"\d+", raw)]
        words = ", ".join(groups)
        return f"{self.lang.words.plus} {words}" if raw.startswith("+") else words

    def _phone(self, m: re.Match[str]) -> str:
        raw = m[0]
        if not 7 <= sum(c.isdigit() for c in raw) <= 15:
            return raw
        return self._say(raw)

    def _national_phone(self, m: re.Match[str]) -> str:
        raw = m[0]
        if m.lastgroup == "emergency":
            cued = cue_before(m.string, m.start(), self.cues)
            return self.lang.digits(raw) if cued else raw
        if not 7 <= sum(c.isdigit() for c in raw) <= 15:
            return raw
        if m.lastgroup == "cued" and not cue_before(m.string, m.start(), self.cues):
            return raw
        return self._say(raw)


_RATING = re.compile(
    r"(?<![\w.,/:-])(?P<num>\d{1,3}(?:[.,]\d{1,2})?)/(?P<den>5|10|20|100)(?![\w/]|[.,]\d)"
)


class Scores:
    """Scores: "rated 4.5/5", "9/10 stars", "Note : 15/20" → "... out of ...", "... sur ...".

    Only over 5, 10, 20 or 100, a numerator no larger than that, and with context: a cue word
    of the language right before (one word between at most: "a score of 9/10") or a rating
    noun right after ("stars", "étoiles"). Without context "3/4" stays a fraction, "9/10" a
    fraction (or a date), "4.5/5" a number "slash" a number.
    """

    def __init__(self, lang: SpokenLanguage) -> None:
        self.lang = lang
        self.ratings = lang.ratings

    def __call__(self, text: str) -> str:
        if self.ratings is None or "/" not in text:
            return text
        return _RATING.sub(self._rating, text)

    def _rating(self, m: re.Match[str]) -> str:
        ratings = self.ratings
        # Unreachable: __call__ checks.
        if ratings is None:
            return m[0]
        after = next_word(m.string, m.end())
        noun = after.lower() in ratings.nouns
        if not noun and not cue_before(m.string, m.start(), ratings.cues, gap=1):
            return m[0]
        amount = split_amount(m["num"], self.lang)
        den = int(m["den"])
        if float(f"{amount.whole}.{amount.frac or 0}") > den:
            return m[0]
        gender = self.lang.noun_gender(after) if noun else None
        score = self.lang.number(amount.whole, amount.frac, gender)
        return f"{score} {ratings.out_of} {self.lang.cardinal(den, gender)}"


class Ranges:
    """ "5–10", "2020-2021", "9:00-17:00" → "5 to 10" (read by the later passes)."""

    def __init__(self, lang: SpokenLanguage) -> None:
        self.to = lang.words.to

    def __call__(self, text: str) -> str:
        if "-" not in text and "–" not in text and "—" not in text:
            return text
        return _RANGE.sub(self._range, text)

    def _range(self, m: re.Match[str]) -> str:
        if m["s1"] != m["s2"]:
            # "5 -3" is a negative number, not a range.
            return m[0]
        return f"{m['a']} {self.to} {m['b']}"


class Money:
    """Currency amounts: "$12.50", "€5", "12,50 €", "USD 3", "$1.5M", "5 Mio. €", "$9/month"."""

    def __init__(self, lang: SpokenLanguage) -> None:
        self.lang = lang
        self.symbols = {s: c for s, c in _SYMBOLS.items() if c in lang.currencies}
        self.symbols.update({c: c for c in lang.currencies})
        sym = _alternation(self.symbols)
        num = number_pattern(lang)
        scale = rf"(?:\s?(?P<scale>{_alternation(lang.scales)})(?![\w]))?"
        # A rate, as in "$9.99/month".
        per = r"(?P<per>/(?=[^\W\d_]))?"
        self._prefix = re.compile(
            rf"(?<![\w$])(?P<sign>[-−])?(?P<sym>{sym})\s?(?P<sign2>[-−])?(?P<num>{num}){scale}{per}"
        )
        self._suffix = re.compile(
            rf"(?<![\w.,])(?P<sign>[-−])?(?P<num>{num}){scale}\s?(?P<sym>{sym})(?![\w$]){per}"
        )
        self._trigger = re.compile(sym)

    def __call__(self, text: str) -> str:
        if not self._trigger.search(text):
            return text
        text = self._prefix.sub(self._money, text)
        return self._suffix.sub(self._money, text)

    def _money(self, m: re.Match[str]) -> str:
        groups = m.groupdict()
        currency = self.lang.currencies[self.symbols[m["sym"]]]
        amount = split_amount(m["num"], self.lang)
        scale = self.lang.scales[m["scale"]] if m["scale"] else None
        sign = groups.get("sign") or groups.get("sign2") or ""
        words = self.lang.money(amount.whole, amount.frac, currency, sign=sign, scale=scale)
        return f"{words} {self.lang.words.per} " if m["per"] else words


class Measures:
    """Numbers with units, degrees and percentages: "5 km", "-3 °C", "45°", "12%"."""

    def __init__(self, lang: SpokenLanguage) -> None:
        self.lang = lang
        w = lang.words
        self.nouns: dict[str, Noun] = dict(lang.units)
        self.nouns["%"] = Noun(w.percent, w.percent, lang.percent_gender)
        self.nouns["‰"] = Noun(w.per_mille, w.per_mille, lang.percent_gender)
        num = number_pattern(lang)
        units = _alternation(self.nouns)
        self._unit = re.compile(
            rf"(?<![\w.,])(?P<sign>[-−])?(?P<num>{num})\s?(?P<unit>{units})(?![\w²³/%])"
        )
        self._degree = re.compile(
            rf"(?<![\w.,])(?P<sign>[-−])?(?P<num>{num})\s?[°º]\s?(?P<scale>[CF](?![\w]))?"
        )

    def __call__(self, text: str) -> str:
        if not any(c.isdigit() for c in text):
            return text
        if "°" in text or "º" in text:
            text = self._degree.sub(self._degrees, text)
        return self._unit.sub(self._measure, text)

    def _measure(self, m: re.Match[str]) -> str:
        amount = split_amount(m["num"], self.lang)
        noun = self.nouns[m["unit"]]
        return self.lang.counted(amount.whole, amount.frac, noun, sign=m["sign"] or "")

    def _degrees(self, m: re.Match[str]) -> str:
        amount = split_amount(m["num"], self.lang)
        w = self.lang.words
        words = self.lang.counted(amount.whole, amount.frac, w.degree, sign=m["sign"] or "")
        if m["scale"]:
            words += " " + (w.celsius if m["scale"] == "C" else w.fahrenheit)
        elif m[0].endswith(" "):
            words += " "
        return words


class Fractions:
    """ "½", "1 ½", "3/4", "1 1/2"; other number pairs with a slash ("24/7", "50/50") lose it."""

    def __init__(self, lang: SpokenLanguage) -> None:
        self.lang = lang

    def __call__(self, text: str) -> str:
        if any(c in _VULGAR for c in text):
            text = _VULGAR_RE.sub(self._vulgar, text)
        if "/" in text:
            text = _SLASH_FRACTION.sub(self._slash, text)
        return text

    def _say(self, whole: str | None, num: int, den: int, noun: str | None) -> str:
        if whole:
            return self.lang.mixed_number(int(whole), num, den)
        if noun and (num, den) == (1, 2) and noun.lower() not in FUNCTION_WORDS:
            half = self.lang.half_before(noun)
            if half:
                return half
        return self.lang.fraction(num, den)

    def _vulgar(self, m: re.Match[str]) -> str:
        num, den = _VULGAR[m["frac"]]
        return self._say(m["whole"], num, den, m["next"])

    def _slash(self, m: re.Match[str]) -> str:
        num, den = int(m["num"]), int(m["den"])
        if den in _DENOMINATORS and 0 < num < den:
            return self._say(m["whole"], num, den, m["next"])
        if m["whole"]:
            return m[0]
        return f"{m['num']} {m['den']}"


class Multipliers:
    """ "10x" → "ten times", "1920x1080" → "1920 by 1080", "3 × 4" → "3 times 4"."""

    def __init__(self, lang: SpokenLanguage) -> None:
        self.lang = lang

    def __call__(self, text: str) -> str:
        if "x" not in text and "×" not in text:
            return text
        return _MULTIPLIER.sub(self._multiplier, text)

    def _multiplier(self, m: re.Match[str]) -> str:
        w = self.lang.words
        if m["b"] is not None:
            word = w.by if m["x"] == "x" else w.times
            a, b = speak_number(m["a"], self.lang), speak_number(m["b"], self.lang)
            return f"{a} {word} {b}"
        return self.lang.multiplier(speak_number(m["a"], self.lang))
