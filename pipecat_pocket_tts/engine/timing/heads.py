"""Word timestamps from the model itself: attention of a few FlowLM heads drives a word pointer.

The method of ``pocket-tts-timestamped`` 1.4.0 (MIT), re-expressed from its description:

- At every generated frame, each configured (layer, query head) pair's attention logits over the
  chunk's text-token positions are softmaxed over those positions only, spread over the text
  *spans* (lexical words and punctuation runs) by the token → span overlap matrix, and averaged
  over the heads: one score per span.
- A monotonic pointer opens the first word at the first voiced frame; at a voiced frame, the open
  word is closed and the next one opened when the next word scores above the open one, or when
  the open one scores below ``NEXT_WORD_ATTENTION`` and any later word scores above it.
- At a quiet frame (RMS ≤ ``SILENCE_RMS``) the open word closes when any later span scores
  above it, or when it is the last word and no written punctuation follows it; the next voiced
  frame opens the next word.
- At the end of the chunk the open word closes; words never reached get estimated times.

The pointer reports each word twice: a ``SpanStart`` on the frame that opens it and a
``SpanTiming`` (start and end) on the frame that closes it. Times are in frames of the chunk (a
word opened at frame f starts where frame f starts; closed at frame f, it ends there). The heads
per checkpoint are data (``heads.json`` beside this module, from the peer's configs).

A pack with none (a custom ``config.json``, an unknown checkpoint, heads that do not fit the
model), or a backend that cannot expose attention (CoreML), gets the fallback (``RateAligner``):
the chunk's first voiced frame starts its first word, and each next word starts its
predecessor's spoken length (characters + 1) × a speaking rate later; at the chunk's last frame
the words left are spread over what remains of its voiced frames by spoken length. The rate
starts at ``FRAMES_PER_CHARACTER`` and follows the session's speech (``SpeakingRate``). All
marked ``estimated``; words are never missing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING

import numpy as np

from .words import ChunkSpans

if TYPE_CHECKING:
    from ..backends.base import Backend
    from ..model.config import ModelConfig

SILENCE_RMS = 1e-3
"""A frame whose RMS is at most this is quiet."""

# The threshold as float32 holds it, as the peer compares it.
_SILENCE_RMS_F32 = float(np.float32(SILENCE_RMS))

NEXT_WORD_ATTENTION = 1e-3
"""Below this score the open word gives way to any later word that scores above it."""

FRAMES_PER_CHARACTER = 0.8
"""The fallback's speaking rate before the session has spoken: frames (80 ms) per character of
spoken text, a word's trailing space included. Read English runs at about 165 words a minute,
2.75 words a second; an English word is 4.7 letters on average, 5.7 characters with its space:
15.7 characters a second, 12.5 / 15.7 ≈ 0.8 frames per character."""

RATE_PRIOR_CHARACTERS = 60.0
"""How many characters the initial rate weighs against the speech the session has produced."""

Heads = tuple[tuple[int, int], ...]
"""(layer, query head) pairs, 0-based."""


@cache
def _head_table() -> dict[str, Heads]:
    text = resources.files(__package__).joinpath("heads.json").read_text("utf-8")
    return {
        name: tuple((int(layer), int(head)) for layer, head in pairs)
        for name, pairs in json.loads(text)["heads"].items()
    }


def heads_for(config: ModelConfig) -> Heads | None:
    """The timestamp heads of ``config``'s checkpoint, or None (then times are estimated).

    Only shipped checkpoints have them: a config without hub weights (a custom ``config.json``)
    gets none, and so does one whose layers or heads the table's entries do not fit.
    """
    if config.weights is None and config.weights_without_voice_cloning is None:
        return None
    heads = _head_table().get(config.name)
    if heads is None or not heads_fit(heads, config):
        return None
    return heads


def heads_fit(heads: Heads, config: ModelConfig) -> bool:
    """Whether every (layer, head) exists in ``config``'s FlowLM transformer."""
    tr = config.flow_lm.transformer
    return bool(heads) and all(
        0 <= layer < tr.num_layers and 0 <= head < tr.num_heads for layer, head in heads
    )


def check_heads(heads: Heads | None, config: ModelConfig, backend: Backend) -> Heads | None:
    """``heads`` as (int, int) pairs if ``config``'s model has them and ``backend`` reads
    attention; raises ``ValueError`` saying which does not hold.

    Args:
        heads: (layer, head) pairs, or None (word times are then estimated).
        config: The model whose FlowLM transformer the pairs must exist in.
        backend: The backend that must read attention for them.

    Returns:
        The pairs as a tuple of int pairs, or None.
    """
    if heads is None:
        return None
    heads = tuple((int(layer), int(head)) for layer, head in heads)
    if not heads_fit(heads, config):
        raise ValueError(
            f"timestamp heads {list(heads)} do not all exist in {config.name!r} "
            f"({config.num_layers} layers × {config.flow_lm.transformer.num_heads} heads)"
        )
    if not backend.capabilities.attention_probe:
        raise ValueError(
            f"the {backend.name} backend cannot read attention: its word times are estimated"
        )
    return heads


def is_voiced(samples: np.ndarray) -> bool:
    """Whether a frame of audio [n] is louder than ``SILENCE_RMS``."""
    x = np.asarray(samples, np.float32).reshape(-1)
    return x.size > 0 and float(x @ x) > _SILENCE_RMS_F32**2 * x.size


def span_scores(logits: np.ndarray, token_to_span: np.ndarray) -> np.ndarray:
    """Attention logits [heads, tokens] → mean over heads of the softmax spread on spans [U]."""
    z = np.asarray(logits, np.float32)
    z = np.exp(z - z.max(axis=-1, keepdims=True))
    z /= z.sum(axis=-1, keepdims=True)
    return (z @ token_to_span).sum(axis=0) / np.float32(z.shape[0])


@dataclass(frozen=True)
class SpanStart:
    """When one word span of a chunk starts, in (possibly fractional) frames of the chunk."""

    span: int
    """Its index in ``ChunkSpans.spans``."""
    start: float
    estimated: bool


@dataclass(frozen=True)
class SpanTiming:
    """When one word span of a chunk is said, in (possibly fractional) frames of the chunk."""

    # Its index in ChunkSpans.spans.
    span: int
    start: float
    end: float
    estimated: bool


SpanEvent = SpanStart | SpanTiming
"""A span starts, or ends (with its start again); a span's start always comes first."""


class WordPointer:
    """The monotonic word pointer over one chunk's spans (see the module docstring)."""

    def __init__(self, spans: ChunkSpans) -> None:
        self._spans = spans.spans
        self._words = spans.word_spans
        # Positions in ``_words``: the next word to open, and the open word.
        self._next = 0
        self._open: int | None = None
        self._open_start = 0

    def frame(self, scores: np.ndarray, voiced: bool, index: int) -> list[SpanEvent]:
        """Advance on frame ``index`` with span scores [U]; the words it closes, then opens."""
        if not voiced:
            return self._quiet(scores, index)
        if self._open is None:
            return [self._open_next(index)] if self._next < len(self._words) else []
        if self._next >= len(self._words) or not self._next_dominates(scores):
            return []
        return [self._close(index), self._open_next(index)]

    def finish(self, frames: int) -> list[SpanEvent]:
        """The chunk ended after ``frames`` frames: close the open word, estimate the rest."""
        out: list[SpanEvent] = [self._close(frames)] if self._open is not None else []
        for p in range(self._next, len(self._words)):
            span = self._words[p]
            out += [SpanStart(span, frames, True), SpanTiming(span, frames, frames, True)]
        self._next = len(self._words)
        return out

    def _quiet(self, scores: np.ndarray, index: int) -> list[SpanEvent]:
        if self._open is None:
            return []
        span = self._words[self._open]
        later = scores[span + 1 :]
        louder_later = later.size > 0 and float(later.max()) > float(scores[span])
        last_word = self._open == len(self._words) - 1
        written_after = any(not u.is_word and not u.synthetic for u in self._spans[span + 1 :])
        if louder_later or (last_word and not written_after):
            return [self._close(index)]
        return []

    def _next_dominates(self, scores: np.ndarray) -> bool:
        assert self._open is not None
        current = float(scores[self._words[self._open]])
        if float(scores[self._words[self._next]]) > current:
            return True
        if current >= NEXT_WORD_ATTENTION:
            return False
        return any(float(scores[u]) > current for u in self._words[self._next + 1 :])

    def _open_next(self, index: int) -> SpanStart:
        self._open = self._next
        self._open_start = index
        self._next += 1
        return SpanStart(self._words[self._open], index, False)

    def _close(self, index: int) -> SpanTiming:
        assert self._open is not None
        timing = SpanTiming(self._words[self._open], self._open_start, index, False)
        self._open = None
        return timing


class SpeakingRate:
    """Frames per spoken character, learned from the chunks a session has spoken.

    Starts at ``FRAMES_PER_CHARACTER`` (weighing ``RATE_PRIOR_CHARACTERS``) and moves to the
    voice's own rate as chunks finish: (prior + voiced frames) / (prior + spoken characters).
    """

    def __init__(self, frames_per_character: float = FRAMES_PER_CHARACTER) -> None:
        self._frames = frames_per_character * RATE_PRIOR_CHARACTERS
        self._characters = RATE_PRIOR_CHARACTERS

    @property
    def frames_per_character(self) -> float:
        return self._frames / self._characters

    def observe(self, characters: float, frames: float) -> None:
        """A chunk said ``characters`` of spoken text over ``frames`` voiced frames."""
        if characters > 0 and frames > 0:
            self._characters += characters
            self._frames += frames


class RateAligner:
    """The fallback for one chunk, frame by frame (see the module docstring): words start at
    a speaking rate from the first voiced frame; at the end, the words left share the rest."""

    def __init__(self, spans: ChunkSpans, frames_per_character: float) -> None:
        self._words = spans.word_spans
        lengths = [spans.spans[u].end - spans.spans[u].begin + 1 for u in self._words]
        self._lengths = np.asarray(lengths, float)
        self._offsets = frames_per_character * np.concatenate([[0.0], np.cumsum(lengths)])
        # The first voiced frame, and the frame after the last voiced one.
        self._first: int | None = None
        self._voiced_end = 0
        self._frames = 0
        # The position in ``_words`` of the next word to start, and the start of the
        # open word (at ``_next - 1``).
        self._next = 0
        self._open_start = 0.0

    @property
    def characters(self) -> float:
        """The chunk's spoken length (its words' characters and spaces)."""
        return float(self._lengths.sum())

    @property
    def voiced_frames(self) -> int:
        """Frames from the first voiced frame to the end of the last one, so far."""
        return 0 if self._first is None else self._voiced_end - self._first

    def frame(self, voiced: bool) -> list[SpanEvent]:
        """One more frame: the words that start in it (each closing the one before)."""
        index = self._frames
        self._frames += 1
        if voiced:
            self._first = index if self._first is None else self._first
            self._voiced_end = index + 1
        out: list[SpanEvent] = []
        while self._first is not None and self._next < len(self._words):
            start = max(self._first + float(self._offsets[self._next]), self._open_start)
            if start >= index + 1:
                break
            out += self._start(start)
        return out

    def finish(self) -> list[SpanEvent]:
        """The chunk's last frame was fed: the open word and the words left share the rest
        of the voiced frames by spoken length (all frames if none was voiced)."""
        is_open = self._next > 0
        positions = range(self._next - 1 if is_open else self._next, len(self._words))
        if not positions:
            return []
        begin = self._open_start if is_open else float(self._first or 0)
        stop = max(float(self._voiced_end if self._first is not None else self._frames), begin)
        rest = self._lengths[positions.start :]
        edges = begin + (stop - begin) * np.concatenate([[0.0], np.cumsum(rest) / rest.sum()])
        out: list[SpanEvent] = []
        for k, p in enumerate(positions):
            span, start, end = self._words[p], float(edges[k]), float(edges[k + 1])
            if k or not is_open:
                out.append(SpanStart(span, start, True))
            out.append(SpanTiming(span, start, end, True))
        self._next = len(self._words)
        return out

    def _start(self, start: float) -> list[SpanEvent]:
        out: list[SpanEvent] = []
        if self._next:
            out.append(SpanTiming(self._words[self._next - 1], self._open_start, start, True))
        out.append(SpanStart(self._words[self._next], start, True))
        self._open_start = start
        self._next += 1
        return out


class ChunkAligner:
    """Word-span starts and ends of one chunk, fed frame by frame (attention or fallback)."""

    def __init__(self, spans: ChunkSpans, *, attention: bool, rate: SpeakingRate | None = None):
        self.spans = spans
        self._rate = rate
        self._pointer = WordPointer(spans) if attention else None
        self._fallback = RateAligner(spans, (rate or SpeakingRate()).frames_per_character)
        self._frames = 0

    @property
    def estimated(self) -> bool:
        return self._pointer is None

    def frame(self, samples: np.ndarray, logits: np.ndarray | None) -> list[SpanEvent]:
        """One decoded frame [1920] and its heads' logits [heads, tokens] (None: fallback)."""
        voiced = is_voiced(samples)
        index = self._frames
        self._frames += 1
        if self._pointer is None:
            return self._fallback.frame(voiced)
        if logits is None:
            raise RuntimeError("a chunk aligned by attention needs every frame's logits")
        return self._pointer.frame(span_scores(logits, self.spans.token_to_span), voiced, index)

    def finish(self) -> list[SpanEvent]:
        """The chunk's last frame was fed: the remaining starts and ends."""
        if self._pointer is not None:
            return self._pointer.finish(self._frames)
        if self._rate is not None:
            self._rate.observe(self._fallback.characters, self._fallback.voiced_frames)
        return self._fallback.finish()


__all__ = [
    "FRAMES_PER_CHARACTER",
    "NEXT_WORD_ATTENTION",
    "RATE_PRIOR_CHARACTERS",
    "SILENCE_RMS",
    "ChunkAligner",
    "Heads",
    "RateAligner",
    "SpanEvent",
    "SpanStart",
    "SpanTiming",
    "SpeakingRate",
    "WordPointer",
    "check_heads",
    "heads_fit",
    "heads_for",
    "is_voiced",
    "span_scores",
]
