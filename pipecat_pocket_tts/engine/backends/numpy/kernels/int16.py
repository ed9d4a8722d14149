"""Integer dot products on AVX512_VNNI (numba), two products an instruction lane: Mimi's
decoder on 16-bit integers (``int16_window_matmul``: its convs, transposed convs and
transformer linears) and the FlowLM's int8 linears (``int8_matmul_vnni``).

``vpdpwssd`` multiplies 32 pairs of int16 and adds each pair's two products into one of 16
int32 lanes: twice the multiply-adds of a float32 FMA of the same width, as ``vdpbf16ps``. Where
bfloat16 keeps 8 bits of each operand, here a weight keeps 16 bits (one scale per output
column) and an input 13 bits (one scale per time row of the input, from that row's largest
value): the full-size random pack's audio is 62–63 dB from float32's, where bfloat16 in the
transformer and two transposed convs gave 46–50 dB.

``int16_window_matmul`` is ``bf16_kernels.bf16_window_matmul`` on those units: the windows of a
conv (K = taps · C_in int16 in a row of memory) times a weight packed once at load, four
windows by 32 output columns a tile. A window's taps are rows of the input, each with its own
scale, so the int32 sums are turned into float32 every ``FLUSH_PAIRS`` pairs (a tap holds a
whole number of flushes) and multiplied by the row's scale as they are added to float32
accumulators; the tile ends by adding those times the columns' scales to the output (the bias).
Each row is quantized alone and each window summed alone, so a block of frames gives the same
bits as its frames one by one.

No int32 sum can wrap: a row's codes are at most ``INPUT_LIMIT`` in size, and each column's
weight scale is chosen at packing so that ``INPUT_LIMIT`` times the column's absolute codes over
any flush stays under 2^31.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from .base import (
    FLOAT32_EXPONENT,
    bits_of_float32,
    compiles_for,
    float32_from_bits,
    jit,
    jit_nan_safe,
    row_pointers,
)
from .matmul import _int_dots, _quantize_rows_int16, int8_matmul_float, int8_matmul_int16
from .window import TileAddresses

INT16_ROWS = 4
"""Windows (output rows) a tile computes together."""
INT16_LANES = 16
"""int32 / float32 lanes of one accumulator (a 512-bit register)."""
INT16_COLUMN_BLOCK = 2 * INT16_LANES
"""Output columns a tile computes together; packed weights are cut in blocks this wide."""
FLUSH_PAIRS = 16
"""Pairs summed in int32 before the sums go to float32: the channels of a tap must be a
multiple of twice this."""
INPUT_LIMIT = 4095
"""The largest input code (13 bits with the sign): a row's largest value maps to it."""
WEIGHT_LIMIT = 32767
"""The largest weight code."""
SUM_LIMIT = 2**31 - 2**24
"""What ``INPUT_LIMIT`` times a flush's absolute weight codes stays under (int32, a margin)."""
INT16_CACHED_WEIGHT_BYTES = 256 * 1024
"""As ``window_kernels.CACHED_WEIGHT_BYTES``."""


def host_has_int16_dot() -> bool:
    """Whether numba compiles for a CPU with AVX512_VNNI (``kernel_base.compiles_for``)."""
    return compiles_for("avx512vnni", "avx512bw")


INT16_DOT = host_has_int16_dot()
"""Whether this process can run ``int16_window_matmul``."""


def fits_int16(depth: int, columns: int, channels: int) -> bool:
    """Whether a [depth, columns] weight whose taps are ``channels`` deep packs here."""
    return (
        channels % (2 * FLUSH_PAIRS) == 0
        and depth % channels == 0
        and columns % INT16_COLUMN_BLOCK == 0
    )


def pack_int16_columns(matrix: np.ndarray, channels: int) -> tuple[np.ndarray, np.ndarray]:
    """matrix [K, N] float32 (taps of ``channels`` rows; ``fits_int16``) → (packed
    [N / 32, K / 2, 32] uint32, column scales [N] float32): lane c of pair p holds the int16
    codes of matrix[2p, c] (low half) and matrix[2p + 1, c] (high half), rounded to nearest;
    a column's value is its code times its scale."""
    k, n = matrix.shape
    if not fits_int16(k, n, channels):
        raise ValueError(f"a [{k}, {n}] weight of {channels}-deep taps does not pack in int16")
    weight = np.asarray(matrix, np.float64)
    largest = np.abs(weight).max(axis=0)
    flush_sums = np.abs(weight).reshape(k // (2 * FLUSH_PAIRS), 2 * FLUSH_PAIRS, n).sum(axis=1)
    widest = flush_sums.max(axis=0)
    # Rounding adds at most half a code to each of a flush's 2·FLUSH_PAIRS weights.
    room = (SUM_LIMIT / INPUT_LIMIT - FLUSH_PAIRS) / np.maximum(widest, 1e-30)
    scale = np.minimum(WEIGHT_LIMIT / np.maximum(largest, 1e-30), room)
    scale[largest == 0] = 1.0
    codes = np.rint(weight * scale).astype(np.int16)
    bits = codes.view(np.uint16).astype(np.uint32)
    pairs = bits[0::2] | (bits[1::2] << np.uint32(16))  # [K/2, N]
    blocks = pairs.reshape(k // 2, n // INT16_COLUMN_BLOCK, INT16_COLUMN_BLOCK).transpose(1, 0, 2)
    return np.ascontiguousarray(blocks), (1.0 / scale).astype(np.float32)


@jit_nan_safe
def quantize_rows(x, codes, scales):  # pragma: no cover - compiled
    """x [B, L, C] f32 → codes [B, ≥ L, C] int16 and scales [B, ≥ L] f32, row by row: a row's
    largest magnitude becomes ``INPUT_LIMIT``, its value = code · scale. A zero row has scale
    0; a row holding NaN or infinity has codes 0 and scale NaN (its sums become NaN, as in
    float32)."""
    limit = np.float32(INPUT_LIMIT)
    for b in range(x.shape[0]):
        for t in range(x.shape[1]):
            # The largest magnitude as the largest bit pattern without the sign (an integer
            # max, which vectorizes): patterns from 0x7F800000 up are infinity and NaN.
            top = np.int32(0)
            for c in range(x.shape[2]):
                top = max(top, bits_of_float32(x[b, t, c]) & np.int32(0x7FFFFFFF))
            if top >= FLOAT32_EXPONENT or top == 0:
                scales[b, t] = np.float32(np.nan) if top else np.float32(0.0)
                codes[b, t, :] = 0
                continue
            largest = float32_from_bits(top)
            factor = limit / largest
            scales[b, t] = largest / limit
            for c in range(x.shape[2]):
                codes[b, t, c] = np.int16(np.rint(x[b, t, c] * factor))


@intrinsic
def _int16_tile(
    typingctx, windows, packed, out, first, block, row_scales, column_scales, step, channels
):  # pragma: no cover - compiled
    """Rows ``first … first + 3`` of the flattened windows (``TileAddresses``):
    out[row, 32·block : 32·block + 32] += Σ_taps (windows[row, tap] · packed[block, tap]) ·
    row scale · column scales (windows [B, R, K] int16, tap t of window r being input row
    r·step + t of ``row_scales`` [B, L]; packed [blocks, K/2, 32] uint32; column_scales [N]
    f32; out [B, R, N] f32 holding the bias)."""
    arrays = (windows, packed, out, row_scales, column_scales)
    fits = (
        all(isinstance(a, types.Array) for a in arrays)
        and (windows.ndim, packed.ndim, out.ndim, row_scales.ndim, column_scales.ndim)
        == (3, 3, 3, 2, 1)
        and windows.dtype == types.int16
        and packed.dtype == types.uint32
        and out.dtype == types.float32
        and row_scales.dtype == types.float32
        and column_scales.dtype == types.float32
    )
    if not fits:
        return None
    signature = types.none(
        windows, packed, out, first, block, row_scales, column_scales, step, channels
    )

    def codegen(context, builder, sig, args):
        tile = TileAddresses(context, builder, sig, args, INT16_ROWS)
        i32, f32 = ir.IntType(32), ir.FloatType()
        ivec, fvec = ir.VectorType(i32, INT16_LANES), ir.VectorType(f32, INT16_LANES)
        wvec = ir.VectorType(ir.IntType(16), 2 * INT16_LANES)
        dot = cgutils.get_or_insert_function(
            builder.module,
            ir.FunctionType(ivec, [ivec, wvec, wvec]),
            "llvm.x86.avx512.vpdpwssd.512",
        )
        const = tile.const
        block_, step_, channels_ = args[4], args[7], args[8]
        scales_arr = context.make_array(sig.args[5])(context, builder, args[5])
        columns_arr = context.make_array(sig.args[6])(context, builder, args[6])
        s_strides = cgutils.unpack_tuple(builder, scales_arr.strides, 2)
        s_base = builder.bitcast(scales_arr.data, ir.IntType(8).as_pointer())
        scale_rows = [
            builder.gep(
                s_base,
                [
                    builder.add(
                        builder.mul(seq, s_strides[0]),
                        builder.mul(builder.mul(row, step_), s_strides[1]),
                    )
                ],
            )
            for seq, row in tile.places
        ]
        pair_stride = builder.mul(tile.x_strides[2], const(2))
        tap_pairs = builder.sdiv(channels_, const(2))
        taps = builder.sdiv(tile.w_shape[1], tap_pairs)
        flushes = builder.sdiv(tap_pairs, const(FLUSH_PAIRS))
        x_rows = tile.windows()
        w_block = tile.weight_block(block_)
        column = builder.mul(block_, const(4 * INT16_COLUMN_BLOCK))
        o_vectors = tile.outputs(column, fvec, 2)
        zero_f, zero_i = ir.Constant(fvec, None), ir.Constant(ivec, None)
        floats = [cgutils.alloca_once_value(builder, zero_f) for _ in o_vectors]
        ints = [cgutils.alloca_once_value(builder, zero_i) for _ in o_vectors]

        with cgutils.for_range(builder, taps) as tap_loop:
            tap = tap_loop.index
            row_scales_now = [
                tile.splat(tile.element(row, tap, s_strides[1], f32, 4), fvec) for row in scale_rows
            ]
            with cgutils.for_range(builder, flushes) as flush_loop:
                start = builder.add(
                    builder.mul(tap, tap_pairs), builder.mul(flush_loop.index, const(FLUSH_PAIRS))
                )
                for acc in ints:
                    builder.store(zero_i, acc)
                with cgutils.for_range(builder, const(FLUSH_PAIRS)) as pair_loop:
                    p = builder.add(start, pair_loop.index)
                    w_p = builder.gep(w_block, [builder.mul(p, tile.w_strides[1])])
                    weights = tile.load_vectors(w_p, wvec, 2)
                    for r, x_row in enumerate(x_rows):
                        pair = tile.splat(tile.element(x_row, p, pair_stride, i32, 2), ivec)
                        inputs = builder.bitcast(pair, wvec)
                        for v, weight in enumerate(weights):
                            acc = ints[r * 2 + v]
                            builder.store(
                                builder.call(dot, [builder.load(acc), inputs, weight]), acc
                            )
                for index, (acc, total) in enumerate(zip(ints, floats, strict=True)):
                    sums = builder.sitofp(builder.load(acc), fvec)
                    scaled = builder.fmul(sums, row_scales_now[index // 2], flags=("fast",))
                    builder.store(builder.fadd(builder.load(total), scaled, flags=("fast",)), total)
        c_base = builder.bitcast(columns_arr.data, ir.IntType(8).as_pointer())
        c_start = builder.gep(c_base, [column])
        column_scales_now = tile.load_vectors(c_start, fvec, 2)
        for index, (total, pointer) in enumerate(zip(floats, o_vectors, strict=True)):
            scaled = builder.fmul(
                builder.load(total), column_scales_now[index % 2], flags=("fast",)
            )
            result = builder.fadd(builder.load(pointer, align=4), scaled, flags=("fast",))
            builder.store(result, pointer, align=4)
        return context.get_dummy_value()

    return signature, codegen


@jit
def int16_window_matmul(
    windows, packed, out, row_scales, column_scales, step, channels
):  # pragma: no cover - compiled
    """out [B, R, N] += windows [B, R, K] · W: windows of int16 codes (a strided view of the
    codes ``quantize_rows`` wrote, window r starting at row r·step, K = taps · ``channels``),
    W [K, N] packed by ``pack_int16_columns``; B · R a multiple of ``INT16_ROWS``; out holds
    the bias (or zeros) on entry. Each row's sums are its own: the same in any batch."""
    total = windows.shape[0] * windows.shape[1]
    blocks = packed.shape[0]
    if packed.size * 4 > INT16_CACHED_WEIGHT_BYTES:
        for b in range(blocks):  # large weights: each block read once a call
            for first in range(0, total, INT16_ROWS):
                _int16_tile(
                    windows, packed, out, first, b, row_scales, column_scales, step, channels
                )
    else:
        for first in range(0, total, INT16_ROWS):  # small weights: windows read once a call
            for b in range(blocks):
                _int16_tile(
                    windows, packed, out, first, b, row_scales, column_scales, step, channels
                )


def warm_up() -> None:
    """Compile (or load from the disk cache) the int16 kernels now, at model load: the window
    product on a conv's overlapping windows and on plain rows, and the int8 matmul on weights
    writable and read-only (memory-mapped from the narrow cache: numba compiles each apart)."""
    channels = 2 * FLUSH_PAIRS
    x = np.zeros((1, INT16_ROWS + 1, channels), np.float32)
    codes = np.zeros(x.shape, np.int16)
    scales = np.zeros(x.shape[:2], np.float32)
    quantize_rows(x, codes, scales)
    out = np.zeros((1, INT16_ROWS, INT16_COLUMN_BLOCK), np.float32)
    seq, row, item = codes.strides
    overlapping = np.lib.stride_tricks.as_strided(
        codes, (1, INT16_ROWS, 2 * channels), (seq, row, item)
    )
    plain = np.lib.stride_tricks.as_strided(codes, (1, INT16_ROWS, channels), (seq, row, item))
    for windows in (overlapping, plain):
        depth = windows.shape[2]
        weight = np.zeros((depth, INT16_COLUMN_BLOCK), np.float32)
        packed, columns = pack_int16_columns(weight, channels)
        int16_window_matmul(windows, packed, out, scales, columns, 1, channels)
    rows = np.zeros((VNNI_ROWS, VNNI_INPUTS), np.float32)
    result = np.empty((VNNI_ROWS, VNNI_ROWS), np.float32)
    for writable in (True, False):
        weight8, scale = np.zeros((VNNI_ROWS, VNNI_INPUTS), np.int8), np.ones(VNNI_ROWS, np.float32)
        weight8.flags.writeable = scale.flags.writeable = writable
        int8_matmul_vnni(rows, weight8, scale, result)


# -- int8 weights × int16 inputs: the FlowLM's linears ------------------------------------------
VNNI_ROWS = 4
"""Rows of x, and rows of the weight, a tile of ``int8_matmul_vnni`` takes together."""
VNNI_INPUTS = 2 * INT16_LANES
"""Inputs one ``vpdpwssd`` takes: 32 int16 of x against 32 int8 weights widened."""
VNNI_MAX_DEPTH = 8192
"""Longest reduction whose int32 lanes cannot wrap: each lane sums depth / 16 products of an
int16 code (≤ 32767) and an int8 code (≤ 128), 8192 / 16 · 32767 · 128 < 2^31."""


def fits_vnni(depth: int) -> bool:
    """Whether ``int8_matmul_vnni`` takes a weight of ``depth`` inputs."""
    return depth % VNNI_INPUTS == 0 and depth <= VNNI_MAX_DEPTH


@intrinsic
def _vnni_tile(typingctx, xq, x_rows, weight, rows):  # pragma: no cover - compiled
    """Σ_i xq[x_rows[p], i] · weight[rows[j], i] over every i for the 16 pairs (p, j) →
    16 int32 (x row p's four, then the next row's), by ``vpdpwssd`` on 32 inputs at a time:
    xq [n, k] int16, weight [m, k] int8, both C-contiguous, k a multiple of 32 and at most
    ``VNNI_MAX_DEPTH``; x_rows and rows tuples of four."""
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
        and len(x_rows) == VNNI_ROWS
        and isinstance(rows, types.UniTuple)
        and len(rows) == VNNI_ROWS
    )
    if not fits:
        return None
    signature = types.UniTuple(types.int32, VNNI_ROWS * VNNI_ROWS)(xq, x_rows, weight, rows)

    def codegen(context, builder, sig, args):
        x_arr = context.make_array(sig.args[0])(context, builder, args[0])
        w_arr = context.make_array(sig.args[2])(context, builder, args[2])
        i8, i16, i32 = ir.IntType(8), ir.IntType(16), ir.IntType(32)
        wide = ir.VectorType(i16, VNNI_INPUTS)
        narrow = ir.VectorType(i8, VNNI_INPUTS)
        acc_vec = ir.VectorType(i32, INT16_LANES)
        intp = context.get_value_type(types.intp)
        dot = cgutils.get_or_insert_function(
            builder.module,
            ir.FunctionType(acc_vec, [acc_vec, wide, wide]),
            "llvm.x86.avx512.vpdpwssd.512",
        )
        total = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(i32, [acc_vec]), "llvm.vector.reduce.add.v16i32"
        )

        x_starts = row_pointers(builder, x_arr, args[1], VNNI_ROWS, i16)
        w_starts = row_pointers(builder, w_arr, args[3], VNNI_ROWS, i8)
        depth = cgutils.unpack_tuple(builder, x_arr.shape, 2)[1]
        sums = [
            cgutils.alloca_once_value(builder, ir.Constant(acc_vec, None))
            for _ in range(VNNI_ROWS * VNNI_ROWS)
        ]
        step = ir.Constant(intp, VNNI_INPUTS)
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
                    acc = sums[VNNI_ROWS * p + j]
                    builder.store(builder.call(dot, [builder.load(acc), x_val, w_val]), acc)
        reduced = [builder.call(total, [builder.load(acc)]) for acc in sums]
        return context.make_tuple(builder, sig.return_type, reduced)

    return signature, codegen


@jit
def int8_matmul_vnni(x, weight, scale, out):  # pragma: no cover - compiled
    """x [n, k] f32 · (weight [m, k] int8 × scale [m] f32)ᵀ → out [n, m] f32 by ``vpdpwssd``
    (``fits_vnni(k)``): as ``matmul_kernels.int8_matmul_int16`` (each row of x rounded to int16
    with its own scale; NaN or infinity in x: the float kernel), the products of four rows of x
    and four weight rows a tile, each a whole int32 sum (no sum can wrap). Fewer than four rows
    of x run ``int8_matmul_int16``; the rows past a multiple of four its two-row tiles."""
    n, k = x.shape
    m = weight.shape[0]
    if n < VNNI_ROWS or m % VNNI_ROWS:
        int8_matmul_int16(x, weight, scale, out)
        return
    xq = np.empty((n, k), np.int16)
    xscale = np.empty(n, np.float32)
    if not _quantize_rows_int16(x, xq, xscale):
        int8_matmul_float(x, weight, scale, out)
        return
    whole = n - n % VNNI_ROWS
    pair = np.empty((2, 4), np.float32)
    for o in range(0, m, VNNI_ROWS):
        rows = (o, o + 1, o + 2, o + 3)
        for b in range(0, whole, VNNI_ROWS):
            sums = _vnni_tile(xq, (b, b + 1, b + 2, b + 3), weight, rows)
            for p in range(VNNI_ROWS):
                for j in range(VNNI_ROWS):
                    out[b + p, o + j] = np.float32(sums[VNNI_ROWS * p + j]) * (
                        scale[o + j] * xscale[b + p]
                    )
        for b in range(whole, n - 1, 2):
            _int_dots(xq, (b, b + 1), weight, rows, pair)
            for p in range(2):
                for j in range(VNNI_ROWS):
                    out[b + p, o + j] = pair[p, j] * (scale[o + j] * xscale[b + p])
        if (n - whole) % 2:
            _int_dots(xq, (n - 1,), weight, rows, pair)
            for j in range(VNNI_ROWS):
                out[n - 1, o + j] = pair[0, j] * (scale[o + j] * xscale[n - 1])
