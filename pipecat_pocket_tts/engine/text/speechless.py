"""Sentences with nothing to say: a sentence of bare marks ("...", "?!") is never said alone.

Both the batch chunker and the streaming one glue it to the next sentence, so streaming cuts
text where the batch path does and TOKEN aggregation never sends a bare "..." as an utterance.
One at the very end is dropped by both: the stream has released the sentence before it by
then, so gluing it backwards would make the batch path say what the stream cannot.
"""

from __future__ import annotations


def speaks(word: str) -> bool:
    """Whether a word has a letter or digit in it."""
    return any(c.isalnum() for c in word)


def glue_speechless(sentences: list[list[str]]) -> list[list[str]]:
    """A sentence (a list of words) with no letter or digit joins the next one; at the end it
    is dropped (kept only when no sentence says anything: there is nothing to say then)."""
    out: list[list[str]] = []
    carried: list[str] = []
    for sentence in sentences:
        if not any(map(speaks, sentence)):
            carried += sentence
            continue
        out.append(carried + sentence)
        carried = []
    if carried and not out:
        out.append(carried)
    return out


__all__ = ["glue_speechless", "speaks"]
