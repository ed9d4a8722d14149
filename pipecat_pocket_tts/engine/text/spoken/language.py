"""What every spoken language knows: number words and the small vocabulary the rules say aloud.

``SpokenLanguage`` holds the behaviour shared by all languages (number words from num2words,
cached; decimals; counted nouns; money; fractions). Each language module subclasses it with its
own data (words, months, currencies, units, abbreviations) and overrides what its grammar needs
(dates, times, ordinal endings, agreement of "one" with the noun's gender).
What several languages do alike but with other words (a 24-hour clock, "y medio", "un millón
de", "primero de mayo") is one method here, driven by class attributes each language sets.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import ClassVar, Literal, TypeVar

from num2words import num2words

Gender = Literal["m", "f", "n"]
K = TypeVar("K")
V = TypeVar("V")

# Longer integers are read digit by digit (ids, card numbers).
MAX_CARDINAL = 10**15
_FINAL_O = re.compile(r"o\b")


@dataclass(frozen=True)
class Noun:
    """A word said after a count: singular, plural, and the gender "one" agrees with (None:
    the number keeps its standalone form)."""

    one: str
    many: str
    gender: Gender | None = "m"


@dataclass(frozen=True)
class Currency:
    """A currency's main unit and its hundredth (None when amounts have no minor unit)."""

    major: Noun
    minor: Noun | None = None


@dataclass(frozen=True)
class Scale:
    """A large-number word written after an amount ("$2bn", "5 Mio. €").

    ``one`` is the whole phrase for exactly one ("one million", es "un millón", es "mil");
    ``many`` follows any other amount.
    """

    one: str
    many: str
    gender: Gender = "m"


@dataclass(frozen=True)
class Words:
    """The small words the rules say aloud, in one language; most are named by what they read.

    ``point`` is the decimal separator, ``version_point`` is said in "3.11.7", ``to`` in "5-10",
    ``times`` in "3 × 4", ``factor`` in "10x", ``by`` in "1920x1080", ``at`` in e-mail and
    @mentions, ``number`` in "#5", ``approx`` in "~5", ``per`` in "$9.99/month" and ``ratio``
    in "16:9" or a score "3:2" (empty: say ``to``).
    """

    point: str
    version_point: str
    minus: str
    plus: str
    and_: str
    to: str
    times: str
    factor: str
    by: str
    equals: str
    percent: str
    per_mille: str
    at: str
    dot: str
    slash: str
    dash: str
    underscore: str
    hashtag: str
    number: str
    approx: str
    plus_minus: str
    less_than: str
    greater_than: str
    at_most: str
    at_least: str
    divided_by: str
    power: str
    section: str
    degree: Noun
    per: str = "per"
    ratio: str = ""
    celsius: str = "Celsius"
    fahrenheit: str = "Fahrenheit"


@dataclass(frozen=True)
class Clock:
    """How a language reads a 24-hour clock time ("quince y treinta", "fünfzehn Uhr dreißig").

    The hour comes first, with ``hour_word`` after it when the language says one ("Uhr",
    "heure", "uur"); otherwise "one" agrees with ``hour_gender`` (the implied "hora", "ora").
    Then the minutes, after ``before_minutes`` ("y", "e") if any, or ``on_the_hour`` when
    there are none ("en punto"); then "and" and the seconds, counted with ``second``.
    """

    second: Noun
    hour_word: Noun | None = None
    hour_gender: Gender | None = None
    before_minutes: str = ""
    on_the_hour: Noun | None = None


@dataclass(frozen=True)
class PhoneStyle:
    """How a language writes national phone numbers (no "+"), and the words that announce one.

    ``shapes`` are groupings no ordinary number uses ("612 34 56 78", "333 123 4567"): read as
    a phone number wherever they stand. ``cued_shapes`` could also be a grouped number, a
    range or a count ("912 345 678", "555-1234"): read as one only right after a ``cues`` word
    ("call", "Tel.", "llame al"; at most two words between). ``emergency`` numbers ("112")
    are read digit by digit after a cue where people say them that way. Shapes are regexes
    without groups; cues are lowercase, without a final dot.
    """

    cues: frozenset[str] = frozenset()
    shapes: tuple[str, ...] = ()
    cued_shapes: tuple[str, ...] = ()
    emergency: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Ratings:
    """Scores written "4.5/5", "9/10", "15/20": said "four point five out of five" in context.

    ``out_of`` joins the two numbers; ``cues`` are the words just before a score ("rated",
    "note"), ``nouns`` the words just after one ("stars", "étoiles"), all lowercase.
    """

    out_of: str
    cues: frozenset[str] = frozenset()
    nouns: frozenset[str] = frozenset()


def wordset(words: str) -> frozenset[str]:
    """A set of words written as one space-separated string (compact language data)."""
    return frozenset(words.split())


def table(entries: dict[K, V]) -> Mapping[K, V]:
    """A read-only view of a language's data table (instances are shared by every session)."""
    return MappingProxyType(entries)


@lru_cache(maxsize=16384)
def num2words_cached(value: int, lang: str, to: str) -> str:
    """num2words, memoized: the same few numbers recur in every conversation."""
    return num2words(value, lang=lang, to=to)


class SpokenLanguage:
    """Shared reading rules; subclasses fill in the data (``code``: the ISO code it answers to,
    "en", "pt-BR") and override grammar."""

    code: ClassVar[str]
    num2words_lang: ClassVar[str]
    decimal_sep: ClassVar[str] = ","
    group_sep: ClassVar[str] = "."
    # group_sep, no-break and thin spaces and, where set, ordinary spaces ("1 000 000", fr)
    # group digits; year_span holds bare 4-digit years; "3,14" may read "...virgule quatorze".
    space_groups: ClassVar[bool] = False
    date_order: ClassVar[str] = "DMY"
    year_span: ClassVar[tuple[int, int] | None] = None
    fraction_digits_as_number: ClassVar[bool] = True
    words: ClassVar[Words]
    # The twelve names as written mid-sentence, abbreviations in lower case without the dot, and
    # whether only "May 5" is a date, never "may 5" (en, de).
    months: ClassVar[tuple[str, ...]]
    month_abbreviations: ClassVar[Mapping[str, int]] = MappingProxyType({})
    months_need_capital: ClassVar[bool] = False
    # Tables by ISO code, by symbol as written and by written form ("M", "bn", "Mio.").
    currencies: ClassVar[Mapping[str, Currency]]
    units: ClassVar[Mapping[str, Noun]]
    scales: ClassVar[Mapping[str, Scale]]
    # The gender of "ein Prozent" (de); nouns by denominator; the suffix an ordinal denominator
    # takes ("three fifths"); "one and a half" (None: "one and one half").
    percent_gender: ClassVar[Gender | None] = None
    fractions: ClassVar[Mapping[int, Noun]]
    fraction_plural_suffix: ClassVar[str] = ""
    half_after_whole: ClassVar[str | None] = None
    # "½ taza" → "media taza": the half said before a feminine noun, and before any other
    half_by_gender: ClassVar[tuple[str, str] | None] = None
    # Nouns whose gender the spelling tells ("-ción" feminine, but "el día"): see noun_gender
    feminine_endings: ClassVar[tuple[str, ...]] = ()
    masculine_exceptions: ClassVar[frozenset[str]] = frozenset()
    # Feminine ordinals end in -a ("primero" becomes "primera") and are marked as in "1ª".
    feminine_ordinals_in_a: ClassVar[bool] = False
    feminine_ordinal_marks: ClassVar[frozenset[str]] = frozenset()
    # "un millón de euros": the big-number words after which a counted noun takes ``count_of``
    big_numbers: ClassVar[re.Pattern[str] | None] = None
    count_of: ClassVar[str] = ""
    # Abbreviations read anywhere (whole tokens), only before a digit ("No. 5"), and those that
    # can end a sentence ("etc.").
    abbreviations: ClassVar[Mapping[str, str]] = MappingProxyType({})
    numbered_abbreviations: ClassVar[Mapping[str, str]] = MappingProxyType({})
    sentence_end_abbreviations: ClassVar[frozenset[str]] = frozenset()
    # Years read by num2words ("nineteen ninety"); the word between day, month and year ("1 de
    # mayo de 2026"); day 1 in a date ("primero", "premier").
    num2words_years: ClassVar[bool] = False
    date_link: ClassVar[str] = ""
    first_of_month: ClassVar[str | None] = None
    clock: ClassVar[Clock]
    phones: ClassVar[PhoneStyle] = PhoneStyle()
    ratings: ClassVar[Ratings | None] = None
    # Words before a day/month date without a year ("on 11/30", "le 30/11"), lowercase
    date_cues: ClassVar[frozenset[str]] = frozenset()
    # Nouns after which "3/16" is a measure, not a date ("3/16 inch"), besides the units
    fraction_nouns: ClassVar[frozenset[str]] = frozenset()
    # A date written with the month's name, day first; {mon} and {year} are filled in by the
    # date rule (groups d, mon, y). Month first ("Nov 30, 2026") only where it is used (en).
    day_month_pattern: ClassVar[str] = r"(?P<d>\d{{1,2}})\s+{mon}(?!\w)(?:\s+{year})?"
    month_day_pattern: ClassVar[str | None] = None
    # Dates such as "am 30.11." (de), times "15h45", hours "15h" (fr) or "3pm" (en), and a
    # clock word after "15:45" that the reading replaces.
    day_dot_dates: ClassVar[bool] = False
    clock_suffix: ClassVar[str] = ""
    h_clock: ClassVar[bool] = False
    h_only_clock: ClassVar[bool] = False
    meridiem_hours: ClassVar[bool] = False
    # Ordinals in groups num and suf (by default nothing matches); a decade's digits in the
    # first non-empty group.
    ordinal_pattern: ClassVar[str] = r"(?!x)x"
    decade_pattern: ClassVar[str | None] = None

    # ---- integers -------------------------------------------------------------------------

    def _clean(self, words: str) -> str:
        """Tidy a num2words result (overridden where its output needs care)."""
        return words

    def cardinal(self, n: int, gender: Gender | None = None) -> str:
        """``n`` in words; ``gender`` makes "one" agree with a following noun."""
        if n < 0:
            return f"{self.words.minus} {self.cardinal(-n, gender)}"
        if n >= MAX_CARDINAL:
            return self.digits(str(n))
        words = self._clean(num2words_cached(n, self.num2words_lang, "cardinal"))
        return self.agree(words, n, gender) if gender else words

    def agree(self, words: str, n: int, gender: Gender) -> str:
        """Adapt a cardinal said before a noun of ``gender`` (default: unchanged)."""
        return words

    def noun_gender(self, word: str) -> Gender | None:
        """A guess at the gender of a noun after a bare number (None: keep the plain form).

        By default read off the spelling with ``feminine_endings`` and ``masculine_exceptions``;
        no guess in a language that lists no endings.
        """
        if not self.feminine_endings:
            return None
        return gender_by_ending(word, self.feminine_endings, self.masculine_exceptions)

    def ordinal(self, n: int, gender: Gender = "m", ending: str = "") -> str:
        """``n`` as an ordinal word; ``ending`` is a case ending where grammar has them."""
        if n >= MAX_CARDINAL:
            words = self.digits(str(n))
        else:
            words = self._clean(num2words_cached(n, self.num2words_lang, "ordinal"))
        if gender == "f" and self.feminine_ordinals_in_a:
            words = _FINAL_O.sub("a", words)
        return words

    def ordinal_match(self, match: re.Match[str]) -> str | None:
        """Words for a match of ``ordinal_pattern`` (groups num, suf); None keeps the text."""
        return self.ordinal_suffix(int(match["num"]), match["suf"])

    def ordinal_suffix(self, n: int, suffix: str) -> str | None:
        """An ordinal written with a suffix ("21st", "1ª", "2e"), feminine after a feminine mark."""
        return self.ordinal(n, "f" if suffix in self.feminine_ordinal_marks else "m")

    def year(self, n: int) -> str:
        """A year as people say it: num2words' year reading where it has one, else the cardinal."""
        if self.num2words_years:
            return self._clean(num2words_cached(n, self.num2words_lang, "year"))
        return self.cardinal(n)

    def year_in_context(self, before: str, after: str) -> bool:
        """Whether a bare number in ``year_span`` between these words is a year (default: yes)."""
        return True

    def decade(self, n: int) -> str:
        """The number of a decade written "1990s" / "90er", before the language's decade ending
        (only languages with a decade_pattern): a year from 100 up, else the tens."""
        return self.year(n) if n >= 100 else self.cardinal(n)

    def digits(self, text: str) -> str:
        """Every digit of ``text`` by name: "0042" → "zero zero four two"."""
        return " ".join(self.cardinal(int(c)) for c in text if c.isdecimal())

    # ---- decimals and counts ----------------------------------------------------------------

    def fraction_digits(self, frac: str) -> str:
        """The digits after the decimal separator."""
        if not self.fraction_digits_as_number or len(frac) > 3:
            return self.digits(frac)
        zeros = len(frac) - len(frac.lstrip("0"))
        rest = frac[zeros:]
        parts = [self.cardinal(0)] * zeros
        if rest:
            parts.append(self.cardinal(int(rest)))
        return " ".join(parts)

    def number(
        self, whole: str, frac: str | None = None, gender: Gender | None = None, *, sign: str = ""
    ) -> str:
        """A parsed number (digit strings) in words: whole part, optional decimals, sign."""
        if (len(whole) > 1 and whole.startswith("0") and not frac) or len(whole.lstrip("0")) > 15:
            words = self.digits(whole)
        else:
            words = self.cardinal(int(whole), None if frac else gender)
        if frac:
            words = f"{words} {self.words.point} {self.fraction_digits(frac)}"
        return f"{self.words.minus} {words}" if sign else words

    def is_singular(self, whole: str, frac: str | None) -> bool:
        """Whether a noun after this amount is singular (default: exactly one)."""
        return not frac and whole.lstrip("0") == "1"

    def counted(self, whole: str, frac: str | None, noun: Noun, *, sign: str = "") -> str:
        """An amount followed by a noun: "2.5 km" → "two point five kilometers"."""
        singular = self.is_singular(whole, frac)
        amount = self.number(whole, frac, noun.gender, sign=sign)
        return self.join_count(amount, noun.one if singular else noun.many)

    def join_count(self, amount: str, noun: str) -> str:
        """Put a noun after an amount in words, with ``count_of`` after a ``big_numbers`` word."""
        if self.big_numbers is not None and self.big_numbers.search(amount):
            return f"{amount} {self.count_of} {noun}"
        return f"{amount} {noun}"

    def scaled(
        self, whole: str, frac: str | None, scale: Scale, *, sign: str = "", noun: str = ""
    ) -> str:
        """An amount with a scale word, maybe before a noun: "1.5M $" → "... million dollars"."""
        if not frac and whole.lstrip("0") == "1":
            words = scale.one
            if sign:
                words = f"{self.words.minus} {words}"
        else:
            words = f"{self.number(whole, frac, scale.gender, sign=sign)} {scale.many}"
        return self.join_count(words, noun) if noun else words

    def money(
        self,
        whole: str,
        frac: str | None,
        currency: Currency,
        *,
        sign: str = "",
        scale: Scale | None = None,
    ) -> str:
        """A currency amount: "$12.50" → "twelve dollars and fifty cents"."""
        major = currency.major
        if scale is not None:
            return self.scaled(whole, frac, scale, sign=sign, noun=major.many)
        minor = currency.minor
        if frac is None or minor is None or len(frac) > 2:
            return self.counted(whole, frac, major, sign=sign)
        cents = int(frac.ljust(2, "0"))
        main = int(whole)
        parts = []
        if main or not cents:
            parts.append(self.counted(whole, None, major))
        if cents:
            parts.append(self.counted(str(cents), None, minor))
        words = f" {self.words.and_} ".join(parts)
        return f"{self.words.minus} {words}" if sign else words

    # ---- fractions ---------------------------------------------------------------------------

    def fraction(self, num: int, den: int) -> str:
        """A common fraction: "3/4" → "three quarters"."""
        noun = self.fractions.get(den)
        if noun is None:
            ordinal = self.ordinal(den)
            noun = Noun(ordinal, self.plural_fraction(ordinal))
        return f"{self.cardinal(num, noun.gender)} {noun.one if num == 1 else noun.many}"

    def plural_fraction(self, ordinal: str) -> str:
        """The plural of an ordinal used as a denominator."""
        return ordinal + self.fraction_plural_suffix

    def half_before(self, noun: str) -> str | None:
        """ "½" before a noun ("half a cup", "media taza"); None: say the plain fraction."""
        if self.half_by_gender is None:
            return None
        feminine, other = self.half_by_gender
        return feminine if self.noun_gender(noun) == "f" else other

    def mixed_number(self, whole: int, num: int, den: int) -> str:
        """A whole number and a fraction: "1 1/2" → "one and a half"."""
        if (num, den) == (1, 2) and self.half_after_whole:
            return f"{self.cardinal(whole)} {self.half_after_whole}"
        return f"{self.cardinal(whole)} {self.words.and_} {self.fraction(num, den)}"

    def multiplier(self, amount: str) -> str:
        """A factor written "10x" ("ten times")."""
        return f"{amount} {self.words.factor}"

    # ---- dates and times ---------------------------------------------------------------------

    def month_name(self, month: int) -> str:
        return self.months[month - 1]

    def date(self, day: int | None, month: int, year: int | None, *, before: str = "") -> str:
        """A calendar date; ``before`` is the word preceding it (grammar may depend on it)."""
        parts = [self.day(day, before=before)] if day else []
        parts.append(self.month_name(month))
        if year is not None:
            parts.append(self.year(year))
        return f" {self.date_link} ".join(parts) if self.date_link else " ".join(parts)

    def day_first_date(self, day: int, month: int, year: int | None, *, before: str = "") -> str:
        """A date written day first in running text ("30 November 2026")."""
        return self.date(day, month, year, before=before)

    def day(self, day: int, *, before: str = "") -> str:
        """The day of the month in a date: ``first_of_month`` for the 1st, else the cardinal."""
        if day == 1 and self.first_of_month:
            return self.first_of_month
        return self.cardinal(day)

    def time(self, hour: int, minute: int, second: int | None, meridiem: str | None) -> str:
        """A clock time, read on the 24-hour ``clock``; ``meridiem`` is "am", "pm" or None."""
        hour = hour_of_day(hour, meridiem)
        clock = self.clock
        if clock.hour_word is None:
            words = self.cardinal(hour, clock.hour_gender)
        else:
            words = self.counted(str(hour), None, clock.hour_word)
        if minute:
            before = f" {clock.before_minutes}" if clock.before_minutes else ""
            words += f"{before} {self.cardinal(minute)}"
        elif clock.on_the_hour is not None:
            words += " " + (clock.on_the_hour.one if hour == 1 else clock.on_the_hour.many)
        if second:
            words += " " + self.clock_seconds(second)
        return words

    def clock_seconds(self, second: int) -> str:
        """The seconds of a clock time: "and twelve seconds"."""
        return f"{self.words.and_} {self.counted(str(second), None, self.clock.second)}"

    # ---- abbreviations -----------------------------------------------------------------------

    def special_abbreviation(self, token: str, after: str) -> str | None:
        """An abbreviation whose reading depends on what follows (default: none)."""
        return None


def hour_of_day(hour: int, meridiem: str | None) -> int:
    """``hour`` on the 24-hour clock: "3 pm" → 15, "12 am" → 0."""
    if meridiem == "pm" and hour < 12:
        return hour + 12
    if meridiem == "am" and hour == 12:
        return 0
    return hour


def gender_by_ending(
    word: str, feminine_endings: tuple[str, ...], masculine_exceptions: frozenset[str]
) -> Gender:
    """Feminine when ``word`` has one of the endings (and is no known exception), else masculine."""
    lower = word.lower()
    if lower.endswith(feminine_endings) and lower not in masculine_exceptions:
        return "f"
    return "m"


def strip_commas(words: str) -> str:
    """Drop the commas num2words puts inside long numbers (they would cut the sentence)."""
    return words.replace(",", "")


def last_word_sub(words: str, pattern: re.Pattern[str], repl: str) -> str:
    """Substitute ``pattern`` in the last word of ``words`` only."""
    head, _, last = words.rpartition(" ")
    last = pattern.sub(repl, last)
    return f"{head} {last}" if head else last
