"""Chunks of text that arrives in pieces (LLM tokens), cut as the whole text would be.

``StreamingChunker`` releases a sentence as soon as its end is certain
(``Chunker.certain_end``'s rules), the very first one alone so audio can start early, and cuts
an overlong unfinished sentence without waiting for its end.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .chunking import Chunker, Clean, TextChunk, scan_words, words_and_breaks

if TYPE_CHECKING:
    from .chunking import _Piece

_WORD = re.compile(r"\S+")


def complete_word_ends(text: str) -> list[int]:
    """Where each word of ``text`` that more text cannot lengthen ends (all but a last word
    with no whitespace after it)."""
    ends = [m.end() for m in _WORD.finditer(text)]
    if ends and ends[-1] == len(text):
        ends.pop()
    return ends


class StreamingChunker:
    """Chunks of text that arrives in pieces; ``push`` as it comes, ``flush`` at the end.

    A sentence is released as soon as its end is certain: its final mark is followed by
    whitespace (a line break needs the first letter of the next line). The first sentence of
    the stream goes alone; sentences that complete together are merged. A sentence still
    open once its text would fill three chunks has its leading pieces released (the last two
    are held back, so a lone last word can still be rebalanced). ``clean(text, final)``, when
    given, is applied to the pending text at each push (``final`` False: it must keep
    trailing whitespace and must be idempotent) and at the flush (``final`` True).
    """

    def __init__(self, chunker: Chunker, clean: Clean | None = None) -> None:
        self.chunker = chunker
        self._clean = clean
        self._pending = ""
        self._released_any = False
        # The pending text continues a sentence begun in released chunks.
        self._mid = False

    @property
    def pending_text(self) -> str:
        """Text received but not released yet."""
        return self._pending

    def push(self, text: str) -> list[TextChunk]:
        """Add text; return the chunks that became certain."""
        pending = self._pending + text
        if self._clean is not None:
            pending = self._clean(pending, False)
        words, breaks, starts = scan_words(pending)
        last_complete = bool(words) and pending[-1].isspace()
        chunker = self.chunker
        out: list[TextChunk] = []
        end = chunker._last_certain_end(words, breaks, last_complete)
        if end >= 0:
            out += self._release(chunker._sentences(words, breaks, end + 1))
            words, breaks, starts = words[end + 1 :], breaks[end + 1 :], starts[end + 1 :]
        n_complete = len(words) if last_complete else len(words) - 1
        if n_complete > 0 and self._overlong(words[:n_complete]):
            pieces = chunker.split_sentence(words[:n_complete], self._mid)
            released = pieces[:-2]
            while released and not released[-1].ends_word:
                # Never stop inside a word cut at characters.
                released.pop()
            if released:
                out += self._emit(released)
                self._mid = True
                consumed = sum(len(p.words) for p in released if p.ends_word)
                words, starts = words[consumed:], starts[consumed:]
        self._pending = pending[starts[0] :] if words else ""
        return out

    def flush(self) -> list[TextChunk]:
        """Release everything pending (the stream has ended) and start afresh."""
        pending = self._pending
        if self._clean is not None:
            pending = self._clean(pending, True)
        words, breaks = words_and_breaks(pending)
        sentences = self.chunker._sentences(words, breaks, len(words))
        out = self._release(sentences)
        self._pending = ""
        self._released_any = False
        self._mid = False
        return out

    def _overlong(self, words: list[str]) -> bool:
        chunker = self.chunker
        return chunker.measure(" ".join(words), self._mid) > 2 * chunker.max_tokens

    def _release(self, sentences: list[list[str]]) -> list[TextChunk]:
        if not sentences:
            return []
        chunks = self.chunker._release(
            sentences, first_mid=self._mid, first_alone=not self._released_any
        )
        self._mid = False
        self._released_any = self._released_any or bool(chunks)
        return chunks

    def _emit(self, pieces: list[_Piece]) -> list[TextChunk]:
        chunks = self.chunker._merge(pieces)
        self._released_any = self._released_any or bool(chunks)
        return chunks


__all__ = ["StreamingChunker", "complete_word_ends"]
