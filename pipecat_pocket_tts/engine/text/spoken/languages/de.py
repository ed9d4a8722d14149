"""German: ordinals with case endings ("am dreißigsten November"), 24-hour clock with "Uhr"."""

from __future__ import annotations

import re

from ..language import (
    Clock,
    Currency,
    Gender,
    Noun,
    PhoneStyle,
    Ratings,
    Scale,
    SpokenLanguage,
    Words,
    table,
    wordset,
)

_FINAL_EINS = re.compile(r"eins$")
# Words after which an ordinal takes the weak -en ending (dative/accusative).
_EN_BEFORE = frozenset(
    [
        "am",
        "im",
        "vom",
        "zum",
        "beim",
        "dem",
        "den",
        "des",
        "seit",
        "ab",
        "bis",
        "einem",
        "einen",
        "eines",
        "einer",
        "ihrem",
        "seinem",
    ]
)
_E_BEFORE = frozenset(["der", "die", "das"])
_FEMININE_ENDINGS = ("e", "ung", "heit", "keit", "schaft", "ion", "tät", "ik", "ur")
_MASCULINE_E = frozenset(
    [
        "Käse",
        "Name",
        "Gedanke",
        "Kunde",
        "Junge",
        "Affe",
        "Löwe",
        "Hase",
        "Auge",
        "Ende",
        "Interesse",
    ]
)


class German(SpokenLanguage):
    code = "de"
    num2words_lang = "de"
    year_span = (1100, 1999)
    percent_gender = "n"
    fraction_digits_as_number = False
    months_need_capital = True
    words = Words(
        point="Komma",
        version_point="Punkt",
        minus="minus",
        plus="plus",
        and_="und",
        to="bis",
        times="mal",
        factor="mal",
        by="mal",
        equals="gleich",
        percent="Prozent",
        per_mille="Promille",
        at="ät",
        dot="Punkt",
        slash="Schrägstrich",
        dash="Bindestrich",
        underscore="Unterstrich",
        hashtag="Hashtag",
        number="Nummer",
        approx="etwa",
        plus_minus="plus minus",
        less_than="kleiner als",
        greater_than="größer als",
        at_most="kleiner gleich",
        at_least="größer gleich",
        divided_by="geteilt durch",
        power="hoch",
        section="Paragraf",
        degree=Noun("Grad", "Grad", "n"),
        per="pro",
        ratio="zu",
    )
    months = (
        "Januar", "Februar", "März", "April", "Mai", "Juni",
        "Juli", "August", "September", "Oktober", "November", "Dezember",
    )  # fmt: skip
    month_abbreviations = table({
        "jan": 1, "feb": 2, "mär": 3, "mrz": 3, "apr": 4, "jun": 6, "jul": 7,
        "aug": 8, "sep": 9, "sept": 9, "okt": 10, "nov": 11, "dez": 12,
    })  # fmt: skip
    currencies = table(
        {
            "USD": Currency(Noun("Dollar", "Dollar"), Noun("Cent", "Cent")),
            "EUR": Currency(Noun("Euro", "Euro"), Noun("Cent", "Cent")),
            "GBP": Currency(Noun("Pfund", "Pfund", "n"), Noun("Penny", "Pence")),
            "JPY": Currency(Noun("Yen", "Yen")),
            "CNY": Currency(Noun("Yuan", "Yuan")),
            "INR": Currency(Noun("Rupie", "Rupien", "f")),
            "CHF": Currency(Noun("Franken", "Franken"), Noun("Rappen", "Rappen")),
            "BTC": Currency(Noun("Bitcoin", "Bitcoin")),
        }
    )
    units = table(
        {
            "km": Noun("Kilometer", "Kilometer"),
            "m": Noun("Meter", "Meter"),
            "cm": Noun("Zentimeter", "Zentimeter"),
            "mm": Noun("Millimeter", "Millimeter"),
            "µm": Noun("Mikrometer", "Mikrometer"),
            "nm": Noun("Nanometer", "Nanometer"),
            "km²": Noun("Quadratkilometer", "Quadratkilometer"),
            "m²": Noun("Quadratmeter", "Quadratmeter"),
            "m³": Noun("Kubikmeter", "Kubikmeter"),
            "kg": Noun("Kilogramm", "Kilogramm", "n"),
            "g": Noun("Gramm", "Gramm", "n"),
            "mg": Noun("Milligramm", "Milligramm", "n"),
            "t": Noun("Tonne", "Tonnen", "f"),
            "l": Noun("Liter", "Liter"),
            "L": Noun("Liter", "Liter"),
            "ml": Noun("Milliliter", "Milliliter"),
            "mL": Noun("Milliliter", "Milliliter"),
            "km/h": Noun("Kilometer pro Stunde", "Kilometer pro Stunde"),
            "kmh": Noun("Kilometer pro Stunde", "Kilometer pro Stunde"),
            "mph": Noun("Meile pro Stunde", "Meilen pro Stunde", "f"),
            "m/s": Noun("Meter pro Sekunde", "Meter pro Sekunde"),
            "h": Noun("Stunde", "Stunden", "f"),
            "Std.": Noun("Stunde", "Stunden", "f"),
            "min": Noun("Minute", "Minuten", "f"),
            "Min.": Noun("Minute", "Minuten", "f"),
            "s": Noun("Sekunde", "Sekunden", "f"),
            "Sek.": Noun("Sekunde", "Sekunden", "f"),
            "ms": Noun("Millisekunde", "Millisekunden", "f"),
            "Hz": Noun("Hertz", "Hertz", "n"),
            "kHz": Noun("Kilohertz", "Kilohertz", "n"),
            "MHz": Noun("Megahertz", "Megahertz", "n"),
            "GHz": Noun("Gigahertz", "Gigahertz", "n"),
            "KB": Noun("Kilobyte", "Kilobyte", "n"),
            "kB": Noun("Kilobyte", "Kilobyte", "n"),
            "MB": Noun("Megabyte", "Megabyte", "n"),
            "GB": Noun("Gigabyte", "Gigabyte", "n"),
            "TB": Noun("Terabyte", "Terabyte", "n"),
            "Mbit/s": Noun("Megabit pro Sekunde", "Megabit pro Sekunde", "n"),
            "Mbps": Noun("Megabit pro Sekunde", "Megabit pro Sekunde", "n"),
            "W": Noun("Watt", "Watt", "n"),
            "kW": Noun("Kilowatt", "Kilowatt", "n"),
            "MW": Noun("Megawatt", "Megawatt", "n"),
            "kWh": Noun("Kilowattstunde", "Kilowattstunden", "f"),
            "V": Noun("Volt", "Volt", "n"),
            "mAh": Noun("Milliamperestunde", "Milliamperestunden", "f"),
            "PS": Noun("PS", "PS", "n"),
            "mi": Noun("Meile", "Meilen", "f"),
            "ft": Noun("Fuß", "Fuß"),
            "lb": Noun("Pfund", "Pfund", "n"),
            "lbs": Noun("Pfund", "Pfund", "n"),
            "oz": Noun("Unze", "Unzen", "f"),
            "px": Noun("Pixel", "Pixel", "n"),
            "dB": Noun("Dezibel", "Dezibel", "n"),
            "kcal": Noun("Kilokalorie", "Kilokalorien", "f"),
        }
    )
    scales = table(
        {
            "k": Scale("eintausend", "tausend"),
            "K": Scale("eintausend", "tausend"),
            "Tsd.": Scale("eintausend", "tausend"),
            "Tausend": Scale("eintausend", "tausend"),
            "M": Scale("eine Million", "Millionen", "f"),
            "Mio.": Scale("eine Million", "Millionen", "f"),
            "Mio": Scale("eine Million", "Millionen", "f"),
            "Million": Scale("eine Million", "Millionen", "f"),
            "Millionen": Scale("eine Million", "Millionen", "f"),
            "Mrd.": Scale("eine Milliarde", "Milliarden", "f"),
            "Mrd": Scale("eine Milliarde", "Milliarden", "f"),
            "Milliarde": Scale("eine Milliarde", "Milliarden", "f"),
            "Milliarden": Scale("eine Milliarde", "Milliarden", "f"),
            "Bio.": Scale("eine Billion", "Billionen", "f"),
        }
    )
    fractions = table(
        {
            2: Noun("halb", "halbe", "n"),
            3: Noun("Drittel", "Drittel", "n"),
            4: Noun("Viertel", "Viertel", "n"),
            5: Noun("Fünftel", "Fünftel", "n"),
            6: Noun("Sechstel", "Sechstel", "n"),
            7: Noun("Siebtel", "Siebtel", "n"),
            8: Noun("Achtel", "Achtel", "n"),
            9: Noun("Neuntel", "Neuntel", "n"),
            10: Noun("Zehntel", "Zehntel", "n"),
            100: Noun("Hundertstel", "Hundertstel", "n"),
        }
    )
    abbreviations = table(
        {
            "z.B.": "zum Beispiel",
            "z. B.": "zum Beispiel",
            "Z.B.": "Zum Beispiel",
            "Z. B.": "Zum Beispiel",
            "d.h.": "das heißt",
            "d. h.": "das heißt",
            "usw.": "und so weiter",
            "bzw.": "beziehungsweise",
            "ca.": "circa",
            "evtl.": "eventuell",
            "ggf.": "gegebenenfalls",
            "inkl.": "inklusive",
            "exkl.": "exklusive",
            "zzgl.": "zuzüglich",
            "vgl.": "vergleiche",
            "u.a.": "unter anderem",
            "u. a.": "unter anderem",
            "z.T.": "zum Teil",
            "z. T.": "zum Teil",
            "u.U.": "unter Umständen",
            "u. U.": "unter Umständen",
            "o.Ä.": "oder Ähnliches",
            "o. Ä.": "oder Ähnliches",
            "s.o.": "siehe oben",
            "s.u.": "siehe unten",
            "bspw.": "beispielsweise",
            "insb.": "insbesondere",
            "sog.": "sogenannte",
            "mind.": "mindestens",
            "max.": "maximal",
            "min.": "minimal",
            "Dr.": "Doktor",
            "Prof.": "Professor",
            "Hr.": "Herr",
            "Hrn.": "Herrn",
            "Fr.": "Frau",
            "St.": "Sankt",
            "Str.": "Straße",
            "Mio.": "Millionen",
            "Mrd.": "Milliarden",
            "Tsd.": "Tausend",
            "Jh.": "Jahrhundert",
            "Abb.": "Abbildung",
            "Kap.": "Kapitel",
            "Tel.": "Telefon",
            "MwSt.": "Mehrwertsteuer",
            "etc.": "et cetera",
            "v. Chr.": "vor Christus",
            "n. Chr.": "nach Christus",
        }
    )
    numbered_abbreviations = table(
        {
            "Nr.": "Nummer",
            "S.": "Seite",
            "Abs.": "Absatz",
            "Bd.": "Band",
        }
    )
    sentence_end_abbreviations = frozenset(
        {"usw.", "etc.", "u.a.", "u. a.", "o.Ä.", "o. Ä.", "s.o.", "s.u.", "Str.", "Jh.",
         "v. Chr.", "n. Chr.", "MwSt."}
    )  # fmt: skip
    day_month_pattern = r"(?P<d>\d{{1,2}})\.\s?{mon}(?!\w)(?:\s+{year})?"
    day_dot_dates = True
    clock_suffix = r"\s*Uhr\b"
    # National numbers keep their trunk "0" (shared shapes); emergency numbers after a cue.
    phones = PhoneStyle(
        cues=wordset(
            "ruf rufe rufen ruft anrufen anruf wähle wählen wählt tel telefon telefonnummer "
            "nummer handy mobil fax hotline notruf"
        ),
        emergency=frozenset({"110", "112", "115", "116117", "19222"}),
    )
    ratings = Ratings(
        out_of="von",
        cues=wordset("bewertung bewertet bewertungen note wertung punktzahl score ergebnis"),
        nouns=frozenset({"sternen", "sterne", "stern", "punkten", "punkte", "punkt"}),
    )
    date_cues = wordset(
        "am vom bis zum ab seit "
        "montag dienstag mittwoch donnerstag freitag samstag sonntag "
        "mo di mi do fr sa so"
    )
    fraction_nouns = frozenset({"zoll", "tasse", "tassen"})
    clock = Clock(second=Noun("Sekunde", "Sekunden", "f"), hour_word=Noun("Uhr", "Uhr", "n"))
    num2words_years = True
    # "der 3. Platz", "am 2. Tag": an ordinal needs a determiner before it and a word after it,
    # otherwise "Ich bin 5. Dann ..." would lose its sentence end.
    ordinal_pattern = (
        r"(?P<det>\b(?i:der|die|das|den|dem|des|am|im|zum|zur|vom|beim|ein|eine|einer|einem|"
        r"einen|eines|jeder|jede|jedes|sein|seine|seinem|seinen|ihr|ihre|ihrem|ihren)\s+)"
        # A word follows it on its line.
        r"(?P<num>\d{1,4})\.(?=[ \t]+\w)"
    )
    decade_pattern = r"(?<![\w'])(1[1-9]\d0|20\d0|[1-9]0)er\b"

    def agree(self, words: str, n: int, gender: Gender) -> str:
        return _FINAL_EINS.sub("eine" if gender == "f" else "ein", words)

    def noun_gender(self, word: str) -> Gender | None:
        if not word[:1].isupper():
            # An adjective or verb follows: keep "eins".
            return None
        if word.endswith(_FEMININE_ENDINGS) and word not in _MASCULINE_E:
            return "f"
        return "m"

    def ordinal(self, n: int, gender: Gender = "m", ending: str = "") -> str:
        words = super().ordinal(n)
        if ending and words.endswith("e"):
            words = words[:-1] + ending
        return words

    def ordinal_for(self, n: int, before: str) -> str:
        """The ordinal form a preceding word asks for: "am dritten", "der dritte", "dritter"."""
        word = before.lower()
        ending = "en" if word in _EN_BEFORE else "e" if word in _E_BEFORE else "er"
        if word in {"ein", "sein", "ihr"}:
            ending = "er"
        return self.ordinal(n, ending=ending)

    def ordinal_match(self, match: re.Match[str]) -> str | None:
        det = match["det"]
        return det + self.ordinal_for(int(match["num"]), det.strip())

    def decade(self, n: int) -> str:
        return super().decade(n) + "er"

    def half_before(self, noun: str) -> str | None:
        gender = self.noun_gender(noun)
        if gender is None:
            return None
        return "eine halbe" if gender == "f" else "ein halber"

    def mixed_number(self, whole: int, num: int, den: int) -> str:
        if (num, den) == (1, 2):
            return f"{self.cardinal(whole, 'n')}einhalb"
        return super().mixed_number(whole, num, den)

    def multiplier(self, amount: str) -> str:
        return f"{amount}{self.words.factor}" if " " not in amount else super().multiplier(amount)

    def day(self, day: int, *, before: str = "") -> str:
        # As in "am dreißigsten", "der dreißigste".
        return self.ordinal_for(day, before)
