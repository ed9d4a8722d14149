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
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..errors import EmptyTextError
from ..model.config import FRAME_RATE, MAX_TOKENS_PER_CHUNK, ModelConfig, TextOptions
from .chunking import Chunker, TextChunk, ensure_terminal_punctuation
from .streaming_chunker import StreamingChunker, complete_word_ends
from .tokenizer import Tokenizer

# Fewer words than this count as a short input, as upstream does.
SHORT_INPUT_WORDS = 5
SHORT_INPUT_PADDING = " " * 8
TOKENS_PER_SECOND_ESTIMATE = 3.0
GENERATION_PADDING_SECONDS = 2.0
FRAMES_AFTER_EOS_EXTRA = 2
# Raw words at the end of an open sentence not yet normalized.
OPEN_SENTENCE_MARGIN_WORDS = 3

Normalize = Callable[[str, bool], str]
"""Spoken-form normalization of (whole sentences of) raw text: ``normalize(text,
continues_line)``, ``continues_line`` when the text starts inside a line that earlier text
began (a leading "2." there is a number, not a list marker)."""

_SENTENCE_MARK_THEN_CLAUSE_MARK = re.compile(r"([.!?\u2026])(?:\s*[,;:])+")
_BLANKS = re.compile(r"\s+")
_LEADING_CLAUSE_MARKS = ",;: "
_WORD_AND_SPACE = re.compile(r"(\S+)(\s*)")
_HAS_BLANK = re.compile(r"\s")


@dataclass(frozen=True)
class PreparedChunk:
    """One chunk as the FlowLM receives it."""

    # Exactly the text that was tokenized.
    text: str
    # Int64 [n], read-only.
    token_ids: np.ndarray = field(compare=False)
    # Frames generated from the EOS step on, the EOS step included.
    frames_after_eos: int
    # Generation stops here if EOS never comes.
    max_frames: int
    # Starts inside a sentence that an earlier chunk began.
    is_mid_sentence: bool

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
        return self._prepared(self.clean(text), is_mid_sentence, frames_after_eos)

    def split(
        self,
        text: str,
        *,
        first_sentence_alone: bool = False,
        continues_sentence: bool = False,
    ) -> list[PreparedChunk]:
        """The whole pipeline on a complete text: prepared chunks (none for blank text).

        ``continues_sentence``: ``text`` goes on with a sentence that earlier text began, so
        its first chunk is prepared mid-sentence (no capital letter added).
        """
        chunks = self.chunker.split(
            self.clean(text),
            first_sentence_alone=first_sentence_alone,
            starts_mid=continues_sentence,
        )
        return self.prepare_chunks(chunks)

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

    def _prepared(
        self, clean_text: str, is_mid_sentence: bool, frames_after_eos: int | None = None
    ) -> PreparedChunk:
        """Step 3 and tokenizing on text that step 1 already cleaned."""
        text = " ".join(clean_text.split()).lstrip(_LEADING_CLAUSE_MARKS)
        # Blank, or bare marks ("...", "?!").
        if not any(c.isalnum() for c in text):
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

    def _measure(self, text: str, mid: bool) -> int:
        text = text.lstrip(_LEADING_CLAUSE_MARKS)
        if not text:
            return 0
        return self.tokenizer.count(self._finish(text, mid))

    def prepare_chunks(self, chunks: list[TextChunk]) -> list[PreparedChunk]:
        """Step 3 on chunks of clean text (the chunker's); chunks with nothing to say go."""
        out = []
        for chunk in chunks:
            try:
                out.append(self._prepared(chunk.text, chunk.is_mid_sentence))
            except EmptyTextError:
                # A chunk of bare clause marks has nothing to say.
                continue
        return out


class TextStream:
    """Text arriving in fragments (LLM tokens) → the prepared chunks the batch path makes of it.

    The batch path is ``split(normalize(text))``. Here ``normalize`` runs on each run of
    sentences as soon as their ends are certain in the raw text, and the result is cleaned and
    chunked incrementally (``StreamingChunker``: the first sentence alone, an overlong open
    sentence cut early), then prepared and tokenized once. For that early cut the open
    sentence is normalized too, and only words its normalized form keeps however it goes on
    are passed on (all but the last ``OPEN_SENTENCE_MARGIN_WORDS`` raw words, and only if
    their normalized form is a prefix of the whole open sentence's); once passed, their raw
    text is dropped, so no text is normalized again and again: the work per fragment is
    bounded by a few chunks of text, linear in the whole. A fragment that completes no word
    costs nothing. Each chunk carries its mid-sentence flag.
    """

    def __init__(self, preparer: TextPreparer, normalize: Normalize | None = None) -> None:
        self._preparer = preparer
        self._normalize = normalize
        self._chunks = StreamingChunker(preparer.chunker, self._clean)
        # Raw text of the open sentence not passed on yet (normalize only).
        self._raw = ""
        # Normalized words of ``_raw`` already passed on.
        self._passed_words = 0
        # ``_raw`` starts inside a line that passed text began.
        self._mid_line = False
        # That line is a list item, heading or table row (see certain_end).
        self._block_line = False

    @property
    def pending_text(self) -> str:
        """Text received but not released as chunks yet."""
        return (self._chunks.pending_text + " " + self._raw).strip()

    def push(self, text: str) -> list[PreparedChunk]:
        """Add text; return the prepared chunks that became certain."""
        return self._preparer.prepare_chunks(self._push(text))

    def flush(self) -> list[PreparedChunk]:
        """The stream has ended: return the remaining chunks and start afresh."""
        out: list[TextChunk] = []
        if self._normalize is not None and self._raw.strip():
            out += self._pass_block_line_end(len(self._raw))
        if self._normalize is not None and self._raw.strip():
            out += self._pass_rest(_spoken_words(self._spoken(self._raw)))
        self._raw = ""
        self._passed_words = 0
        self._mid_line = self._block_line = False
        return self._preparer.prepare_chunks(out + self._chunks.flush())

    def _push(self, text: str) -> list[TextChunk]:
        if self._normalize is None:
            return self._chunks.push(text)
        starts_word = not self._raw or self._raw[-1].isspace()
        self._raw += text
        if not starts_word and not _HAS_BLANK.search(text):
            # The last word grew: no sentence end or complete word is new.
            return []
        out: list[TextChunk] = []
        cut = self._preparer.chunker.certain_end(
            self._raw, raw=True, starts_line=not self._mid_line, in_block_line=self._block_line
        )
        if cut:
            before = len(self._raw)
            out += self._pass_block_line_end(cut)
            cut -= before - len(self._raw)
        if cut:
            out += self._pass_sentences(self._raw[:cut])
            self._cut_raw(cut)
        return out + self._pass_open_sentence()

    def _pass_block_line_end(self, limit: int) -> list[TextChunk]:
        """Pass on ``_raw`` up to the line break that ends the list item, heading or table
        row it goes on with, if that break comes before ``limit``: Markdown ends such a line
        with a stop, which normalizing the rest with the next line would not add."""
        if not (self._mid_line and self._block_line):
            return []
        head = self._raw[:limit]
        newline = head.find("\n")
        if newline < 0 or not head[newline:].strip():
            return []
        out = self._pass_sentences(head[: newline + 1])
        self._cut_raw(newline + 1)
        return out

    def _spoken(self, raw: str) -> str:
        """``raw`` (a prefix of ``_raw``) normalized, read as continuing a line if it does."""
        assert self._normalize is not None
        return self._normalize(raw, self._mid_line)

    def _cut_raw(self, cut: int) -> None:
        """Drop the first ``cut`` characters of ``_raw`` (passed on)."""
        passed = self._raw[:cut]
        if passed.strip():
            body = passed.rstrip()
            line_start = body.rfind("\n") + 1
            # The last line of ``passed`` starts in it.
            if line_start or not self._mid_line:
                self._block_line = self._preparer.chunker.lines.starts_block_line(body[line_start:])
            self._mid_line = "\n" not in passed[len(body) :]
        self._raw = self._raw[cut:]

    def _clean(self, text: str, final: bool) -> str:
        return self._preparer.clean(text, final=final)

    def _pass_sentences(self, raw: str) -> list[TextChunk]:
        """Pass on whole sentences (``raw`` ends at a certain sentence end)."""
        assert self._normalize is not None
        words = _spoken_words(self._spoken(raw))
        # A line end, as the chunker reads it.
        if words and raw.rstrip(" \t").endswith("\n"):
            words[-1] = ensure_terminal_punctuation(words[-1].rstrip()) + "\n"
        out = self._pass_rest(words)
        self._passed_words = 0
        return out

    def _pass_open_sentence(self) -> list[TextChunk]:
        """Pass on the stable words of a long open sentence, so it can be cut early."""
        assert self._normalize is not None
        raw = self._raw
        ends = complete_word_ends(raw)
        if len(ends) <= OPEN_SENTENCE_MARGIN_WORDS:
            return []
        complete = raw[: ends[-1]]
        chunker = self._preparer.chunker
        if chunker.measure(" ".join(complete.split()), True) <= chunker.max_tokens:
            # Far from any early cut.
            return []
        head_end = ends[-1 - OPEN_SENTENCE_MARGIN_WORDS]
        head = _spoken_words(self._spoken(raw[:head_end]))
        whole = _spoken_words(self._spoken(complete))
        stable = 0
        while stable < min(len(head), len(whole)) and head[stable] == whole[stable]:
            stable += 1
        if stable <= self._passed_words:
            return []
        out = self._pass_rest(head[:stable])
        # All of the head is passed on, so its raw text is done with.
        if stable == len(head):
            self._cut_raw(head_end)
            self._passed_words = 0
        return out

    def _pass_rest(self, words: list[str]) -> list[TextChunk]:
        """Pass on the normalized words of the open sentence not passed on yet."""
        rest = words[self._passed_words :]
        self._passed_words = len(words)
        return self._chunks.push(" ".join(rest) + " ") if rest else []


def _spoken_words(text: str) -> list[str]:
    """The words of ``text``, each with a newline appended when a line break follows it."""
    return [
        m.group(1) + ("\n" if "\n" in m.group(2) else "") for m in _WORD_AND_SPACE.finditer(text)
    ]


def _collapse(match: re.Match[str]) -> str:
    return "\n" if "\n" in match.group() else " "


__all__ = [
    "Normalize",
    "PreparedChunk",
    "TextPreparer",
    "TextStream",
    "frames_after_eos_guess",
    "max_frames_for",
]
