"""Compiled matmul kernels for narrow FlowLM weights (numba: the optional ``fast`` extra).

Weight-only: the activations stay float32, the weights are read narrow and widened in
registers. ``int8_matmul`` takes int8 weights with one float32 scale per output row;
``bf16_matmul`` takes bfloat16 bit patterns (uint16). Both compute
``out [n, out] = x [n, in] · Wᵀ`` for small n (one step, or a small batch of steps).

``int8_matmul`` walks four output rows at once, one from each quarter of the weight: four
independent streams from four distant places in memory keep more DRAM reads in flight than
one row after another does (a step's linears at one input row: 0.31× / 0.27× of NumPy's fp32
time for 6 / 24 layers, against 0.51× / 0.49× row by row; ``bench_narrow_kernels.py``).
The four rows (a few KB) stay in L1 while the n rows of x pass over them, so one call
streams every weight byte once.

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
def _dot4(x, r0, r1, r2, r3):  # pragma: no cover - compiled
    """x [k] f32 · four int8 rows [k] → four float32 sums (unscaled)."""
    a0 = np.float32(0.0)
    a1 = np.float32(0.0)
    a2 = np.float32(0.0)
    a3 = np.float32(0.0)
    for i in range(x.shape[0]):
        value = x[i]
        a0 += np.float32(r0[i]) * value
        a1 += np.float32(r1[i]) * value
        a2 += np.float32(r2[i]) * value
        a3 += np.float32(r3[i]) * value
    return a0, a1, a2, a3


@_jit
def int8_matmul(x, weight, scale, out):  # pragma: no cover - compiled
    """x [n, k] f32 · (weight [m, k] int8 × scale [m] f32)ᵀ → out [n, m] f32."""
    n, k = x.shape
    m = weight.shape[0]
    quarter = m // 4
    for o in range(quarter):
        rows = (o, o + quarter, o + 2 * quarter, o + 3 * quarter)
        w0, w1, w2, w3 = weight[rows[0]], weight[rows[1]], weight[rows[2]], weight[rows[3]]
        for b in range(n):
            a0, a1, a2, a3 = _dot4(x[b], w0, w1, w2, w3)
            out[b, rows[0]] = a0 * scale[rows[0]]
            out[b, rows[1]] = a1 * scale[rows[1]]
            out[b, rows[2]] = a2 * scale[rows[2]]
            out[b, rows[3]] = a3 * scale[rows[3]]
    for o in range(4 * quarter, m):  # the rows left over when m is not a multiple of four
        for b in range(n):
            acc = np.float32(0.0)
            for i in range(k):
                acc += np.float32(weight[o, i]) * x[b, i]
            out[b, o] = acc * scale[o]


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
    out = np.empty((1, 6), np.float32)
    int8_matmul(x, np.zeros((6, 8), np.int8), np.ones(6, np.float32), out)
    bf16_matmul(x, np.zeros((6, 8), np.uint16), out)
