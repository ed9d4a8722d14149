"""Prompt preparation: spoken-form text → chunks of token ids ready for the FlowLM.

Follows upstream pocket-tts (``prepare_text_prompt`` and the chunk loop of
``generate_audio_stream``), driven by the pack's ``TextOptions``:

1. ``clean`` (whole text): trim; the pack's ``replace_characters`` (then a sentence mark
   directly followed by ``, ; :`` keeps the sentence mark only, as upstream); characters the
   tokenizer cannot represent mapped or dropped (``Tokenizer.filter_unrepresentable``);
   ``;`` → ``,`` when ``remove_semicolons``; whitespace runs collapsed (line breaks are kept
   for the chunker, which treats them as sentence ends).
2. ``Chunker`` cuts the text into chunks of at most ``max_tokens`` tokens, counted on the
   prepared form of each chunk (step 3), so the limit holds for what the model receives.
3. ``prepare`` (each chunk): capitalize the first letter (``capitalize_first_letter``; not for
   a chunk that starts mid-sentence), end with ``.!?…`` (``append_terminal_punctuation``),
   prefix 8 spaces when it has fewer than 5 words (``pad_with_spaces_for_short_inputs``).
   Frames generated after EOS: 3 for ≤ 4 words, else 1, plus 2 (→ 5 or 3), unless the caller
   or the model config says otherwise. Frame budget: ceil((tokens / 3 + 2) · frame_rate).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from ..config import FRAME_RATE, MAX_TOKENS_PER_CHUNK, ModelConfig, TextOptions
from ..errors import EmptyTextError
from .chunking import Chunker, StreamingChunker, TextChunk, ensure_terminal_punctuation
from .tokenizer import Tokenizer

SHORT_INPUT_WORDS = 5  # fewer words than this count as a short input (upstream)
SHORT_INPUT_PADDING = " " * 8
TOKENS_PER_SECOND_ESTIMATE = 3.0
GENERATION_PADDING_SECONDS = 2.0
FRAMES_AFTER_EOS_EXTRA = 2

_SENTENCE_MARK_THEN_CLAUSE_MARK = re.compile(r"([.!?\u2026])(?:\s*[,;:])+")
_BLANKS = re.compile(r"\s+")
_LEADING_CLAUSE_MARKS = ",;: "


@dataclass(frozen=True)
class PreparedChunk:
    """One chunk as the FlowLM receives it."""

    text: str  # exactly the text that was tokenized
    token_ids: np.ndarray = field(compare=False)  # int64 [n], read-only
    frames_after_eos: int  # frames generated from the EOS step on, EOS step included
    max_frames: int  # generation stops here if EOS never comes
    is_mid_sentence: bool  # starts inside a sentence that an earlier chunk began

    @property
    def num_tokens(self) -> int:
        return int(self.token_ids.shape[0])


def frames_after_eos_guess(text: str) -> int:
    """Upstream's guess: 3 frames after EOS for ≤ 4 words, else 1 (before the +2)."""
    return 3 if len(text.split()) <= 4 else 1


def max_frames_for(num_tokens: int, frame_rate: float = FRAME_RATE) -> int:
    """Generation length cap of a chunk: ceil((tokens / 3 + 2 s) · frame rate)."""
    seconds = num_tokens / TOKENS_PER_SECOND_ESTIMATE + GENERATION_PADDING_SECONDS
    return math.ceil(seconds * frame_rate)


class TextPreparer:
    """Cleans, chunks and tokenizes text the way one pack's model expects it."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        options: TextOptions | None = None,
        *,
        language: str = "english",
        max_tokens: int = MAX_TOKENS_PER_CHUNK,
        frame_rate: float = FRAME_RATE,
        recommended_frames_after_eos: int | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.options = options or TextOptions()
        self.frame_rate = frame_rate
        self.recommended_frames_after_eos = recommended_frames_after_eos
        self._table = str.maketrans(self.options.replace_characters)
        self.chunker = Chunker(self._measure, max_tokens=max_tokens, language=language)

    @classmethod
    def for_config(
        cls, tokenizer: Tokenizer, config: ModelConfig, *, max_tokens: int = MAX_TOKENS_PER_CHUNK
    ) -> TextPreparer:
        """The preparer of ``config``'s pack (its text options, language and frame rate)."""
        return cls(
            tokenizer,
            config.text,
            language=config.language,
            max_tokens=max_tokens,
            frame_rate=config.mimi.frame_rate,
            recommended_frames_after_eos=config.model_recommended_frames_after_eos,
        )

    # ------------------------------------------------------------------------------ steps
    def clean(self, text: str, *, final: bool = True) -> str:
        """Step 1 on ``text`` (may return ''). Idempotent.

        ``final=False`` is for text that more text will follow (streaming): trailing
        whitespace stays, and a dropped symbol at the very end keeps a mark until the next
        character shows whether it separated two words.
        """
        if final:
            text = text.strip()
        if self.options.replace_characters:
            text = text.translate(self._table)
        text = self.tokenizer.filter_unrepresentable(text, keep_trailing_mark=not final)
        if self.options.replace_characters:
            text = _SENTENCE_MARK_THEN_CLAUSE_MARK.sub(r"\1", text)
        if self.options.remove_semicolons:
            text = text.replace(";", ",")
        text = _BLANKS.sub(_collapse, text)
        return text.strip() if final else text.lstrip()

    def prepare(
        self,
        text: str,
        *,
        is_mid_sentence: bool = False,
        frames_after_eos: int | None = None,
    ) -> PreparedChunk:
        """Steps 1 and 3 on one chunk. Raises ``EmptyTextError`` if nothing sayable is left.

        ``frames_after_eos`` overrides the guess (as upstream's argument of that name).
        """
        text = " ".join(self.clean(text).split()).lstrip(_LEADING_CLAUSE_MARKS)
        if not text:
            raise EmptyTextError(
                "the text is empty once prepared (blank, or only characters this voice model "
                "cannot say); pass text with words in it"
            )
        final = self._finish(text, is_mid_sentence)
        ids = self.tokenizer.encode(final)
        ids.setflags(write=False)
        if frames_after_eos is None:
            frames_after_eos = self.recommended_frames_after_eos
        if frames_after_eos is None:
            frames_after_eos = frames_after_eos_guess(text) + FRAMES_AFTER_EOS_EXTRA
        return PreparedChunk(
            text=final,
            token_ids=ids,
            frames_after_eos=frames_after_eos,
            max_frames=max_frames_for(len(ids), self.frame_rate),
            is_mid_sentence=is_mid_sentence,
        )

    def split(self, text: str, *, first_sentence_alone: bool = False) -> list[PreparedChunk]:
        """The whole pipeline on a complete text: prepared chunks (none for blank text)."""
        chunks = self.chunker.split(self.clean(text), first_sentence_alone=first_sentence_alone)
        return self._prepare_all(chunks)

    def stream(self) -> PreparedStream:
        """A streaming pipeline: ``push`` text as it arrives, ``flush`` at the end."""
        return PreparedStream(self)

    # -------------------------------------------------------------------------- internals
    def _finish(self, text: str, mid: bool) -> str:
        """Step 3's text edits on clean, single-spaced, non-empty text."""
        options = self.options
        if options.capitalize_first_letter and not mid and not text[0].isupper():
            first = text[0].upper()
            if len(first) == 1:
                text = first + text[1:]
        if options.append_terminal_punctuation:
            text = ensure_terminal_punctuation(text)
        if options.pad_with_spaces_for_short_inputs and len(text.split()) < SHORT_INPUT_WORDS:
            text = SHORT_INPUT_PADDING + text
        return text

    def _measure(self, text: str, mid: bool) -> int:
        text = text.lstrip(_LEADING_CLAUSE_MARKS)
        if not text:
            return 0
        return self.tokenizer.count(self._finish(text, mid))

    def _prepare_all(self, chunks: list[TextChunk]) -> list[PreparedChunk]:
        out = []
        for chunk in chunks:
            try:
                out.append(self.prepare(chunk.text, is_mid_sentence=chunk.is_mid_sentence))
            except EmptyTextError:
                continue  # a chunk of bare clause marks: nothing to say
        return out


class PreparedStream:
    """``TextPreparer`` over text that arrives in pieces (see ``StreamingChunker``)."""

    def __init__(self, preparer: TextPreparer) -> None:
        self._preparer = preparer
        self._chunks: StreamingChunker = preparer.chunker.stream(self._clean)

    def _clean(self, text: str, final: bool) -> str:
        return self._preparer.clean(text, final=final)

    def push(self, text: str) -> list[PreparedChunk]:
        """Add text; return the chunks that became certain."""
        return self._preparer._prepare_all(self._chunks.push(text))

    def flush(self) -> list[PreparedChunk]:
        """The stream has ended: return the remaining chunks and start afresh."""
        return self._preparer._prepare_all(self._chunks.flush())


def _collapse(match: re.Match[str]) -> str:
    return "\n" if "\n" in match.group() else " "


__all__ = [
    "PreparedChunk",
    "PreparedStream",
    "TextPreparer",
    "frames_after_eos_guess",
    "max_frames_for",
]
