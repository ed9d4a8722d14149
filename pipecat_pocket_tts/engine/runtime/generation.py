"""The rules of one chunk's frames, written once for the runtime (``streams``, ``ticks``).

- ``ChunkEnd``: where a chunk's frames stop (its frame limit, or frames after its first EOS);
- ``frame_limit``: that limit (the plan's, the user's bound and the KV room);
- ``draw_noise``: the sampler's noise of one frame;
- ``attention_probe``: which attention logits a frame's step reports (word timestamps);
- ``FadeIn``: the 5 ms fade-in at the very start of a Mimi state's audio.

None of them knows which backend runs. The same seed, text and voice give the same audio on
every path because every path goes through these.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from ..audio.signal import fade_in
from ..backends.base import AttentionProbe
from ..model.config import SAMPLE_RATE

if TYPE_CHECKING:
    from ..backends.base import Backend
    from ..frames import GenerationSettings
    from ..text.prepare import PreparedChunk
    from ..timing.heads import Heads

MIN_FRAMES_BEFORE_EOS = 6
"""EOS logits of the first frames are ignored (upstream does the same)."""

FADE_IN_SAMPLES = SAMPLE_RATE // 200
"""5 ms linear fade-in at the start of a session's audio (hides the fresh decoder's step)."""


class ChunkEnd:
    """Where one chunk's frames stop (upstream's rule).

    At ``limit`` frames, or sooner: the first step from frame ``MIN_FRAMES_BEFORE_EOS`` on
    whose EOS logit is strictly above ``threshold`` (step e) ends the chunk before step
    e + ``frames_after_eos`` (at least 1: the EOS frame itself is kept).
    """

    def __init__(self, limit: int, threshold: float, frames_after_eos: int) -> None:
        self.limit = self.stop_at = limit
        self._threshold = threshold
        self._after_eos = max(1, frames_after_eos)
        self.eos_step: int | None = None

    def step(self, index: int, eos_logit: float) -> bool:
        """Frame ``index``'s step gave ``eos_logit``: whether that frame is the chunk's last."""
        if self.eos_step is None and index >= MIN_FRAMES_BEFORE_EOS and eos_logit > self._threshold:
            self.eos_step = index
            self.stop_at = min(self.limit, index + self._after_eos)
        return self.is_last(index)

    def is_last(self, index: int) -> bool:
        """Whether frame ``index`` is the chunk's last (as far as the steps so far tell)."""
        return index + 1 >= self.stop_at

    @staticmethod
    def certain_frames(limit: int) -> int:
        """Frames a chunk of this limit makes whatever its EOS logits."""
        return min(limit, MIN_FRAMES_BEFORE_EOS + 1)


def frame_limit(plan: PreparedChunk, settings: GenerationSettings, room: int) -> int:
    """Frames this chunk may produce: the plan's limit, the user's bound and KV room."""
    limit = plan.max_frames
    if settings.max_frames is not None:
        limit = min(limit, settings.max_frames)
    return max(1, min(limit, room))


def draw_noise(rng: np.random.Generator, temperature: float, dim: int) -> np.ndarray:
    """Sampler noise [dim] float32: standard normal · √temperature (a draw even at 0)."""
    scale = math.sqrt(max(temperature, 0.0))
    return (rng.standard_normal(dim) * scale).astype(np.float32)


def attention_probe(
    backend: Backend, heads: Heads | None, text_start: int, text_end: int
) -> AttentionProbe | None:
    """The probe of a chunk's text positions [text_start, text_end) for ``heads``; None without
    heads or on a backend that cannot probe (its word times are then estimated)."""
    if heads and backend.capabilities.attention_probe:
        return AttentionProbe(tuple(heads), text_start, text_end)
    return None


class FadeIn:
    """The fade-in of one Mimi state's audio: the first ``FADE_IN_SAMPLES`` samples it ever
    decodes ramp up linearly; everything after passes as it is."""

    def __init__(self) -> None:
        self._started = False

    def __call__(self, samples: np.ndarray) -> np.ndarray:
        """A frame's samples [frame_size] → float32, faded in if it is the first."""
        samples = np.asarray(samples, dtype=np.float32)
        if self._started:
            return samples
        self._started = True
        return fade_in(samples, FADE_IN_SAMPLES)


__all__ = [
    "FADE_IN_SAMPLES",
    "MIN_FRAMES_BEFORE_EOS",
    "ChunkEnd",
    "FadeIn",
    "attention_probe",
    "draw_noise",
    "frame_limit",
]
