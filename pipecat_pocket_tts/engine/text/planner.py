"""An utterance's text → the prepared chunks the runtime speaks, with their word timing.

- ``TextPlanner``: normalize, filter, chunk, prepare, tokenize (≤ 50 tokens a chunk), whole
  (``plan``) or as fragments arrive (``stream``);
- ``TimedText``: the caller's words of one text, mapped onto its chunks' spans (word
  timestamps); ``ChunkTiming``: one chunk's share, which builds each frame's ``FrameWords``;
- ``PreparedUtterance`` (``TextPlanner.prepare``: a whole text in one call) and ``FedText``
  (``TextPlanner.fed_text``: fragments): what a session submits to the runtime, the chunks
  with their ``TimedText``.

Every synthesis path (``synthesize``, ``stream``, sessions) plans its text here.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..checks import check_lexicon
from ..errors import UnknownLanguageError
from ..timing.word_timing import FrameWords, WordLedger
from ..timing.words import (
    CallerWord,
    CallerWordFeed,
    ChunkSpans,
    WordMapper,
    caller_words,
    chunk_spans,
    token_spans,
)
from .normalize import WordForms, language_code, normalize_text, text_normalizer
from .plan_cache import PlanCache, plan_key
from .prepare import PreparedChunk, TextPreparer, TextStream

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from ..frames import LatentFrame
    from ..model.config import ModelConfig
    from .tokenizer import Tokenizer


class TimedText:
    """The caller's words of one text (an enqueued text, or a fed stream), mapped onto its
    chunks' spans for word timestamps.

    ``add`` takes the caller's text (all of it, or fragments as they come) with the chunks it
    released; ``chunk`` maps each chunk, in order, when its frames are generated (off the
    caller's thread). ``ledger`` is what the word timing releases words from.
    """

    def __init__(self, planner: TextPlanner, normalize: bool, lexicon: Mapping[str, str] | None):
        self._planner = planner
        self._stream = planner.word_stream(normalize=normalize, lexicon=lexicon)
        self._mapper = WordMapper()
        self.ledger = WordLedger(self._mapper.words)
        # Chunks released and mapped for this text so far, and whether it is complete.
        self._released = 0
        self._final = False
        self._mapped = 0

    @property
    def words(self) -> list[CallerWord]:
        return self._mapper.words

    def add(self, text: str, chunks: list[PreparedChunk], *, final: bool) -> None:
        """More caller text and the chunks it released; ``final``: the text is complete."""
        self._mapper.add(self._stream.push(text, final=final))
        self._released += len(chunks)
        self._final = final

    def spans(self, chunk: PreparedChunk) -> ChunkSpans:
        """The spans of the next chunk (chunks must come in text order)."""
        self._mapped += 1
        return self._planner.spans(chunk, self._mapper)

    def chunk(self, chunk: PreparedChunk, utterance: int) -> ChunkTiming:
        """The word timing input of the next chunk's frames (chunks in text order)."""
        spans = self.spans(chunk)
        ends_text = self._final and self._mapped >= self._released
        return ChunkTiming(utterance, self.ledger, spans, ends_text)


@dataclass(frozen=True, eq=False)
class ChunkTiming:
    """One chunk of a timed utterance: builds each of its frames' ``FrameWords``."""

    utterance: int
    ledger: WordLedger
    spans: ChunkSpans
    ends_text: bool

    def frame(self, frame: LatentFrame, *, last_in_utterance: bool) -> FrameWords:
        return FrameWords(
            self.utterance,
            self.ledger,
            self.spans,
            frame.attention,
            first_in_chunk=frame.frame_index == 0,
            last_in_chunk=frame.is_last,
            last_in_utterance=last_in_utterance,
            ends_text=self.ends_text,
        )


class StreamProbe:
    """``SpeechProbe`` of a text stream: speech once the stream releases a chunk."""

    def __init__(self, stream: TextStream) -> None:
        self._stream = stream
        self._speaks = False

    def push(self, text: str) -> bool:
        self._speaks = self._speaks or bool(self._stream.push(text))
        return self._speaks

    def flush(self) -> bool:
        self._speaks = self._speaks or bool(self._stream.flush())
        return self._speaks


@dataclass(frozen=True, eq=False)
class PreparedUtterance:
    """A whole text ready for the runtime: its chunks and, word timestamps on, its caller
    words mapped onto them."""

    # Empty when nothing is left to say.
    chunks: list[PreparedChunk]
    timed: TimedText | None = None


class FedText:
    """Text arriving in fragments (``Session.feed``) → prepared chunks, as ``plan`` would cut
    the whole, with its caller words (``timed``, word timestamps on) kept in step."""

    def __init__(self, stream: TextStream, timed: TimedText | None) -> None:
        self._stream = stream
        self.timed = timed

    @property
    def pending_text(self) -> str:
        """The text given but not released in a chunk yet."""
        return self._stream.pending_text

    def push(self, text: str) -> list[PreparedChunk]:
        """More text → the chunks it makes certain."""
        chunks = self._stream.push(text)
        if self.timed is not None:
            self.timed.add(text, chunks, final=False)
        return chunks

    def flush(self) -> list[PreparedChunk]:
        """The text is complete → the chunks still held."""
        chunks = self._stream.flush()
        if self.timed is not None:
            self.timed.add("", chunks, final=True)
        return chunks


class TextPlanner:
    """An utterance's text → prepared chunks: normalize, filter, chunk, prepare, tokenize."""

    def __init__(
        self, config: ModelConfig, tokenizer: Tokenizer, *, text_language: str | None = None
    ) -> None:
        self.config = config
        self.preparer = TextPreparer.for_config(tokenizer, config)
        #: What the normalizer reads the text as: the pack's language unless a variant of it
        #: is asked for ("pt-BR" on the portuguese pack); None for a language with no
        #: normalizer (an upstream config's Czech): upstream's text preparation only.
        self.text_language = _normalizer_language(text_language or config.name)
        # The copies made for other text languages share it.
        self._plans = PlanCache()

    def with_text_language(self, text_language: str | None) -> TextPlanner:
        """This planner, normalizing as ``text_language`` (shares the tokenizer and preparer)."""
        if text_language is None or self.text_language is None:
            return self
        code = language_code(text_language)
        if code == self.text_language:
            return self
        if code.split("-")[0] != self.text_language.split("-")[0]:
            raise UnknownLanguageError(
                f"text_language {text_language!r} is not a variant of the {self.config.name!r} "
                f"pack's language ({self.text_language}); load the pack of that language instead"
            )
        planner = copy.copy(self)
        planner.text_language = code
        return planner

    def plan(
        self,
        text: str,
        *,
        normalize: bool = True,
        lexicon: Mapping[str, str] | None = None,
        continues_sentence: bool = False,
    ) -> list[PreparedChunk]:
        """Chunks of ≤ 50 tokens ready for the model ([] when nothing is left to say).

        ``normalize`` turns numbers, dates, symbols... into their spoken form first, with
        ``lexicon`` ({word: spoken form}) applied before the other rules.
        ``continues_sentence``: ``text`` goes on with a sentence begun by earlier text (a
        piece of a ``stream`` chunk marked mid-sentence): its first chunk is prepared so.
        """
        key = plan_key(self.text_language, text, normalize, lexicon, continues_sentence)
        return self._plans.get(
            key, lambda: self._plan(text, normalize, lexicon, continues_sentence)
        )

    def _plan(
        self,
        text: str,
        normalize: bool,
        lexicon: Mapping[str, str] | None,
        continues_sentence: bool,
    ) -> list[PreparedChunk]:
        if normalize and self.text_language is not None:
            text = normalize_text(text, self.text_language, lexicon=lexicon)
        return self.preparer.split(text, continues_sentence=continues_sentence)

    def prepare(
        self,
        text: str,
        *,
        normalize: bool = True,
        lexicon: Mapping[str, str] | None = None,
        timestamps: bool = False,
    ) -> PreparedUtterance:
        """``text`` → what a session submits as one utterance: ``plan``'s chunks and, with
        ``timestamps``, its ``TimedText``."""
        chunks = self.plan(text, normalize=normalize, lexicon=lexicon)
        if not (chunks and timestamps):
            return PreparedUtterance(chunks)
        timed = self.timed_text(normalize, lexicon)
        timed.add(text, chunks, final=True)
        return PreparedUtterance(chunks, timed)

    def has_speech(
        self, text: str, *, normalize: bool = True, lexicon: Mapping[str, str] | None = None
    ) -> bool:
        """Whether ``text`` gives the model anything to say: it is planned exactly as
        ``enqueue`` plans it (False for "👍", "***", a code block or a script the tokenizer
        cannot read). The plan is kept, so enqueueing the text next plans it once; the time
        grows with the text's length (plan long text off an event loop)."""
        return bool(self.plan(text, normalize=normalize, lexicon=lexicon or None))

    def speech_probe(
        self, *, normalize: bool = True, lexicon: Mapping[str, str] | None = None
    ) -> StreamProbe:
        """A ``SpeechProbe`` (``contract``) over the text stream a session's ``feed`` would use."""
        return StreamProbe(self.stream(normalize=normalize, lexicon=lexicon))

    def words(
        self, text: str, *, normalize: bool = True, lexicon: Mapping[str, str] | None = None
    ) -> list[CallerWord]:
        """The caller's words of ``text``, each with the keys of its spoken form."""
        return caller_words(text, self._word_forms(normalize, lexicon))

    def word_stream(
        self, *, normalize: bool = True, lexicon: Mapping[str, str] | None = None
    ) -> CallerWordFeed:
        """``words`` for text arriving in fragments (``Session.feed``)."""
        return CallerWordFeed(self._word_forms(normalize, lexicon))

    def _word_forms(self, normalize: bool, lexicon: Mapping[str, str] | None) -> WordForms:
        """Caller words → their written and spoken forms (each word normalized on its own,
        memoized per text), or as written without ``normalize``."""
        if not normalize or self.text_language is None:
            return WordForms()
        return WordForms.normalized(self.text_language, check_lexicon(lexicon))

    def timed_text(
        self, normalize: bool = True, lexicon: Mapping[str, str] | None = None
    ) -> TimedText:
        """A ``TimedText`` for one enqueued text or fed text stream (word timestamps)."""
        return TimedText(self, normalize, lexicon)

    def spans(self, chunk: PreparedChunk, mapper: WordMapper) -> ChunkSpans:
        """The text spans of a prepared chunk, its lexical words mapped to caller words."""
        ids = [int(i) for i in chunk.token_ids]
        tokens = token_spans(self.preparer.tokenizer.decode, ids, chunk.text)
        return chunk_spans(chunk.text, tokens, mapper)

    def stream(
        self, *, normalize: bool = True, lexicon: Mapping[str, str] | None = None
    ) -> TextStream:
        """Text arriving in fragments → prepared chunks, as ``plan`` would cut the whole."""
        if not normalize or self.text_language is None:
            return TextStream(self.preparer)
        return TextStream(
            self.preparer, text_normalizer(self.text_language, check_lexicon(lexicon))
        )

    def fed_text(
        self,
        *,
        normalize: bool = True,
        lexicon: Mapping[str, str] | None = None,
        timestamps: bool = False,
    ) -> FedText:
        """``prepare`` for text arriving in fragments (``Session.feed``)."""
        timed = self.timed_text(normalize, lexicon) if timestamps else None
        return FedText(self.stream(normalize=normalize, lexicon=lexicon), timed)


def _normalizer_language(name: str) -> str | None:
    """The normalizer's code for ``name``, or None (logged once per model) when no
    normalizer reads that language."""
    try:
        return language_code(name)
    except UnknownLanguageError:
        logger.warning(
            "No text normalization for %r: its text gets upstream's preparation only (the "
            "config's text options and tokenizer); numbers and symbols are read as written",
            name,
        )
        return None


__all__ = ["ChunkTiming", "FedText", "PreparedUtterance", "TextPlanner", "TimedText"]
