"""English: US conventions for dates (month first) and money, 12-hour clock."""

from __future__ import annotations

import re

from ..language import (
    Clock,
    Currency,
    Noun,
    PhoneStyle,
    Ratings,
    Scale,
    SpokenLanguage,
    Words,
    strip_commas,
    table,
    wordset,
)

_TEENS_TENS = re.compile(r"y$")
# A bare 1100-2099 is a year after these words, or before these, or before punctuation;
# before any other lowercase word it counts things ("2024 people").
_YEAR_BEFORE = frozenset(
    [
        "in",
        "since",
        "by",
        "from",
        "until",
        "till",
        "to",
        "through",
        "of",
        "during",
        "before",
        "after",
        "around",
        "circa",
        "year",
        "years",
        "early",
        "late",
        "mid",
        "spring",
        "summer",
        "fall",
        "autumn",
        "winter",
        "between",
        "than",
        "c",
    ]
)
_YEAR_AFTER = frozenset(
    [
        "was",
        "is",
        "will",
        "has",
        "had",
        "saw",
        "were",
        "and",
        "or",
        "to",
        "through",
        "marked",
        "began",
        "ended",
        "brought",
        "AD",
        "BC",
        "BCE",
        "CE",
    ]
)


class English(SpokenLanguage):
    code = "en"
    num2words_lang = "en"
    decimal_sep = "."
    group_sep = ","
    date_order = "MDY"
    year_span = (1100, 2099)
    fraction_digits_as_number = False
    months_need_capital = True
    words = Words(
        point="point",
        version_point="point",
        minus="minus",
        plus="plus",
        and_="and",
        to="to",
        times="times",
        factor="times",
        by="by",
        equals="equals",
        percent="percent",
        per_mille="per mille",
        at="at",
        dot="dot",
        slash="slash",
        dash="dash",
        underscore="underscore",
        hashtag="hashtag",
        number="number",
        approx="about",
        plus_minus="plus or minus",
        less_than="less than",
        greater_than="greater than",
        at_most="at most",
        at_least="at least",
        divided_by="divided by",
        power="to the power of",
        section="section",
        degree=Noun("degree", "degrees"),
        per="per",
    )
    months = (
        "January", "February", "March", "April", "May", "June",
        "July", "August", "September", "October", "November", "December",
    )  # fmt: skip
    month_abbreviations = table({
        "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7,
        "aug": 8, "sep": 9, "sept": 9, "oct": 10, "nov": 11, "dec": 12,
    })  # fmt: skip
    currencies = table(
        {
            "USD": Currency(Noun("dollar", "dollars"), Noun("cent", "cents")),
            "EUR": Currency(Noun("euro", "euros"), Noun("cent", "cents")),
            "GBP": Currency(Noun("pound", "pounds"), Noun("penny", "pence")),
            "JPY": Currency(Noun("yen", "yen")),
            "CNY": Currency(Noun("yuan", "yuan")),
            "INR": Currency(Noun("rupee", "rupees"), Noun("paisa", "paise")),
            "CHF": Currency(Noun("Swiss franc", "Swiss francs"), Noun("centime", "centimes")),
            "BTC": Currency(Noun("bitcoin", "bitcoins")),
        }
    )
    units = table(
        {
            "km": Noun("kilometer", "kilometers"),
            "m": Noun("meter", "meters"),
            "cm": Noun("centimeter", "centimeters"),
            "mm": Noun("millimeter", "millimeters"),
            "µm": Noun("micrometer", "micrometers"),
            "nm": Noun("nanometer", "nanometers"),
            "km²": Noun("square kilometer", "square kilometers"),
            "m²": Noun("square meter", "square meters"),
            "m³": Noun("cubic meter", "cubic meters"),
            "kg": Noun("kilogram", "kilograms"),
            "g": Noun("gram", "grams"),
            "mg": Noun("milligram", "milligrams"),
            "t": Noun("ton", "tons"),
            "l": Noun("liter", "liters"),
            "L": Noun("liter", "liters"),
            "ml": Noun("milliliter", "milliliters"),
            "mL": Noun("milliliter", "milliliters"),
            "cl": Noun("centiliter", "centiliters"),
            "km/h": Noun("kilometer per hour", "kilometers per hour"),
            "kmh": Noun("kilometer per hour", "kilometers per hour"),
            "mph": Noun("mile per hour", "miles per hour"),
            "m/s": Noun("meter per second", "meters per second"),
            "h": Noun("hour", "hours"),
            "hr": Noun("hour", "hours"),
            "hrs": Noun("hour", "hours"),
            "min": Noun("minute", "minutes"),
            "mins": Noun("minute", "minutes"),
            "s": Noun("second", "seconds"),
            "sec": Noun("second", "seconds"),
            "ms": Noun("millisecond", "milliseconds"),
            "µs": Noun("microsecond", "microseconds"),
            "Hz": Noun("hertz", "hertz"),
            "kHz": Noun("kilohertz", "kilohertz"),
            "MHz": Noun("megahertz", "megahertz"),
            "GHz": Noun("gigahertz", "gigahertz"),
            "KB": Noun("kilobyte", "kilobytes"),
            "kB": Noun("kilobyte", "kilobytes"),
            "MB": Noun("megabyte", "megabytes"),
            "GB": Noun("gigabyte", "gigabytes"),
            "TB": Noun("terabyte", "terabytes"),
            "Mbps": Noun("megabit per second", "megabits per second"),
            "Gbps": Noun("gigabit per second", "gigabits per second"),
            "W": Noun("watt", "watts"),
            "kW": Noun("kilowatt", "kilowatts"),
            "MW": Noun("megawatt", "megawatts"),
            "kWh": Noun("kilowatt hour", "kilowatt hours"),
            "V": Noun("volt", "volts"),
            "mAh": Noun("milliamp hour", "milliamp hours"),
            "mi": Noun("mile", "miles"),
            "ft": Noun("foot", "feet"),
            "yd": Noun("yard", "yards"),
            "lb": Noun("pound", "pounds"),
            "lbs": Noun("pound", "pounds"),
            "oz": Noun("ounce", "ounces"),
            "tsp": Noun("teaspoon", "teaspoons"),
            "tbsp": Noun("tablespoon", "tablespoons"),
            "px": Noun("pixel", "pixels"),
            "dB": Noun("decibel", "decibels"),
            "kcal": Noun("kilocalorie", "kilocalories"),
            "cal": Noun("calorie", "calories"),
        }
    )
    scales = table(
        {
            "k": Scale("one thousand", "thousand"),
            "K": Scale("one thousand", "thousand"),
            "thousand": Scale("one thousand", "thousand"),
            "m": Scale("one million", "million"),
            "M": Scale("one million", "million"),
            "mn": Scale("one million", "million"),
            "million": Scale("one million", "million"),
            "millions": Scale("one million", "million"),
            "b": Scale("one billion", "billion"),
            "B": Scale("one billion", "billion"),
            "bn": Scale("one billion", "billion"),
            "billion": Scale("one billion", "billion"),
            "billions": Scale("one billion", "billion"),
            "T": Scale("one trillion", "trillion"),
            "tn": Scale("one trillion", "trillion"),
            "trillion": Scale("one trillion", "trillion"),
        }
    )
    fractions = table(
        {
            2: Noun("half", "halves"),
            4: Noun("quarter", "quarters"),
        }
    )
    fraction_plural_suffix = "s"
    half_after_whole = "and a half"
    abbreviations = table(
        {
            "Mr.": "Mister",
            "Mrs.": "Missus",
            "Ms.": "Miz",
            "Dr.": "Doctor",
            "St.": "Street",
            "Prof.": "Professor",
            "Jr.": "Junior",
            "Sr.": "Senior",
            "Mt.": "Mount",
            "Ave.": "Avenue",
            "Blvd.": "Boulevard",
            "Rd.": "Road",
            "Gov.": "Governor",
            "Sen.": "Senator",
            "Rep.": "Representative",
            "Gen.": "General",
            "Capt.": "Captain",
            "Lt.": "Lieutenant",
            "Sgt.": "Sergeant",
            "Inc.": "Incorporated",
            "Ltd.": "Limited",
            "Corp.": "Corporation",
            "Co.": "Company",
            "Dept.": "Department",
            "Univ.": "University",
            "e.g.": "for example",
            "i.e.": "that is",
            "etc.": "et cetera",
            "vs.": "versus",
            "vs": "versus",
            "approx.": "approximately",
            "est.": "established",
            "min.": "minimum",
            "max.": "maximum",
            "misc.": "miscellaneous",
            "incl.": "including",
            "excl.": "excluding",
            "w/": "with",
            "w/o": "without",
            "a.k.a.": "also known as",
            "aka": "also known as",
            "P.S.": "P S",
            "ASAP": "as soon as possible",
            "FYI": "for your information",
        }
    )
    numbered_abbreviations = table(
        {
            "No.": "number",
            "Nos.": "numbers",
            "Fig.": "figure",
            "fig.": "figure",
            "Vol.": "volume",
            "vol.": "volume",
            "Ch.": "chapter",
            "ch.": "chapter",
            "p.": "page",
            "pp.": "pages",
            "Ex.": "example",
            "Sec.": "section",
        }
    )
    sentence_end_abbreviations = frozenset(
        {"etc.", "Inc.", "Ltd.", "Corp.", "Co.", "Jr.", "Sr.", "Ave.", "Blvd.", "Rd.", "St."}
    )
    day_month_pattern = r"(?P<d>\d{{1,2}})(?:st|nd|rd|th)?(?:\s+of)?\s+{mon}(?!\w)(?:,?\s+{year})?"
    month_day_pattern = r"{mon}\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?(?![\w:]|[.,]\d)(?:,?\s+{year})?"
    meridiem_hours = True
    # North American numbers; "555-1234" could be a range and "5551234567" a count: cued.
    phones = PhoneStyle(
        cues=wordset(
            "call calls calling dial phone telephone tel tel. text fax mobile cell number "
            "reach ring contact hotline helpline whatsapp"
        ),
        shapes=(r"\d{3} \d{3} \d{4}",),
        cued_shapes=(r"[2-9]\d{2}[-.]\d{4}", r"[2-9]\d{9}"),
        emergency=frozenset({"911", "999", "112", "111", "101", "988", "311", "411", "211"}),
    )
    ratings = Ratings(
        out_of="out of",
        cues=wordset("rated rating ratings score scored scores scoring grade graded verdict"),
        nouns=frozenset({"stars", "star", "points", "pts"}),
    )
    date_cues = wordset(
        "on by until till due since from before after through thru "
        "monday tuesday wednesday thursday friday saturday sunday "
        "mon tue tues wed thu thurs fri sat sun"
    )
    fraction_nouns = wordset(
        "inch inches cup cups teaspoon teaspoons tablespoon tablespoons pint pints "
        "pound pounds ounce ounces mile miles"
    )
    clock = Clock(second=Noun("second", "seconds", None))
    num2words_years = True
    ordinal_pattern = r"(?<![\w.,])(?P<num>\d+)(?P<suf>st|nd|rd|th)\b"
    # "1990s", "'80s", and a bare "90s" only after a word that asks for a decade ("the 90s",
    # "in their 20s"), since "30s" alone is more often thirty seconds.
    decade_pattern = (
        r"(?:(?<![\w'])(1[1-9]\d0|20\d0)|'(\d0))'?s\b"
        r"|(?:(?<=\bthe\s)|(?<=\btheir\s)|(?<=\bhis\s)|(?<=\bher\s)|(?<=\bmy\s)|(?<=\bour\s)"
        r"|(?<=\bearly\s)|(?<=\blate\s)|(?<=\bmid-))([1-9]0)s\b"
    )

    def _clean(self, words: str) -> str:
        return strip_commas(words).replace("oh-", "oh ")

    def year_in_context(self, before: str, after: str) -> bool:
        if before.lower() in _YEAR_BEFORE or before in self.months:
            return True
        return not after[:1].islower() or after in _YEAR_AFTER

    def decade(self, n: int) -> str:
        return _TEENS_TENS.sub("ie", super().decade(n)) + "s"

    def half_before(self, noun: str) -> str | None:
        lower = noun.lower()
        vowel_sound = lower[:1] in "aeio" or lower.startswith(("hour", "honest", "honor", "heir"))
        return "half an" if vowel_sound else "half a"

    def date(self, day: int | None, month: int, year: int | None, *, before: str = "") -> str:
        name = self.month_name(month)
        if day is None:
            return f"{name} {self.year(year)}" if year is not None else name
        words = f"{name} {self.ordinal(day)}"
        return f"{words}, {self.year(year)}" if year is not None else words

    def day_first_date(self, day: int, month: int, year: int | None, *, before: str = "") -> str:
        """ "30 November 2026" → "the thirtieth of November twenty twenty-six"."""
        the = "" if before.lower() == "the" else "the "
        words = f"{the}{self.ordinal(day)} of {self.month_name(month)}"
        return f"{words} {self.year(year)}" if year is not None else words

    def time(self, hour: int, minute: int, second: int | None, meridiem: str | None) -> str:
        if meridiem is None and 13 <= hour <= 23:
            hour, meridiem = hour - 12, "pm"
        elif meridiem is None and hour == 0:
            hour, meridiem = 12, "am"
        if minute == 0:
            words = self.cardinal(hour) + ("" if meridiem else " o'clock")
        elif minute < 10:
            words = f"{self.cardinal(hour)} oh {self.cardinal(minute)}"
        else:
            words = f"{self.cardinal(hour)} {self.cardinal(minute)}"
        if second:
            words += " " + self.clock_seconds(second)
        if meridiem:
            words += " " + meridiem.upper()
        return words

    def special_abbreviation(self, token: str, after: str) -> str | None:
        if token == "St.":
            # "St. Louis" (a name follows) vs "Main St." / "Baker St. is".
            # None keeps "Street" as it is.
            return "Saint" if re.match(r"\s+[A-Z]", after) else None
        return None
