"""Compiled one-pass layer kernels (numba): activations, LayerNorm, RoPE, one step's attention.

``elu_flat`` is the ELU of the Mimi decoder in one pass (NumPy needs five passes and its float32
``exp``, which runs at ~2 ns an element here): an exponential by range reduction and a
polynomial, with its power of two built from the exponent bits, in a loop LLVM vectorizes.
Mimi decode runs it whenever numba is installed, at any precision (``streaming_conv.elu``).
``gelu_tanh_flat``, ``layer_norm_rows`` and ``rope_pairs`` are the one-pass forms of
``layers.py``; ``store_and_attend`` is one step's KV write and attention over a float32 or
bfloat16 KV cache in one call, and ``store_bfloat16`` that cache's rounding for a prefill
(``kv_cache.py``).
"""

from __future__ import annotations

import numpy as np
from numba.core import types
from numba.extending import overload

from .base import bits_of_float32, float32_from_bits, inline, jit, jit_nan_safe, prefetch


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


@inline
def _bfloat16_code(value):  # pragma: no cover - compiled
    """The bfloat16 bit pattern (uint16) of the float32 ``value``, rounded to nearest even;
    NaN as 0x7FC0 (as ``linears.to_bfloat16_bits`` rounds)."""
    bits = np.int64(bits_of_float32(value)) & np.int64(0xFFFFFFFF)
    rounded = (bits + np.int64(0x7FFF) + ((bits >> np.int64(16)) & np.int64(1))) >> 16
    code = np.int64(0x7FC0) if value != value else rounded & np.int64(0xFFFF)
    return np.uint16(code)


def _kv_entry(cache, value):  # pragma: no cover - compiled only (the overload below)
    """A float32 as a KV cache of ``cache``'s type stores it: itself, or its bfloat16 bits."""
    raise NotImplementedError("compiled only")


@overload(_kv_entry)
def _kv_entry_overload(cache, value):  # pragma: no cover - compiled
    if isinstance(cache, types.Array) and cache.dtype == types.uint16:
        return lambda cache, value: _bfloat16_code(value)
    if isinstance(cache, types.Array) and cache.dtype == types.float32:
        return lambda cache, value: value
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
                cache[h, start + t, i] = _bfloat16_code(x[t, h, i])


PREFETCH_AHEAD = 16
"""Positions ahead of the one being read that ``store_and_attend`` asks the CPU to fetch: a
stream's KV cache is out of the caches by its next step once many streams run (the FlowLM's
weights pass between), and the hardware prefetcher alone fetched it at ~13 GB/s here."""
BLOCK = 4
"""Positions ``store_and_attend`` takes together (four dot products, four values a pass)."""


def _prefetch_position(rows, position):  # pragma: no cover - compiled only (the overload)
    """Ask for the cache lines of ``rows[position]`` (rows [positions, Dh], one head)."""
    raise NotImplementedError("compiled only")


@overload(_prefetch_position, inline="always")
def _prefetch_position_overload(rows, position):  # pragma: no cover - compiled
    # Each line of a row of up to 64 entries: two of bfloat16, four of float32 (unrolled: a
    # loop over the lines ran 2.5× slower).
    if isinstance(rows, types.Array) and rows.dtype == types.uint16:

        def two_lines(rows, position):
            prefetch(rows, position, 0)
            prefetch(rows, position, rows.shape[1] - 1)

        return two_lines

    def four_lines(rows, position):
        width = rows.shape[1]
        prefetch(rows, position, 0)
        prefetch(rows, position, width >> 2)
        prefetch(rows, position, width >> 1)
        prefetch(rows, position, width - 1)

    return four_lines


@jit_nan_safe
def store_and_attend(
    q, key, value, keys, values, position, scale, scores, out
):  # pragma: no cover - compiled
    """One step's KV write and attention in one pass: key and value [kv_heads, Dh] f32 go to
    ``position`` of keys and values [kv_heads, capacity, Dh] (float32, or bfloat16 bit patterns
    rounded to nearest even as ``store_bfloat16``), then the queries q [H, Dh] attend over
    positions 0 … position (query head h reads kv head h // (H / kv_heads)) → out [H, Dh];
    scores [position + 1] f32 is scratch. Softmax by max shift and the polynomial e^t.

    Positions go four at a time (four dot products, four values a pass). While one head's keys
    are read its values are fetched, and while its values are read the next head's keys
    (``PREFETCH_AHEAD``): the cache is read from memory at several times the rate the hardware
    prefetcher alone gives.
    """
    heads, width = q.shape
    kv_heads = keys.shape[0]
    group = heads // kv_heads
    for h in range(kv_heads):
        for i in range(width):
            keys[h, position, i] = _kv_entry(keys, key[h, i])
            values[h, position, i] = _kv_entry(values, value[h, i])
    length = position + 1
    whole = length - length % BLOCK
    row = np.empty(width, np.float32)  # a head's sum, local (out's rows may alias nothing)
    for h in range(heads):
        kv = h // group
        head_keys, head_values = keys[kv], values[kv]
        following = keys[min(kv + 1, kv_heads - 1)]
        for p in range(0, whole, BLOCK):
            for j in range(p, p + BLOCK):
                _prefetch_position(head_keys, min(j + PREFETCH_AHEAD, position))
                _prefetch_position(head_values, j)
            dot0 = dot1 = dot2 = dot3 = np.float32(0.0)
            for i in range(width):
                query = q[h, i]
                dot0 += query * _kv_float(head_keys[p, i])
                dot1 += query * _kv_float(head_keys[p + 1, i])
                dot2 += query * _kv_float(head_keys[p + 2, i])
                dot3 += query * _kv_float(head_keys[p + 3, i])
            scores[p], scores[p + 1] = dot0 * scale, dot1 * scale
            scores[p + 2], scores[p + 3] = dot2 * scale, dot3 * scale
        for p in range(whole, length):
            dot = np.float32(0.0)
            for i in range(width):
                dot += q[h, i] * _kv_float(head_keys[p, i])
            scores[p] = dot * scale
        top = np.float32(-np.inf)
        for p in range(length):
            top = max(top, scores[p])
        total = np.float32(0.0)
        for p in range(length):
            weight = _exp(max(scores[p] - top, np.float32(-87.0)))
            scores[p] = weight
            total += weight
        inv_total = np.float32(1.0) / total
        for i in range(width):
            row[i] = np.float32(0.0)
        for p in range(0, whole, BLOCK):
            for j in range(p, p + BLOCK):
                _prefetch_position(head_values, min(j + PREFETCH_AHEAD, position))
                _prefetch_position(following, j)
            w0, w1 = scores[p] * inv_total, scores[p + 1] * inv_total
            w2, w3 = scores[p + 2] * inv_total, scores[p + 3] * inv_total
            for i in range(width):
                row[i] += (
                    w0 * _kv_float(head_values[p, i]) + w1 * _kv_float(head_values[p + 1, i])
                ) + (w2 * _kv_float(head_values[p + 2, i]) + w3 * _kv_float(head_values[p + 3, i]))
        for p in range(whole, length):
            weight = scores[p] * inv_total
            for i in range(width):
                row[i] += weight * _kv_float(head_values[p, i])
        for i in range(width):
            out[h, i] = row[i]
