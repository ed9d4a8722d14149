"""Compiled matmuls of a few rows (numba): ``out [n, out] = x [n, in] · Wᵀ`` for small n.

One step, or a small batch of steps. ``int8_matmul`` takes int8 weights with one float32 scale
per output row; ``bf16_matmul`` takes bfloat16 bit patterns (uint16), widened in registers;
``f32_matmul`` float32 weights, for the fp32 linears (``linears.DenseLinear``, with numba
installed: one step's six layers in ~0.7× of NumPy's BLAS time on one thread, a batched step of
8 rows ~0.5×, the sampler head ~0.5×, as OpenBLAS packs the weight for every matrix product of
a few rows).

The matmuls walk four output rows at once, one from each quarter of the weight: four
independent streams from four distant places in memory keep more DRAM reads in flight than
one row after another does (``benchmarks.micro.narrow_kernels``). The four rows (a few KB)
stay in L1 while the n rows of x pass over them, so one call streams every weight byte once.

``int8_matmul`` is one of two kernels, chosen for the CPU numba compiles for:

- ``int8_matmul_int16`` (AVX2): each row of x rounded to int16 with its own scale, then
  integer multiply-adds (``vpmaddwd``, 16 products an instruction, from LLVM IR written in
  ``_madd_rows``: the numba loops tried for it ran slower than the float kernel), summed in
  int32 per ``MADD_BLOCK`` inputs; two rows of x share each load of the weight. The rounding
  (~90 dB) is far below the int8 weights' own error (~40 dB). Widening int8 to float32 in
  registers bounded the float kernel at ~17 G weights/s even in cache; this one reaches the
  DRAM rate on one step (a step's linears in ~0.75×, a batched step of 8 rows ~0.5× of the
  float kernel's time). From ~6 rows it is bound by arithmetic, not by the weight bytes:
  ~34 G multiply-adds/s at 12 rows here, about what BLAS reaches in float32.
- ``int8_matmul_float`` (other CPUs, and input holding NaN or infinity): int8 widened to
  float32 in registers; from ``WIDEN_FROM_ROWS`` rows of x (a batched step), the four rows are
  widened once and the rows of x go two at a time, as ``f32_matmul`` walks its rows.

``int8_matmul_rounded`` is the integer kernel on a path (``int16.path_code``):
``int8_matmul_int16`` is it on AVX2, ``int8_matmul_portable`` on the portable path (the same
sums in plain vector IR: any CPU, NEON on aarch64; taken only where asked for,
``arithmetic.choose_int8_kernel``).
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from .base import FLOAT32_EXPONENT, bits_of_float32, compiles_for, jit, jit_nan_safe, row_pointers
from .int16 import multiply_add, path_code

WIDEN_FROM_ROWS = 10
"""From this many rows of x, ``int8_matmul_float`` widens each group of four weight rows to float32
once (scales folded in) and takes the rows of x two at a time: arithmetic, not the weight
bytes, bounds it there (six layers' linears at 12 rows: 38.8 ms against 43.8 ms; equal at 6
to 8 rows; ``benchmarks.micro.narrow_kernels``, candidate ``numba-int8-unwidened``)."""
# Fast math that keeps NaN and infinity meaning what they mean (the ELU passes NaN through).


@jit
def _dot4(x, r0, r1, r2, r3):  # pragma: no cover - compiled
    """x [k] f32 · four rows [k] (int8, unscaled, or float32) → four float32 sums."""
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


@jit
def _dot4_pair(x0, x1, r0, r1, r2, r3):  # pragma: no cover - compiled
    """Two rows x0, x1 [k] f32 · four float32 rows [k] → eight sums (x0's four, then x1's)."""
    a0 = a1 = a2 = a3 = b0 = b1 = b2 = b3 = np.float32(0.0)
    for i in range(x0.shape[0]):
        w0, w1, w2, w3 = r0[i], r1[i], r2[i], r3[i]
        v = x0[i]
        a0 += w0 * v
        a1 += w1 * v
        a2 += w2 * v
        a3 += w3 * v
        v = x1[i]
        b0 += w0 * v
        b1 += w1 * v
        b2 += w2 * v
        b3 += w3 * v
    return a0, a1, a2, a3, b0, b1, b2, b3


@jit
def _four_int8_rows(x, weight, scale, rows, out):  # pragma: no cover - compiled
    """out[:, rows] for four output rows, every row of x against the int8 rows directly."""
    w0, w1, w2, w3 = weight[rows[0]], weight[rows[1]], weight[rows[2]], weight[rows[3]]
    for b in range(x.shape[0]):
        a0, a1, a2, a3 = _dot4(x[b], w0, w1, w2, w3)
        out[b, rows[0]] = a0 * scale[rows[0]]
        out[b, rows[1]] = a1 * scale[rows[1]]
        out[b, rows[2]] = a2 * scale[rows[2]]
        out[b, rows[3]] = a3 * scale[rows[3]]


@jit
def _four_float_rows(x, f0, f1, f2, f3, rows, out):  # pragma: no cover - compiled
    """out[:, rows] = x · [f0 f1 f2 f3] for four float32 rows [k], the rows of x two at a time."""
    n = x.shape[0]
    for b in range(0, n - 1, 2):
        sums = _dot4_pair(x[b], x[b + 1], f0, f1, f2, f3)
        for j in range(4):
            out[b, rows[j]] = sums[j]
            out[b + 1, rows[j]] = sums[4 + j]
    if n % 2:
        a0, a1, a2, a3 = _dot4(x[n - 1], f0, f1, f2, f3)
        out[n - 1, rows[0]] = a0
        out[n - 1, rows[1]] = a1
        out[n - 1, rows[2]] = a2
        out[n - 1, rows[3]] = a3


@jit
def _four_widened_rows(x, weight, scale, rows, wide, out):  # pragma: no cover - compiled
    """out[:, rows] for four int8 output rows, widened into wide [4, k] f32 once (scales
    folded in)."""
    for j in range(4):
        row_scale = scale[rows[j]]
        for i in range(x.shape[1]):
            wide[j, i] = np.float32(weight[rows[j], i]) * row_scale
    _four_float_rows(x, wide[0], wide[1], wide[2], wide[3], rows, out)


@jit
def int8_matmul_float(x, weight, scale, out):  # pragma: no cover - compiled
    """x [n, k] f32 · (weight [m, k] int8 × scale [m] f32)ᵀ → out [n, m] f32, the int8 rows
    widened to float32 in registers (hosts without AVX2; rows of x that are not finite)."""
    n, k = x.shape
    m = weight.shape[0]
    quarter = m // 4
    widen = n >= WIDEN_FROM_ROWS
    wide = np.empty((4, k if widen else 0), np.float32)
    for o in range(quarter):
        rows = (o, o + quarter, o + 2 * quarter, o + 3 * quarter)
        if widen:
            _four_widened_rows(x, weight, scale, rows, wide, out)
        else:
            _four_int8_rows(x, weight, scale, rows, out)
    for o in range(4 * quarter, m):  # the rows left over when m is not a multiple of four
        for b in range(n):
            acc = np.float32(0.0)
            for i in range(k):
                acc += np.float32(weight[o, i]) * x[b, i]
            out[b, o] = acc * scale[o]


def _host_has_avx2() -> bool:
    """Whether numba compiles for a CPU with AVX2 (``kernel_base.compiles_for``: a portable
    cache built for a generic CPU takes the float kernel)."""
    return compiles_for("avx2")


AVX2 = _host_has_avx2()
"""``int8_matmul`` is ``int8_matmul_int16`` on AVX2 hosts, else ``int8_matmul_float``."""
MADD_LANES = 16
"""int16 products ``vpmaddwd`` takes per instruction (a 256-bit register)."""
MADD_BLOCK = 512
"""Inputs summed in int32 before a float32 add: |Σ| ≤ 512 · 128 · 32767 < 2³¹ (the block's
eight int32 lanes are added together at its end)."""
X16_PEAK = np.float32(32767.0)


@intrinsic
def _madd_rows(
    typingctx, xq, x_rows, weight, rows, start, stop, path
):  # pragma: no cover - compiled
    """Σ_i xq[x_rows[p], i] · weight[rows[j], i] over i in [start, stop) for every pair (p, j)
    → len(x_rows) · 4 int32 (x row p's four, then the next row's), 16 inputs at a time: by
    ``vpmaddwd`` on the x86 paths, in portable vector code on the portable one (``path``, a
    literal ``int16.path_code``): xq [n, k] int16, weight [m, k] int8, both C-contiguous, rows
    a tuple of four, ``stop - start`` a multiple of 16 and at most ``MADD_BLOCK``."""
    arrays_fit = (
        isinstance(xq, types.Array)
        and xq.dtype == types.int16
        and xq.ndim == 2
        and xq.layout == "C"
        and isinstance(weight, types.Array)
        and weight.ndim == 2
        and weight.dtype == types.int8
        and weight.layout == "C"
        and isinstance(x_rows, types.UniTuple)
        and isinstance(rows, types.UniTuple)
        and len(rows) == 4
        and isinstance(path, types.IntegerLiteral)
    )
    if not arrays_fit:
        return None
    pairs = len(x_rows) * 4
    portable = path.literal_value == path_code("portable")
    code = path_code("portable" if portable else "avx2")
    signature = types.UniTuple(types.int32, pairs)(xq, x_rows, weight, rows, start, stop, path)

    def codegen(context, builder, sig, args):
        x_arr = context.make_array(sig.args[0])(context, builder, args[0])
        w_arr = context.make_array(sig.args[2])(context, builder, args[2])
        first, last = args[4], args[5]
        i8, i16, i32 = ir.IntType(8), ir.IntType(16), ir.IntType(32)
        x_vec, w_vec, acc_vec = (
            ir.VectorType(i16, MADD_LANES),
            ir.VectorType(i8, MADD_LANES),
            ir.VectorType(i32, 8),
        )
        intp = context.get_value_type(types.intp)
        add_products = multiply_add(builder, code, 8)
        total = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(i32, [acc_vec]), "llvm.vector.reduce.add.v8i32"
        )

        x_starts = row_pointers(builder, x_arr, args[1], pairs // 4, i16)
        w_starts = row_pointers(builder, w_arr, args[3], 4, i8)
        sums = [
            cgutils.alloca_once_value(builder, ir.Constant(acc_vec, None)) for _ in range(pairs)
        ]
        step = ir.Constant(intp, MADD_LANES)
        with cgutils.for_range_slice(builder, first, last, step, intp) as (i, _):
            w_vals = []
            for row in w_starts:
                w_ptr = builder.bitcast(builder.gep(row, [i]), w_vec.as_pointer())
                w_vals.append(builder.sext(builder.load(w_ptr, align=1), x_vec))
            for p, x_row in enumerate(x_starts):
                x_ptr = builder.bitcast(builder.gep(x_row, [i]), x_vec.as_pointer())
                x_val = builder.load(x_ptr, align=2)
                for j, w_val in enumerate(w_vals):
                    acc = sums[4 * p + j]
                    builder.store(add_products(builder.load(acc), x_val, w_val), acc)
        reduced = [builder.call(total, [builder.load(acc)]) for acc in sums]
        return context.make_tuple(builder, sig.return_type, reduced)

    return signature, codegen


@jit_nan_safe
def _quantize_rows_int16(x, xq, xscale):  # pragma: no cover - compiled
    """xq [n, k] int16 = rint(x / xscale), xscale [n] = max |x| / 32767 per row of x [n, k]
    f32 (1 for a zero row). False, with xq unfinished, if x holds a NaN or an infinity (told
    by the bits: the callers' fast math may assume floats finite)."""
    n, k = x.shape
    for b in range(n):
        peak = np.float32(0.0)
        exponent = np.int32(0)  # the largest exponent field: all ones for NaN and ±inf
        for i in range(k):
            peak = max(peak, abs(x[b, i]))
            exponent = max(exponent, bits_of_float32(x[b, i]) & FLOAT32_EXPONENT)
        if exponent == FLOAT32_EXPONENT:
            return False
        step = peak / X16_PEAK if peak > np.float32(0.0) else np.float32(1.0)
        inv = np.float32(1.0) / step
        for i in range(k):
            code = np.rint(x[b, i] * inv)
            xq[b, i] = np.int16(max(min(code, X16_PEAK), -X16_PEAK))
        xscale[b] = step
    return True


@jit
def _int_dots(xq, x_rows, weight, rows, out, path):  # pragma: no cover - compiled
    """out [P, 4] f32 = xq[x_rows] · weight[rows]ᵀ (P = len(x_rows), rows four), exact int32 sums
    per ``MADD_BLOCK`` inputs added in float32, on ``_madd_rows``'s ``path``."""
    k = xq.shape[1]
    whole = k - k % MADD_LANES
    out[:] = np.float32(0.0)
    for start in range(0, whole, MADD_BLOCK):
        sums = _madd_rows(xq, x_rows, weight, rows, start, min(start + MADD_BLOCK, whole), path)
        for p in range(len(x_rows)):
            for j in range(4):
                out[p, j] += np.float32(sums[4 * p + j])
    for p in range(len(x_rows)):  # the inputs left over when k is not a multiple of 16
        for j in range(4):
            tail = np.int32(0)
            for i in range(whole, k):
                tail += np.int32(weight[rows[j], i]) * np.int32(xq[x_rows[p], i])
            out[p, j] += np.float32(tail)


@jit
def int8_matmul_rounded(x, weight, scale, out, path):  # pragma: no cover - compiled
    """x [n, k] f32 · (weight [m, k] int8 × scale [m] f32)ᵀ → out [n, m] f32 by integer
    multiply-adds on ``_madd_rows``'s ``path`` (a literal ``int16.path_code``): each row of x
    quantized to int16 with its own scale (max |x| / 32767: ~90 dB, far below the int8 weights'
    own error), four distant weight rows at a time against two rows of x. Input holding NaN or
    infinity runs ``int8_matmul_float`` (NaN stays NaN)."""
    numba.literally(path)
    n, k = x.shape
    m = weight.shape[0]
    xq = np.empty((n, k), np.int16)
    xscale = np.empty(n, np.float32)
    if not _quantize_rows_int16(x, xq, xscale):
        int8_matmul_float(x, weight, scale, out)
        return
    sums = np.empty((2, 4), np.float32)
    quarter = m // 4
    for o in range(quarter):
        rows = (o, o + quarter, o + 2 * quarter, o + 3 * quarter)
        for b in range(0, n - 1, 2):
            _int_dots(xq, (b, b + 1), weight, rows, sums, path)
            for p in range(2):
                for j in range(4):
                    out[b + p, rows[j]] = sums[p, j] * (scale[rows[j]] * xscale[b + p])
        if n % 2:
            _int_dots(xq, (n - 1,), weight, rows, sums, path)
            for j in range(4):
                out[n - 1, rows[j]] = sums[0, j] * (scale[rows[j]] * xscale[n - 1])
    for o in range(4 * quarter, m):  # the rows left over when m is not a multiple of four
        for b in range(n):
            acc = np.int64(0)
            for i in range(k):
                acc += np.int64(weight[o, i]) * np.int64(xq[b, i])
            out[b, o] = np.float32(acc) * (scale[o] * xscale[b])


# One entry point a path, called from Python (a literal path given from Python would be
# dispatched again at every call).
@jit
def int8_matmul_int16(x, weight, scale, out):  # pragma: no cover - compiled
    """``int8_matmul_rounded`` by ``vpmaddwd`` (AVX2)."""
    int8_matmul_rounded(x, weight, scale, out, 2)


@jit
def int8_matmul_portable(x, weight, scale, out):  # pragma: no cover - compiled
    """``int8_matmul_rounded`` in portable vector code (NEON on aarch64): any CPU, opt-in."""
    int8_matmul_rounded(x, weight, scale, out, 3)


int8_matmul = int8_matmul_int16 if AVX2 else int8_matmul_float
"""x [n, k] f32 · (weight [m, k] int8 × scale [m] f32)ᵀ → out [n, m] f32: the integer kernel
on AVX2 hosts, else the float one."""


@jit
def f32_matmul(x, weight, out):  # pragma: no cover - compiled
    """x [n, k] f32 · weight [m, k] f32ᵀ → out [n, m] f32 (four distant rows at once)."""
    n, k = x.shape
    m = weight.shape[0]
    quarter = m // 4
    for o in range(quarter):
        rows = (o, o + quarter, o + 2 * quarter, o + 3 * quarter)
        f0, f1, f2, f3 = weight[rows[0]], weight[rows[1]], weight[rows[2]], weight[rows[3]]
        _four_float_rows(x, f0, f1, f2, f3, rows, out)
    for o in range(4 * quarter, m):  # the rows left over when m is not a multiple of four
        for b in range(n):
            acc = np.float32(0.0)
            for i in range(k):
                acc += weight[o, i] * x[b, i]
            out[b, o] = acc


@jit
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
