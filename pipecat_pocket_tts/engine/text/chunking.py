"""Cutting text into chunks the FlowLM says one at a time (each ≤ ``max_tokens`` tokens).

The model is trained on single sentences, so text is cut into sentences first. A sentence
over the limit is cut at clause marks (``, ; :`` and dashes), a clause over the limit at
words, and a single word over the limit at characters. Neighbouring pieces are then merged
greedily while the result stays within the limit.

Rules for sentence ends (``.``, ``!``, ``?``, ``…``, possibly followed by closing quotes or
brackets, then whitespace): a full stop after a known abbreviation of the language
(``Dr.``, ``z.B.``, ``Mme.``), after a single capital initial (``J. K.``), after a dotted
initialism (``U.S.``), or — in German — after a number (ordinals: ``am 3. Mai``) does not end
a sentence. Cuts happen only at whitespace, so decimal points (``3.14``) and thousands
separators (``1,000``) are never cut; a comma between two numbers (``1, 2``) is not a clause
cut either. A line break ends a sentence (a full stop is added if it has no terminal mark)
unless the next line starts with a lowercase letter (a wrapped line).

A chunk is *mid-sentence* when it starts inside a sentence whose beginning an earlier chunk
says (FluidAudio's ``isMidSentence``). The token cost of a chunk is measured by a callback,
so the limit holds for the text as it will be prepared for the model.

``certain_end`` says where the sentence ends of text still arriving cannot change any more;
``streaming_chunker.StreamingChunker`` uses it on text that arrives piece by piece (LLM tokens).
A line that starts with a list, heading, quote or table mark is a block line (Markdown ends
it with a stop), except a number mark followed by a month ("1. Mai", "2) Apr."), which the
normalizer reads as a date, not a list item.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ..model.config import MAX_TOKENS_PER_CHUNK
from .line_marks import BLOCK_MARK, LineMarks
from .speechless import glue_speechless, speaks
from .tokenizer import DROP_MARK

Measure = Callable[[str, bool], int]
"""Tokens a chunk text costs once prepared, given its mid-sentence flag."""

Clean = Callable[[str, bool], str]
"""Text cleanup for streamed input: ``clean(text, final)``; see ``StreamingChunker``."""

TERMINAL_PUNCTUATION = ".!?…"
WEAK_PUNCTUATION = ",;:-–—"
CLOSERS = "\"'”’)]}»"
OPENERS = "\"'“‘„‚«([{¿¡"


def _abbreviations(words: str) -> frozenset[str]:
    """Lowercase abbreviations without their final full stop, plus 'etc'."""
    return frozenset(words.split()) | {"etc"}


ABBREVIATIONS: dict[str, frozenset[str]] = {
    "english": _abbreviations(
        "mr mrs ms dr prof st jr sr vs e.g i.e mt ft approx inc ltd co corp dept fig gen gov lt "
        "col capt sgt rev hon cf al viz est jan feb mar apr jun jul aug sep sept oct nov dec"
    ),
    "french": _abbreviations(
        "m mm mme mmes mlle mlles dr pr p pp vol cf ex av bd st ste env éd chap fig tél c.-à-d"
    ),
    "german": _abbreviations(
        "z.b usw dr prof nr bzw ca vgl evtl ggf str hr fr sog u.a d.h z.t inkl bsp geb jh abs"
    ),
    "spanish": _abbreviations(
        "sr sra srta sres dr dra ud uds lic ing pág p.ej av núm art cap ej vol"
    ),
    "italian": _abbreviations(
        "sig sigg sig.ra sig.na dott dott.ssa prof ing avv arch ecc es pag p.es geom"
    ),
    "portuguese": _abbreviations("sr sra srta dr dra prof pág p.ex av exmo exma eng"),
    "dutch": _abbreviations(
        "dhr mevr mr dr prof ir ing drs bijv bv b.v enz d.w.z o.a m.b.t t.a.v ca nr blz"
    ),
}
_ORDINAL_DOT_LANGUAGES = {"german"}
_INITIALISM = re.compile(r"(?:[^\W\d_]\.)+[^\W\d_]")
_WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class TextChunk:
    """One chunk of text and whether it starts inside a sentence."""

    text: str
    is_mid_sentence: bool = False


@dataclass
class _Piece:
    words: list[str]
    mid: bool
    # False for a part of a word cut at characters, except its last part.
    ends_word: bool = True

    @property
    def text(self) -> str:
        return " ".join(self.words)


def ensure_terminal_punctuation(text: str) -> str:
    """End ``text`` with ``.!?…`` as upstream does.

    Already ending with one (closing quotes/brackets after it allowed): unchanged. Ending with
    ``, ; : -`` or a dash: that mark becomes a full stop. Otherwise a full stop is appended
    (after any closing quote, so it stays in the chunk).
    """
    core = text.rstrip(CLOSERS + " ")
    closers = text[len(core) :].strip()
    if not core or core[-1] in TERMINAL_PUNCTUATION:
        return text
    if core[-1] in WEAK_PUNCTUATION:
        return core.rstrip(WEAK_PUNCTUATION + " ") + "." + closers
    return text + "."


class Chunker:
    """Cuts text into ``TextChunk``s of at most ``max_tokens`` tokens (as ``measure`` counts)."""

    def __init__(
        self,
        measure: Measure,
        *,
        max_tokens: int = MAX_TOKENS_PER_CHUNK,
        language: str = "english",
    ) -> None:
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be positive, got {max_tokens}")
        self.measure = measure
        self.max_tokens = max_tokens
        self.language = language
        self.abbreviations = ABBREVIATIONS.get(language, ABBREVIATIONS["english"])
        self._ordinal_dot = language in _ORDINAL_DOT_LANGUAGES
        self.lines = LineMarks(language)

    def split(
        self, text: str, *, first_sentence_alone: bool = False, starts_mid: bool = False
    ) -> list[TextChunk]:
        """All chunks of ``text`` (none for blank text).

        ``first_sentence_alone`` keeps the first sentence out of the merging, so the first
        chunk is short and its audio comes early. ``starts_mid``: ``text`` continues a
        sentence whose beginning an earlier chunk says (its first chunk is mid-sentence).
        """
        words, breaks = words_and_breaks(text)
        sentences = self._sentences(words, breaks, len(words))
        return self._release(sentences, first_mid=starts_mid, first_alone=first_sentence_alone)

    def certain_end(
        self,
        text: str,
        *,
        raw: bool = False,
        starts_line: bool = True,
        in_block_line: bool = False,
    ) -> int:
        """Length of the longest prefix of ``text`` made of whole sentences whose ends cannot
        change with more text (0 for none); the whitespace after the last end is included.

        ``raw``: ``text`` is not normalized yet, so a line break ends a sentence only where the
        next line's normalized form cannot start lowercase: it starts with a capital letter,
        or with a list, heading, quote or table mark (``Markdown`` ends the line before). A
        line that starts "0 the" reads "zero the" and continues the line before it. Nor does
        a list mark ("1.") where a line starts (``starts_line``: ``text`` starts one); the end
        of a list item, heading or table row does (``in_block_line``: ``text`` goes on with one
        that earlier text began).
        """
        words, breaks, starts = scan_words(text)
        last_complete = bool(words) and text[-1].isspace()
        end = self._last_certain_end(
            words,
            breaks,
            last_complete,
            raw=raw,
            starts_line=starts_line,
            in_block_line=in_block_line,
        )
        if end < 0:
            return 0
        return starts[end + 1] if end + 1 < len(words) else len(text)

    def sentences(self, text: str) -> list[str]:
        """The sentences of ``text``, before any cutting or merging."""
        words, breaks = words_and_breaks(text)
        return [" ".join(s) for s in self._sentences(words, breaks, len(words))]

    # -------------------------------------------------------------------------- sentences
    def is_sentence_end(self, word: str) -> bool:
        """Whether ``word`` ends a sentence by its punctuation (when whitespace follows)."""
        core = word.rstrip(CLOSERS)
        if not core or core[-1] not in TERMINAL_PUNCTUATION:
            return False
        if core[-1] != "." or core.endswith(".."):
            return True
        stem = core[:-1].lstrip(OPENERS)
        if not stem:
            return True
        if stem.lower() in self.abbreviations:
            return False
        if len(stem) == 1 and stem.isalpha() and stem.isupper():
            return False
        if _INITIALISM.fullmatch(stem):
            return False
        return not (self._ordinal_dot and stem.isdigit())

    def _line_end(self, words: list[str], breaks: list[bool], i: int) -> bool:
        """A line break after word ``i`` that ends a sentence (next line not lowercase)."""
        return breaks[i] and i + 1 < len(words) and not words[i + 1][0].islower()

    def _sentences(self, words: list[str], breaks: list[bool], n: int) -> list[list[str]]:
        """Sentences of ``words[:n]``; the last one ends at ``n`` whatever its punctuation."""
        sentences = []
        start = 0
        for i in range(n):
            if self.is_sentence_end(words[i]):
                sentences.append(words[start : i + 1])
                start = i + 1
            elif self._line_end(words, breaks, i):
                sentence = words[start : i + 1]
                sentence[-1] = ensure_terminal_punctuation(sentence[-1])
                sentences.append(sentence)
                start = i + 1
        if start < n:
            sentences.append(words[start:n])
        return glue_speechless(sentences)

    def _last_certain_end(
        self,
        words: list[str],
        breaks: list[bool],
        last_complete: bool,
        *,
        raw: bool = False,
        starts_line: bool = True,
        in_block_line: bool = False,
    ) -> int:
        """Index of the last word whose sentence end cannot change with more text, or -1
        (``raw``, ``starts_line``, ``in_block_line``: see ``certain_end``)."""
        block = self.lines.block_lines(words, breaks, starts_line, in_block_line) if raw else []
        for i in range(len(words) - 1, -1, -1):
            complete = i + 1 < len(words) or last_complete
            if raw:
                at_line_start = breaks[i - 1] if i else starts_line
                mark = at_line_start and BLOCK_MARK.fullmatch(words[i]) is not None
                ends = (complete and self.is_sentence_end(words[i]) and not mark) or (
                    breaks[i]
                    and i + 1 < len(words)
                    and not words[i + 1].startswith(DROP_MARK)
                    and (block[i] or self.lines.opens_a_line(words, i + 1, last_complete))
                )
            else:
                # A line ends a sentence unless the next begins with a dropped symbol: its
                # first letter is still to come.
                ends = (complete and self.is_sentence_end(words[i])) or (
                    self._line_end(words, breaks, i) and not words[i + 1].startswith(DROP_MARK)
                )
            # A sentence that says nothing joins the next one.
            if ends and self._says_something(words, breaks, i):
                return i
        return -1

    def _says_something(self, words: list[str], breaks: list[bool], end: int) -> bool:
        """Whether the sentence ending at word ``end`` has a letter or digit in it."""
        for j in range(end, -1, -1):
            if j < end and (self.is_sentence_end(words[j]) or self._line_end(words, breaks, j)):
                return False
            if speaks(words[j]):
                return True
        return False

    # ----------------------------------------------------------------------------- pieces
    def _fits(self, words: list[str], mid: bool) -> bool:
        return self.measure(" ".join(words), mid) <= self.max_tokens

    def _is_clause_end(self, word: str, next_word: str | None) -> bool:
        core = word.rstrip(CLOSERS)
        if not core:
            return False
        last = core[-1]
        if last in ",;:":
            between_numbers = (
                last == ","
                and len(core) > 1
                and core[-2].isdigit()
                and next_word is not None
                and next_word[:1].isdigit()
            )
            return not between_numbers
        return not core.strip("-–—") or last in "–—" or core.endswith("--")

    def _clauses(self, words: list[str]) -> list[list[str]]:
        clauses = []
        start = 0
        for i, word in enumerate(words):
            following = words[i + 1] if i + 1 < len(words) else None
            if self._is_clause_end(word, following):
                clauses.append(words[start : i + 1])
                start = i + 1
        if start < len(words):
            clauses.append(words[start:])
        return clauses

    def split_sentence(self, words: list[str], starts_mid: bool = False) -> list[_Piece]:
        """Pieces of one sentence, each within the limit: clauses, then words, then characters."""
        if self._fits(words, starts_mid):
            return [_Piece(list(words), starts_mid)]
        packer = _Packer(self._fits, starts_mid)
        for clause in self._clauses(words):
            if packer.extend(clause) or packer.start(clause):
                continue
            # An overlong clause is cut at its own words only.
            packer.close()
            for word in clause:
                if packer.extend([word]) or packer.start([word]):
                    continue
                parts = self._slice_word(word, packer.next_flag())
                for k, part in enumerate(parts):
                    packer.force([part], ends_word=k == len(parts) - 1)
        pieces = packer.finish()
        self._rebalance_tail(pieces)
        return pieces

    def _slice_word(self, word: str, first_mid: bool) -> list[str]:
        """Cut a word too long for one chunk into the longest parts that fit (≥ 1 character).

        Each part is measured as it will be prepared: the first with the flag of the piece it
        opens (``first_mid``; a sentence start is capitalized and punctuated), the rest as
        mid-sentence.
        """
        parts = []
        rest = word
        mid = first_mid
        while rest:
            # Find the longest prefix that fits, by bisection.
            low, high = 1, len(rest)
            while low < high:
                middle = (low + high + 1) // 2
                if self._fits([rest[:middle]], mid):
                    low = middle
                else:
                    high = middle - 1
            parts.append(rest[:low])
            rest = rest[low:]
            mid = True
        return parts

    def _rebalance_tail(self, pieces: list[_Piece]) -> None:
        """A lone last word takes the previous piece's last word, unless a clause ends there."""
        if len(pieces) < 2:
            return
        previous, last = pieces[-2], pieces[-1]
        if len(last.words) != 1 or len(previous.words) < 2:
            return
        if self._is_clause_end(previous.words[-1], last.words[0]):
            return
        moved = previous.words[-1:] + last.words
        if self._fits(moved, last.mid):
            previous.words.pop()
            last.words[:] = moved

    # ---------------------------------------------------------------------------- merging
    def _merge(self, pieces: list[_Piece]) -> list[TextChunk]:
        chunks: list[TextChunk] = []
        current: _Piece | None = None
        for piece in pieces:
            if current is not None and self._fits(current.words + piece.words, current.mid):
                current = _Piece(current.words + piece.words, current.mid)
                continue
            if current is not None:
                chunks.append(TextChunk(current.text, current.mid))
            current = piece
        if current is not None:
            chunks.append(TextChunk(current.text, current.mid))
        return chunks

    def _release(
        self, sentences: list[list[str]], *, first_mid: bool, first_alone: bool
    ) -> list[TextChunk]:
        """Chunks of whole sentences (the first may continue an earlier, released part)."""
        per_sentence = [
            self.split_sentence(s, first_mid and i == 0) for i, s in enumerate(sentences)
        ]
        if first_alone and per_sentence:
            head = self._merge(per_sentence[0])
            return head + self._merge([p for ps in per_sentence[1:] for p in ps])
        return self._merge([p for ps in per_sentence for p in ps])


class _Packer:
    """Greedy packing of word groups into pieces; the first piece carries ``first_mid``."""

    def __init__(self, fits: Callable[[list[str], bool], bool], first_mid: bool) -> None:
        self._fits = fits
        self._first_mid = first_mid
        self._pieces: list[_Piece] = []
        self._current: list[str] = []
        self._current_ends_word = True

    def _flag(self, *, new: bool) -> bool:
        opened = self._pieces or (new and self._current)
        return True if opened else self._first_mid

    def next_flag(self) -> bool:
        """The mid-sentence flag of a piece opened now (``start``/``force``)."""
        return self._flag(new=True)

    def extend(self, words: list[str]) -> bool:
        """Append ``words`` to the open piece if the result fits."""
        if self._current and self._fits(self._current + words, self._flag(new=False)):
            self._current += words
            self._current_ends_word = True
            return True
        return False

    def start(self, words: list[str]) -> bool:
        """Open a new piece with ``words`` if they fit alone."""
        flag = self._flag(new=True)
        if not self._fits(words, flag):
            return False
        self.force(words)
        return True

    def force(self, words: list[str], *, ends_word: bool = True) -> None:
        """Open a new piece with ``words`` without checking."""
        self.close()
        self._current = list(words)
        self._current_ends_word = ends_word

    def close(self) -> None:
        """Close the open piece, if any."""
        if self._current:
            flag = self._flag(new=False)
            self._pieces.append(_Piece(self._current, flag, self._current_ends_word))
            self._current = []

    def finish(self) -> list[_Piece]:
        self.close()
        return self._pieces


def words_and_breaks(text: str) -> tuple[list[str], list[bool]]:
    """Whitespace-separated words, and whether a line break follows each."""
    words, breaks, _ = scan_words(text)
    return words, breaks


def scan_words(text: str) -> tuple[list[str], list[bool], list[int]]:
    """Words, whether a line break follows each, and where each starts."""
    spans = [m.span() for m in _WORD.finditer(text)]
    words = [text[a:b] for a, b in spans]
    gaps_end = [a for a, _ in spans[1:]] + [len(text)] * bool(spans)
    breaks = ["\n" in text[b:gap_end] for (_, b), gap_end in zip(spans, gaps_end, strict=True)]
    return words, breaks, [a for a, _ in spans]
