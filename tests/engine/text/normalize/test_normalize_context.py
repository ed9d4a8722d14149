"""Digits read by context: national phone numbers, emergency numbers after a cue, scores
("4.5/5" after "rated"), and day/month dates without a year ("11/30", "30/11").

Each block has the positive rows and the look-alikes that must keep their old reading.
"""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipecat_pocket_tts.engine.text.normalize import normalize_text
from pipecat_pocket_tts.engine.text.spoken.languages import spoken_language
from pipecat_pocket_tts.engine.text.spoken.pipeline import SpokenForm

PHONES = [
    # national shapes no ordinary number uses: read anywhere
    (
        "it",
        "Chiama il 333 123 4567.",
        "Chiama il tre tre tre, uno due tre, quattro cinque sei sette.",
    ),
    (
        "it",
        "Chiama il 333 1234567.",
        "Chiama il tre tre tre, uno due tre quattro cinque sei sette.",
    ),
    ("it", "Tel. 02 1234 5678", "Telefono zero due, uno due tre quattro, cinque sei sette otto"),
    ("es", "Llame al 612 34 56 78.", "Llame al seis uno dos, tres cuatro, cinco seis, siete ocho."),
    (
        "es",
        "Marque el 91 234 56 78.",
        "Marque el nueve uno, dos tres cuatro, cinco seis, siete ocho.",
    ),
    (
        "en",
        "My number is 555 123 4567.",
        "My number is five five five, one two three, four five six seven.",
    ),
    ("en", "Call (555) 123-4567.", "Call five five five, one two three, four five six seven."),
    ("en", "Call 555-123-4567.", "Call five five five, one two three, four five six seven."),
    (
        "fr",
        "Appelez le 06-12-34-56-78.",
        "Appelez le zéro six, un deux, trois quatre, cinq six, sept huit.",
    ),
    (
        "fr",
        "Tél. : 01 23 45 67 89",
        "Téléphone : zéro un, deux trois, quatre cinq, six sept, huit neuf",
    ),
    (
        "de",
        "Ruf 030 12 34 56 78 an.",
        "Ruf null drei null, eins zwei, drei vier, fünf sechs, sieben acht an.",
    ),
    (
        "de",
        "Tel. 0171 1234567",
        "Telefon null eins sieben eins, eins zwei drei vier fünf sechs sieben",
    ),
    ("nl", "Bel 06 123 456 78.", "Bel nul zes, één twee drie, vier vijf zes, zeven acht."),
    ("nl", "Bel 020 123 4567.", "Bel nul twee nul, één twee drie, vier vijf zes zeven."),
    ("pt", "Ligue 808 24 24 24.", "Ligue oito zero oito, dois quatro, dois quatro, dois quatro."),
    ("pt-BR", "Ligue 91234-5678.", "Ligue nove um dois três quatro, cinco seis sete oito."),
    # shapes that could be a grouped number, a range or a count: only after a cue
    ("en", "Call 555-1234.", "Call five five five, one two three four."),
    (
        "en",
        "Call me at 555-1234 tomorrow.",
        "Call me at five five five, one two three four tomorrow.",
    ),
    ("en", "Call 5551234567 now.", "Call five five five one two three four five six seven now."),
    ("es", "Llame al 912 345 678.", "Llame al nueve uno dos, tres cuatro cinco, seis siete ocho."),
    ("pt", "Ligue 912 345 678.", "Ligue nove um dois, três quatro cinco, seis sete oito."),
    (
        "pt",
        "Ligue para o 213 456 789.",
        "Ligue para o dois um três, quatro cinco seis, sete oito nove.",
    ),
    ("it", "Chiama il 333.123.456.", "Chiama il tre tre tre, uno due tre, quattro cinque sei."),
    ("pt-BR", "Ligue 3456-7890.", "Ligue três quatro cinco seis, sete oito nove zero."),
    # ... and without one they keep their reading
    ("en", "Pages 100-1000 are missing.", "Pages one hundred to one thousand are missing."),
    ("en", "Call, then 555-1234.", "Call, then five hundred and fifty-five to twelve thirty-four."),
    (
        "en",
        "We sold 5551234567 units.",
        "We sold five billion five hundred and fifty-one million two hundred and thirty-four "
        "thousand five hundred and sixty-seven units.",
    ),
    (
        "fr",
        "Il y a 912 345 678 habitants.",
        "Il y a neuf cent douze millions trois cent quarante-cinq mille six cent "
        "soixante-dix-huit habitants.",
    ),
    (
        "it",
        "Sono 333.123.456 euro.",
        "Sono trecentotrentatré milioni e centoventitremilaquattrocentocinquantasei euro.",
    ),
    ("pt-BR", "De 2020-2025.", "De dois mil e vinte a dois mil e vinte e cinco."),
    ("nl", "Geboren op 05-11-2026.", "Geboren op vijf november tweeduizendzesentwintig."),
    ("fr", "Né le 05-11-2026.", "Né le cinq novembre deux mille vingt-six."),
]

EMERGENCY = [
    ("en", "Call 911 now.", "Call nine one one now."),
    ("en", "In the UK, dial 999!", "In the UK, dial nine nine nine!"),
    ("de", "Ruf die 112 an.", "Ruf die eins eins zwei an."),
    ("de", "Notruf 110.", "Notruf eins eins null."),
    ("es", "Llama al 112.", "Llama al uno uno dos."),
    ("es", "Llama al 061.", "Llama al cero seis uno."),
    ("pt", "Ligue 112.", "Ligue um um dois."),
    ("nl", "Bel 112.", "Bel één één twee."),
    # said as numbers where that is the custom ("le cent douze", "il centodiciotto")
    ("fr", "Appelez le 112.", "Appelez le cent douze."),
    ("it", "Chiama il 118.", "Chiama il centodiciotto."),
    ("pt-BR", "Ligue 190.", "Ligue cento e noventa."),
    # no cue: an ordinary number
    ("en", "The Porsche 911 is fast.", "The Porsche nine hundred and eleven is fast."),
    ("en", "In 911 cases it failed.", "In nine hundred and eleven cases it failed."),
    ("es", "Hay 112 personas.", "Hay ciento doce personas."),
    ("de", "Die 112 Leute kamen.", "Die einhundertzwölf Leute kamen."),
    ("nl", "Het kost 112 euro.", "Het kost honderdtwaalf euro."),
]

RATINGS = [
    ("en", "It was rated 4.5/5.", "It was rated four point five out of five."),
    ("en", "9/10 stars from me.", "nine out of ten stars from me."),
    ("en", "She scored 100/100.", "She scored one hundred out of one hundred."),
    ("en", "A score of 9/10.", "A score of nine out of ten."),
    ("en", "Score: 9/10", "Score: nine out of ten"),
    ("fr", "Noté 9/10.", "Noté neuf sur dix."),
    ("fr", "Note : 15/20.", "Note : quinze sur vingt."),
    ("fr", "Il a 4,5/5 étoiles.", "Il a quatre virgule cinq sur cinq étoiles."),
    ("de", "Bewertung: 4,5/5 Sternen.", "Bewertung: vier Komma fünf von fünf Sternen."),
    ("es", "Valoración: 4,5/5 estrellas.", "Valoración: cuatro coma cinco de cinco estrellas."),
    ("it", "Voto 8/10.", "Voto otto su dieci."),
    ("pt", "Nota 9/10.", "Nota nove de dez."),
    ("nl", "Cijfer 8/10.", "Cijfer acht van tien."),
    ("nl", "Het heeft 4,5/5 sterren.", "Het heeft vier komma vijf van vijf sterren."),
    # no score context, or no score shape: as before
    ("en", "I'd rate it 4.5/5.", "I'd rate it four point five slash five."),
    ("en", "Use 3/4 of it.", "Use three quarters of it."),
    ("en", "rated 3/4", "rated three quarters"),
    ("en", "He scored 7/5.", "He scored seven five."),
    ("en", "9/10 dentists agree.", "nine tenths dentists agree."),
    ("fr", "Ajoutez 3/4 de litre.", "Ajoutez trois quarts de litre."),
]

DATES = [
    ("en", "Due 11/30.", "Due November thirtieth."),
    ("en", "Due 1/15, paid 12/25.", "Due January fifteenth, paid December twenty-fifth."),
    ("en", "On 3/4 we meet.", "On March fourth we meet."),
    ("fr", "Le 30/11.", "Le trente novembre."),
    ("fr", "Le 1/5 est férié.", "Le premier mai est férié."),
    ("de", "Am 30/11 ist es.", "Am dreißigsten November ist es."),
    ("es", "El 30/11 llegamos.", "El treinta de noviembre llegamos."),
    ("it", "Il 30/11 arriviamo.", "Il trenta novembre arriviamo."),
    ("pt", "Em 30/11 chegamos.", "Em trinta de novembro chegamos."),
    ("nl", "Op 30/11 komen we.", "Op dertig november komen we."),
    # fractions, ratios, counts and impossible dates keep their reading
    ("en", "Add 3/4 cup.", "Add three quarters cup."),
    ("en", "Use 3/4 of it.", "Use three quarters of it."),
    ("en", "Open 24/7.", "Open twenty-four seven."),
    ("en", "He made 12/15 shots.", "He made twelve fifteen shots."),
    ("en", "Due 2/30.", "Due two thirty."),
    ("en", "Due 30/11.", "Due thirty eleven."),
    ("en", "A 3/16 inch bit.", "A three sixteen inch bit."),
    ("fr", "Ouvert 24/7.", "Ouvert vingt-quatre sept."),
    ("fr", "Un écran 16/9.", "Un écran seize neuf."),
    ("fr", "Le 3/4 de la tarte.", "Le trois quarts de la tarte."),
    ("de", "Bis 30/2 ist Zeit.", "Bis dreißig zwei ist Zeit."),
]


@pytest.mark.parametrize(("language", "text", "spoken"), PHONES + EMERGENCY + RATINGS + DATES)
def test_read_by_context(language: str, text: str, spoken: str) -> None:
    assert normalize_text(text, language) == spoken


@pytest.mark.parametrize(
    ("language", "text"),
    [
        ("es", "Hay 912 345 678 habitantes."),
        ("pt", "São 912 345 678 pessoas."),
        ("it", "Abitanti: 333 123 456."),
        ("en", "Ages 555-1234 apply."),
    ],
)
def test_number_groups_without_a_cue_are_no_phone(language: str, text: str) -> None:
    digit_names = {spoken_language(language).cardinal(d) for d in range(10)}
    words = re.findall(r"[^\W\d_]+", normalize_text(text, language))
    runs = [a in digit_names and b in digit_names for a, b in itertools.pairwise(words)]
    assert not any(runs), words


CODES = ("en", "de", "es", "fr", "it", "pt", "pt-BR", "nl")
STRICT = {code: SpokenForm(spoken_language(code), strict=True) for code in CODES}
context_token = st.sampled_from(
    [
        "call", "Tel.", "appelez le", "llame al", "chiama il", "ligue", "bel", "ruf die",
        "rated", "note", "stars", "on", "le", "am", "of", "cup", ",", ":", "(",
        "555-1234", "612 34 56 78", "912 345 678", "333 123 4567", "06 12 34 56 78",
        "911", "112", "061", "4.5/5", "9/10", "100/100", "15/20", "11/30", "30/11", "3/4",
        "24/7", "2/30", "12/15",
    ]
)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(
    words=st.lists(context_token, min_size=1, max_size=8),
    end=st.sampled_from([".", "!", "?"]),
    code=st.sampled_from(CODES),
)
def test_context_rules_leave_no_digits_and_keep_the_end(
    words: list[str], end: str, code: str
) -> None:
    out = STRICT[code](" ".join(words) + end)
    assert not re.search(r"\d", out), out
    assert out.endswith(end), out
