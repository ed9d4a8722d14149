"""The FlowLM's int8 linears in tiles of whole int32 dot products (numba): four rows of x by
four weight rows a tile, int16-rounded inputs against widened int8 weights, on one of three
paths (``int16.INT16_KERNELS``): ``int8_matmul_vnni`` by ``vpdpwssd`` on zmm (AVX512_VNNI,
path "vnni"), ``int8_matmul_avx_vnni`` on ymm (AVX-VNNI's VEX form, "avx-vnni"), and
``int8_matmul_portable_tiles``, the same sums in plain vector code for any CPU ("portable":
NEON on aarch64, opt-in as no ARM CPU was at hand to time it).

Each product of a row of x and a weight row is one int32 sum over every input, whatever the
register width: the paths give the same bits, and up to ``MADD_BLOCK`` (512) inputs the same
bits as the two-row kernel (``matmul.int8_matmul_rounded``, which adds its 512-input sums in
float32; beyond, within float32 rounding of it). A lane sums depth / 16 (zmm) or depth / 8
(ymm, portable) products of an int16 code (≤ 32767) and an int8 code (≤ 127); integer sums
wrap modulo 2^32 alike on every path, so only the whole sum must fit in int32, as it does for
any activations up to 516 inputs and for the model's (far from all-equal) rows beyond.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from .base import jit, row_pointers
from .int16 import PATH_LANES, multiply_add
from .matmul import (
    _int_dots,
    _quantize_rows_int16,
    int8_matmul_float,
    int8_matmul_portable,
    int8_matmul_rounded,
)

TILE_ROWS = 4
"""Rows of x, and rows of the weight, a tile takes together."""
TILE_INPUTS = 32
"""Inputs a step of a tile takes (one zmm ``vpdpwssd``, or two ymm-wide ones): the depth of a
weight must be a multiple of it."""
TILE_MAX_DEPTH = 8192
"""Longest reduction ``fits_tiles`` takes (each zmm lane sums 512 products at most)."""


def fits_tiles(depth: int) -> bool:
    """Whether the tiles take a weight of ``depth`` inputs."""
    return depth % TILE_INPUTS == 0 and depth <= TILE_MAX_DEPTH


@intrinsic
def _int8_tile(typingctx, xq, x_rows, weight, rows, path):  # pragma: no cover - compiled
    """Σ_i xq[x_rows[p], i] · weight[rows[j], i] over every i for the 16 pairs (p, j) →
    16 int32 (x row p's four, then the next row's), by ``int16.multiply_add`` on path
    ``path`` (a literal ``int16.path_code``): xq [n, k] int16, weight [m, k] int8, both
    C-contiguous, k a multiple of 32 and at most ``TILE_MAX_DEPTH``; x_rows and rows tuples of
    four."""
    fits = (
        isinstance(xq, types.Array)
        and xq.dtype == types.int16
        and xq.ndim == 2
        and xq.layout == "C"
        and isinstance(weight, types.Array)
        and weight.dtype == types.int8
        and weight.ndim == 2
        and weight.layout == "C"
        and isinstance(x_rows, types.UniTuple)
        and len(x_rows) == TILE_ROWS
        and isinstance(rows, types.UniTuple)
        and len(rows) == TILE_ROWS
        and isinstance(path, types.IntegerLiteral)
    )
    if not fits:
        return None
    code = path.literal_value
    lanes = PATH_LANES[code]
    signature = types.UniTuple(types.int32, TILE_ROWS * TILE_ROWS)(xq, x_rows, weight, rows, path)

    def codegen(context, builder, sig, args):
        x_arr = context.make_array(sig.args[0])(context, builder, args[0])
        w_arr = context.make_array(sig.args[2])(context, builder, args[2])
        i8, i16, i32 = ir.IntType(8), ir.IntType(16), ir.IntType(32)
        wide = ir.VectorType(i16, 2 * lanes)
        narrow = ir.VectorType(i8, 2 * lanes)
        acc_vec = ir.VectorType(i32, lanes)
        intp = context.get_value_type(types.intp)
        add_products = multiply_add(builder, code, lanes)
        total = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(i32, [acc_vec]), f"llvm.vector.reduce.add.v{lanes}i32"
        )

        x_starts = row_pointers(builder, x_arr, args[1], TILE_ROWS, i16)
        w_starts = row_pointers(builder, w_arr, args[3], TILE_ROWS, i8)
        depth = cgutils.unpack_tuple(builder, x_arr.shape, 2)[1]
        sums = [
            cgutils.alloca_once_value(builder, ir.Constant(acc_vec, None))
            for _ in range(TILE_ROWS * TILE_ROWS)
        ]
        step = ir.Constant(intp, 2 * lanes)
        with cgutils.for_range_slice(builder, ir.Constant(intp, 0), depth, step, intp) as (i, _):
            w_vals = [
                builder.sext(
                    builder.load(
                        builder.bitcast(builder.gep(row, [i]), narrow.as_pointer()), align=1
                    ),
                    wide,
                )
                for row in w_starts
            ]
            for p, x_row in enumerate(x_starts):
                x_val = builder.load(
                    builder.bitcast(builder.gep(x_row, [i]), wide.as_pointer()), align=2
                )
                for j, w_val in enumerate(w_vals):
                    acc = sums[TILE_ROWS * p + j]
                    builder.store(add_products(builder.load(acc), x_val, w_val), acc)
        reduced = [builder.call(total, [builder.load(acc)]) for acc in sums]
        return context.make_tuple(builder, sig.return_type, reduced)

    return signature, codegen


@jit
def _int8_matmul_dots(x, weight, scale, out, path):  # pragma: no cover - compiled
    """x [n, k] f32 · (weight [m, k] int8 × scale [m] f32)ᵀ → out [n, m] f32 in tiles on
    ``path`` (an ``int16.path_code``; ``fits_tiles(k)``): as ``matmul.int8_matmul_rounded``
    (each row of x rounded to int16 with its own scale; NaN or infinity in x: the float
    kernel), the products of four rows of x and four weight rows a tile, each a whole int32
    sum. Fewer than four rows of x run ``int8_matmul_rounded`` (by ``vpmaddwd`` on the x86
    paths); the rows past a multiple of four its two-row tiles."""
    numba.literally(path)
    n, k = x.shape
    m = weight.shape[0]
    if n < TILE_ROWS or m % TILE_ROWS:
        int8_matmul_rounded(x, weight, scale, out, path)
        return
    xq = np.empty((n, k), np.int16)
    xscale = np.empty(n, np.float32)
    if not _quantize_rows_int16(x, xq, xscale):
        int8_matmul_float(x, weight, scale, out)
        return
    whole = n - n % TILE_ROWS
    pair = np.empty((2, 4), np.float32)
    for o in range(0, m, TILE_ROWS):
        rows = (o, o + 1, o + 2, o + 3)
        for b in range(0, whole, TILE_ROWS):
            sums = _int8_tile(xq, (b, b + 1, b + 2, b + 3), weight, rows, path)
            for p in range(TILE_ROWS):
                for j in range(TILE_ROWS):
                    out[b + p, o + j] = np.float32(sums[TILE_ROWS * p + j]) * (
                        scale[o + j] * xscale[b + p]
                    )
        for b in range(whole, n - 1, 2):
            _int_dots(xq, (b, b + 1), weight, rows, pair, path)
            for p in range(2):
                for j in range(TILE_ROWS):
                    out[b + p, o + j] = pair[p, j] * (scale[o + j] * xscale[b + p])
        if (n - whole) % 2:
            _int_dots(xq, (n - 1,), weight, rows, pair, path)
            for j in range(TILE_ROWS):
                out[n - 1, o + j] = pair[0, j] * (scale[o + j] * xscale[n - 1])


# One entry point a path, called from Python (a literal path given from Python would be
# dispatched again at every call).
@jit
def int8_matmul_vnni(x, weight, scale, out):  # pragma: no cover - compiled
    """``_int8_matmul_dots`` on zmm (AVX512_VNNI)."""
    _int8_matmul_dots(x, weight, scale, out, 0)


@jit
def int8_matmul_avx_vnni(x, weight, scale, out):  # pragma: no cover - compiled
    """``_int8_matmul_dots`` on ymm (AVX-VNNI)."""
    _int8_matmul_dots(x, weight, scale, out, 1)


@jit
def int8_matmul_portable_tiles(x, weight, scale, out):  # pragma: no cover - compiled
    """``_int8_matmul_dots`` in portable vector code (NEON on aarch64)."""
    _int8_matmul_dots(x, weight, scale, out, 3)


INT8_MATMULS = {
    "vnni": int8_matmul_vnni,
    "avx-vnni": int8_matmul_avx_vnni,
    "portable": int8_matmul_portable_tiles,
}
"""The int8 kernel of each path."""


def warm_up(path: str) -> None:
    """Compile (or load from the disk cache) the tiles on ``path`` now, at model load, on
    weights writable and read-only (memory-mapped from the narrow cache: numba compiles each
    apart); on the portable path also ``matmul.int8_matmul_portable``, which its linears of
    other depths run."""
    rows = np.zeros((TILE_ROWS, TILE_INPUTS), np.float32)
    result = np.empty((TILE_ROWS, TILE_ROWS), np.float32)
    for writable in (True, False):
        weight8, scale = np.zeros((TILE_ROWS, TILE_INPUTS), np.int8), np.ones(TILE_ROWS, np.float32)
        weight8.flags.writeable = scale.flags.writeable = writable
        INT8_MATMULS[path](rows, weight8, scale, result)
        if path == "portable":
            int8_matmul_portable(rows, weight8, scale, result)
