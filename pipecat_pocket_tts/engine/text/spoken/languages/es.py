"""Spanish: gendered "uno/un/una", "1.º/1.ª", "30 de noviembre de 2026", "un millón de euros"."""

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

_UNO = re.compile(r"uno$")
_HUNDREDS = re.compile(r"ientos\b")
_DECIMO = re.compile(r"décimo(?=\w)")
_VEINTIUNO = re.compile(r"^veintiuno$")
_UNO_WORD = re.compile(r"^uno$")
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
        factor="veces",
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
        per="por",
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
    fraction_plural_suffix = "s"
    half_after_whole = "y medio"
    half_by_gender = ("media", "medio")
    feminine_endings = ("a", "as", "ión", "iones", "dad", "dades", "tud", "tudes")
    masculine_exceptions = _MASCULINE_A
    feminine_ordinals_in_a = True
    feminine_ordinal_marks = frozenset({"ª", "ra", "as"})
    big_numbers = re.compile(r"(?:millón|millones)$")
    count_of = "de"
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
    date_link = "de"
    first_of_month = "primero"
    # Nine digits, no trunk "0": "612 34 56 78" and "91 234 56 78" are phone groupings;
    # "912 345 678" could be a grouped number, so it needs a cue ("llame al").
    phones = PhoneStyle(
        cues=wordset(
            "llama llame llamar llamen llámanos llámame llámenos marca marque marcar "
            "teléfono tel tlf tfno móvil número whatsapp fax contacto"
        ),
        shapes=(r"[6-9]\d{2} \d{2} \d{2} \d{2}", r"[89]\d \d{3} \d{2} \d{2}"),
        cued_shapes=(r"[6-9]\d{2}[ .]\d{3}[ .]\d{3}", r"[6-9]\d{8}"),
        emergency=frozenset({"112", "091", "092", "061", "062", "080", "016", "024"}),
    )
    ratings = Ratings(
        out_of="de",
        cues=wordset(
            "puntuación puntuado puntuada calificación calificado calificada nota "
            "valoración valorado valorada puntaje"
        ),
        nouns=frozenset({"estrellas", "estrella", "puntos"}),
    )
    date_cues = wordset(
        "el del al desde hasta lunes martes miércoles jueves viernes sábado domingo"
    )
    fraction_nouns = frozenset({"pulgada", "pulgadas", "taza", "tazas"})
    clock = Clock(
        second=Noun("segundo", "segundos"),
        hour_gender="f",
        before_minutes="y",
        on_the_hour=Noun("en punto", "en punto"),
    )
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

    def ordinal(self, n: int, gender: Gender = "m", ending: str = "") -> str:
        # As in "decimoprimero", with no accent.
        return _DECIMO.sub("decimo", super().ordinal(n, gender))

    def ordinal_suffix(self, n: int, suffix: str) -> str | None:
        words = super().ordinal_suffix(n, suffix)
        if suffix == "er" and words in {"primero", "tercero"}:
            # "1er piso" becomes "primer piso".
            return words[:-1]
        if suffix in {"os", "as"}:
            return words + "s"
        return words
