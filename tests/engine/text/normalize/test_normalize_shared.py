"""Rules every language reads through one shared method, with its own words: the 24-hour
clock (with seconds and "pm" input), "and a half", "½" before a noun, ordinal marks,
"primero de mayo", "un millón de", factors ("10x") and fractions with ordinal denominators."""

from __future__ import annotations

import pytest

from pipecat_pocket_tts.engine.text.normalize import normalize_text

CASES = {
    "es": [
        ("A las 3:45 pm.", "A las quince y cuarenta y cinco."),
        ("A las 1:00:01.", "A las una en punto y un segundo."),
        ("A las 21:30:21.", "A las veintiuna y treinta y veintiún segundos."),
        ("Los 1os y las 2as.", "Los primeros y las segundas."),
        ("El 1er piso.", "El primer piso."),
        ("El 1 de mayo de 2026.", "El primero de mayo de dos mil veintiséis."),
        ("Añade ½ taza.", "Añade media taza."),
        ("Cuesta 1 M$.", "Cuesta un millón de dólares."),
    ],
    "pt": [
        ("À 1:00.", "À uma hora."),
        ("Às 13:00.", "Às treze horas."),
        ("Às 3:45 pm.", "Às quinze e quarenta e cinco."),
        ("Às 21:30:21.", "Às vinte e uma e trinta e vinte e um segundos."),
        ("Junte ½ xícara e ½ copo.", "Junte meia xícara e meio copo."),
        ("O 1 de maio de 2026.", "O primeiro de maio de dois mil e vinte e seis."),
        ("É 10x mais rápido.", "É dez vezes mais rápido."),
    ],
    "it": [
        ("Alle 3:45 pm.", "Alle quindici e quarantacinque."),
        ("Alle 15:00.", "Alle quindici."),
        ("Alle 21:30:21.", "Alle ventuna e trenta e ventuno secondi."),
        ("Aggiungi ½ bicchiere.", "Aggiungi mezzo bicchiere."),
        ("Il 1 maggio 2026.", "Il primo maggio duemilaventisei."),
        ("Mangia 3/5 della torta.", "Mangia tre quinti della torta."),
    ],
    "fr": [
        ("À 3:45 pm.", "À quinze heures quarante-cinq."),
        ("À 0:30.", "À zéro heure trente."),
        ("À 1:00:01.", "À une heure et une seconde."),
        ("À 21:30:21.", "À vingt et une heures trente et vingt et une secondes."),
        ("Les 1ers et les 1res.", "Les premiers et les premières."),
        ("Le 1 mai 2026.", "Le premier mai deux mille vingt-six."),
        ("Mangez 3/5 de la tarte.", "Mangez trois cinquièmes de la tarte."),
    ],
    "de": [
        ("Um 3:45 pm.", "Um fünfzehn Uhr fünfundvierzig."),
        ("Um 1:00:01.", "Um ein Uhr und eine Sekunde."),
        ("Um 21:30:21 Uhr.", "Um einundzwanzig Uhr dreißig und einundzwanzig Sekunden."),
        ("Bis am 1. Mai 2026.", "Bis am ersten Mai zweitausendsechsundzwanzig."),
        ("Die 1990er und die 90er.", "Die neunzehnhundertneunziger und die neunziger."),
        ("Es fehlen 3/5 der Strecke.", "Es fehlen drei Fünftel der Strecke."),
    ],
    "nl": [
        ("Om 3:45 pm.", "Om vijftien uur vijfenveertig."),
        ("Om 1:00:01.", "Om één uur en één seconde."),
        ("Om 21:30:21.", "Om eenentwintig uur dertig en eenentwintig seconden."),
        ("Het duurt 1 ½ uur.", "Het duurt één en een half uur."),
        ("Eet 3/5 van de taart.", "Eet drie vijfde van de taart."),
    ],
    "en": [
        ("At 3:45:01 pm.", "At three forty-five and one second PM."),
        ("At 21:30:21.", "At nine thirty and twenty-one seconds PM."),
        ("It took 2 ½ hours.", "It took two and a half hours."),
        ("In the 1990s and the '80s.", "In the nineteen nineties and the eighties."),
        ("Eat 3/5 of the pie.", "Eat three fifths of the pie."),
        ("It is 3x faster.", "It is three times faster."),
    ],
}


@pytest.mark.parametrize(
    ("language", "text", "spoken"),
    [(lang, text, spoken) for lang, cases in CASES.items() for text, spoken in cases],
)
def test_shared_rule(language: str, text: str, spoken: str) -> None:
    assert normalize_text(text, language) == spoken
