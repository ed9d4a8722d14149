"""The values that travel with synthesis: an utterance's sampling settings, each chunk's latent
frames, and the 80 ms audio frames a session hands out."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .timing.word_timing import Word, WordStart


@dataclass(frozen=True, eq=False)
class AudioFrame:
    """80 ms of 24 kHz mono audio (at speed 1) and where it sits in the output."""

    # Float32 [n]: 1920, but shorter or longer at a speed other than 1 or in a pause.
    samples: np.ndarray
    # Counted from 0 within its chunk.
    frame_index: int
    # Counted from 0 within its utterance.
    chunk_index: int
    # Which enqueue call made it (0 for synthesize and stream).
    utterance_index: int
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
    # The user's bound on frames per chunk.
    max_frames: int | None = None


@dataclass(frozen=True, eq=False)
class LatentFrame:
    """One sampled latent of a chunk."""

    # Float32 [latent_dim], in the normalized space.
    latent: np.ndarray
    frame_index: int
    # The last frame of its chunk.
    is_last: bool
    # Logits [heads, chunk tokens] when heads were probed.
    attention: np.ndarray | None = None


__all__ = ["AudioFrame", "GenerationSettings", "LatentFrame"]
