"""One chunk of speech: text prefill, then step → sample → decode until EOS.

The pieces every synthesis path shares (``synthesize``, ``stream`` and sessions all go through
them, so the same seed, text and voice give the same audio everywhere):

- ``TextPlanner``: an utterance's text → prepared, tokenized chunks of ≤ 50 tokens;
- ``generate_chunk``: one chunk's latents (FlowLM prefill, BOS, autoregressive steps, EOS rule);
- ``AudioDecoder``: latents → 24 kHz samples through one continuous Mimi streaming state, with
  a 5 ms fade-in at the very start of its audio.

None of them knows which backend runs: they only call the stages of ``backends.base.Backend``.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .audio import fade_in
from .backends.base import AttentionProbe
from .checks import check_lexicon
from .errors import UnknownLanguageError
from .model.config import FRAME_SIZE, SAMPLE_RATE
from .text.normalize import language_code, normalize_text
from .text.prepare import PreparedChunk, TextPreparer, TextStream
from .timing.heads import Heads
from .timing.word_timing import FrameWords, Word, WordLedger, WordStart
from .timing.words import (
    CallerWord,
    CallerWordStream,
    ChunkUnits,
    WordMapper,
    caller_words,
    chunk_units,
    token_spans,
)

if TYPE_CHECKING:
    from .backends.base import Backend, FlowState, MimiState
    from .model.config import ModelConfig
    from .text.tokenizer import Tokenizer

MIN_FRAMES_BEFORE_EOS = 6
"""EOS logits of the first frames are ignored (upstream does the same)."""

FADE_IN_SAMPLES = SAMPLE_RATE // 200
"""5 ms linear fade-in at the start of a session's audio (hides the fresh decoder's step)."""


@dataclass(frozen=True, eq=False)
class AudioFrame:
    """80 ms of 24 kHz mono audio and where it sits in the output."""

    samples: np.ndarray  # [1920] float32
    frame_index: int  # 0-based within its chunk
    chunk_index: int  # 0-based within its utterance
    utterance_index: int  # which enqueue call (0 for synthesize/stream)
    is_last_in_utterance: bool
    #: With timestamps on: the caller's words that start in this frame (Pipecat needs these),
    words: tuple[WordStart, ...] = ()
    #: and the words whose end this frame makes known, with start and end (subtitles).
    completed_words: tuple[Word, ...] = ()


@dataclass(frozen=True)
class GenerationSettings:
    """Sampling parameters of one utterance."""

    temperature: float
    eos_threshold: float
    max_frames: int | None = None  # the user's bound on frames per chunk


@dataclass(frozen=True, eq=False)
class LatentFrame:
    """One sampled latent of a chunk."""

    latent: np.ndarray  # [latent_dim] float32, normalized space
    frame_index: int
    is_last: bool  # last frame of its chunk
    attention: np.ndarray | None = None  # [heads, chunk tokens] logits when heads were probed


def draw_noise(rng: np.random.Generator, temperature: float, dim: int) -> np.ndarray:
    """Sampler noise [dim] float32: standard normal · √temperature (a draw even at 0)."""
    scale = math.sqrt(max(temperature, 0.0))
    return (rng.standard_normal(dim) * scale).astype(np.float32)


def frame_limit(plan: PreparedChunk, settings: GenerationSettings, room: int) -> int:
    """Frames this chunk may produce: the plan's limit, the user's bound and KV room."""
    limit = plan.max_frames
    if settings.max_frames is not None:
        limit = min(limit, settings.max_frames)
    return max(1, min(limit, room))


def attention_probe(
    backend: Backend, heads: Heads | None, text_start: int, text_end: int
) -> AttentionProbe | None:
    """The probe of a chunk's text positions [text_start, text_end) for ``heads``; None without
    heads or on a backend that cannot probe (its word times are then estimated)."""
    if heads and backend.capabilities.attention_probe:
        return AttentionProbe(tuple(heads), text_start, text_end)
    return None


def generate_chunk(
    backend: Backend,
    voice_state: FlowState,
    plan: PreparedChunk,
    settings: GenerationSettings,
    rng: np.random.Generator,
    cancelled: Callable[[], bool],
    heads: Heads | None = None,
) -> Iterator[LatentFrame]:
    """The latents of one chunk, one per frame, until EOS + frames_after_eos or the limit.

    ``voice_state`` is copied, never changed. The first step is BOS (``step(state, None)``);
    an EOS logit above the threshold counts from frame ``MIN_FRAMES_BEFORE_EOS`` on; after EOS
    at step e the chunk ends before step e + frames_after_eos (upstream's rule). ``cancelled``
    is checked before every step and between the step and the sampler. ``heads`` (on a backend
    whose ``capabilities.attention_probe``): each frame carries those heads' attention logits over
    the chunk's text tokens.
    """
    if cancelled():
        return
    state = voice_state.copy()
    text_start = state.position
    backend.prefill(state, backend.embed_text(plan.token_ids))
    probe = attention_probe(backend, heads, text_start, state.position)
    limit = frame_limit(plan, settings, state.capacity - state.position)
    after_eos = max(1, plan.frames_after_eos)
    latent_dim = backend.config.flow_lm.latent_dim
    stop_at = limit
    eos_step: int | None = None
    previous: np.ndarray | None = None
    for index in range(limit):
        if cancelled():
            return
        out = (
            backend.step(state, previous)
            if probe is None
            else backend.step(state, previous, probe=probe)
        )  # type: ignore[call-arg]
        if (
            eos_step is None
            and index >= MIN_FRAMES_BEFORE_EOS
            and out.eos_logit > settings.eos_threshold
        ):
            eos_step = index
            stop_at = min(limit, index + after_eos)
        if cancelled():
            return
        latent = backend.sample(out.hidden, draw_noise(rng, settings.temperature, latent_dim))
        yield LatentFrame(
            latent=latent,
            frame_index=index,
            is_last=index + 1 >= stop_at,
            attention=out.attention,
        )
        if index + 1 >= stop_at:
            return
        previous = latent


class AudioDecoder:
    """Mimi decoding with one streaming state for all the audio of a session.

    The state is never reset between chunks or utterances (no seam); the first
    ``FADE_IN_SAMPLES`` samples it ever produces get a linear fade-in.
    """

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self._state: MimiState = backend.new_mimi_state()
        self._started = False

    def decode(self, latent: np.ndarray) -> np.ndarray:
        """Latent [latent_dim] → samples [1920] float32."""
        samples = np.asarray(self._backend.decode(self._state, latent), dtype=np.float32)
        if not self._started:
            self._started = True
            samples = fade_in(samples, FADE_IN_SAMPLES)
        return samples


class TimedText:
    """The caller's words of one text (an enqueued text, or a fed stream), mapped onto its
    chunks' units for word timestamps.

    ``add`` takes the caller's text (all of it, or fragments as they come) with the chunks it
    released; ``chunk`` maps each chunk, in order, when its frames are generated (off the
    caller's thread). ``ledger`` is what the word timing releases words from.
    """

    def __init__(self, planner: TextPlanner, normalize: bool, lexicon: Mapping[str, str] | None):
        self._planner = planner
        self._stream = planner.word_stream(normalize=normalize, lexicon=lexicon)
        self._mapper = WordMapper()
        self.ledger = WordLedger(self._mapper.words)
        self._released = 0  # chunks released for this text
        self._final = False  # the text is complete
        self._mapped = 0  # chunks mapped so far

    @property
    def words(self) -> list[CallerWord]:
        return self._mapper.words

    def add(self, text: str, chunks: list[PreparedChunk], *, final: bool) -> None:
        """More caller text and the chunks it released; ``final``: the text is complete."""
        self._mapper.add(self._stream.push(text))
        if final:
            self._mapper.add(self._stream.flush())
        self._released += len(chunks)
        self._final = final

    def units(self, chunk: PreparedChunk) -> ChunkUnits:
        """The units of the next chunk (chunks must come in text order)."""
        self._mapped += 1
        return self._planner.units(chunk, self._mapper)

    def chunk(self, chunk: PreparedChunk, utterance: int) -> ChunkTiming:
        """The word timing input of the next chunk's frames (chunks in text order)."""
        units = self.units(chunk)
        ends_text = self._final and self._mapped >= self._released
        return ChunkTiming(utterance, self.ledger, units, ends_text)


@dataclass(frozen=True, eq=False)
class ChunkTiming:
    """One chunk of a timed utterance: builds each of its frames' ``FrameWords``."""

    utterance: int
    ledger: WordLedger
    units: ChunkUnits
    ends_text: bool

    def frame(self, frame: LatentFrame, *, last_in_utterance: bool) -> FrameWords:
        return FrameWords(
            self.utterance,
            self.ledger,
            self.units,
            frame.attention,
            first_in_chunk=frame.frame_index == 0,
            last_in_chunk=frame.is_last,
            last_in_utterance=last_in_utterance,
            ends_text=self.ends_text,
        )


class TextPlanner:
    """An utterance's text → prepared chunks: normalize, filter, chunk, prepare, tokenize."""

    def __init__(
        self, config: ModelConfig, tokenizer: Tokenizer, *, text_language: str | None = None
    ) -> None:
        self.config = config
        self.preparer = TextPreparer.for_config(tokenizer, config)
        #: What the normalizer reads the text as: the pack's language unless a variant of it
        #: is asked for ("pt-BR" on the portuguese pack).
        self.text_language = language_code(text_language or config.name)

    def with_text_language(self, text_language: str | None) -> TextPlanner:
        """This planner, normalizing as ``text_language`` (shares the tokenizer and preparer)."""
        if text_language is None:
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
        if normalize:
            text = normalize_text(text, self.text_language, lexicon=lexicon)
        return self.preparer.split(text, continues_sentence=continues_sentence)

    def has_speech(
        self, text: str, *, normalize: bool = True, lexicon: Mapping[str, str] | None = None
    ) -> bool:
        """Whether ``text`` gives the model anything to say once normalized and filtered
        (False for "👍", "***" or a script the tokenizer cannot read). A Latin letter or digit
        always does, so such text is not planned; other text is, in time that grows with its
        length (plan long text off an event loop)."""
        if any(c.isascii() and c.isalnum() for c in text):
            return True
        return bool(self.plan(text, normalize=normalize, lexicon=lexicon or None))

    def words(
        self, text: str, *, normalize: bool = True, lexicon: Mapping[str, str] | None = None
    ) -> list[CallerWord]:
        """The caller's words of ``text``, each with the keys of its spoken form."""
        return caller_words(
            text,
            self._spoken_form(normalize, lexicon),
            spoken_mid_line=self._spoken_form(normalize, lexicon, continues_line=True),
        )

    def word_stream(
        self, *, normalize: bool = True, lexicon: Mapping[str, str] | None = None
    ) -> CallerWordStream:
        """``words`` for text arriving in fragments (``Session.feed``)."""
        return CallerWordStream(
            self._spoken_form(normalize, lexicon),
            self._spoken_form(normalize, lexicon, continues_line=True),
        )

    def _spoken_form(
        self, normalize: bool, lexicon: Mapping[str, str] | None, *, continues_line: bool = False
    ) -> Callable[[str], str] | None:
        """One word → its spoken form on its own (memoized per call site), or None;
        ``continues_line``: the word does not start a line."""
        if not normalize:
            return None
        language = self.text_language
        lexicon = check_lexicon(lexicon)
        forms: dict[str, str] = {}

        def spoken(word: str) -> str:
            if word not in forms:
                forms[word] = normalize_text(
                    word, language, lexicon=lexicon, continues_line=continues_line
                )
            return forms[word]

        return spoken

    def timed_text(
        self, normalize: bool = True, lexicon: Mapping[str, str] | None = None
    ) -> TimedText:
        """A ``TimedText`` for one enqueued text or fed text stream (word timestamps)."""
        return TimedText(self, normalize, lexicon)

    def units(self, chunk: PreparedChunk, mapper: WordMapper) -> ChunkUnits:
        """The text units of a prepared chunk, its lexical words mapped to caller words."""
        ids = [int(i) for i in chunk.token_ids]
        spans = token_spans(self.preparer.tokenizer.decode, ids, chunk.text)
        return chunk_units(chunk.text, spans, mapper)

    def stream(
        self, *, normalize: bool = True, lexicon: Mapping[str, str] | None = None
    ) -> TextStream:
        """Text arriving in fragments → prepared chunks, as ``plan`` would cut the whole."""
        if not normalize:
            return TextStream(self.preparer)
        language = self.text_language
        lexicon = check_lexicon(lexicon)
        return TextStream(
            self.preparer,
            lambda text, mid: normalize_text(text, language, lexicon=lexicon, continues_line=mid),
        )


__all__ = [
    "FADE_IN_SAMPLES",
    "FRAME_SIZE",
    "MIN_FRAMES_BEFORE_EOS",
    "AudioDecoder",
    "AudioFrame",
    "GenerationSettings",
    "LatentFrame",
    "TextPlanner",
    "TimedText",
    "draw_noise",
    "frame_limit",
    "generate_chunk",
]
