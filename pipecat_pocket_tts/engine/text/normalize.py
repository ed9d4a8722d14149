"""Spoken-form text normalization: what an LLM writes, turned into what a voice should say.

PocketTTS reads raw text tokens and has no phoneme stage, so "$12.50", "3:45 pm", "2026-11-30",
"**bold**" or "Dr." must become words before chunking. This module is the small, stable API
the engine and the Pipecat service use::

    normalize_text("It costs $12.50.", "english")    # 'It costs twelve dollars and fifty cents.'
    norm = TextNormalizer("french_24l", lexicon={"NVIDIA": "ène vidia"})
    norm("Le 1er mai à 15h30.")                      # 'Le premier mai à quinze heures trente.'

``language`` accepts pack / model config names ("english", "french_24l",
"english_7m_2026-10"), ISO codes ("en", "fr", "pt-BR") and Pipecat ``Language`` values; an
unknown one raises ``UnknownLanguageError``. Normalization never raises on text, keeps
sentence-ending punctuation, and returns prose without digits, symbols or markdown unchanged.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from types import MappingProxyType

from .spoken.languages import SUPPORTED_LANGUAGES, language_code
from .spoken.lexicon import Lexicon, sub_tag_written
from .spoken.pipeline import spoken_form

__all__ = [
    "SUPPORTED_LANGUAGES",
    "TextNormalizer",
    "WordForms",
    "language_code",
    "normalize_text",
    "text_normalizer",
]


class TextNormalizer:
    """Normalization for one language and lexicon, compiled once; call it with text.

    The lexicon ({"NVIDIA": "en-vidia"}) is applied first, to whole words: keys with a capital
    letter match exactly, all-lowercase keys match in any case.
    ``<sub alias="spoken">written</sub>`` tags are honoured too. What either produces is left
    untouched by the other rules.
    Instances hold no per-call state: one can serve many sessions and threads.
    """

    def __init__(self, language: object, *, lexicon: Mapping[str, str] | None = None) -> None:
        self.language = language_code(language)
        self._form = spoken_form(self.language)
        self._lexicon = Lexicon(lexicon) if lexicon else None
        self.lexicon: Mapping[str, str] = MappingProxyType(dict(lexicon or {}))

    def __call__(self, text: str, continues_line: bool = False) -> str:
        """``continues_line``: ``text`` starts inside a line that earlier text began (a
        streamed sentence): a leading "1." or "#" there is text, not a list or heading mark."""
        if not isinstance(text, str):
            raise TypeError(f"text to normalize must be a str, not {type(text).__name__}")
        if not text:
            return text
        return self._form(text, self._lexicon, continues_line=continues_line)

    def __repr__(self) -> str:
        return f"TextNormalizer({self.language!r}, lexicon={len(self.lexicon)} entries)"


@lru_cache(maxsize=64)
def _normalizer(language: object, lexicon_items: tuple[tuple[str, str], ...]) -> TextNormalizer:
    return TextNormalizer(language, lexicon=dict(lexicon_items))


def text_normalizer(language: object, lexicon: Mapping[str, str] | None = None) -> TextNormalizer:
    """The shared ``TextNormalizer`` of ``language`` and ``lexicon`` (built once, cached by both
    as given: a hit resolves no language; the lexicon is read now)."""
    try:
        items = tuple(sorted(lexicon.items())) if lexicon else ()
        return _normalizer(language, items)
    except (AttributeError, TypeError):
        # Not a mapping, odd keys, unhashable: validate it uncached.
        return TextNormalizer(language, lexicon=lexicon)


def normalize_text(
    text: str,
    language: object,
    *,
    lexicon: Mapping[str, str] | None = None,
    continues_line: bool = False,
) -> str:
    """``text`` in spoken form for ``language`` (see the module docstring); ``continues_line``:
    ``text`` starts inside a line that earlier text began (``TextNormalizer.__call__``)."""
    return text_normalizer(language, lexicon)(text, continues_line)


class WordForms:
    """The caller's words (whitespace-free pieces of a text) → their (written, spoken) forms,
    a batch in one call (word timestamps: ``timing.words.caller_words``).

    *written* shows a ``<sub alias="…">written</sub>`` element as its written form; *spoken* is
    the word normalized on its own, by ``spoken`` at a line start and by ``spoken_mid_line``
    (default ``spoken``) inside a line; its written form without them. Memoized per instance:
    make one per text or text stream.
    """

    def __init__(
        self,
        spoken: Callable[[str], str] | None = None,
        spoken_mid_line: Callable[[str], str] | None = None,
    ) -> None:
        self._spoken = spoken
        self._spoken_mid_line = spoken_mid_line or spoken
        self._forms: dict[tuple[str, str, bool], tuple[str, str]] = {}

    @classmethod
    def normalized(cls, language: object, lexicon: Mapping[str, str] | None = None) -> WordForms:
        """Forms spoken by ``text_normalizer(language, lexicon)``."""
        normalizer = text_normalizer(language, lexicon)
        return cls(normalizer, functools.partial(normalizer, continues_line=True))

    def __call__(self, words: Iterable[tuple[str, str, bool]]) -> list[tuple[str, str]]:
        """``words``: (the word, what is read for its spoken form, whether it is inside a
        line); at a line start the word is read with the blanks after it ("1. " is a list
        marker there)."""
        return [self._forms.get(word) or self._form(word) for word in words]

    def _form(self, word: tuple[str, str, bool]) -> tuple[str, str]:
        raw, read, mid_line = word
        written = sub_tag_written(raw)
        spoken = self._spoken_mid_line if mid_line else self._spoken
        self._forms[word] = form = (written, spoken(read) if spoken else written)
        return form
