"""Portuguese: European by default ("dezasseis", "mil milhões"); ``pt-BR`` for Brazilian."""

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

_UM = re.compile(r"^um$")
_DOIS = re.compile(r"\bdois\b")
_HUNDREDS = re.compile(r"entos\b")
_BIG = re.compile(r"(?:milhão|milhões|bilhão|bilhões)$")
_O_END = re.compile(r"o\b")
_FEMININE_ENDINGS = (
    "a",
    "as",
    "ã",
    "ãs",
    "ção",
    "ções",
    "são",
    "sões",
    "dade",
    "dades",
    "agem",
    "agens",
)
_MASCULINE_A = frozenset(
    [
        "dia",
        "dias",
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
    ]
)


class Portuguese(SpokenLanguage):
    code = "pt"
    num2words_lang = "pt"
    words = Words(
        point="vírgula",
        version_point="ponto",
        minus="menos",
        plus="mais",
        and_="e",
        to="a",
        times="vezes",
        by="por",
        equals="igual a",
        percent="por cento",
        per_mille="por mil",
        at="arroba",
        dot="ponto",
        slash="barra",
        dash="hífen",
        underscore="underscore",
        hashtag="hashtag",
        number="número",
        approx="cerca de",
        plus_minus="mais ou menos",
        less_than="menor que",
        greater_than="maior que",
        at_most="menor ou igual a",
        at_least="maior ou igual a",
        divided_by="dividido por",
        power="elevado a",
        section="parágrafo",
        degree=Noun("grau", "graus"),
        celsius="Celsius",
        fahrenheit="Fahrenheit",
    )
    months = (
        "janeiro", "fevereiro", "março", "abril", "maio", "junho",
        "julho", "agosto", "setembro", "outubro", "novembro", "dezembro",
    )  # fmt: skip
    month_abbreviations = table({
        "jan": 1, "fev": 2, "abr": 4, "mai": 5, "jun": 6, "jul": 7,
        "ago": 8, "set": 9, "out": 10, "nov": 11, "dez": 12,
    })  # fmt: skip
    minor_unit = Noun("cêntimo", "cêntimos")
    currencies = table(
        {
            "USD": Currency(Noun("dólar", "dólares"), minor_unit),
            "EUR": Currency(Noun("euro", "euros"), minor_unit),
            "GBP": Currency(Noun("libra", "libras", "f"), Noun("penny", "pence")),
            "JPY": Currency(Noun("iene", "ienes")),
            "CNY": Currency(Noun("yuan", "yuans")),
            "INR": Currency(Noun("rupia", "rupias", "f")),
            "CHF": Currency(Noun("franco suíço", "francos suíços"), minor_unit),
            "BRL": Currency(Noun("real", "reais"), Noun("centavo", "centavos")),
            "BTC": Currency(Noun("bitcoin", "bitcoins")),
        }
    )
    units = table(
        {
            "km": Noun("quilómetro", "quilómetros"),
            "m": Noun("metro", "metros"),
            "cm": Noun("centímetro", "centímetros"),
            "mm": Noun("milímetro", "milímetros"),
            "km²": Noun("quilómetro quadrado", "quilómetros quadrados"),
            "m²": Noun("metro quadrado", "metros quadrados"),
            "m³": Noun("metro cúbico", "metros cúbicos"),
            "kg": Noun("quilo", "quilos"),
            "g": Noun("grama", "gramas"),
            "mg": Noun("miligrama", "miligramas"),
            "t": Noun("tonelada", "toneladas", "f"),
            "l": Noun("litro", "litros"),
            "L": Noun("litro", "litros"),
            "ml": Noun("mililitro", "mililitros"),
            "mL": Noun("mililitro", "mililitros"),
            "km/h": Noun("quilómetro por hora", "quilómetros por hora"),
            "kmh": Noun("quilómetro por hora", "quilómetros por hora"),
            "mph": Noun("milha por hora", "milhas por hora", "f"),
            "m/s": Noun("metro por segundo", "metros por segundo"),
            "h": Noun("hora", "horas", "f"),
            "min": Noun("minuto", "minutos"),
            "s": Noun("segundo", "segundos"),
            "ms": Noun("milissegundo", "milissegundos"),
            "Hz": Noun("hertz", "hertz"),
            "kHz": Noun("quilohertz", "quilohertz"),
            "MHz": Noun("megahertz", "megahertz"),
            "GHz": Noun("gigahertz", "gigahertz"),
            "KB": Noun("kilobyte", "kilobytes"),
            "kB": Noun("kilobyte", "kilobytes"),
            "MB": Noun("megabyte", "megabytes"),
            "GB": Noun("gigabyte", "gigabytes"),
            "TB": Noun("terabyte", "terabytes"),
            "Mbps": Noun("megabit por segundo", "megabits por segundo"),
            "W": Noun("watt", "watts"),
            "kW": Noun("quilowatt", "quilowatts"),
            "kWh": Noun("quilowatt-hora", "quilowatts-hora"),
            "V": Noun("volt", "volts"),
            "mAh": Noun("miliampere-hora", "miliamperes-hora"),
            "mi": Noun("milha", "milhas", "f"),
            "ft": Noun("pé", "pés"),
            "lb": Noun("libra", "libras", "f"),
            "lbs": Noun("libra", "libras", "f"),
            "oz": Noun("onça", "onças", "f"),
            "px": Noun("píxel", "píxeis"),
            "dB": Noun("decibel", "decibéis"),
            "kcal": Noun("quilocaloria", "quilocalorias", "f"),
        }
    )
    scales = table(
        {
            "k": Scale("mil", "mil"),
            "K": Scale("mil", "mil"),
            "M": Scale("um milhão", "milhões"),
            "mi": Scale("um milhão", "milhões"),
            "milhão": Scale("um milhão", "milhões"),
            "milhões": Scale("um milhão", "milhões"),
            "B": Scale("mil milhões", "mil milhões"),
            "bn": Scale("mil milhões", "mil milhões"),
        }
    )
    fractions = table(
        {
            2: Noun("meio", "meios"),
            3: Noun("terço", "terços"),
            4: Noun("quarto", "quartos"),
            5: Noun("quinto", "quintos"),
            6: Noun("sexto", "sextos"),
            7: Noun("sétimo", "sétimos"),
            8: Noun("oitavo", "oitavos"),
            9: Noun("nono", "nonos"),
            10: Noun("décimo", "décimos"),
            100: Noun("centésimo", "centésimos"),
        }
    )
    abbreviations = table(
        {
            "Sr.": "senhor",
            "Sra.": "senhora",
            "Srta.": "senhorita",
            "Dr.": "doutor",
            "Dra.": "doutora",
            "Prof.": "professor",
            "Profa.": "professora",
            "Exmo.": "excelentíssimo",
            "Exma.": "excelentíssima",
            "V. Exa.": "Vossa Excelência",
            "etc.": "etcétera",
            "p. ex.": "por exemplo",
            "p.ex.": "por exemplo",
            "aprox.": "aproximadamente",
            "Av.": "avenida",
            "Lda.": "limitada",
            "Ltda.": "limitada",
            "S.A.": "sociedade anónima",
            "tel.": "telefone",
            "máx.": "máximo",
            "mín.": "mínimo",
            "a.C.": "antes de Cristo",
            "d.C.": "depois de Cristo",
            "vs.": "contra",
        }
    )
    numbered_abbreviations = table(
        {
            "n.º": "número",
            "N.º": "número",
            "nº": "número",
            "Nº": "número",
            "pág.": "página",
            "págs.": "páginas",
            "cap.": "capítulo",
            "vol.": "volume",
            "art.": "artigo",
        }
    )
    sentence_end_abbreviations = frozenset({"etc.", "Lda.", "Ltda.", "S.A.", "a.C.", "d.C."})
    day_month_pattern = r"(?P<d>\d{{1,2}})(?:\.?º)?\s+de\s+{mon}(?!\w)(?:\s+de\s+{year})?"
    clock_suffix = r"\s*(?:h|horas)\b"
    h_clock = True
    ordinal_pattern = r"(?<![\w.,])(?P<num>\d+)\.?(?P<suf>º|ª|°(?=\s+[a-záéíóúâêôãõç]))(?![\w])"

    def agree(self, words: str, n: int, gender: Gender) -> str:
        if gender != "f":
            return words
        if "milh" not in words:
            words = _HUNDREDS.sub("entas", words)
        words = _DOIS.sub("duas", words)
        return last_word_sub(words, _UM, "uma")

    def noun_gender(self, word: str) -> Gender | None:
        return gender_by_ending(word, _FEMININE_ENDINGS, _MASCULINE_A)

    def ordinal(self, n: int, gender: Gender = "m", ending: str = "") -> str:
        words = super().ordinal(n)
        return _O_END.sub("a", words) if gender == "f" else words

    def ordinal_suffix(self, n: int, suffix: str) -> str | None:
        return self.ordinal(n, "f" if suffix == "ª" else "m")

    def join_count(self, amount: str, noun: str) -> str:
        return f"{amount} de {noun}" if _BIG.search(amount) else f"{amount} {noun}"

    def plural_fraction(self, ordinal: str) -> str:
        return ordinal + "s"

    def half_before(self, noun: str) -> str | None:
        return "meia" if self.noun_gender(noun) == "f" else "meio"

    def mixed_number(self, whole: int, num: int, den: int) -> str:
        if (num, den) == (1, 2):
            return f"{self.cardinal(whole)} e meio"
        return super().mixed_number(whole, num, den)

    def multiplier(self, amount: str) -> str:
        return f"{amount} vezes"

    def day(self, day: int) -> str:
        return "primeiro" if day == 1 else self.cardinal(day)

    def date(self, day: int | None, month: int, year: int | None, *, before: str = "") -> str:
        words = f"{self.day(day)} de {self.month_name(month)}" if day else self.month_name(month)
        return f"{words} de {self.year(year)}" if year is not None else words

    def time(self, hour: int, minute: int, second: int | None, meridiem: str | None) -> str:
        if meridiem == "pm" and hour < 12:
            hour += 12
        elif meridiem == "am" and hour == 12:
            hour = 0
        words = self.cardinal(hour, "f")
        if minute:
            words += f" e {self.cardinal(minute)}"
        else:
            words += " hora" if hour == 1 else " horas"
        if second:
            words += f" e {self.cardinal(second)} segundo{'s' if second > 1 else ''}"
        return words


class BrazilianPortuguese(Portuguese):
    """Brazilian number words ("dezesseis", "bilhão") and money ("centavos")."""

    code = "pt-BR"
    num2words_lang = "pt_BR"
    minor_unit = Noun("centavo", "centavos")
    currencies = table(
        {
            **Portuguese.currencies,
            "USD": Currency(Noun("dólar", "dólares"), minor_unit),
            "EUR": Currency(Noun("euro", "euros"), minor_unit),
            "CHF": Currency(Noun("franco suíço", "francos suíços"), minor_unit),
        }
    )
    scales = table(
        {
            **Portuguese.scales,
            "B": Scale("um bilhão", "bilhões"),
            "bi": Scale("um bilhão", "bilhões"),
            "bn": Scale("um bilhão", "bilhões"),
        }
    )
    units = table(
        {
            **Portuguese.units,
            "km": Noun("quilômetro", "quilômetros"),
            "km²": Noun("quilômetro quadrado", "quilômetros quadrados"),
            "km/h": Noun("quilômetro por hora", "quilômetros por hora"),
            "kmh": Noun("quilômetro por hora", "quilômetros por hora"),
            "px": Noun("pixel", "pixels"),
        }
    )
