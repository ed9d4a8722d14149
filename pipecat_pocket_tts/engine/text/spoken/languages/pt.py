"""Portuguese: European by default ("dezasseis", "mil milhões"); ``pt-BR`` for Brazilian."""

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

_UM = re.compile(r"^um$")
_DOIS = re.compile(r"\bdois\b")
_HUNDREDS = re.compile(r"entos\b")
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
        factor="vezes",
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
        per="por",
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
    fraction_plural_suffix = "s"
    half_after_whole = "e meio"
    half_by_gender = ("meia", "meio")
    feminine_endings = _FEMININE_ENDINGS
    masculine_exceptions = _MASCULINE_A
    feminine_ordinals_in_a = True
    feminine_ordinal_marks = frozenset({"ª"})
    big_numbers = re.compile(r"(?:milhão|milhões|bilhão|bilhões)$")
    count_of = "de"
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
    date_link = "de"
    first_of_month = "primeiro"
    # Portugal: nine digits, no trunk "0"; "912 345 678" could be a grouped number (cued),
    # "21 345 6789" and "808 24 24 24" are phone groupings.
    phones = PhoneStyle(
        cues=wordset(
            "ligue liga ligar ligue-nos ligue-me telefone telemóvel telemovel tel telef "
            "número contacto contato whatsapp fax marque"
        ),
        shapes=(r"2\d \d{3} \d{4}", r"[2-9]\d{2} \d{2} \d{2} \d{2}"),
        cued_shapes=(r"[29]\d{2}[ .]\d{3}[ .]\d{3}", r"[29]\d{8}"),
        emergency=frozenset({"112"}),
    )
    ratings = Ratings(
        out_of="de",
        cues=wordset("nota avaliação avaliado avaliada classificação classificado pontuação"),
        nouns=frozenset({"estrelas", "estrela", "pontos"}),
    )
    date_cues = wordset("em dia de desde até segunda terça quarta quinta sexta sábado domingo")
    fraction_nouns = frozenset(
        {"polegada", "polegadas", "chávena", "chávenas", "xícara", "xícaras"}
    )
    clock = Clock(
        second=Noun("segundo", "segundos", None),
        hour_gender="f",
        before_minutes="e",
        on_the_hour=Noun("hora", "horas"),
    )
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
    # "(11) 91234-5678" is shared; "91234-5678" is a mobile; "3456-7890" could be a range of
    # years, so it needs a cue. "Ligue 190" is said as a number ("cento e noventa").
    phones = PhoneStyle(
        cues=Portuguese.phones.cues | frozenset({"disque", "disca", "celular", "fone"}),
        shapes=(r"\d{2} 9\d{4}-\d{4}", r"9\d{4}-\d{4}"),
        cued_shapes=(r"[2-5]\d{3}-\d{4}", r"\d{2} [2-5]\d{3}-\d{4}"),
    )
