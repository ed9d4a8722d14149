"""NumPy building blocks shared by FlowLM and Mimi (picoGPT style: plain functions on arrays).

All arrays are float32. ``T`` is time, ``D`` a feature width, ``H`` heads, ``Dh`` head width.
Linear weights keep PyTorch's [out, in] layout; ``x @ w.T`` is a BLAS call on a transposed view.

With numba installed (the ``fast`` extra), ``layer_norm``, ``gelu_tanh`` and ``apply_rope`` run
one compiled pass each (``layer_kernels.py``) instead of NumPy's several: on the rows of one step,
NumPy's per-call cost is most of their time. Without it they run as written below.
"""

from __future__ import annotations

import math

import numpy as np

from ..kernels import compiled

# The ``fast`` extra: imported and compiled at model load (``NumpyBackend``), never at import;
# a test sets None to run NumPy alone.
_kernels = compiled.AT_FIRST_USE

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def linear(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """x [..., in] · weight [out, in]ᵀ (+ bias [out]) → [..., out]."""
    out = x @ weight.T
    if bias is not None:
        out += bias
    return out


GEMV_ROWS_MAX = 3
"""Up to this many rows, a matrix-vector product per row beats one matrix product."""


def linear_rows(x: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """x [B, in] · weight [out, in]ᵀ → [B, out] for a few rows against a large weight.

    OpenBLAS packs the weight for every matrix product, which costs more than reading it
    when B is small: up to ``GEMV_ROWS_MAX`` rows go one matrix-vector product each
    (FlowLM step of 2 streams on one thread: 46 ms instead of 69 ms).
    """
    if x.shape[0] <= GEMV_ROWS_MAX:
        return np.stack([weight @ row for row in x])
    return x @ weight.T


def layer_norm(
    x: np.ndarray, weight: np.ndarray | None, bias: np.ndarray | None, eps: float
) -> np.ndarray:
    """LayerNorm over the last axis of x [..., D] (biased variance, like torch) → a new array.

    Sums by ``np.add.reduce`` and in-place passes: on the [1, 1024] rows of a step this is
    ~30% quicker than ``mean``/``var`` (whose Python wrappers cost more than the arithmetic),
    with the same float32 results. With numba: ``kernels.layer_norm_rows``.
    """
    kernels = compiled.resolve(_kernels)
    if kernels is not None:
        rows = np.ascontiguousarray(x, dtype=np.float32).reshape(-1, x.shape[-1])
        out = np.empty(rows.shape, np.float32)
        kernels.layer_norm_rows(rows, weight, bias, np.float32(eps), out)
        return out.reshape(x.shape)
    inv_width = np.float32(1.0 / x.shape[-1])
    centered = x - np.add.reduce(x, axis=-1, keepdims=True) * inv_width
    spread = np.add.reduce(centered * centered, axis=-1, keepdims=True)
    spread *= inv_width
    spread += np.float32(eps)
    np.sqrt(spread, out=spread)
    centered /= spread
    if weight is not None:
        centered *= weight
    if bias is not None:
        centered += bias
    return centered


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """GELU, tanh approximation: 0.5·x·(1 + tanh(u)), u = √(2/π)·(x + 0.044715·x³) → a new array.

    Computed as x / (1 + exp(-2u)) (the same function: 1 + tanh(u) = 2 / (1 + exp(-2u))), in
    one buffer with in-place passes: float32 exp costs half of tanh in NumPy, and it runs on
    the widest activations. exp overflows to inf for very negative x, giving -0 as it should.
    With numba: ``kernels.gelu_tanh_flat``.
    """
    kernels = compiled.resolve(_kernels)
    if kernels is not None:
        flat = np.ascontiguousarray(x, dtype=np.float32)
        out = np.empty(flat.shape, np.float32)
        kernels.gelu_tanh_flat(flat.reshape(-1), out.reshape(-1))
        return out
    out = x * x
    out *= np.float32(-2.0 * 0.044715 * SQRT_2_OVER_PI)
    out -= np.float32(2.0 * SQRT_2_OVER_PI)
    # Now out is -2u.
    out *= x
    with np.errstate(over="ignore"):
        np.exp(out, out=out)
    out += np.float32(1.0)
    return np.divide(x, out, out=out)


def silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def rope_tables(
    positions: np.ndarray, head_dim: int, max_period: float
) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin [T, Dh/2] for absolute positions [T] (frequency max_period^(-2i/Dh))."""
    freqs = np.exp(
        np.arange(head_dim // 2, dtype=np.float32)
        * np.float32(-math.log(max_period) * 2 / head_dim)
    )
    angles = positions.astype(np.float32)[:, None] * freqs[None, :]
    return np.cos(angles), np.sin(angles)


def apply_rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Rotate interleaved pairs (x[2i], x[2i+1]) of x [T, H, Dh] by tables [T, Dh/2] → a new
    array. With numba: ``kernels.rope_pairs``."""
    kernels = compiled.resolve(_kernels)
    if kernels is not None:
        out = np.empty(x.shape, np.float32)
        kernels.rope_pairs(
            np.ascontiguousarray(x), np.ascontiguousarray(cos), np.ascontiguousarray(sin), out
        )
        return out
    t, h, d = x.shape
    pairs = x.reshape(t, h, d // 2, 2)
    real, imag = pairs[..., 0], pairs[..., 1]
    c, s = cos[:, None, :], sin[:, None, :]
    out = np.empty_like(pairs)
    out[..., 0] = real * c - imag * s
    out[..., 1] = real * s + imag * c
    return out.reshape(t, h, d)
