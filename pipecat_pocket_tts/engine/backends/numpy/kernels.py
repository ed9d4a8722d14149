"""Compiled matmul kernels for narrow FlowLM weights (numba: the optional ``fast`` extra).

Weight-only: the activations stay float32, the weights are read narrow and widened in
registers. ``int8_matmul`` takes int8 weights with one float32 scale per group of
``in / groups`` consecutive inputs of each output row; ``bf16_matmul`` takes bfloat16 bit
patterns (uint16). Both compute ``out [n, out] = x [n, in] · Wᵀ`` for small n (one step, or a
small batch of steps): a weight row is loaded once and stays in L1 while the n rows of x
pass over it, so one call streams every weight byte once.

The kernels release the GIL and are serial: sessions on different threads run them side by
side, and numba's thread pool (unsafe for concurrent callers under its default threading
layer) is never used. Compiled code is cached on disk (``cache=True``), so only the first
process on a machine pays the JIT compile. Importing this module needs numba.
"""

from __future__ import annotations

import numba
import numpy as np

_jit = numba.njit(cache=True, fastmath=True, nogil=True, boundscheck=False)


@_jit
def int8_matmul(x, weight, scale, out):  # pragma: no cover - compiled
    """x [n, k] f32 · (weight [m, k] int8 × scale [m, groups] f32)ᵀ → out [n, m] f32.

    For n of one or two: one pass over each weight row per input row, widening in registers.
    """
    n, k = x.shape
    m, groups = scale.shape
    size = k // groups
    for o in range(m):
        for b in range(n):
            total = np.float32(0.0)
            for g in range(groups):
                base = g * size
                acc = np.float32(0.0)
                for i in range(size):
                    acc += np.float32(weight[o, base + i]) * x[b, base + i]
                total += acc * scale[o, g]
            out[b, o] = total


@_jit
def int8_matmul_rows(x, weight, scale, out):  # pragma: no cover - compiled
    """Like ``int8_matmul``, but each weight row is dequantized once into an L1 buffer that the
    n input rows then share (faster from a few rows up)."""
    n, k = x.shape
    m, groups = scale.shape
    size = k // groups
    row = np.empty(k, np.float32)
    for o in range(m):
        for g in range(groups):
            base = g * size
            s = scale[o, g]
            for i in range(size):
                row[base + i] = np.float32(weight[o, base + i]) * s
        for b in range(n):
            acc = np.float32(0.0)
            for i in range(k):
                acc += row[i] * x[b, i]
            out[b, o] = acc


@_jit
def bf16_matmul(x, weight, out):  # pragma: no cover - compiled
    """x [n, k] f32 · (weight [m, k] bfloat16 bits as uint16)ᵀ → out [n, m] f32."""
    n, k = x.shape
    m = weight.shape[0]
    bits = np.empty(k, np.uint32)
    row = bits.view(np.float32)
    for o in range(m):
        for i in range(k):
            bits[i] = np.uint32(weight[o, i]) << 16
        for b in range(n):
            acc = np.float32(0.0)
            for i in range(k):
                acc += row[i] * x[b, i]
            out[b, o] = acc


def warm_up() -> None:
    """Compile (or load from the disk cache) both kernels now rather than on the first step."""
    x = np.zeros((1, 8), np.float32)
    out = np.empty((1, 2), np.float32)
    int8_matmul(x, np.zeros((2, 8), np.int8), np.ones((2, 1), np.float32), out)
    int8_matmul_rows(x, np.zeros((2, 8), np.int8), np.ones((2, 1), np.float32), out)
    bf16_matmul(x, np.zeros((2, 8), np.uint16), out)
