"""The caller's words, followed through normalization, chunking and tokenization.

Word timestamps name the words the caller wrote ("$12.50."), while the model reads their spoken
form ("twelve dollars and fifty cents."), cut into chunks, capitalized, punctuated and padded.
This module keeps the link:

- ``caller_words``: the caller's text → ``CallerWord``s (whitespace-separated; a
  ``<sub alias="…">written</sub>`` element is one word shown as its written form), each with the
  *keys* of its spoken form (the lexical words of that word normalized on its own; the forms
  of all the words come in one call, ``text.normalize.WordForms``);
- ``WordMapper``: the lexical words of each chunk, as the chunks come, → the caller word each
  belongs to. Keys are matched in order (``difflib``); unmatched spoken words between two matches
  go to the caller words between them (context-dependent spoken forms, e.g. years); caller words
  with keys that nothing matched are reported as unspoken (kept, with estimated times);
  caller words without keys (markdown, emoji) are not words;
- ``chunk_spans``: one prepared chunk → its ``TextSpan``s (lexical words and punctuation runs,
  in chunk-text characters) and the token → span overlap matrix the aligner reduces attention by.

A *lexical word* is a run of letters/digits (with combining marks), joined across ``-`` ``'`` ``’``
when a letter or digit follows: "twenty-six", "don't".
"""

from __future__ import annotations

import difflib
import itertools
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..text.normalize import WordForms

_CONTINUATIONS = frozenset("-‐‑'’")
_FOLD = str.maketrans({"’": "'", "‐": "-", "‑": "-"})
_SUB_OR_SPACE = re.compile(r"<sub\b.{0,2600}?</sub\s*>|\s+", re.I | re.S)
# How SentencePiece decodes an unknown piece.
_UNKNOWN_PIECE = "\u2047"


def _is_mark(char: str) -> bool:
    return unicodedata.category(char).startswith("M")


def _is_punctuation(char: str) -> bool:
    return unicodedata.category(char).startswith("P")


def lexical_spans(text: str) -> list[tuple[int, int]]:
    """[begin, end) of every lexical word of ``text`` (see the module docstring)."""
    spans = []
    i, n = 0, len(text)
    while i < n:
        if not text[i].isalnum():
            i += 1
            continue
        begin = i
        while True:
            while i < n and (text[i].isalnum() or _is_mark(text[i])):
                i += 1
            if i + 1 < n and text[i] in _CONTINUATIONS and text[i + 1].isalnum():
                i += 1
                continue
            break
        spans.append((begin, i))
    return spans


def word_key(text: str) -> str:
    """The form two spellings of one word share: NFKC, casefolded, letters/digits/-/' only."""
    folded = unicodedata.normalize("NFKC", text).casefold().translate(_FOLD)
    return "".join(c for c in folded if c.isalnum() or c in "-'")


def lexical_keys(text: str) -> list[str]:
    """The keys of the lexical words of ``text``, in order."""
    return [word_key(text[b:e]) for b, e in lexical_spans(text)]


@dataclass(frozen=True)
class CallerWord:
    """One word of the caller's text."""

    text: str
    """As written (a <sub> element shown as its written form)."""
    begin: int
    """[begin, end) in the caller's text (the raw element for <sub>)."""
    end: int
    keys: tuple[str, ...]
    """Lexical keys of its spoken form; () for markup-only words."""
    punctuated: bool
    """Whether punctuation follows its last letter or digit (in the word itself)."""
    opens_with_punctuation: bool
    """Whether punctuation comes before its first letter or digit."""


def caller_words(
    text: str,
    spoken: Callable[[str], str] | WordForms | None = None,
    *,
    offset: int = 0,
    spoken_mid_line: Callable[[str], str] | None = None,
    starts_line: bool = True,
) -> list[CallerWord]:
    """The whitespace-separated words of ``text``; ``spoken`` turns one into its spoken form,
    ``spoken_mid_line`` (when given) one that does not start a line ("2." in "Step 1. 2." is
    a number, at a line start a list marker); ``starts_line``: ``text`` begins a line. A
    ``WordForms`` as ``spoken`` gives the forms of all the words in one call."""
    # Each piece: (begin, (raw, read, mid_line)).
    pieces: list[tuple[int, tuple[str, str, bool]]] = []
    start = 0
    at_line_start = starts_line
    for m in _SUB_OR_SPACE.finditer(text):
        if m[0][:1].isspace():
            if m.start() > start:
                raw = text[start : m.start()]
                # With the blanks after it: "1. " there is a list marker.
                if at_line_start:
                    pieces.append((start, (raw, raw + m[0].split("\n")[0], False)))
                else:
                    pieces.append((start, (raw, raw, True)))
                at_line_start = False
            at_line_start = at_line_start or "\n" in m[0]
            start = m.end()
    if start < len(text):
        pieces.append((start, (text[start:], text[start:], not at_line_start)))
    forms = spoken if isinstance(spoken, WordForms) else WordForms(spoken, spoken_mid_line)
    # One call for all the words.
    written_spoken = forms([word for _, word in pieces])
    return [
        _caller_word(word[0], begin + offset, shown, said)
        for (begin, word), (shown, said) in zip(pieces, written_spoken, strict=True)
    ]


def _caller_word(raw: str, begin: int, shown: str, spoken: str) -> CallerWord:
    keys = tuple(k for k in lexical_keys(spoken) if k)
    spans = lexical_spans(shown)
    head = shown[: spans[0][0]] if spans else shown
    tail = shown[spans[-1][1] :] if spans else ""
    return CallerWord(
        text=shown,
        begin=begin,
        end=begin + len(raw),
        keys=keys,
        punctuated=any(_is_punctuation(c) for c in tail),
        opens_with_punctuation=any(_is_punctuation(c) for c in head),
    )


class CallerWordFeed:
    """``caller_words`` on text that arrives in fragments (LLM tokens).

    ``push`` returns the words that became complete (whitespace after them, never inside an
    unclosed ``<sub>`` element); ``flush`` the rest. Word offsets count from the first push.
    """

    _OPEN_SUB = re.compile(r"<(?:s(?:ub?)?)?$|<sub\b(?:(?!</sub\s*>).){0,2600}$", re.I | re.S)

    def __init__(
        self,
        spoken: Callable[[str], str] | WordForms | None = None,
        spoken_mid_line: Callable[[str], str] | None = None,
    ) -> None:
        self._forms = (
            spoken if isinstance(spoken, WordForms) else WordForms(spoken, spoken_mid_line)
        )
        self._pending = ""
        # Caller-text offset of _pending.
        self._offset = 0
        # Whether _pending begins a line.
        self._starts_line = True

    def push(self, text: str, *, final: bool = False) -> list[CallerWord]:
        """``final``: the text is complete, its last words too (``flush`` in the same call)."""
        self._pending += text
        cut = len(self._pending) if final else self._last_complete_end(self._pending)
        return self._take(cut)

    def flush(self) -> list[CallerWord]:
        return self._take(len(self._pending))

    def _last_complete_end(self, text: str) -> int:
        """The end of the last whitespace before an unclosed ``<sub`` and outside a closed
        ``<sub>`` element (whose alias may hold spaces): where ``caller_words`` splits."""
        held = self._OPEN_SUB.search(text)
        limit = held.start() if held else len(text)
        cut = 0
        for m in _SUB_OR_SPACE.finditer(text, 0, limit):
            if m[0][:1].isspace():
                cut = m.end()
        return cut

    def _take(self, cut: int) -> list[CallerWord]:
        if cut <= 0:
            return []
        taken = self._pending[:cut]
        words = caller_words(taken, self._forms, offset=self._offset, starts_line=self._starts_line)
        gap = taken[len(taken.rstrip()) :]
        self._starts_line = "\n" in gap or (self._starts_line and not taken.strip())
        self._pending = self._pending[cut:]
        self._offset += cut
        return words


@dataclass(frozen=True)
class MappedChunk:
    """What ``WordMapper.map`` found for one chunk's lexical words."""

    owners: tuple[int | None, ...]
    """Caller word index per spoken lexical word (None: unmapped)."""
    unspoken: tuple[int, ...]
    """Caller words with keys that no spoken word matched (skipped)."""
    open_word: int | None = None
    """The caller word whose spoken form the next chunk goes on with."""


class WordMapper:
    """Caller words (given all at once or as they complete) ↔ the chunks' lexical words."""

    def __init__(self) -> None:
        self.words: list[CallerWord] = []
        # First caller word not finished.
        self._cursor = 0
        # Keys of the cursor word already matched.
        self._used = 0

    def add(self, words: Sequence[CallerWord]) -> None:
        """Append caller words (in text order)."""
        self.words.extend(words)

    def trailing_punctuation_is_written(self, index: int) -> bool:
        """Whether the caller wrote punctuation after word ``index`` (before the next word)."""
        word = self.words[index]
        following = self.words[index + 1] if index + 1 < len(self.words) else None
        return word.punctuated or bool(following and following.opens_with_punctuation)

    def map(self, spoken_keys: Sequence[str]) -> MappedChunk:
        """Owners of the next spoken lexical words (one chunk's), consuming caller words."""
        n = len(spoken_keys)
        if n == 0:
            return MappedChunk((), (), self._cursor if self._used else None)
        expected: list[str] = []
        owner_of: list[int] = []
        budget = 2 * n + 8
        i = self._cursor
        while i < len(self.words) and len(expected) < budget:
            keys = self.words[i].keys[self._used :] if i == self._cursor else self.words[i].keys
            expected.extend(keys)
            owner_of.extend([i] * len(keys))
            i += 1
        owners: list[int | None] = [None] * n
        matcher = difflib.SequenceMatcher(None, list(spoken_keys), expected, autojunk=False)
        # Each anchor: (spoken index, expected index).
        anchors: list[tuple[int, int]] = []
        for block in matcher.get_matching_blocks():
            for k in range(block.size):
                anchors.append((block.a + k, block.b + k))
                owners[block.a + k] = owner_of[block.b + k]
        open_word = self._open_owner(anchors, owner_of, n)
        self._fill_gaps(owners, anchors, owner_of)
        last_owner = max((o for o in owners if o is not None), default=self._cursor)
        spoken_set = {o for o in owners if o is not None}
        unspoken = tuple(
            w for w in range(self._cursor, last_owner) if w not in spoken_set and self.words[w].keys
        )
        if open_word is None:
            self._cursor, self._used = last_owner + 1, 0
        else:
            last_expected = anchors[-1][1]
            consumed = last_expected - owner_of.index(open_word) + 1
            self._used = (self._used if open_word == self._cursor else 0) + consumed
            self._cursor = open_word
        return MappedChunk(tuple(owners), unspoken, open_word)

    @staticmethod
    def _open_owner(anchors: list[tuple[int, int]], owner_of: list[int], n: int) -> int | None:
        """The caller word the chunk ends inside of (its spoken form goes on), or None."""
        if not anchors or anchors[-1][0] != n - 1:
            return None
        last = anchors[-1][1]
        if last + 1 < len(owner_of) and owner_of[last + 1] == owner_of[last]:
            return owner_of[last]
        return None

    def _fill_gaps(
        self,
        owners: list[int | None],
        anchors: list[tuple[int, int]],
        owner_of: list[int],
    ) -> None:
        """Give unmatched spoken words the caller words between the matches around them."""
        n = len(owners)
        bounds: list[tuple[int, int | None]] = [(-1, self._cursor - 1)]
        bounds += [(a, owner_of[b]) for a, b in anchors]
        bounds.append((n, None))
        for (left, left_owner), (right, right_owner) in itertools.pairwise(bounds):
            gap = range(left + 1, right)
            if not gap:
                continue
            assert left_owner is not None
            # Trailing: the next word (anchors' word if it goes on).
            if right_owner is None:
                if left >= 0 and self._continues(left, anchors, owner_of):
                    candidates = [left_owner]
                else:
                    candidates = self._next_spoken(self._cursor if left < 0 else left_owner + 1)
            else:
                candidates = [w for w in range(left_owner + 1, right_owner) if self.words[w].keys]
            if not candidates:
                fallback = left_owner if left_owner >= self._cursor else right_owner
                for s in gap:
                    owners[s] = fallback
                continue
            weights = np.array([max(1, len(self.words[w].keys)) for w in candidates], float)
            edges = np.cumsum(weights) / weights.sum() * len(gap)
            for j, s in enumerate(gap):
                owners[s] = candidates[
                    min(int(np.searchsorted(edges, j + 0.5)), len(candidates) - 1)
                ]

    def _next_spoken(self, start: int) -> list[int]:
        """[the first caller word from ``start`` on that has a spoken form] (or [])."""
        for w in range(start, len(self.words)):
            if self.words[w].keys:
                return [w]
        return []

    @staticmethod
    def _continues(spoken: int, anchors: list[tuple[int, int]], owner_of: list[int]) -> bool:
        """Whether the caller word matched at spoken index ``spoken`` has keys left after it."""
        expected = dict(anchors)[spoken]
        return expected + 1 < len(owner_of) and owner_of[expected + 1] == owner_of[expected]


@dataclass(frozen=True)
class TextSpan:
    """A lexical word or a punctuation run of a chunk's text, as the aligner scores it."""

    begin: int
    """[begin, end) in the chunk text."""
    end: int
    word: int | None
    """Caller word index (None: punctuation, or a word that maps to none)."""
    synthetic: bool = False
    """Whether it is punctuation (or an unmapped word) the caller did not write."""

    @property
    def is_word(self) -> bool:
        return self.word is not None


@dataclass(frozen=True)
class ChunkSpans:
    """The spans of one chunk and how its tokens spread over them."""

    spans: tuple[TextSpan, ...]
    token_to_span: np.ndarray
    """[tokens, spans] float32; each row sums to 1 (or 0: no span)."""
    unspoken: tuple[int, ...]
    """Caller words skipped before this chunk's words."""
    open_word: int | None = None
    """The caller word that goes on in the next chunk."""

    @property
    def word_spans(self) -> list[int]:
        return [i for i, span in enumerate(self.spans) if span.is_word]


def chunk_spans(
    text: str,
    token_spans: Sequence[tuple[int, int]],
    mapper: WordMapper,
) -> ChunkSpans:
    """Spans of the prepared chunk ``text`` (its lexical words mapped through ``mapper``)."""
    lexical = lexical_spans(text)
    mapped = mapper.map([word_key(text[b:e]) for b, e in lexical])
    covered = np.zeros(len(text), bool)
    spans: list[TextSpan] = []
    for (b, e), owner in zip(lexical, mapped.owners, strict=True):
        spans.append(TextSpan(b, e, owner, synthetic=owner is None))
        covered[b:e] = True
    last_word = max((u for u in spans if u.is_word), key=lambda u: u.end, default=None)
    i = 0
    while i < len(text):
        if covered[i] or not _is_punctuation(text[i]):
            i += 1
            continue
        j = i + 1
        while j < len(text) and not covered[j] and _is_punctuation(text[j]):
            j += 1
        synthetic = (
            last_word is not None
            and i >= last_word.end
            and last_word.word is not None
            and not mapper.trailing_punctuation_is_written(last_word.word)
        )
        spans.append(TextSpan(i, j, None, synthetic=synthetic))
        i = j
    spans.sort(key=lambda u: (u.begin, u.end))
    return ChunkSpans(
        tuple(spans), overlap_matrix(token_spans, spans), mapped.unspoken, mapped.open_word
    )


def overlap_matrix(token_spans: Sequence[tuple[int, int]], spans: Sequence[TextSpan]) -> np.ndarray:
    """[tokens, spans] share of each token's characters in each span (rows sum to 1 or 0)."""
    if not token_spans or not spans:
        return np.zeros((len(token_spans), len(spans)), np.float32)
    tb = np.array([s[0] for s in token_spans])[:, None]
    te = np.array([s[1] for s in token_spans])[:, None]
    ub = np.array([u.begin for u in spans])[None, :]
    ue = np.array([u.end for u in spans])[None, :]
    overlap = np.clip(np.minimum(te, ue) - np.maximum(tb, ub), 0, None).astype(np.float32)
    totals = overlap.sum(axis=1, keepdims=True)
    return np.divide(overlap, totals, out=np.zeros_like(overlap), where=totals > 0)


def token_spans(decode: Callable[[Sequence[int]], str], ids: Sequence[int], text: str) -> list:
    """[begin, end) in ``text`` of each token of ``ids`` (the tokenization of ``text``).

    Found by decoding growing prefixes and walking ``text`` over the characters each token adds
    (spaces skipped, case and compatibility forms ignored, an unknown piece covering one
    character). A token that adds only spaces gets an empty span.
    """
    spans: list[tuple[int, int]] = []
    cursor = 0
    previous = ""
    for k in range(len(ids)):
        decoded = decode(list(ids[: k + 1]))
        common = (
            len(previous) if decoded.startswith(previous) else _common_prefix(previous, decoded)
        )
        added = decoded[common:]
        previous = decoded
        begin = end = None
        for char in added:
            if char.isspace():
                continue
            while cursor < len(text) and text[cursor].isspace():
                cursor += 1
            if cursor >= len(text):
                break
            mismatch = char != _UNKNOWN_PIECE and not _same_char(char, text[cursor])
            if mismatch and begin is not None and _same_char(char, text[cursor - 1]):
                # A compatibility form decoding to several characters.
                continue
            begin = cursor if begin is None else begin
            cursor += 1
            end = cursor
        spans.append((begin, end) if begin is not None else (cursor, cursor))
    return spans


def _same_char(a: str, b: str) -> bool:
    return a == b or word_key(a) == word_key(b) or unicodedata.normalize("NFKC", b)[:1] == a


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


__all__ = [
    "CallerWord",
    "CallerWordFeed",
    "ChunkSpans",
    "MappedChunk",
    "TextSpan",
    "WordMapper",
    "caller_words",
    "chunk_spans",
    "lexical_keys",
    "lexical_spans",
    "overlap_matrix",
    "token_spans",
    "word_key",
]
