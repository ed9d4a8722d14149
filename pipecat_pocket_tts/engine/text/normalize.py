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

from collections.abc import Mapping
from functools import lru_cache
from types import MappingProxyType

from .spoken.languages import SUPPORTED_LANGUAGES, language_code
from .spoken.lexicon import Lexicon
from .spoken.pipeline import spoken_form

__all__ = ["SUPPORTED_LANGUAGES", "TextNormalizer", "language_code", "normalize_text"]


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

    def __call__(self, text: str, *, continues_line: bool = False) -> str:
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
def _normalizer(language: str, lexicon_items: tuple[tuple[str, str], ...]) -> TextNormalizer:
    return TextNormalizer(language, lexicon=dict(lexicon_items))


def normalize_text(
    text: str,
    language: object,
    *,
    lexicon: Mapping[str, str] | None = None,
    continues_line: bool = False,
) -> str:
    """``text`` in spoken form for ``language`` (see the module docstring); ``continues_line``:
    ``text`` starts inside a line that earlier text began (``TextNormalizer.__call__``)."""
    code = language_code(language)
    try:
        items = tuple(sorted(lexicon.items())) if lexicon else ()
        normalizer = _normalizer(code, items)
    except (AttributeError, TypeError):  # not a mapping, or odd keys: validate uncached
        normalizer = TextNormalizer(code, lexicon=lexicon)
    return normalizer(text, continues_line=continues_line)
