"""Numbers as written: telling grouping from decimals, and reading what is not one number.

"1,000,000" (en) and "1.000.000" (de) group; "3,5" (de) and "3.5" (en, and LLM output in any
language) are decimals; "1,2,3" is a list; "3.11.7" is a version; "192.168.0.1" an address.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .language import Gender, SpokenLanguage

_GROUP_SPACES = " \u00a0\u202f"
_DECIMAL_COMMA = re.compile(r"(\d{1,3}(?:\.\d{3})*|\d+),(\d{1,2})")
_SPACE_GROUPED = re.compile(r"(\d{1,3}(?:[ \u00a0\u202f]\d{3})+)(?:([.,])(\d+))?")


def number_pattern(lang: SpokenLanguage) -> str:
    """A regex (no groups) for one written number in ``lang``, without sign."""
    spaces = _GROUP_SPACES if lang.space_groups else _GROUP_SPACES[1:]
    return rf"\d{{1,3}}(?:[{spaces}]\d{{3}})+(?:[.,]\d+)?(?!\d)|\d+(?:[.,]\d+)*"


@dataclass(frozen=True)
class ParsedNumber:
    """Digits before and after the decimal separator (``frac`` None for integers)."""

    whole: str
    frac: str | None = None


def _valid_groups(text: str, sep: str) -> bool:
    head, *rest = text.split(sep)
    return 1 <= len(head) <= 3 and bool(rest) and all(len(g) == 3 for g in rest)


def parse_number(token: str, lang: SpokenLanguage) -> ParsedNumber | None:
    """Read a written number by ``lang``'s conventions; None if it is not one number."""
    if any(c in _GROUP_SPACES for c in token):
        m = _SPACE_GROUPED.fullmatch(token)
        if not m:
            return None
        return ParsedNumber(re.sub(r"\D", "", m[1]), m[3])
    dots, commas = token.count("."), token.count(",")
    if not dots and not commas:
        return ParsedNumber(token)
    if dots and commas:
        dec = "." if token.rfind(".") > token.rfind(",") else ","
        group = "," if dec == "." else "."
        if token.count(dec) != 1:
            return None
        whole, frac = token.split(dec)
        if not _valid_groups(whole, group) or not frac:
            return None
        return ParsedNumber(whole.replace(group, ""), frac)
    sep = "." if dots else ","
    if dots + commas > 1:
        return ParsedNumber(token.replace(sep, "")) if _valid_groups(token, sep) else None
    whole, frac = token.split(sep)
    if sep == lang.decimal_sep:
        return ParsedNumber(whole, frac)
    if len(frac) == 3 and len(whole) <= 3 and not whole.startswith("0"):
        # A group separator: "1,000" (en), "1.000" (de).
        return ParsedNumber(whole + frac)
    if sep == ",":
        # An English "1,5" is more likely a list than a decimal.
        return None
    # "3.5" in German text is a decimal point all the same.
    return ParsedNumber(whole, frac)


def speak_number(
    token: str, lang: SpokenLanguage, gender: Gender | None = None, *, sign: str = ""
) -> str:
    """Words for a written number; lists, versions and addresses are read part by part."""
    parsed = parse_number(token, lang)
    if parsed is not None:
        return lang.number(parsed.whole, parsed.frac, gender, sign=sign)
    parts = re.split(r"([.,\u00a0\u202f ])", token)
    numbers = parts[::2]
    dots = parts[1::2]
    is_address = len(numbers) == 4 and set(dots) == {"."} and all(len(p) <= 3 for p in numbers)
    out = [lang.number(numbers[0], sign=sign)]
    for sep, part in zip(dots, numbers[1:], strict=True):
        if sep == ".":
            joiner = f" {lang.words.dot if is_address else lang.words.version_point} "
        elif sep == ",":
            joiner = ", "
        else:
            joiner = " "
        out.append(joiner + lang.number(part))
    return "".join(out)


def split_amount(token: str, lang: SpokenLanguage) -> ParsedNumber:
    """Parse an amount that must be one number (currency, units); odd ones lose separators."""
    parsed = parse_number(token, lang)
    if parsed is not None:
        return parsed
    cents = _DECIMAL_COMMA.fullmatch(token)
    # "12,50 €" in English text is a European amount.
    if cents:
        return ParsedNumber(cents[1].replace(".", ""), cents[2])
    return ParsedNumber(re.sub(r"\D", "", token))
