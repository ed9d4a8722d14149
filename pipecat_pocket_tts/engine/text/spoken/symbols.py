"""Emoji out; abbreviations and symbols in words; the spacing and punctuation tidied after."""

from __future__ import annotations

import re
from collections.abc import Sequence

from .dates import keeps_period
from .language import SpokenLanguage

_EMOJI_BASE = (
    # Pictographs, emoticons, transport, flags, supplemental symbols.
    "\U0001f000-\U0001faff"
    # Miscellaneous symbols and dingbats (☀ ✓ ❤ ✨).
    "\u2600-\u27bf"
    # Stars and arrows drawn as emoji (⭐ ⬆).
    "\u2b00-\u2bff"
    # Technical symbols shown as emoji (⌚ ⏰ ⏩).
    "\u2300-\u23ff"
)
_EMOJI_MARKS = "\ufe0e\ufe0f\u20e3\U0001f3fb-\U0001f3ff\U000e0020-\U000e007f"
_EMOJI = re.compile(rf"[ \t]?(?:[{_EMOJI_BASE}]|[{_EMOJI_MARKS}]|\u200d(?=[{_EMOJI_BASE}]))+")
_EMOJI_TRIGGER = re.compile(rf"[{_EMOJI_BASE}{_EMOJI_MARKS}]")


class Emoji:
    """Removes emoji (with skin tones, joiners and keycaps) and the space before them."""

    def __call__(self, text: str) -> str:
        if not _EMOJI_TRIGGER.search(text):
            return text
        return _EMOJI.sub("", text)


_SENTENCE_START = re.compile(r"(?:^|[.!?]\s+|\n\s*)$")


class Abbreviations:
    """Expands the language's abbreviations ("Dr.", "z. B.", "p. ex."), whole tokens only."""

    def __init__(self, lang: SpokenLanguage) -> None:
        self.lang = lang
        table: dict[str, str] = {}
        numbered: set[str] = set()
        sentence_end: set[str] = set()
        for source, is_numbered in (
            (lang.abbreviations, False),
            (lang.numbered_abbreviations, True),
        ):
            for token, spoken in source.items():
                variants = {token: spoken}
                if token[:1].islower():
                    variants[token[0].upper() + token[1:]] = spoken[0].upper() + spoken[1:]
                for variant, words in variants.items():
                    table.setdefault(variant, words)
                    if is_numbered:
                        numbered.add(variant)
                    if token in lang.sentence_end_abbreviations:
                        sentence_end.add(variant)
        self.table = table
        self.numbered = frozenset(numbered)
        self.sentence_end = frozenset(sentence_end)
        keys = sorted(table, key=len, reverse=True)
        self._re = re.compile(r"(?<![\w.])(?:" + "|".join(re.escape(k) for k in keys) + r")(?!\w)")
        self._digit_after = re.compile(r"\s?\d")

    def __call__(self, text: str) -> str:
        return self._re.sub(self._expand, text)

    def _expand(self, m: re.Match[str]) -> str:
        token = m[0]
        text = m.string
        if token in self.numbered and not self._digit_after.match(text, m.end()):
            return token
        after = text[m.end() : m.end() + 3]
        spoken = self.lang.special_abbreviation(token, after)
        if spoken is not None:
            return spoken
        spoken = self.table[token]
        starts_sentence = _SENTENCE_START.search(text, max(0, m.start() - 3), m.start())
        if token[:1].isupper() and spoken[:1].islower() and starts_sentence:
            spoken = spoken[0].upper() + spoken[1:]
        # Rules read one line at a time.
        ends_line = not text[m.end() :].strip(" \t")
        if token.endswith(".") and (
            ends_line or (token in self.sentence_end and keeps_period(text, m.end()))
        ):
            spoken += "."
        return spoken


Rewrite = tuple[re.Pattern[str], str]


def rewrite(text: str, rules: Sequence[Rewrite]) -> str:
    """Apply ``rules`` (pattern, replacement) to ``text`` one after the other."""
    for pattern, repl in rules:
        text = pattern.sub(repl, text)
    return text


def _operator(symbol: str, word: str) -> tuple[str, str]:
    """A rule saying ``symbol`` (a regex) as ``word``, one space either side however written."""
    return rf"\s*{symbol}\s*", f" {word} "


class Symbols:
    """Symbols between words said in words: "&", "+", "=", "#3", "@name", "~5", "→"."""

    def __init__(self, lang: SpokenLanguage) -> None:
        w = lang.words

        def spaced(word: str) -> str:
            return f" {word} "

        rules: list[tuple[str, str]] = [
            (r"(?<![\w+])C\+\+(?![\w+])", "C plus plus"),
            (r"(?<![\w#])([CF])#(?![\w#])", r"\1 sharp"),
            (r"(?<![\w.])\.NET\b", "dot net"),
            _operator(r"(?:->|=>|→|⇒|⟶)", w.to),
            _operator(r"(?:<=|≤)", w.at_most),
            _operator(r"(?:>=|≥)", w.at_least),
            (r"(?<=[\w)])\s+<\s+(?=[\w(-])", spaced(w.less_than)),
            (r"(?<=[\w)])\s+>\s+(?=[\w(-])", spaced(w.greater_than)),
            _operator("±", w.plus_minus),
            _operator("&", w.and_),
            _operator(r"\+", w.plus),
            _operator("={1,3}", w.equals),
            (r"(?<=[\w)])\s*[×*]\s*(?=[\w(])", spaced(w.times)),
            _operator("÷", w.divided_by),
            (r"(?<=\w)\s*\^\s*(?=[\w-])", spaced(w.power)),
            (r"(?:~|≈|∼)\s*(?=[\w$€£¥-])", f"{w.approx} "),
            (r"\s*²", f" {w.power} {lang.cardinal(2)}"),
            (r"\s*³", f" {w.power} {lang.cardinal(3)}"),
            (r"(?<![\w#])#\s?(?=\d)", f"{w.number} "),
            (r"(?<![\w#&])#(?=[^\W\d_])", f"{w.hashtag} "),
            (r"(?<![\w@])@(?=\w)", f"{w.at} "),
            (r"\s*%", spaced(w.percent)),
            (r"§\s*", f"{w.section} "),
            (r"(?<=[^\W\d_])/(?=[^\W\d_])", " "),
            # What the number rules left between digits: a ratio "16:9", a rating "4.5/5".
            (r"(?<=\d)\s?:\s?(?=\d)", spaced(w.ratio or w.to)),
            (r"(?<=\d)/(?=\d)", spaced(w.slash)),
            (r"(?<=[^\W_])_+(?=[^\W_])", " "),
            (r"[©®™]", ""),
            (r"\s*\|\s*", ", "),
            (r"[\\`*~^#_]+", " "),
        ]
        self._rules: list[Rewrite] = [(re.compile(p), r) for p, r in rules]
        self._trigger = re.compile(r"[&+=×*÷^~≈∼#@%§/_|\\`©®™<>±→⇒⟶≤≥²³]|\.NET|\d:\d")

    def __call__(self, text: str) -> str:
        if not self._trigger.search(text):
            return text
        return rewrite(text, self._rules)


_TIDY: tuple[Rewrite, ...] = (
    # Empty brackets.
    (re.compile(r"\([ \t]*\)|\[[ \t]*\]"), ""),
    # Runs of spaces.
    (re.compile(r"[ \t]{2,}"), " "),
    # A space before a mark (not "1. ...").
    (re.compile(r"(?<![.!?…])[ \t]+([,.](?!\d))"), r"\1"),
    # Doubled marks.
    (re.compile(r"([,;:])(?:[ \t]*[,;:])+"), r"\1"),
    # A comma, then the sentence end.
    (re.compile(r"[,;:][ \t]*([.!?])"), r"\1"),
    # The sentence end, then a comma.
    (re.compile(r"([.!?])[ \t]*,"), r"\1"),
    # Spaces at line edges.
    (re.compile(r"[ \t]+$|^[ \t]+", re.MULTILINE), ""),
    # A line starting with a comma.
    (re.compile(r"^[ \t]*[,;][ \t]*", re.MULTILINE), ""),
    # Blank lines.
    (re.compile(r"\n{3,}"), "\n\n"),
)


def tidy(text: str) -> str:
    """Clean what the rewriting left: double spaces, stray commas, empty brackets, blank lines."""
    return rewrite(text, _TIDY)
