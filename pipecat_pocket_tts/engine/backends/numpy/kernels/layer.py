"""Compiled one-pass layer kernels (numba): activations, LayerNorm, RoPE, one step's attention.

``elu_flat`` is the ELU of the Mimi decoder in one pass (NumPy needs five passes and its float32
``exp``, which runs at ~2 ns an element here): an exponential by range reduction and a
polynomial, with its power of two built from the exponent bits, in a loop LLVM vectorizes.
Mimi decode runs it whenever numba is installed, at any precision (``streaming_conv.elu``).
``gelu_tanh_flat``, ``layer_norm_rows`` and ``rope_pairs`` are the one-pass forms of
``layers.py``; ``attend_one`` is one step's attention over a float32 or bfloat16 KV cache, and
``store_bfloat16`` that cache's rounding (``flowlm.py``).
"""

from __future__ import annotations

import numpy as np
from numba.core import types
from numba.extending import overload

from .base import bits_of_float32, float32_from_bits, inline, jit, jit_nan_safe


@inline
def _exp(t):  # pragma: no cover - compiled
    """e^t for t in [-87, 88]: t = n·ln 2 + r with |r| ≤ ln 2 / 2, e^r by Cephes' expf
    polynomial (relative error ~1e-7), times 2^n built as exponent bits."""
    n = np.floor(t * np.float32(1.44269504088896341) + np.float32(0.5))
    r = t - n * np.float32(0.693359375) - n * np.float32(-2.12194440e-4)  # ln 2 in two parts
    p = np.float32(1.9875691500e-4)
    p = p * r + np.float32(1.3981999507e-3)
    p = p * r + np.float32(8.3334519073e-3)
    p = p * r + np.float32(4.1665795894e-2)
    p = p * r + np.float32(1.6666665459e-1)
    p = p * r + np.float32(5.0000001201e-1)
    p = p * r * r + r + np.float32(1.0)
    return p * float32_from_bits((np.int32(n) + np.int32(127)) << np.int32(23))


@inline
def _exp_minus_one(t):  # pragma: no cover - compiled
    """e^t - 1 for t in [-87, 0] (absolute error ~1e-7: enough for the ELU)."""
    return _exp(t) - np.float32(1.0)


@jit_nan_safe
def elu_flat(x, out):  # pragma: no cover - compiled
    """ELU (alpha 1) of x [n] f32 into out [n] f32 (both contiguous; may be the same array).

    x > 0: x; otherwise e^x - 1 (e^x flushed to 0 below e^-87, where float32 ELU is -1);
    NaN stays NaN. Within ~2e-7 of NumPy's ``exp(x) - 1``.
    """
    for i in range(x.shape[0]):
        v = x[i]
        y = _exp_minus_one(max(min(v, np.float32(0.0)), np.float32(-87.0)))
        y = v if v > np.float32(0.0) else y
        out[i] = v if v != v else y


@jit_nan_safe
def gelu_tanh_flat(x, out):  # pragma: no cover - compiled
    """GELU, tanh approximation, of x [n] f32 into out [n] f32 (contiguous; may be the same
    array), as x / (1 + e^(-2u)) with u = √(2/π)·(x + 0.044715·x³); -2u is clamped to
    [-87, 88], where the result is x or ±0 to float32 precision. NaN stays NaN."""
    c1 = np.float32(-2.0 * 0.7978845608028654)
    c3 = np.float32(-2.0 * 0.044715 * 0.7978845608028654)
    for i in range(x.shape[0]):
        v = x[i]
        t = v * (c1 + c3 * v * v)
        out[i] = v / (np.float32(1.0) + _exp(max(min(t, np.float32(88.0)), np.float32(-87.0))))


@jit_nan_safe
def layer_norm_rows(x, weight, bias, eps, out):  # pragma: no cover - compiled
    """LayerNorm of each row of x [n, D] f32 (biased variance) into out [n, D]; weight and
    bias [D] f32, or None for none."""
    n, width = x.shape
    inv_width = np.float32(1.0) / np.float32(width)
    for b in range(n):
        row = x[b]
        total = np.float32(0.0)
        for i in range(width):
            total += row[i]
        mean = total * inv_width
        spread = np.float32(0.0)
        for i in range(width):
            centered = row[i] - mean
            spread += centered * centered
        inv_std = np.float32(1.0) / np.sqrt(spread * inv_width + np.float32(eps))
        for i in range(width):
            value = (row[i] - mean) * inv_std
            if weight is not None:
                value *= weight[i]
            if bias is not None:
                value += bias[i]
            out[b, i] = value


@jit
def rope_pairs(x, cos, sin, out):  # pragma: no cover - compiled
    """Rotate the interleaved pairs (x[..., 2i], x[..., 2i+1]) of x [T, H, Dh] by the
    angles of row t of cos, sin [T, Dh/2] into out [T, H, Dh] (may be x)."""
    steps, heads, width = x.shape
    for t in range(steps):
        for h in range(heads):
            for i in range(width // 2):
                real, imag = x[t, h, 2 * i], x[t, h, 2 * i + 1]
                c, s = cos[t, i], sin[t, i]
                out[t, h, 2 * i] = real * c - imag * s
                out[t, h, 2 * i + 1] = real * s + imag * c


def _kv_float(value):  # pragma: no cover - compiled only (the overload below)
    """A KV cache entry as float32: a float32 itself, a uint16 as the bfloat16 it holds."""
    raise NotImplementedError("compiled only")


@overload(_kv_float, inline="always")
def _kv_float_overload(value):  # pragma: no cover - compiled
    if isinstance(value, types.Integer) and value.bitwidth == 16 and not value.signed:
        return lambda value: float32_from_bits(np.int32(value) << np.int32(16))
    if value == types.float32:
        return lambda value: value
    return None


@jit_nan_safe
def store_bfloat16(x, cache, start):  # pragma: no cover - compiled
    """x [n, H, Dh] f32 → positions start … start + n - 1 of cache [H, capacity, Dh] as
    bfloat16 bit patterns (uint16), rounded to nearest even; NaN is stored as 0x7FC0 (as
    ``linears.to_bfloat16_bits`` rounds)."""
    steps, heads, width = x.shape
    for t in range(steps):
        for h in range(heads):
            for i in range(width):
                value = x[t, h, i]
                bits = np.int64(bits_of_float32(value)) & np.int64(0xFFFFFFFF)
                rounded = (bits + np.int64(0x7FFF) + ((bits >> np.int64(16)) & np.int64(1))) >> 16
                code = np.int64(0x7FC0) if value != value else rounded & np.int64(0xFFFF)
                cache[h, start + t, i] = np.uint16(code)


@jit_nan_safe
def attend_one(q, keys, values, length, scale, scores, out):  # pragma: no cover - compiled
    """Attention of one position's queries q [H, Dh] over the first ``length`` keys and values
    [kv_heads, capacity, Dh] (query head h reads kv head h // (H / kv_heads)) → out [H, Dh];
    scores [length] f32 is scratch. The caches are float32, or bfloat16 bit patterns (uint16:
    half the bytes, widened as read). Softmax by max shift and the polynomial e^t."""
    heads, width = q.shape
    group = heads // keys.shape[0]
    row = np.empty(width, np.float32)  # a head's sum, local (out's rows may alias nothing)
    for h in range(heads):
        kv = h // group
        top = np.float32(-np.inf)
        for p in range(length):
            dot = np.float32(0.0)
            for i in range(width):
                dot += q[h, i] * _kv_float(keys[kv, p, i])
            dot *= scale
            scores[p] = dot
            top = max(top, dot)
        total = np.float32(0.0)
        for p in range(length):
            weight = _exp(max(scores[p] - top, np.float32(-87.0)))
            scores[p] = weight
            total += weight
        inv_total = np.float32(1.0) / total
        for i in range(width):
            row[i] = np.float32(0.0)
        for p in range(length):
            weight = scores[p] * inv_total
            for i in range(width):
                row[i] += weight * _kv_float(values[kv, p, i])
        for i in range(width):
            out[h, i] = row[i]
