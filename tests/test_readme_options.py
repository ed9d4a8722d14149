"""The README's one options table lists every ``PocketTTSService`` argument (its own, and the
``LoadOptions`` fields it takes as keywords) and every ``PocketTTSService.Settings`` field,
each with a default, a range and a cost column. A new argument or field fails here until the
table has its row."""

from __future__ import annotations

import dataclasses
import inspect
import re

from paths import REPO_ROOT

from pipecat_pocket_tts import PocketTTSService
from pipecat_pocket_tts.engine.model.options import LoadOptions

README = REPO_ROOT / "README.md"


def options_rows() -> list[list[str]]:
    """The cells of the table under ``## Options`` (header and rule left out)."""
    text = README.read_text(encoding="utf-8")
    start = text.index("\n## Options\n")
    end = text.index("\n## ", start + 1)
    rows = [line for line in text[start:end].splitlines() if line.startswith("|")]
    assert len(rows) > 2, "no table under ## Options"
    header = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert header == ["name", "default", "range", "cost"]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]]


def listed_names() -> set[str]:
    return {name for row in options_rows() for name in re.findall(r"`([\w.]+)`", row[0])}


def test_every_constructor_argument_is_in_the_options_table() -> None:
    parameters = inspect.signature(PocketTTSService.__init__).parameters
    arguments = {n for n, p in parameters.items() if n != "self" and p.kind != p.VAR_KEYWORD}
    arguments |= {field.name for field in dataclasses.fields(LoadOptions)}  # keywords too
    missing = sorted(arguments - listed_names())
    assert not missing, f"add a row to the README's options table for: {missing}"


def test_every_settings_field_is_in_the_options_table() -> None:
    fields = {f"Settings.{field.name}" for field in dataclasses.fields(PocketTTSService.Settings)}
    missing = sorted(fields - listed_names())
    assert not missing, f"add a row to the README's options table for: {missing}"


def test_every_row_gives_a_default_a_range_and_a_cost() -> None:
    for row in options_rows():
        assert len(row) == 4 and all(row[:3]), row  # the cost may be "—" (none)
        assert row[3], row
