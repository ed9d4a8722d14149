"""The order of the rules, per language, and the guarantees around them.

Order matters: what a rule rewrites is plain words for the rules after it, so the most
specific shapes go first (addresses, phone numbers, scores, dates before ranges, ranges before
times, money and units before bare numbers) and bare numbers go last. Markdown reads the whole
text (fences span lines); every other rule reads one line at a time, so a line's spoken form
never depends on the next line ("Abs." at a line end, "der 3." before a list), the same
whether the text is normalized at once or streamed.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable
from functools import cache

from .dates import Dates, Times
from .language import SpokenLanguage
from .languages import spoken_language
from .lexicon import Lexicon, Protected, strip_private_use, substitute_sub_tags
from .markdown import Markdown
from .numerals import Cardinals, Decades, DigitsInWords, Ordinals, Years
from .quantities import Fractions, Measures, Money, Multipliers, Phones, Ranges, Scores
from .symbols import Abbreviations, Emoji, Symbols, tidy
from .web import WebAddresses

logger = logging.getLogger(__name__)

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class SpokenForm:
    """All rules of one language, compiled once. Call it with text; it never raises on text.

    ``strict=True`` lets a failing rule raise (for tests); otherwise the rule is skipped and
    its input kept, with a warning in the log.
    """

    def __init__(self, lang: SpokenLanguage, *, strict: bool = False) -> None:
        self.lang = lang
        self.strict = strict
        dates = Dates(lang)
        self.markdown = Markdown(dates.month_starts)
        self.rules: list[tuple[str, Callable[[str], str]]] = [
            ("markdown", self.markdown),
            ("emoji", Emoji()),
            ("web", WebAddresses(lang)),
            ("phones", Phones(lang)),
            ("scores", Scores(lang)),
            ("dates", dates),
            ("ranges", Ranges(lang)),
            ("times", Times(lang)),
            ("money", Money(lang)),
            ("ordinals", Ordinals(lang)),
            ("decades", Decades(lang)),
            ("measures", Measures(lang)),
            ("fractions", Fractions(lang)),
            ("multipliers", Multipliers(lang)),
            ("abbreviations", Abbreviations(lang)),
            ("years", Years(lang)),
            ("digits_in_words", DigitsInWords()),
            ("symbols", Symbols(lang)),
            ("cardinals", Cardinals(lang)),
        ]

    def __call__(
        self, text: str, lexicon: Lexicon | None = None, *, continues_line: bool = False
    ) -> str:
        """``continues_line``: ``text`` starts inside a line (see ``Markdown``)."""
        original = text
        text = strip_private_use(text)
        if _CONTROL.search(text):
            text = _CONTROL.sub("", text)
        protected = Protected()
        text = self._guard("sub", lambda t: substitute_sub_tags(t, protected), text)
        if lexicon is not None:
            text = self._guard("lexicon", lambda t: lexicon.apply(t, protected), text)
        for name, rule in self.rules:
            # Line and block rules read the whole text.
            if rule is self.markdown:
                rule = functools.partial(self.markdown, continues_line=continues_line)
                text = self._guard(name, rule, text)
            elif "\n" in text:
                # The others read one line at a time, as a stream reads them.
                text = "\n".join(self._guard(name, rule, line) for line in text.split("\n"))
            else:
                text = self._guard(name, rule, text)
        text = protected.restore(text)
        if text == original:
            return original
        return _keep_edges(original, tidy(text))

    def _guard(self, name: str, rule: Callable[[str], str], text: str) -> str:
        if self.strict:
            return rule(text)
        try:
            return rule(text)
        except Exception:
            # A rule bug must cost one rewrite, never the utterance.
            logger.warning(
                "text normalization rule %r failed; text kept as is", name, exc_info=True
            )
            return text


def _keep_edges(original: str, text: str) -> str:
    """Give ``text`` the leading and trailing whitespace of ``original`` (fragments join)."""
    lead = original[: len(original) - len(original.lstrip())]
    trail = original[len(original.rstrip()) :]
    body = text.strip()
    if not body:
        return " " if lead or trail else ""
    return lead + body + trail


@cache
def spoken_form(code: str) -> SpokenForm:
    """The shared rule set of a language code (compiled on first use)."""
    return SpokenForm(spoken_language(code))
