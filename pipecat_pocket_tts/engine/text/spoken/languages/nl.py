"""Dutch: "1e/2de/8ste", "negentienhonderdnegenennegentig", "vijftien uur dertig"."""

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
    table,
    wordset,
)

_INNER_EEN = re.compile(r"(?<=\w)één")
# "een half uur" but "een halve kop": het-words take the uninflected form.
_NEUTER_HALF = frozenset(
    ["uur", "jaar", "kilo", "pond", "brood", "ei", "glas", "blik", "pak", "kwartier", "jaar"]
)


class Dutch(SpokenLanguage):
    code = "nl"
    num2words_lang = "nl"
    year_span = (1100, 1999)
    words = Words(
        point="komma",
        version_point="punt",
        minus="min",
        plus="plus",
        and_="en",
        to="tot",
        times="keer",
        factor="keer",
        by="bij",
        equals="is gelijk aan",
        percent="procent",
        per_mille="promille",
        at="apenstaartje",
        dot="punt",
        slash="slash",
        dash="streepje",
        underscore="underscore",
        hashtag="hashtag",
        number="nummer",
        approx="ongeveer",
        plus_minus="plus of min",
        less_than="kleiner dan",
        greater_than="groter dan",
        at_most="kleiner dan of gelijk aan",
        at_least="groter dan of gelijk aan",
        divided_by="gedeeld door",
        power="tot de macht",
        section="paragraaf",
        degree=Noun("graad", "graden"),
        per="per",
        ratio="op",
    )
    months = (
        "januari", "februari", "maart", "april", "mei", "juni",
        "juli", "augustus", "september", "oktober", "november", "december",
    )  # fmt: skip
    month_abbreviations = table({
        "jan": 1, "feb": 2, "mrt": 3, "apr": 4, "jun": 6, "jul": 7,
        "aug": 8, "sep": 9, "sept": 9, "okt": 10, "nov": 11, "dec": 12,
    })  # fmt: skip
    currencies = table(
        {
            "USD": Currency(Noun("dollar", "dollar"), Noun("cent", "cent")),
            "EUR": Currency(Noun("euro", "euro"), Noun("cent", "cent")),
            "GBP": Currency(Noun("pond", "pond"), Noun("penny", "pence")),
            "JPY": Currency(Noun("yen", "yen")),
            "CNY": Currency(Noun("yuan", "yuan")),
            "INR": Currency(Noun("roepie", "roepies")),
            "CHF": Currency(Noun("Zwitserse frank", "Zwitserse frank"), Noun("rappen", "rappen")),
            "BTC": Currency(Noun("bitcoin", "bitcoin")),
        }
    )
    units = table(
        {
            "km": Noun("kilometer", "kilometer"),
            "m": Noun("meter", "meter"),
            "cm": Noun("centimeter", "centimeter"),
            "mm": Noun("millimeter", "millimeter"),
            "km²": Noun("vierkante kilometer", "vierkante kilometer"),
            "m²": Noun("vierkante meter", "vierkante meter"),
            "m³": Noun("kubieke meter", "kubieke meter"),
            "kg": Noun("kilo", "kilo"),
            "g": Noun("gram", "gram"),
            "mg": Noun("milligram", "milligram"),
            "t": Noun("ton", "ton"),
            "l": Noun("liter", "liter"),
            "L": Noun("liter", "liter"),
            "ml": Noun("milliliter", "milliliter"),
            "mL": Noun("milliliter", "milliliter"),
            "km/h": Noun("kilometer per uur", "kilometer per uur"),
            "kmh": Noun("kilometer per uur", "kilometer per uur"),
            "mph": Noun("mijl per uur", "mijl per uur"),
            "m/s": Noun("meter per seconde", "meter per seconde"),
            "u": Noun("uur", "uur"),
            "h": Noun("uur", "uur"),
            "min": Noun("minuut", "minuten"),
            "s": Noun("seconde", "seconden"),
            "sec": Noun("seconde", "seconden"),
            "ms": Noun("milliseconde", "milliseconden"),
            "Hz": Noun("hertz", "hertz"),
            "kHz": Noun("kilohertz", "kilohertz"),
            "MHz": Noun("megahertz", "megahertz"),
            "GHz": Noun("gigahertz", "gigahertz"),
            "KB": Noun("kilobyte", "kilobyte"),
            "kB": Noun("kilobyte", "kilobyte"),
            "MB": Noun("megabyte", "megabyte"),
            "GB": Noun("gigabyte", "gigabyte"),
            "TB": Noun("terabyte", "terabyte"),
            "Mbps": Noun("megabit per seconde", "megabit per seconde"),
            "W": Noun("watt", "watt"),
            "kW": Noun("kilowatt", "kilowatt"),
            "kWh": Noun("kilowattuur", "kilowattuur"),
            "V": Noun("volt", "volt"),
            "mAh": Noun("milliampère-uur", "milliampère-uur"),
            "mi": Noun("mijl", "mijl"),
            "ft": Noun("voet", "voet"),
            "lb": Noun("pond", "pond"),
            "lbs": Noun("pond", "pond"),
            "oz": Noun("ons", "ons"),
            "px": Noun("pixel", "pixels"),
            "dB": Noun("decibel", "decibel"),
            "kcal": Noun("kilocalorie", "kilocalorieën"),
        }
    )
    scales = table(
        {
            "k": Scale("duizend", "duizend"),
            "K": Scale("duizend", "duizend"),
            "M": Scale("één miljoen", "miljoen"),
            "mln": Scale("één miljoen", "miljoen"),
            "miljoen": Scale("één miljoen", "miljoen"),
            "B": Scale("één miljard", "miljard"),
            "mld": Scale("één miljard", "miljard"),
            "miljard": Scale("één miljard", "miljard"),
        }
    )
    fractions = table(
        {
            2: Noun("half", "halve"),
            3: Noun("derde", "derde"),
            4: Noun("kwart", "kwart"),
        }
    )
    half_after_whole = "en een half"
    abbreviations = table(
        {
            "dhr.": "de heer",
            "Dhr.": "De heer",
            "mevr.": "mevrouw",
            "Mevr.": "Mevrouw",
            "mw.": "mevrouw",
            "dr.": "doctor",
            "Dr.": "doctor",
            "prof.": "professor",
            "Prof.": "professor",
            "ir.": "ingenieur",
            "mr.": "meester",
            "bijv.": "bijvoorbeeld",
            "bv.": "bijvoorbeeld",
            "b.v.": "bijvoorbeeld",
            "d.w.z.": "dat wil zeggen",
            "enz.": "enzovoort",
            "etc.": "et cetera",
            "o.a.": "onder andere",
            "m.b.t.": "met betrekking tot",
            "ca.": "circa",
            "i.p.v.": "in plaats van",
            "t/m": "tot en met",
            "z.s.m.": "zo snel mogelijk",
            "a.u.b.": "alstublieft",
            "aub": "alstublieft",
            "mln": "miljoen",
            "mld": "miljard",
            "incl.": "inclusief",
            "excl.": "exclusief",
            "evt.": "eventueel",
            "resp.": "respectievelijk",
            "tel.": "telefoon",
            "max.": "maximaal",
            "min.": "minimaal",
            "m.a.w.": "met andere woorden",
            "e.d.": "en dergelijke",
            "vs.": "versus",
        }
    )
    numbered_abbreviations = table(
        {
            "nr.": "nummer",
            "Nr.": "nummer",
            "blz.": "bladzijde",
            "p.": "pagina",
            "hfst.": "hoofdstuk",
            "art.": "artikel",
        }
    )
    sentence_end_abbreviations = frozenset({"enz.", "etc.", "e.d.", "o.a."})
    clock_suffix = r"\s*uur\b"
    # National numbers start with "0" (shared shapes); emergency numbers after a cue.
    phones = PhoneStyle(
        cues=wordset("bel belt bellen tel telefoon telefoonnummer nummer mobiel fax whatsapp"),
        emergency=frozenset({"112"}),
    )
    ratings = Ratings(
        out_of="van",
        cues=wordset("beoordeling beoordeeld cijfer score waardering scoorde"),
        nouns=frozenset({"sterren", "ster", "punten"}),
    )
    date_cues = wordset(
        "op tot vanaf sinds voor na maandag dinsdag woensdag donderdag vrijdag zaterdag zondag"
    )
    fraction_nouns = frozenset({"inch", "duim", "kopje", "kopjes"})
    clock = Clock(second=Noun("seconde", "seconden", None), hour_word=Noun("uur", "uur", None))
    ordinal_pattern = r"(?<![\w.,])(?P<num>\d+)(?P<suf>ste|de|e)(?![\w])"

    def _clean(self, words: str) -> str:
        return _INNER_EEN.sub("een", words)

    def year(self, n: int) -> str:
        if 1100 <= n <= 1999 and n % 1000 >= 100:
            rest = n % 100
            return f"{self.cardinal(n // 100)}honderd{self.cardinal(rest) if rest else ''}"
        return self.cardinal(n)

    def half_before(self, noun: str) -> str | None:
        lower = noun.lower()
        return "een half" if lower in _NEUTER_HALF or lower.endswith("je") else "een halve"

    def fraction(self, num: int, den: int) -> str:
        words = super().fraction(num, den)
        return "een" + words[3:] if words.startswith("één ") else words
