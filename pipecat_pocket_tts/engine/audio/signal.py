"""Signal work on float samples: channel mixing, resampling, fades and the output polish filter.

Samples are float32 in [-1, 1]. Mono audio is ``[n]``; multichannel audio is ``[n, channels]``.
Nothing here imports scipy: the filters run as block-wise linear recurrences in NumPy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from ..errors import CloneAudioError


def to_mono(samples: np.ndarray) -> np.ndarray:
    """[n], [n, channels] or [channels, n] → [n] float32, the mean of the channels.

    In 2-D input the shorter axis is the channel axis (a recording has more frames than
    channels); other shapes raise ``CloneAudioError`` (a ``ValueError``).
    """
    audio = np.asarray(samples, dtype=np.float32)
    if audio.ndim == 1:
        return audio
    if audio.ndim == 2:
        channel_axis = 1 if audio.shape[1] <= audio.shape[0] else 0
        return audio.mean(axis=channel_axis, dtype=np.float32)
    raise CloneAudioError(
        f"audio samples must be [n], [n, channels] or [channels, n], got shape {audio.shape}"
    )


def resample(samples: np.ndarray, from_sr: int, to_sr: int) -> np.ndarray:
    """Resample [n] or [n, channels] float audio with soxr (high quality) → float32."""
    audio = np.asarray(samples, dtype=np.float32)
    if from_sr <= 0 or to_sr <= 0:
        raise ValueError(f"sample rates must be positive, got {from_sr} → {to_sr}")
    if from_sr == to_sr or audio.shape[0] == 0:
        return audio.copy()
    import soxr

    return np.asarray(soxr.resample(audio, from_sr, to_sr, quality="HQ"), dtype=np.float32)


def fade_in(samples: np.ndarray, n: int) -> np.ndarray:
    """A copy of ``samples`` [n_samples] with a linear fade-in over the first ``n`` samples.

    Gains are 0, 1/n, …, (n-1)/n, so the very first sample is silent.
    """
    audio = np.array(samples, dtype=np.float32)
    count = min(max(int(n), 0), audio.shape[0])
    if count:
        ramp = np.arange(count, dtype=np.float32) / np.float32(n)
        audio[:count] *= ramp if audio.ndim == 1 else ramp[:, None]
    return audio


# -- post-processing -------------------------------------------------------------------------

HIGH_PASS_HZ = 80.0
SHELF_HZ = 6_000.0
SHELF_GAIN_DB = -3.0
SHELF_Q = 0.707


def post_process(samples: np.ndarray, sample_rate: int = 24_000) -> np.ndarray:
    """The buffered-output polish of FluidAudio's PocketTTS: [n] float → [n] float32.

    1. One-pole high-pass at 80 Hz (DC and rumble): y[i] = α(y[i-1] + x[i] - x[i-1]) for
       i ≥ 1 with y[0] = 0 as the starting state; the first sample passes unchanged.
    2. RBJ high shelf at 6 kHz, -3 dB, Q 0.707 (tames hiss and sibilance), zero initial state.
    """
    x = np.asarray(samples, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"post_process takes mono samples [n], got shape {x.shape}")
    if x.size == 0:
        return x.astype(np.float32)
    high_passed = _high_pass(x, sample_rate)
    b, a = high_shelf_coefficients(sample_rate)
    return _biquad(high_passed, b, a).astype(np.float32)


def _high_pass(x: np.ndarray, sample_rate: int) -> np.ndarray:
    rc = 1.0 / (2.0 * math.pi * HIGH_PASS_HZ)
    dt = 1.0 / sample_rate
    alpha = rc / (rc + dt)
    drive = np.zeros_like(x)
    drive[1:] = alpha * np.diff(x)
    y = _all_pole(drive, (-alpha,))
    y[0] = x[0]
    return y


def high_shelf_coefficients(
    sample_rate: int,
    frequency: float = SHELF_HZ,
    gain_db: float = SHELF_GAIN_DB,
    q: float = SHELF_Q,
) -> tuple[tuple[float, float, float], tuple[float, float]]:
    """RBJ cookbook high-shelf biquad, normalized: ((b0, b1, b2), (a1, a2))."""
    amp = 10.0 ** (gain_db / 40.0)
    w0 = 2.0 * math.pi * frequency / sample_rate
    cos_w0 = math.cos(w0)
    alpha = math.sin(w0) / (2.0 * q)
    root = 2.0 * math.sqrt(amp) * alpha
    b0 = amp * ((amp + 1) + (amp - 1) * cos_w0 + root)
    b1 = -2.0 * amp * ((amp - 1) + (amp + 1) * cos_w0)
    b2 = amp * ((amp + 1) + (amp - 1) * cos_w0 - root)
    a0 = (amp + 1) - (amp - 1) * cos_w0 + root
    a1 = 2.0 * ((amp - 1) - (amp + 1) * cos_w0)
    a2 = (amp + 1) - (amp - 1) * cos_w0 - root
    return (b0 / a0, b1 / a0, b2 / a0), (a1 / a0, a2 / a0)


def _biquad(x: np.ndarray, b: Sequence[float], a: Sequence[float]) -> np.ndarray:
    """Biquad with zero initial state (same output as Direct Form II transposed)."""
    drive = b[0] * x
    drive[1:] += b[1] * x[:-1]
    drive[2:] += b[2] * x[:-2]
    return _all_pole(drive, a)


_BLOCK = 128


def _all_pole(v: np.ndarray, a: Sequence[float], block: int = _BLOCK) -> np.ndarray:
    """y[i] = v[i] - Σ_k a[k]·y[i-1-k] with zero initial state; v float64 [n] → [n].

    Vectorized by blocks: inside a block the output is (zero-state response, a Toeplitz
    product) + (response to the state entering the block); only the p-value state is carried
    from block to block in a short Python loop (n / block iterations).
    """
    order = len(a)
    n = v.shape[0]
    blocks = -(-n // block)
    padded = np.zeros(blocks * block)
    padded[:n] = v
    drive = padded.reshape(blocks, block)

    toeplitz, from_state = _block_matrices(tuple(float(c) for c in a), block)
    # Shape [blocks, block].
    zero_state = drive @ toeplitz.T

    # State entering each block: (y[-1], y[-2], …) of the previous block's output. A scalar
    # recursion over blocks, in plain floats (numpy call overhead dominates at this size).
    last = block - 1 - np.arange(order)
    # The zero-state ends (y[B-1], y[B-2], …) of each block.
    ends = zero_state[:, last].tolist()
    # Shape [order][order]: how an entering state reaches those ends.
    carry = from_state[last].tolist()
    state = [0.0] * order
    entering = []
    for end in ends:
        entering.append(state)
        state = [
            e + sum(c * s for c, s in zip(row, state, strict=True))
            for e, row in zip(end, carry, strict=True)
        ]
    # Shape [blocks, order].
    states = np.array(entering)
    return (zero_state + states @ from_state.T).reshape(-1)[:n]


@lru_cache(maxsize=16)
def _block_matrices(a: tuple[float, ...], block: int) -> tuple[np.ndarray, np.ndarray]:
    """Zero-state response matrix [block, block] (lower-triangular Toeplitz of the impulse
    response) and responses to unit initial states [block, order]. Read-only, cached."""
    order = len(a)

    def run(drive0: float, history: list[float]) -> np.ndarray:
        # Here past[k] = y[i-1-k].
        past = list(history)
        out = np.empty(block)
        for i in range(block):
            y = (drive0 if i == 0 else 0.0) - sum(c * p for c, p in zip(a, past, strict=True))
            out[i] = y
            past = [y, *past[:-1]]
        return out

    impulse = run(1.0, [0.0] * order)
    from_state = np.stack(
        [run(0.0, [1.0 if j == k else 0.0 for j in range(order)]) for k in range(order)], axis=1
    )
    index = np.arange(block)
    lag = index[:, None] - index[None, :]
    toeplitz = np.where(lag >= 0, impulse[np.clip(lag, 0, None)], 0.0)
    toeplitz.flags.writeable = False
    from_state.flags.writeable = False
    return toeplitz, from_state
