"""Word timestamps from the model itself: attention of a few FlowLM heads drives a word pointer.

The method of ``pocket-tts-timestamped`` 1.4.0 (MIT), re-expressed from its description:

- At every generated frame, each configured (layer, query head) pair's attention logits over the
  chunk's text-token positions are softmaxed over those positions only, spread over the text
  *units* (lexical words and punctuation runs) by the token → unit overlap matrix, and averaged
  over the heads: one score per unit.
- A monotonic pointer opens the first word at the first voiced frame; at a voiced frame, the open
  word is closed and the next one opened when the next word scores above the open one, or when
  the open one scores below ``NEXT_WORD_ATTENTION`` and any later word scores above it.
- At a quiet frame (RMS ≤ ``SILENCE_RMS``) the open word closes when any later unit scores
  above it, or when it is the last word and no written punctuation follows it; the next voiced
  frame opens the next word.
- At the end of the chunk the open word closes; words never reached get estimated times.

Times are in frames of the chunk (a word closed at frame f ends where frame f starts). The heads
per checkpoint are data (``timestamp_heads.json``, from the peer's configs). A pack with none
(a custom ``config.json``, an unknown checkpoint, heads that do not fit the model), or a
backend that cannot expose attention (CoreML), gets the fallback: each chunk's words spread
over its voiced frames by their spoken length, marked ``estimated``. Words are never missing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING

import numpy as np

from .text.words import ChunkUnits

if TYPE_CHECKING:
    from .config import ModelConfig

SILENCE_RMS = 1e-3
"""A frame whose RMS is at most this is quiet."""

_SILENCE_RMS_F32 = float(np.float32(SILENCE_RMS))  # the threshold as float32 holds it (peer)

NEXT_WORD_ATTENTION = 1e-3
"""Below this score the open word gives way to any later word that scores above it."""

Heads = tuple[tuple[int, int], ...]
"""(layer, query head) pairs, 0-based."""


@cache
def _head_table() -> dict[str, Heads]:
    text = resources.files(__package__).joinpath("timestamp_heads.json").read_text("utf-8")
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


def is_voiced(samples: np.ndarray) -> bool:
    """Whether a frame of audio [n] is louder than ``SILENCE_RMS``."""
    x = np.asarray(samples, np.float32).reshape(-1)
    return x.size > 0 and float(x @ x) > _SILENCE_RMS_F32**2 * x.size


def unit_scores(logits: np.ndarray, token_to_unit: np.ndarray) -> np.ndarray:
    """Attention logits [heads, tokens] → mean over heads of the softmax spread on units [U]."""
    z = np.asarray(logits, np.float32)
    z = np.exp(z - z.max(axis=-1, keepdims=True))
    z /= z.sum(axis=-1, keepdims=True)
    return (z @ token_to_unit).sum(axis=0) / np.float32(z.shape[0])


@dataclass(frozen=True)
class UnitTiming:
    """When one word unit of a chunk is said, in (possibly fractional) frames of the chunk."""

    unit: int  # index in ChunkUnits.units
    start: float
    end: float
    estimated: bool


class WordPointer:
    """The monotonic word pointer over one chunk's units (see the module docstring)."""

    def __init__(self, units: ChunkUnits) -> None:
        self._units = units.units
        self._words = units.word_units
        self._next = 0  # position in _words of the next word to open
        self._open: int | None = None  # position in _words of the open word
        self._open_start = 0

    def frame(self, scores: np.ndarray, voiced: bool, index: int) -> list[UnitTiming]:
        """Advance on frame ``index`` with unit scores [U]; return the words it closes."""
        if not voiced:
            return self._quiet(scores, index)
        if self._open is None:
            if self._next < len(self._words):
                self._open_next(index)
            return []
        if self._next >= len(self._words) or not self._next_dominates(scores):
            return []
        closed = self._close(index)
        self._open_next(index)
        return [closed]

    def finish(self, frames: int) -> list[UnitTiming]:
        """The chunk ended after ``frames`` frames: close the open word, estimate the rest."""
        out = [self._close(frames)] if self._open is not None else []
        out += [
            UnitTiming(self._words[p], frames, frames, True)
            for p in range(self._next, len(self._words))
        ]
        self._next = len(self._words)
        return out

    def _quiet(self, scores: np.ndarray, index: int) -> list[UnitTiming]:
        if self._open is None:
            return []
        unit = self._words[self._open]
        later = scores[unit + 1 :]
        louder_later = later.size > 0 and float(later.max()) > float(scores[unit])
        last_word = self._open == len(self._words) - 1
        written_after = any(not u.is_word and not u.synthetic for u in self._units[unit + 1 :])
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

    def _open_next(self, index: int) -> None:
        self._open = self._next
        self._open_start = index
        self._next += 1

    def _close(self, index: int) -> UnitTiming:
        assert self._open is not None
        timing = UnitTiming(self._words[self._open], self._open_start, index, False)
        self._open = None
        return timing


def estimate_units(units: ChunkUnits, voiced: list[bool]) -> list[UnitTiming]:
    """The fallback: a chunk's words spread over its voiced frames by spoken length."""
    words = units.word_units
    if not words:
        return []
    frames = len(voiced)
    lit = [i for i, v in enumerate(voiced) if v]
    first, last = (lit[0], lit[-1] + 1) if lit else (0, frames)
    weights = np.array([units.units[u].end - units.units[u].begin + 1 for u in words], float)
    edges = first + (last - first) * np.concatenate([[0.0], np.cumsum(weights) / weights.sum()])
    return [UnitTiming(u, float(edges[k]), float(edges[k + 1]), True) for k, u in enumerate(words)]


class ChunkAligner:
    """Word-unit times of one chunk, fed frame by frame (attention path or fallback)."""

    def __init__(self, units: ChunkUnits, *, attention: bool) -> None:
        self.units = units
        self._pointer = WordPointer(units) if attention else None
        self._voiced: list[bool] = []

    @property
    def estimated(self) -> bool:
        return self._pointer is None

    def frame(self, samples: np.ndarray, logits: np.ndarray | None) -> list[UnitTiming]:
        """One decoded frame [1920] and its heads' logits [heads, tokens] (None: fallback)."""
        voiced = is_voiced(samples)
        index = len(self._voiced)
        self._voiced.append(voiced)
        if self._pointer is None or logits is None:
            return []
        return self._pointer.frame(unit_scores(logits, self.units.token_to_unit), voiced, index)

    def finish(self) -> list[UnitTiming]:
        """The chunk's last frame was fed: the remaining word units."""
        if self._pointer is None:
            return estimate_units(self.units, self._voiced)
        return self._pointer.finish(len(self._voiced))


__all__ = [
    "NEXT_WORD_ATTENTION",
    "SILENCE_RMS",
    "ChunkAligner",
    "Heads",
    "UnitTiming",
    "WordPointer",
    "estimate_units",
    "heads_fit",
    "heads_for",
    "is_voiced",
    "unit_scores",
]
