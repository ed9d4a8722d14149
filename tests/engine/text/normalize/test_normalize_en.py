"""English spoken forms, one table row per behaviour (issue 7)."""

from __future__ import annotations

import pytest

from pipecat_pocket_tts.engine.text.normalize import normalize_text

CASES = [
    # cardinals, grouping, decimals, negatives, leading zeros, long digit strings
    ("There are 42 apples.", "There are forty-two apples."),
    ("She scored 1,234 points.", "She scored one thousand two hundred and thirty-four points."),
    ("The budget is 1,000,000.", "The budget is one million."),
    ("It is 3.14 exactly.", "It is three point one four exactly."),
    ("The balance was -7.", "The balance was minus seven."),
    ("The code is 007.", "The code is zero zero seven."),
    ("Half is .5 of it.", "Half is zero point five of it."),
    ("Count 1,2,3 go", "Count one, two, three go"),
    # ordinals
    ("He was 1st, she was 2nd, I was 3rd.", "He was first, she was second, I was third."),
    ("the 21st century", "the twenty-first century"),
    # money
    ("It costs $12.50.", "It costs twelve dollars and fifty cents."),
    ("It costs $5.", "It costs five dollars."),
    ("It costs $0.99.", "It costs ninety-nine cents."),
    ("Tickets are €5 each.", "Tickets are five euros each."),
    ("It was £3.", "It was three pounds."),
    ("That's ¥100.", "That's one hundred yen."),
    ("They paid 12,50 €.", "They paid twelve euros and fifty cents."),
    ("The deal was worth $1.5M.", "The deal was worth one point five million dollars."),
    ("Revenue hit $2 billion.", "Revenue hit two billion dollars."),
    ("It costs 12.50 USD.", "It costs twelve dollars and fifty cents."),
    # percentages, ranges
    ("Growth was 15%.", "Growth was fifteen percent."),
    ("Inflation hit 3.5%.", "Inflation hit three point five percent."),
    ("Read pages 5–10.", "Read pages five to ten."),
    ("Ages 18-25 apply.", "Ages eighteen to twenty-five apply."),
    ("Expect 5-10% more.", "Expect five to ten percent more."),
    ("Open 9am-5pm daily.", "Open nine AM to five PM daily."),
    ("Pro is $19.99/month.", "Pro is nineteen dollars and ninety-nine cents per month."),
    # times
    ("Meet me at 3:45 pm.", "Meet me at three forty-five PM."),
    ("The train leaves at 15:45.", "The train leaves at three forty-five PM."),
    ("See you at 7am.", "See you at seven AM."),
    ("Wake up at 6:05.", "Wake up at six oh five."),
    ("We open 9:00–17:00.", "We open nine o'clock to five PM."),
    ("It's 5:30 a.m. Then we leave.", "It's five thirty AM. Then we leave."),
    # dates and years
    ("Born on 2026-11-30.", "Born on November thirtieth, twenty twenty-six."),
    ("Due 11/30/2026.", "Due November thirtieth, twenty twenty-six."),
    ("Due 30/11/2026.", "Due November thirtieth, twenty twenty-six."),
    ("Due Nov 30, 2026.", "Due November thirtieth, twenty twenty-six."),
    ("On 30 November 2026 we meet.", "On the thirtieth of November twenty twenty-six we meet."),
    ("In 1999 the world changed.", "In nineteen ninety-nine the world changed."),
    ("From 2020 to 2025, sales rose.", "From twenty twenty to twenty twenty-five, sales rose."),
    ("They came in 2020–21.", "They came in twenty twenty to twenty-one."),
    ("We sold 1500 tickets.", "We sold one thousand five hundred tickets."),
    ("Back in the 1990s.", "Back in the nineteen nineties."),
    ("Music of the '80s.", "Music of the eighties."),
    # units
    ("It is 25°C outside.", "It is twenty-five degrees Celsius outside."),
    ("It was -5 °F.", "It was minus five degrees Fahrenheit."),
    ("Drive 60 mph.", "Drive sixty miles per hour."),
    ("It weighs 5 kg.", "It weighs five kilograms."),
    ("It takes 1 h.", "It takes one hour."),
    ("A 2.5 km walk.", "A two point five kilometers walk."),
    ("It has 16 GB of RAM.", "It has sixteen gigabytes of RAM."),
    # fractions
    ("Add ½ cup of milk.", "Add half a cup of milk."),
    ("Use 3/4 of it.", "Use three quarters of it."),
    ("Add 1 1/2 cups.", "Add one and a half cups."),
    ("Wait 2¾ hours.", "Wait two and three quarters hours."),
    ("Open 24/7.", "Open twenty-four seven."),
    # phone numbers
    ("Call 555-123-4567.", "Call five five five, one two three, four five six seven."),
    (
        "Call +44 20 7946 0958.",
        "Call plus four four, two zero, seven nine four six, zero nine five eight.",
    ),
    ("Call (555) 123-4567.", "Call five five five, one two three, four five six seven."),
    ("Call 020 7946 0958.", "Call zero two zero, seven nine four six, zero nine five eight."),
    # abbreviations
    ("Dr. Smith met Mr. Jones.", "Doctor Smith met Mister Jones."),
    ("Bring fruit, e.g. apples.", "Bring fruit, for example apples."),
    ("Apples, pears, etc.", "Apples, pears, et cetera."),
    ("Apples, pears, etc. Then more.", "Apples, pears, et cetera. Then more."),
    ("Team A vs. team B.", "Team A versus team B."),
    ("St. Louis is on Main St.", "Saint Louis is on Main Street."),
    ("See No. 5.", "See number five."),
    ("Price $10 (incl. VAT).", "Price ten dollars (including VAT)."),
    ("Add 1 tsp salt.", "Add one teaspoon salt."),
    # symbols
    ("Salt & pepper", "Salt and pepper"),
    ("2 + 2 = 4", "two plus two equals four"),
    ("We're #1!", "We're number one!"),
    ("Ping @support now.", "Ping at support now."),
    ("Trending: #python", "Trending: hashtag python"),
    ("~20 people came.", "about twenty people came."),
    ("C++ and C# are languages.", "C plus plus and C sharp are languages."),
    ("Use and/or both.", "Use and or both."),
    ("3 × 4 = 12", "three times four equals twelve"),
    ("A 16:9 screen.", "A sixteen to nine screen."),
    ("I'd rate it 4.5/5.", "I'd rate it four point five slash five."),
    # URLs and e-mail
    ("Email me at jane.doe@example.com.", "Email me at jane dot doe at example dot com."),
    ("Go to www.example.com/docs today.", "Go to example dot com slash docs today."),
    (
        "See https://github.com/kyutai-labs/pocket-tts.",
        "See github dot com slash kyutai dash labs slash pocket dash tts.",
    ),
    ("Visit example.org?", "Visit example dot org?"),
    # numbers inside words
    ("GPT-4 is here.", "GPT four is here."),
    ("COVID-19 changed things.", "COVID nineteen changed things."),
    ("Play the mp3 file.", "Play the mp three file."),
    ("Stream it in 4K.", "Stream it in four K."),
    ("It is 10x faster.", "It is ten times faster."),
    (
        "A 1920x1080 display.",
        "A one thousand nine hundred and twenty by one thousand and eighty display.",
    ),
    ("Version 3.11.7 is out.", "Version three point eleven point seven is out."),
    ("The IP is 10.0.0.1.", "The IP is ten dot zero dot zero dot one."),
    # emoji, plain prose
    ("I love it 😍!", "I love it!"),
    ("Thumbs up 👍🏽 from me.", "Thumbs up from me."),
    ("Plain prose stays exactly as it is.", "Plain prose stays exactly as it is."),
]


@pytest.mark.parametrize(("text", "spoken"), CASES)
def test_english(text: str, spoken: str) -> None:
    assert normalize_text(text, "english") == spoken


def test_enough_english_cases() -> None:
    assert len(CASES) >= 40
