"""Spanish: gendered "uno/un/una", "1.º/1.ª", "30 de noviembre de 2026", "un millón de euros"."""

from __future__ import annotations

import re

from ..language import (
    Currency,
    Gender,
    Noun,
    Scale,
    SpokenLanguage,
    Words,
    gender_by_ending,
    last_word_sub,
    table,
)

_UNO = re.compile(r"uno$")
_HUNDREDS = re.compile(r"ientos\b")
_BIG = re.compile(r"(?:millón|millones)$")
_O_END = re.compile(r"o\b")
_DECIMO = re.compile(r"décimo(?=\w)")
_VEINTIUNO = re.compile(r"^veintiuno$")
_UNO_WORD = re.compile(r"^uno$")
_FEMININE_ENDINGS = ("a", "as", "ión", "iones", "dad", "dades", "tud", "tudes")
_MASCULINE_A = frozenset(
    [
        "día",
        "días",
        "mapa",
        "mapas",
        "problema",
        "problemas",
        "programa",
        "programas",
        "sistema",
        "sistemas",
        "tema",
        "temas",
        "idioma",
        "idiomas",
        "planeta",
        "planetas",
        "clima",
        "climas",
        "esquema",
        "esquemas",
    ]
)


class Spanish(SpokenLanguage):
    code = "es"
    num2words_lang = "es"
    words = Words(
        point="coma",
        version_point="punto",
        minus="menos",
        plus="más",
        and_="y",
        to="a",
        times="por",
        by="por",
        equals="igual a",
        percent="por ciento",
        per_mille="por mil",
        at="arroba",
        dot="punto",
        slash="barra",
        dash="guion",
        underscore="guion bajo",
        hashtag="hashtag",
        number="número",
        approx="aproximadamente",
        plus_minus="más o menos",
        less_than="menor que",
        greater_than="mayor que",
        at_most="menor o igual que",
        at_least="mayor o igual que",
        divided_by="entre",
        power="elevado a",
        section="sección",
        degree=Noun("grado", "grados"),
        celsius="Celsius",
        fahrenheit="Fahrenheit",
    )
    months = (
        "enero", "febrero", "marzo", "abril", "mayo", "junio",
        "julio", "agosto", "septiembre", "octubre", "noviembre", "diciembre",
    )  # fmt: skip
    month_abbreviations = table({
        "ene": 1, "feb": 2, "abr": 4, "jun": 6, "jul": 7, "ago": 8,
        "sep": 9, "sept": 9, "set": 9, "oct": 10, "nov": 11, "dic": 12,
    })  # fmt: skip
    currencies = table(
        {
            "USD": Currency(Noun("dólar", "dólares"), Noun("centavo", "centavos")),
            "EUR": Currency(Noun("euro", "euros"), Noun("céntimo", "céntimos")),
            "GBP": Currency(Noun("libra", "libras", "f"), Noun("penique", "peniques")),
            "JPY": Currency(Noun("yen", "yenes")),
            "CNY": Currency(Noun("yuan", "yuanes")),
            "INR": Currency(Noun("rupia", "rupias", "f")),
            "CHF": Currency(Noun("franco suizo", "francos suizos"), Noun("céntimo", "céntimos")),
            "BTC": Currency(Noun("bitcoin", "bitcoins")),
        }
    )
    units = table(
        {
            "km": Noun("kilómetro", "kilómetros"),
            "m": Noun("metro", "metros"),
            "cm": Noun("centímetro", "centímetros"),
            "mm": Noun("milímetro", "milímetros"),
            "km²": Noun("kilómetro cuadrado", "kilómetros cuadrados"),
            "m²": Noun("metro cuadrado", "metros cuadrados"),
            "m³": Noun("metro cúbico", "metros cúbicos"),
            "kg": Noun("kilo", "kilos"),
            "g": Noun("gramo", "gramos"),
            "mg": Noun("miligramo", "miligramos"),
            "t": Noun("tonelada", "toneladas", "f"),
            "l": Noun("litro", "litros"),
            "L": Noun("litro", "litros"),
            "ml": Noun("mililitro", "mililitros"),
            "mL": Noun("mililitro", "mililitros"),
            "km/h": Noun("kilómetro por hora", "kilómetros por hora"),
            "kmh": Noun("kilómetro por hora", "kilómetros por hora"),
            "mph": Noun("milla por hora", "millas por hora", "f"),
            "m/s": Noun("metro por segundo", "metros por segundo"),
            "h": Noun("hora", "horas", "f"),
            "min": Noun("minuto", "minutos"),
            "s": Noun("segundo", "segundos"),
            "ms": Noun("milisegundo", "milisegundos"),
            "Hz": Noun("hercio", "hercios"),
            "kHz": Noun("kilohercio", "kilohercios"),
            "MHz": Noun("megahercio", "megahercios"),
            "GHz": Noun("gigahercio", "gigahercios"),
            "KB": Noun("kilobyte", "kilobytes"),
            "kB": Noun("kilobyte", "kilobytes"),
            "MB": Noun("megabyte", "megabytes"),
            "GB": Noun("gigabyte", "gigabytes"),
            "TB": Noun("terabyte", "terabytes"),
            "Mbps": Noun("megabit por segundo", "megabits por segundo"),
            "W": Noun("vatio", "vatios"),
            "kW": Noun("kilovatio", "kilovatios"),
            "kWh": Noun("kilovatio hora", "kilovatios hora"),
            "V": Noun("voltio", "voltios"),
            "mAh": Noun("miliamperio hora", "miliamperios hora"),
            "mi": Noun("milla", "millas", "f"),
            "ft": Noun("pie", "pies"),
            "lb": Noun("libra", "libras", "f"),
            "lbs": Noun("libra", "libras", "f"),
            "oz": Noun("onza", "onzas", "f"),
            "px": Noun("píxel", "píxeles"),
            "dB": Noun("decibelio", "decibelios"),
            "kcal": Noun("kilocaloría", "kilocalorías", "f"),
        }
    )
    scales = table(
        {
            "k": Scale("mil", "mil"),
            "K": Scale("mil", "mil"),
            "M": Scale("un millón", "millones"),
            "MM": Scale("un millón", "millones"),
            "millón": Scale("un millón", "millones"),
            "millones": Scale("un millón", "millones"),
            "B": Scale("mil millones", "mil millones"),
            "bn": Scale("mil millones", "mil millones"),
        }
    )
    fractions = table(
        {
            2: Noun("medio", "medios"),
            3: Noun("tercio", "tercios"),
            4: Noun("cuarto", "cuartos"),
            5: Noun("quinto", "quintos"),
            6: Noun("sexto", "sextos"),
            7: Noun("séptimo", "séptimos"),
            8: Noun("octavo", "octavos"),
            9: Noun("noveno", "novenos"),
            10: Noun("décimo", "décimos"),
            100: Noun("centésimo", "centésimos"),
        }
    )
    abbreviations = table(
        {
            "Sr.": "señor",
            "Sra.": "señora",
            "Srta.": "señorita",
            "Sres.": "señores",
            "Dr.": "doctor",
            "Dra.": "doctora",
            "Prof.": "profesor",
            "Ud.": "usted",
            "Uds.": "ustedes",
            "Vd.": "usted",
            "Vds.": "ustedes",
            "Dña.": "doña",
            "etc.": "etcétera",
            "p. ej.": "por ejemplo",
            "p.ej.": "por ejemplo",
            "aprox.": "aproximadamente",
            "Avda.": "avenida",
            "Av.": "avenida",
            "EE. UU.": "Estados Unidos",
            "EE.UU.": "Estados Unidos",
            "EEUU": "Estados Unidos",
            "S.A.": "sociedad anónima",
            "a. C.": "antes de Cristo",
            "d. C.": "después de Cristo",
            "a.C.": "antes de Cristo",
            "d.C.": "después de Cristo",
            "dcha.": "derecha",
            "izq.": "izquierda",
            "tel.": "teléfono",
            "Cía.": "compañía",
            "máx.": "máximo",
            "mín.": "mínimo",
            "vs.": "contra",
        }
    )
    numbered_abbreviations = table(
        {
            "n.º": "número",
            "N.º": "número",
            "nº": "número",
            "Nº": "número",
            "núm.": "número",
            "pág.": "página",
            "págs.": "páginas",
            "cap.": "capítulo",
            "vol.": "volumen",
            "art.": "artículo",
        }
    )
    sentence_end_abbreviations = frozenset(
        {"etc.", "EE. UU.", "EE.UU.", "S.A.", "a. C.", "d. C.", "a.C.", "d.C."}
    )
    day_month_pattern = r"(?P<d>\d{{1,2}})(?:\.?º)?\s+de\s+{mon}(?!\w)(?:\s+(?:de|del)\s+{year})?"
    clock_suffix = r"\s*(?:h|hrs?|horas)\b"
    h_clock = True
    ordinal_pattern = (
        r"(?<![\w.,])(?P<num>\d+)\.?(?P<suf>º|ª|°(?=\s+[a-záéíóúñ])|er|ra|os|as)(?![\w])"
    )

    def agree(self, words: str, n: int, gender: Gender) -> str:
        if gender == "f":
            if "mill" not in words:
                words = _HUNDREDS.sub("ientas", words)
            return last_word_sub(words, _UNO, "una")
        words = last_word_sub(words, _VEINTIUNO, "veintiún")
        return last_word_sub(words, _UNO_WORD, "un")

    def noun_gender(self, word: str) -> Gender | None:
        return gender_by_ending(word, _FEMININE_ENDINGS, _MASCULINE_A)

    def ordinal(self, n: int, gender: Gender = "m", ending: str = "") -> str:
        words = _DECIMO.sub("decimo", super().ordinal(n))  # "decimoprimero", no accent
        return _O_END.sub("a", words) if gender == "f" else words

    def ordinal_suffix(self, n: int, suffix: str) -> str | None:
        feminine = suffix in {"ª", "ra", "as"}
        words = self.ordinal(n, "f" if feminine else "m")
        if suffix == "er" and words in {"primero", "tercero"}:
            return words[:-1]  # "1er piso" → "primer piso"
        if suffix in {"os", "as"}:
            return words + "s"
        return words

    def join_count(self, amount: str, noun: str) -> str:
        return f"{amount} de {noun}" if _BIG.search(amount) else f"{amount} {noun}"

    def plural_fraction(self, ordinal: str) -> str:
        return ordinal + "s"

    def half_before(self, noun: str) -> str | None:
        return "media" if self.noun_gender(noun) == "f" else "medio"

    def mixed_number(self, whole: int, num: int, den: int) -> str:
        if (num, den) == (1, 2):
            return f"{self.cardinal(whole)} y medio"
        return super().mixed_number(whole, num, den)

    def multiplier(self, amount: str) -> str:
        return f"{amount} veces"

    def day(self, day: int) -> str:
        return "primero" if day == 1 else self.cardinal(day)

    def date(self, day: int | None, month: int, year: int | None, *, before: str = "") -> str:
        words = f"{self.day(day)} de {self.month_name(month)}" if day else self.month_name(month)
        return f"{words} de {self.year(year)}" if year is not None else words

    def time(self, hour: int, minute: int, second: int | None, meridiem: str | None) -> str:
        if meridiem == "pm" and hour < 12:
            hour += 12
        elif meridiem == "am" and hour == 12:
            hour = 0
        words = self.cardinal(hour, "f")
        words += f" y {self.cardinal(minute)}" if minute else " en punto"
        if second:
            words += f" y {self.cardinal(second, 'm')} segundo{'s' if second > 1 else ''}"
        return words
