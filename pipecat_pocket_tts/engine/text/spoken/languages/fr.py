"""French: "1er"/"1re", "15 h 45", "un million d'euros", singular below two."""

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

_UN = re.compile(r"^un$")
_BIG = re.compile(r"(?:millions?|milliards?)$")
_VOWEL = re.compile(r"^[aeiouyéèêhAEIOUYÉ]")
_FEMININE = frozenset({"re", "res", "ère", "ères", "ʳᵉ"})
_FIRST_ONLY = _FEMININE | {"er", "ers", "ᵉʳ"}
# French gender cannot be read off the spelling; these are the nouns most often counted.
_FEMININE_NOUNS = frozenset(
    [
        "heure",
        "fois",
        "minute",
        "seconde",
        "semaine",
        "journée",
        "année",
        "personne",
        "page",
        "étape",
        "chose",
        "question",
        "raison",
        "option",
        "solution",
        "idée",
        "ville",
        "femme",
        "fille",
        "voiture",
        "maison",
        "tasse",
        "cuillère",
        "partie",
        "fonction",
        "ligne",
        "version",
        "erreur",
        "façon",
        "manière",
        "nuit",
        "place",
        "tonne",
        "soirée",
        "matinée",
        "classe",
        "règle",
        "table",
        "liste",
        "commande",
        "réponse",
        "valeur",
        "image",
        "photo",
        "vidéo",
        "application",
        "langue",
        "lettre",
        "phrase",
    ]
)


class French(SpokenLanguage):
    code = "fr"
    num2words_lang = "fr"
    space_groups = True
    words = Words(
        point="virgule",
        version_point="point",
        minus="moins",
        plus="plus",
        and_="et",
        to="à",
        times="fois",
        factor="fois",
        by="par",
        equals="égal",
        percent="pour cent",
        per_mille="pour mille",
        at="arobase",
        dot="point",
        slash="slash",
        dash="tiret",
        underscore="tiret bas",
        hashtag="hashtag",
        number="numéro",
        approx="environ",
        plus_minus="plus ou moins",
        less_than="inférieur à",
        greater_than="supérieur à",
        at_most="inférieur ou égal à",
        at_least="supérieur ou égal à",
        divided_by="divisé par",
        power="puissance",
        section="paragraphe",
        degree=Noun("degré", "degrés"),
        per="par",
    )
    months = (
        "janvier", "février", "mars", "avril", "mai", "juin",
        "juillet", "août", "septembre", "octobre", "novembre", "décembre",
    )  # fmt: skip
    month_abbreviations = table({
        "janv": 1, "févr": 2, "fév": 2, "avr": 4, "juil": 7,
        "sept": 9, "oct": 10, "nov": 11, "déc": 12,
    })  # fmt: skip
    currencies = table(
        {
            "USD": Currency(Noun("dollar", "dollars"), Noun("cent", "cents")),
            "EUR": Currency(Noun("euro", "euros"), Noun("centime", "centimes")),
            "GBP": Currency(Noun("livre", "livres", "f"), Noun("penny", "pence")),
            "JPY": Currency(Noun("yen", "yens")),
            "CNY": Currency(Noun("yuan", "yuans")),
            "INR": Currency(Noun("roupie", "roupies", "f")),
            "CHF": Currency(Noun("franc suisse", "francs suisses"), Noun("centime", "centimes")),
            "BTC": Currency(Noun("bitcoin", "bitcoins")),
        }
    )
    units = table(
        {
            "km": Noun("kilomètre", "kilomètres"),
            "m": Noun("mètre", "mètres"),
            "cm": Noun("centimètre", "centimètres"),
            "mm": Noun("millimètre", "millimètres"),
            "µm": Noun("micromètre", "micromètres"),
            "nm": Noun("nanomètre", "nanomètres"),
            "km²": Noun("kilomètre carré", "kilomètres carrés"),
            "m²": Noun("mètre carré", "mètres carrés"),
            "m³": Noun("mètre cube", "mètres cubes"),
            "kg": Noun("kilo", "kilos"),
            "g": Noun("gramme", "grammes"),
            "mg": Noun("milligramme", "milligrammes"),
            "t": Noun("tonne", "tonnes", "f"),
            "l": Noun("litre", "litres"),
            "L": Noun("litre", "litres"),
            "ml": Noun("millilitre", "millilitres"),
            "mL": Noun("millilitre", "millilitres"),
            "cl": Noun("centilitre", "centilitres"),
            "km/h": Noun("kilomètre heure", "kilomètres heure"),
            "kmh": Noun("kilomètre heure", "kilomètres heure"),
            "mph": Noun("mile par heure", "miles par heure"),
            "m/s": Noun("mètre par seconde", "mètres par seconde"),
            "min": Noun("minute", "minutes", "f"),
            "s": Noun("seconde", "secondes", "f"),
            "ms": Noun("milliseconde", "millisecondes", "f"),
            "Hz": Noun("hertz", "hertz"),
            "kHz": Noun("kilohertz", "kilohertz"),
            "MHz": Noun("mégahertz", "mégahertz"),
            "GHz": Noun("gigahertz", "gigahertz"),
            "Ko": Noun("kilooctet", "kilooctets"),
            "Mo": Noun("mégaoctet", "mégaoctets"),
            "Go": Noun("gigaoctet", "gigaoctets"),
            "To": Noun("téraoctet", "téraoctets"),
            "KB": Noun("kilooctet", "kilooctets"),
            "MB": Noun("mégaoctet", "mégaoctets"),
            "GB": Noun("gigaoctet", "gigaoctets"),
            "TB": Noun("téraoctet", "téraoctets"),
            "Mbit/s": Noun("mégabit par seconde", "mégabits par seconde"),
            "Mbps": Noun("mégabit par seconde", "mégabits par seconde"),
            "W": Noun("watt", "watts"),
            "kW": Noun("kilowatt", "kilowatts"),
            "MW": Noun("mégawatt", "mégawatts"),
            "kWh": Noun("kilowattheure", "kilowattheures"),
            "V": Noun("volt", "volts"),
            "mAh": Noun("milliampère-heure", "milliampères-heures"),
            "mi": Noun("mile", "miles"),
            "ft": Noun("pied", "pieds"),
            "lb": Noun("livre", "livres", "f"),
            "lbs": Noun("livre", "livres", "f"),
            "oz": Noun("once", "onces", "f"),
            "px": Noun("pixel", "pixels"),
            "dB": Noun("décibel", "décibels"),
            "kcal": Noun("kilocalorie", "kilocalories", "f"),
        }
    )
    scales = table(
        {
            "k": Scale("mille", "mille"),
            "K": Scale("mille", "mille"),
            "M": Scale("un million", "millions"),
            "million": Scale("un million", "millions"),
            "millions": Scale("un million", "millions"),
            "Md": Scale("un milliard", "milliards"),
            "Mds": Scale("un milliard", "milliards"),
            "Mrd": Scale("un milliard", "milliards"),
            "milliard": Scale("un milliard", "milliards"),
            "milliards": Scale("un milliard", "milliards"),
        }
    )
    fractions = table(
        {
            2: Noun("demi", "demis"),
            3: Noun("tiers", "tiers"),
            4: Noun("quart", "quarts"),
        }
    )
    fraction_plural_suffix = "s"
    half_after_whole = "et demi"
    half_by_gender = ("une demi", "un demi")
    feminine_ordinal_marks = _FEMININE
    big_numbers = _BIG
    count_of = "de"
    abbreviations = table(
        {
            "M.": "Monsieur",
            "MM.": "Messieurs",
            "Mme": "Madame",
            "Mmes": "Mesdames",
            "Mlle": "Mademoiselle",
            "Mlles": "Mesdemoiselles",
            "Dr": "Docteur",
            "Dr.": "Docteur",
            "Pr": "Professeur",
            "Pr.": "Professeur",
            "St": "Saint",
            "Ste": "Sainte",
            "etc.": "et cetera",
            "p. ex.": "par exemple",
            "p.ex.": "par exemple",
            "c.-à-d.": "c'est-à-dire",
            "c-à-d": "c'est-à-dire",
            "env.": "environ",
            "av.": "avenue",
            "bd": "boulevard",
            "boul.": "boulevard",
            "av. J.-C.": "avant Jésus-Christ",
            "apr. J.-C.": "après Jésus-Christ",
            "J.-C.": "Jésus-Christ",
            "cf.": "voir",
            "Cie": "compagnie",
            "svp": "s'il vous plaît",
            "SVP": "s'il vous plaît",
            "tél.": "téléphone",
            "Tél.": "Téléphone",
            "max.": "maximum",
            "min.": "minimum",
            "éd.": "édition",
            "vs": "contre",
            "vs.": "contre",
        }
    )
    numbered_abbreviations = table(
        {
            "n°": "numéro",
            "N°": "numéro",
            "nº": "numéro",
            "Nº": "numéro",
            "no": "numéro",
            "p.": "page",
            "chap.": "chapitre",
            "vol.": "volume",
            "art.": "article",
        }
    )
    sentence_end_abbreviations = frozenset({"etc.", "J.-C.", "av. J.-C.", "apr. J.-C."})
    day_month_pattern = r"(?P<d>\d{{1,2}})(?:er)?\s+{mon}(?!\w)(?:\s+{year})?"
    first_of_month = "premier"
    # National numbers start with "0" (shared shapes). "Le 112", "le 15" are said as numbers
    # ("le cent douze"), so no emergency number is read digit by digit.
    phones = PhoneStyle(
        cues=wordset(
            "appelez appeler appelle appelez-nous appelez-moi composez composer tél tel "
            "téléphone téléphonez numéro portable mobile fax joindre contactez"
        ),
    )
    ratings = Ratings(
        out_of="sur",
        cues=wordset("note noté notée notés notées notation évalué évaluée évaluation score"),
        nouns=frozenset({"étoiles", "étoile", "points", "pts"}),
    )
    date_cues = wordset(
        "le du au dès depuis jusqu'au avant après "
        "lundi mardi mercredi jeudi vendredi samedi dimanche"
    )
    fraction_nouns = frozenset({"pouce", "pouces", "tasse", "tasses"})
    clock = Clock(second=Noun("seconde", "secondes", "f"), hour_word=Noun("heure", "heures", "f"))
    h_clock = True
    h_only_clock = True
    ordinal_pattern = r"(?<![\w.,])(?P<num>\d+)(?P<suf>ères?|res?|ers?|èmes?|es?|ᵉʳ|ʳᵉ|ᵉ)(?![\w])"

    def agree(self, words: str, n: int, gender: Gender) -> str:
        return last_word_sub(words, _UN, "une") if gender == "f" else words

    def noun_gender(self, word: str) -> Gender | None:
        lower = word.lower()
        singular = lower[:-1] if lower.endswith("s") else lower
        if (
            lower in _FEMININE_NOUNS
            or singular in _FEMININE_NOUNS
            or lower.endswith(("tion", "sion"))
        ):
            return "f"
        return None

    def ordinal(self, n: int, gender: Gender = "m", ending: str = "") -> str:
        if n == 1:
            return "première" if gender == "f" else "premier"
        return super().ordinal(n)

    def ordinal_suffix(self, n: int, suffix: str) -> str | None:
        if suffix in _FIRST_ONLY and n != 1:
            # "2er" is no French ordinal.
            return None
        words = super().ordinal_suffix(n, suffix)
        return words + "s" if suffix.endswith("s") else words

    def special_abbreviation(self, token: str, after: str) -> str | None:
        if token == "M.":
            # "M. Dupont" is Monsieur; "la lettre M." stays a letter.
            return "Monsieur" if re.match(r"\s+[A-ZÀ-Ý]", after) else token
        return None

    def is_singular(self, whole: str, frac: str | None) -> bool:
        return whole.lstrip("0") in {"", "1"}

    def join_count(self, amount: str, noun: str) -> str:
        if _VOWEL.match(noun) and _BIG.search(amount):
            # As in "un million d'euros".
            return f"{amount} d'{noun}"
        return super().join_count(amount, noun)
