"""Italian: "un/una", "1º/1ª", "primo maggio", "un milione di euro", "alle quindici e trenta"."""

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
    last_word_sub,
    table,
    wordset,
)

_UNO_WORD = re.compile(r"^uno$")
_UNO_END = re.compile(r"uno$")
_O_END = re.compile(r"o\b")


class Italian(SpokenLanguage):
    code = "it"
    num2words_lang = "it"
    words = Words(
        point="virgola",
        version_point="punto",
        minus="meno",
        plus="più",
        and_="e",
        to="a",
        times="per",
        factor="volte",
        by="per",
        equals="uguale a",
        percent="per cento",
        per_mille="per mille",
        at="chiocciola",
        dot="punto",
        slash="barra",
        dash="trattino",
        underscore="trattino basso",
        hashtag="hashtag",
        number="numero",
        approx="circa",
        plus_minus="più o meno",
        less_than="minore di",
        greater_than="maggiore di",
        at_most="minore o uguale a",
        at_least="maggiore o uguale a",
        divided_by="diviso",
        power="elevato alla",
        section="paragrafo",
        degree=Noun("grado", "gradi"),
        per="al",
    )
    months = (
        "gennaio", "febbraio", "marzo", "aprile", "maggio", "giugno",
        "luglio", "agosto", "settembre", "ottobre", "novembre", "dicembre",
    )  # fmt: skip
    month_abbreviations = table({
        "gen": 1, "feb": 2, "apr": 4, "mag": 5, "giu": 6, "lug": 7,
        "ago": 8, "set": 9, "sett": 9, "ott": 10, "nov": 11, "dic": 12,
    })  # fmt: skip
    currencies = table(
        {
            "USD": Currency(Noun("dollaro", "dollari"), Noun("centesimo", "centesimi")),
            "EUR": Currency(Noun("euro", "euro"), Noun("centesimo", "centesimi")),
            "GBP": Currency(Noun("sterlina", "sterline", "f"), Noun("penny", "pence")),
            "JPY": Currency(Noun("yen", "yen")),
            "CNY": Currency(Noun("yuan", "yuan")),
            "INR": Currency(Noun("rupia", "rupie", "f")),
            "CHF": Currency(
                Noun("franco svizzero", "franchi svizzeri"), Noun("centesimo", "centesimi")
            ),
            "BTC": Currency(Noun("bitcoin", "bitcoin")),
        }
    )
    units = table(
        {
            "km": Noun("chilometro", "chilometri"),
            "m": Noun("metro", "metri"),
            "cm": Noun("centimetro", "centimetri"),
            "mm": Noun("millimetro", "millimetri"),
            "km²": Noun("chilometro quadrato", "chilometri quadrati"),
            "m²": Noun("metro quadrato", "metri quadrati"),
            "m³": Noun("metro cubo", "metri cubi"),
            "kg": Noun("chilo", "chili"),
            "g": Noun("grammo", "grammi"),
            "mg": Noun("milligrammo", "milligrammi"),
            "t": Noun("tonnellata", "tonnellate", "f"),
            "l": Noun("litro", "litri"),
            "L": Noun("litro", "litri"),
            "ml": Noun("millilitro", "millilitri"),
            "mL": Noun("millilitro", "millilitri"),
            "km/h": Noun("chilometro orario", "chilometri orari"),
            "kmh": Noun("chilometro orario", "chilometri orari"),
            "mph": Noun("miglio orario", "miglia orarie"),
            "m/s": Noun("metro al secondo", "metri al secondo"),
            "h": Noun("ora", "ore", "f"),
            "min": Noun("minuto", "minuti"),
            "s": Noun("secondo", "secondi"),
            "ms": Noun("millisecondo", "millisecondi"),
            "Hz": Noun("hertz", "hertz"),
            "kHz": Noun("kilohertz", "kilohertz"),
            "MHz": Noun("megahertz", "megahertz"),
            "GHz": Noun("gigahertz", "gigahertz"),
            "KB": Noun("kilobyte", "kilobyte"),
            "kB": Noun("kilobyte", "kilobyte"),
            "MB": Noun("megabyte", "megabyte"),
            "GB": Noun("gigabyte", "gigabyte"),
            "TB": Noun("terabyte", "terabyte"),
            "Mbps": Noun("megabit al secondo", "megabit al secondo"),
            "W": Noun("watt", "watt"),
            "kW": Noun("chilowatt", "chilowatt"),
            "kWh": Noun("chilowattora", "chilowattora"),
            "V": Noun("volt", "volt"),
            "mAh": Noun("milliampereora", "milliampereora"),
            "mi": Noun("miglio", "miglia"),
            "ft": Noun("piede", "piedi"),
            "lb": Noun("libbra", "libbre", "f"),
            "lbs": Noun("libbra", "libbre", "f"),
            "oz": Noun("oncia", "once", "f"),
            "px": Noun("pixel", "pixel"),
            "dB": Noun("decibel", "decibel"),
            "kcal": Noun("chilocaloria", "chilocalorie", "f"),
        }
    )
    scales = table(
        {
            "k": Scale("mille", "mila"),
            "K": Scale("mille", "mila"),
            "M": Scale("un milione", "milioni"),
            "mln": Scale("un milione", "milioni"),
            "milione": Scale("un milione", "milioni"),
            "milioni": Scale("un milione", "milioni"),
            "B": Scale("un miliardo", "miliardi"),
            "mld": Scale("un miliardo", "miliardi"),
            "miliardo": Scale("un miliardo", "miliardi"),
            "miliardi": Scale("un miliardo", "miliardi"),
        }
    )
    fractions = table(
        {
            2: Noun("mezzo", "mezzi"),
            3: Noun("terzo", "terzi"),
            4: Noun("quarto", "quarti"),
        }
    )
    half_after_whole = "e mezzo"
    half_by_gender = ("mezza", "mezzo")
    feminine_endings = ("a", "ione", "ioni", "tà")
    masculine_exceptions = frozenset(
        ["problema", "programma", "sistema", "tema", "clima", "pianeta", "schema"]
    )
    feminine_ordinals_in_a = True
    feminine_ordinal_marks = frozenset({"ª"})
    big_numbers = re.compile(r"(?:milione|milioni|miliardo|miliardi)$")
    count_of = "di"
    abbreviations = table(
        {
            "Sig.": "signor",
            "Sig.ra": "signora",
            "Sig.na": "signorina",
            "Sigg.": "signori",
            "Dott.": "dottor",
            "Dott.ssa": "dottoressa",
            "Dr.": "dottor",
            "Prof.": "professor",
            "Prof.ssa": "professoressa",
            "Ing.": "ingegner",
            "Avv.": "avvocato",
            "Arch.": "architetto",
            "ecc.": "eccetera",
            "etc.": "eccetera",
            "ad es.": "ad esempio",
            "p.es.": "per esempio",
            "p. es.": "per esempio",
            "ca.": "circa",
            "S.p.A.": "società per azioni",
            "tel.": "telefono",
            "max.": "massimo",
            "min.": "minimo",
            "a.C.": "avanti Cristo",
            "d.C.": "dopo Cristo",
            "Spett.le": "spettabile",
            "vs.": "contro",
        }
    )
    numbered_abbreviations = table(
        {
            "n.": "numero",
            "nº": "numero",
            "n°": "numero",
            "N.": "numero",
            "pag.": "pagina",
            "pagg.": "pagine",
            "p.": "pagina",
            "cap.": "capitolo",
            "vol.": "volume",
            "art.": "articolo",
        }
    )
    sentence_end_abbreviations = frozenset({"ecc.", "etc.", "a.C.", "d.C.", "S.p.A."})
    day_month_pattern = r"(?P<d>\d{{1,2}})(?:º|°)?\s+{mon}(?!\w)(?:\s+{year})?"
    first_of_month = "primo"
    # Mobiles "333 123 4567" / "333 1234567"; "333 123 456" could be a grouped number and
    # needs a cue. Landlines keep their "0" (shared shapes). "Il 112", "il 118" are said as
    # numbers ("centododici", "centodiciotto"): no emergency number is read digit by digit.
    phones = PhoneStyle(
        cues=wordset(
            "chiama chiamare chiamate chiamami chiamaci telefona telefonare telefono tel "
            "cell cellulare numero fax whatsapp contatta"
        ),
        shapes=(r"3\d{2} \d{3} \d{4}", r"3\d{2}[ /-]\d{6,7}"),
        cued_shapes=(r"3\d{2}[ .]\d{3}[ .]\d{3,4}", r"3\d{8,9}"),
    )
    ratings = Ratings(
        out_of="su",
        cues=wordset("voto valutazione valutato valutata punteggio recensione"),
        nouns=frozenset({"stelle", "stella", "punti"}),
    )
    date_cues = wordset(
        "il dal al entro fino lunedì martedì mercoledì giovedì venerdì sabato domenica"
    )
    fraction_nouns = frozenset({"pollice", "pollici", "tazza", "tazze"})
    clock = Clock(second=Noun("secondo", "secondi", None), hour_gender="f", before_minutes="e")
    clock_suffix = r"\s*(?:h|ore)\b"
    h_clock = True
    ordinal_pattern = r"(?<![\w.,])(?P<num>\d+)\s?(?P<suf>º|ª|°(?=\s+[a-zàèéìòù]))(?![\w])"

    def _clean(self, words: str) -> str:
        # num2words drops an "i" after "cento": 118 "centodicotto" (is "centodiciotto")
        return words.replace("dicott", "diciott")

    def agree(self, words: str, n: int, gender: Gender) -> str:
        if gender == "f":
            return last_word_sub(words, _UNO_END, "una")
        return last_word_sub(words, _UNO_WORD, "un")

    def plural_fraction(self, ordinal: str) -> str:
        return _O_END.sub("i", ordinal)
