"""The values that travel with synthesis: an utterance's sampling settings, each chunk's latent
frames, and the 80 ms audio frames a session hands out."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .timing.word_timing import Word, WordStart


@dataclass(frozen=True, eq=False)
class AudioFrame:
    """80 ms of 24 kHz mono audio (at speed 1) and where it sits in the output."""

    samples: np.ndarray  # [n] float32: 1920, but shorter or longer at a speed ≠ 1 or in a pause
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


__all__ = ["AudioFrame", "GenerationSettings", "LatentFrame"]
