"""Mimi decoded the ways the arithmetic tests compare: frame by frame, in blocks, the full-size
random pack's weights, the tiny families' audio in chosen arithmetic, and a frame's level."""

from __future__ import annotations

import functools

import numpy as np
from reference_fixtures import load_family

from pipecat_pocket_tts.devpack import random_weights
from pipecat_pocket_tts.engine.backends.numpy.backend import NumpyBackend
from pipecat_pocket_tts.engine.backends.numpy.layers.mimi import Mimi
from pipecat_pocket_tts.engine.model.config import get_config

#: Least SNR (dB) of any wider arithmetic against fp32 frame by frame (issue 42's bound).
MIN_SNR_DB = 45.0


@functools.cache
def full_mimi_weights() -> dict[str, np.ndarray]:
    """The full-size English Mimi's random weights (the devpack's), without the prefix (read
    only by the tests: one copy for all)."""
    weights = random_weights(get_config("english"), prefix="mimi.")
    return {key[len("mimi.") :]: value for key, value in weights.items()}


def random_latents(frames: int, streams: int = 1, seed: int = 3) -> np.ndarray:
    """Random latents [streams, frames, 32]."""
    return np.random.default_rng(seed).standard_normal((streams, frames, 32)).astype(np.float32)


def quiet_latents(frames: int = 40) -> np.ndarray:
    """Zero latents after 10 loud ones: the quietest stretch random weights give (~7 dB under
    the loud frames, fading)."""
    quiet = random_latents(frames)
    quiet[:, 10:] = 0.0
    return quiet


def frame_by_frame(mimi: Mimi, latents: np.ndarray) -> np.ndarray:
    """latents [B, F, 32] → audio [B, F, frame_size], one ``decode_batch`` a frame."""
    states = [mimi.new_state() for _ in range(latents.shape[0])]
    return np.stack([mimi.decode_batch(states, latents[:, f]) for f in range(latents.shape[1])], 1)


def in_blocks(mimi: Mimi, latents: np.ndarray, sizes: tuple[int, ...]) -> np.ndarray:
    """The same audio decoded in blocks of ``sizes`` frames (``decode_frames``)."""
    states = [mimi.new_state() for _ in range(latents.shape[0])]
    blocks, start = [], 0
    for size in sizes:
        blocks.append(mimi.decode_frames(states, latents[:, start : start + size]))
        start += size
    return np.concatenate(blocks, axis=1)


def tiny_family_audio(name: str, arithmetic: tuple[str, ...]) -> dict[str, np.ndarray]:
    """A tiny family's audio of 16 random latents in each ``arithmetic``, frame by frame."""
    config, weights_path, _, _ = load_family(name)
    frames = random_latents(16, seed=0)[0]
    audio = {}
    for which in arithmetic:
        backend = NumpyBackend.from_files(config, weights_path, mimi_arithmetic=which)
        state = backend.new_mimi_state()
        audio[which] = np.concatenate([backend.decode(state, latent) for latent in frames])
    return audio


def level(audio: np.ndarray) -> np.ndarray:
    """dB per frame of audio [..., frame_size]."""
    return 10 * np.log10(np.mean(audio.astype(np.float64) ** 2, axis=-1) + 1e-30)
