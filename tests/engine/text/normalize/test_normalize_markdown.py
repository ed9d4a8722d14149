"""Markdown as LLMs write it, read as sentences (issue 7)."""

from __future__ import annotations

import pytest

from pipecat_pocket_tts.engine.text.normalize import normalize_text

RECIPE_REPLY = """## Quick Summary

Here's what you need to know:

1. **Preheat** the oven to 350°F.
2. Mix 2 ½ cups of flour with 1 tsp of salt
3. Bake for 25–30 minutes.

- *Tip:* use `parchment paper` for easy cleanup
- See [the recipe](https://example.com/recipe?id=42) for details

> Note: ovens vary! 🔥

---
That's it — enjoy! 😊"""

RECIPE_SPOKEN = """Quick Summary.

Here's what you need to know:

Preheat the oven to three hundred and fifty degrees Fahrenheit.
Mix two and a half cups of flour with one teaspoon of salt.
Bake for twenty-five to thirty minutes.

Tip: use parchment paper for easy cleanup.
See the recipe for details.

Note: ovens vary!

That's it — enjoy!"""

CODE_REPLY = """You can reverse a list like this:

```python
items = [3, 2, 1]
items.reverse()
```

The `reverse()` method works **in place**."""

CODE_SPOKEN = """You can reverse a list like this:

The reverse method works in place."""

TABLE_REPLY = """| Plan | Price |
|------|------:|
| Basic | $5 |
| **Pro** | $12.50 |"""

TABLE_SPOKEN = """Plan, Price.
Basic, five dollars.
Pro, twelve dollars and fifty cents."""

CASES = [
    (RECIPE_REPLY, RECIPE_SPOKEN),
    (CODE_REPLY, CODE_SPOKEN),
    (TABLE_REPLY, TABLE_SPOKEN),
    ("# Welcome", "Welcome."),
    ("### Step 2: Install ###", "Step two: Install."),
    ("This is **very** important.", "This is very important."),
    ("This is __very__ important.", "This is very important."),
    ("An *italic* and _another_ one.", "An italic and another one."),
    ("~~Old~~ new price.", "Old new price."),
    ("Run `pip install numpy` first.", "Run pip install numpy first."),
    ("Read [the docs](https://docs.example.com).", "Read the docs."),
    ("See ![a cat](cat.png) here.", "See a cat here."),
    ("Link: <https://example.com>", "Link: example dot com"),
    ("Mail <mailto:me@example.com>", "Mail me at example dot com"),
    ("- [x] Done\n- [ ] Todo", "Done.\nTodo."),
    ("* one\n* two!", "One.\nTwo!"),  # an item is a sentence: a capital (issue 43)
    ("1) first\n2) second", "First.\nSecond."),
    ("Fact[^1] here.", "Fact here."),
    ("Line one<br>line two", "Line one line two"),
    ("Fish &amp; chips", "Fish and chips"),
    ("snake_case and 2*3*4 stay sane", "snake case and two times three times four stay sane"),
    ("```\nprint('unclosed')", ""),
    ("Title\n=====\nBody.", "Title\nBody."),
]


@pytest.mark.parametrize(("text", "spoken"), CASES)
def test_markdown(text: str, spoken: str) -> None:
    assert normalize_text(text, "en") == spoken


def test_numbered_list_is_not_a_german_date() -> None:
    assert normalize_text("1. Mai ist Feiertag.", "de") == "erster Mai ist Feiertag."
    assert normalize_text("1. Ofen vorheizen", "de") == "Ofen vorheizen."


def test_list_items_end_as_sentences_in_every_language() -> None:
    for language in ("en", "de", "es", "fr", "it", "pt", "nl"):
        assert normalize_text("- alpha\n- beta", language) == "Alpha.\nBeta."


def test_markdown_list_streamed_line_by_line_reads_the_same() -> None:
    lines = ["1. **Preheat** the oven.", "2. Mix the flour", "- Serve warm"]
    assert [normalize_text(line, "en") for line in lines] == [
        "Preheat the oven.",
        "Mix the flour.",
        "Serve warm.",
    ]
