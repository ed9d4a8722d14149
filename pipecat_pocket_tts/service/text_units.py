"""Units of text the service hands to Pipecat: bounded, so Pipecat's per-unit work stays small.

Pipecat's sentence aggregator, word-timestamp sequencer and word tracker each work on one unit
of text at a time (a sentence, a ``TTSSpeakFrame``'s whole text), and their cost per word or
per character grows with the unit: a 20 KB unit held the event loop for seconds. A unit ends
where Pipecat ends a sentence or, once it is ``UNIT_CHARS`` long (``STREAMED_UNIT_CHARS``
with TOKEN aggregation), after whitespace that follows a clause mark (",;:" and dashes);
past twice that, after any whitespace; past four times that (a run with no whitespace),
after any mark that is neither a letter nor a digit. A word is never split, and the text of
the units put together is the text.
"""

from __future__ import annotations

from collections.abc import Collection

from pipecat.frames.frames import AggregatedTextFrame

UNIT_CHARS = 300
"""Length from which a unit ends at the next clause mark followed by whitespace, where the
units are also what the engine gets (SENTENCE aggregation: one utterance each)."""

STREAMED_UNIT_CHARS = 100
"""The same with TOKEN aggregation, where the units are Pipecat's alone (the engine's text
stream gets the tokens and cuts as the batch path): Pipecat's work per word grows with its
unit, so they are kept shorter."""

CLAUSE_MARKS = frozenset(",;:—–-)")


def ends_unit(length: int, previous: str, char: str, limit: int = UNIT_CHARS) -> bool:
    """Whether a unit of ``length`` characters ending in ``previous`` + ``char`` ends after
    ``char`` (``char`` is the unit's last character; ``limit``: ``UNIT_CHARS`` or
    ``STREAMED_UNIT_CHARS``)."""
    if length < limit:
        return False
    if char.isspace():
        return length >= 2 * limit or previous in CLAUSE_MARKS
    return length >= 4 * limit and not char.isalnum()


def boundary_ends_unit(unit: str, following: str, limit: int = UNIT_CHARS) -> bool:
    """Whether ``unit`` ends before the text ``following`` it (a streamed token), by the
    rules of ``ends_unit``; at whitespace on either side, as if one space were added."""
    if len(unit) < limit or not following:
        return False
    if unit[-1].isspace() or following[0].isspace():
        return ends_unit(len(unit), unit.rstrip()[-1:], " ", limit)
    return ends_unit(len(unit), unit[-2:-1], unit[-1], limit)


def split_units(text: str, limit: int = UNIT_CHARS) -> list[str]:
    """``text`` cut into units (one unit when it is short); ``"".join`` gives it back."""
    if len(text) < limit:
        return [text]
    units: list[str] = []
    start = 0
    previous = ""
    for position, char in enumerate(text):
        if ends_unit(position + 1 - start, previous, char, limit):
            units.append(text[start : position + 1])
            start = position + 1
        previous = char
    if start < len(text):
        units.append(text[start:])
    return units


def unit_frames(
    frame: AggregatedTextFrame, streamed: bool, skipped: Collection[str]
) -> list[AggregatedTextFrame] | None:
    """A long aggregated text cut into frames of one unit each, or None when it goes whole
    (short, transformed, or of a type the service skips)."""
    text = frame.text
    limit = STREAMED_UNIT_CHARS if streamed else UNIT_CHARS
    if len(text) < limit or frame.raw_text not in (None, text) or frame.text_type in skipped:
        return None
    units = []
    for unit in split_units(text, limit):
        part = AggregatedTextFrame(unit, frame.text_type, raw_text=unit)
        part.interruptible = frame.interruptible
        units.append(part)
    return units


__all__ = [
    "CLAUSE_MARKS",
    "STREAMED_UNIT_CHARS",
    "UNIT_CHARS",
    "boundary_ends_unit",
    "ends_unit",
    "split_units",
    "unit_frames",
]
