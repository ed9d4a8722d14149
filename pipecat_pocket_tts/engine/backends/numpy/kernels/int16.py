"""Integer dot products for Mimi's decoder (numba): the window product on 16-bit integers
(``int16_window_matmul``: its convs, transposed convs and transformer linears) on whichever of
three x86 instruction paths the CPU has (``INT16_KERNELS``, best first):

- ``"vnni"``: AVX512_VNNI ``vpdpwssd`` on zmm, 32 pairs of int16 into 16 int32 lanes an
  instruction (the same multiply-adds per cycle as ``vdpbf16ps``);
- ``"avx-vnni"``: AVX-VNNI, the VEX ``vpdpwssd`` on ymm (Intel from 12th gen, no AVX-512);
- ``"avx2"``: ``vpmaddwd`` (pairs of int16 products summed into int32) then ``vpaddd``.

Every path computes the same numbers for the same operands: the int32 sums are exact (no lane
can wrap, see below), and the float32 steps (a flush's sum times its row's scale added to the
float32 total, then the total times the column's scale added to the bias) are explicit fused
multiply-adds in the same order, lane for lane. The paths differ only in how many columns a
register holds (16 or 8) and so in how many passes a tile takes over its 32 columns.

A weight keeps 16 bits (one scale per output column) and an input 13 bits (one scale per time
row of the input, from that row's largest value): the full-size random pack's audio is 62–63 dB
from float32's, where bfloat16 in the transformer and two transposed convs gave 46–50 dB.

``int16_window_matmul`` is ``bf16_kernels.bf16_window_matmul`` on integers: the windows of a
conv (K = taps · C_in int16 in a row of memory) times a weight packed once at load, four
windows by 32 output columns a tile. A window's taps are rows of the input, each with its own
scale, so the int32 sums are turned into float32 every ``FLUSH_PAIRS`` pairs (a tap holds a
whole number of flushes) and multiplied by the row's scale as they are added to float32
accumulators; the tile ends by adding those times the columns' scales to the output (the bias).
Each row is quantized alone and each window summed alone, so a block of frames gives the same
bits as its frames one by one. The sampler's linears hold their inputs to ~26 bits in two passes
(``quantize_two_passes``: a row's codes, then its residual's, as two rows of the same product).

No int32 sum can wrap: a row's codes are at most ``INPUT_LIMIT`` in size, and each column's
weight scale is chosen at packing so that ``INPUT_LIMIT`` times the column's absolute codes over
any flush stays under 2^31 (``vpmaddwd``'s one wrapping case, two products of -32768, cannot
occur: weight codes stay within ±32767).
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from . import INT16_KERNELS
from .base import (
    FLOAT32_EXPONENT,
    bits_of_float32,
    compiles_for,
    float32_from_bits,
    jit,
    jit_nan_safe,
)
from .window import TileAddresses

INT16_ROWS = 4
"""Windows (output rows) a tile computes together."""
INT16_COLUMN_BLOCK = 32
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
PATH_FEATURES = {
    "vnni": ("avx512vnni", "avx512bw"),
    "avx-vnni": ("avxvnni",),
    "avx2": ("avx2", "fma"),
    "portable": (),
}
"""What numba must compile for (LLVM's x86 feature names) to build each path: the portable
path builds for any CPU."""
_PATH_CODES = {"vnni": 0, "avx-vnni": 1, "avx2": 2, "portable": 3}
PATH_LANES = (16, 8, 8, 8)
"""int32 / float32 lanes of one register, by path code."""
TILE_VECTORS = 2
"""Registers of columns a tile's pass holds per row: 8 int32 and 8 float32 accumulators, which
fit the 16 ymm registers of an AVX2 or AVX-VNNI CPU (4 gained ~15% on ymm here only with
AVX-512's 32 registers, and lost with 16: measured with the CPU forced to ``haswell`` and
``alderlake`` features)."""


def compiles_path(path: str) -> bool:
    """Whether numba compiles for a CPU that runs ``path`` (``base.compiles_for``; the
    portable path: any)."""
    features = PATH_FEATURES[path]
    return not features or compiles_for(*features)


INT16_PATHS = tuple(path for path in INT16_KERNELS if compiles_path(path))
"""The paths this process can run, best first."""
INT16_DOT = bool(INT16_PATHS)
"""Whether this process can run ``int16_window_matmul`` on some path."""


def path_code(path: str) -> int:
    """The number ``int16_window_matmul`` and ``int8_tiles`` take for ``path``."""
    return _PATH_CODES[path]


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


@jit_nan_safe
def quantize_two_passes(x, codes, scales):  # pragma: no cover - compiled
    """x [n, C] f32 → codes [2, n, C] int16 and scales [2, n] f32: pass 0 is x by
    ``quantize_rows``, pass 1 its residual x − code · scale (computed in float64, rounded once
    to float32) the same way, so a row's two passes hold it to about 26 bits, each row alone.
    A row holding NaN or infinity has NaN scales in both passes."""
    rows, channels = x.shape
    quantize_rows(x.reshape((1, rows, channels)), codes[0:1], scales[0:1])
    residual = np.empty((1, rows, channels), np.float32)
    for t in range(rows):
        scale = np.float64(scales[0, t])
        for c in range(channels):
            kept = np.float64(codes[0, t, c]) * scale
            residual[0, t, c] = np.float32(np.float64(x[t, c]) - kept)
    quantize_rows(residual, codes[1:2], scales[1:2])


def multiply_add(builder, path: int, lanes: int):
    """LLVM IR: a function (sums, inputs, weights) → sums + the pairwise products of ``lanes``
    · 2 int16 ``inputs`` and ``weights`` summed two by two into the ``lanes`` int32 ``sums``
    (``vpdpwssd``; on AVX2 ``vpmaddwd`` then ``vpaddd``; on the portable path the same sums
    in plain vector IR, which LLVM lowers to the target's own instructions): the same integers
    on every path."""
    ivec = ir.VectorType(ir.IntType(32), lanes)
    wvec = ir.VectorType(ir.IntType(16), 2 * lanes)
    if path == _PATH_CODES["portable"]:
        return _portable_multiply_add(builder, lanes)
    if path == _PATH_CODES["avx2"]:
        madd = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ivec, [wvec, wvec]), "llvm.x86.avx2.pmadd.wd"
        )
        return lambda sums, x, w: builder.add(sums, builder.call(madd, [x, w]))
    name = "llvm.x86.avx512.vpdpwssd." + ("512" if lanes == 16 else "256")
    dot = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(ivec, [ivec, wvec, wvec]), name
    )
    return lambda sums, x, w: builder.call(dot, [sums, x, w])


def _portable_multiply_add(builder, lanes: int):
    """``multiply_add`` in target-independent IR: widen both int16 vectors to int32, multiply
    lane by lane, add the even lanes' products to the odd lanes' and both to the sums."""
    i32 = ir.IntType(32)
    wide = ir.VectorType(i32, 2 * lanes)
    even = ir.Constant(ir.VectorType(i32, lanes), [2 * i for i in range(lanes)])
    odd = ir.Constant(ir.VectorType(i32, lanes), [2 * i + 1 for i in range(lanes)])

    def add_products(sums, x, w):
        products = builder.mul(builder.sext(x, wide), builder.sext(w, wide))
        pairs = builder.add(
            builder.shuffle_vector(products, products, even),
            builder.shuffle_vector(products, products, odd),
        )
        return builder.add(sums, pairs)

    return add_products


@intrinsic
def _int16_tile(
    typingctx,
    windows,
    packed,
    out,
    first,
    block,
    row_scales,
    column_scales,
    step,
    channels,
    path,
    rows,
):  # pragma: no cover - compiled
    """Rows ``first … first + rows - 1`` of the flattened windows (``TileAddresses``; ``rows``
    a literal, ``INT16_ROWS`` or 1 for the rows after the last whole tile):
    out[row, 32·block : 32·block + 32] += Σ_taps (windows[row, tap] · packed[block, tap]) ·
    row scale · column scales (windows [B, R, K] int16, tap t of window r being input row
    r·step + t of ``row_scales`` [B, L]; packed [blocks, K/2, 32] uint32; column_scales [N]
    f32; out [B, R, N] f32 holding the bias), on instruction path ``path`` (a literal
    ``path_code``): 32 columns in passes of two registers."""
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
        and isinstance(path, types.IntegerLiteral)
        and isinstance(rows, types.IntegerLiteral)
    )
    if not fits:
        return None
    code = path.literal_value
    lanes = PATH_LANES[code]
    vectors = TILE_VECTORS
    passes = INT16_COLUMN_BLOCK // (vectors * lanes)
    signature = types.none(
        windows, packed, out, first, block, row_scales, column_scales, step, channels, path, rows
    )

    def codegen(context, builder, sig, args):
        tile = TileAddresses(context, builder, sig, args, rows.literal_value)
        i32, f32 = ir.IntType(32), ir.FloatType()
        ivec, fvec = ir.VectorType(i32, lanes), ir.VectorType(f32, lanes)
        wvec = ir.VectorType(ir.IntType(16), 2 * lanes)
        add_products = multiply_add(builder, code, lanes)
        fma = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(fvec, [fvec, fvec, fvec]), f"llvm.fma.v{lanes}f32"
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
        c_base = builder.bitcast(columns_arr.data, ir.IntType(8).as_pointer())
        zero_f, zero_i = ir.Constant(fvec, None), ir.Constant(ivec, None)
        for part in range(passes):
            offset = const(4 * vectors * lanes * part)  # bytes into a pair's 32 columns
            column = builder.add(builder.mul(block_, const(4 * INT16_COLUMN_BLOCK)), offset)
            o_vectors = tile.outputs(column, fvec, vectors)
            floats = [cgutils.alloca_once_value(builder, zero_f) for _ in o_vectors]
            ints = [cgutils.alloca_once_value(builder, zero_i) for _ in o_vectors]
            with cgutils.for_range(builder, taps) as tap_loop:
                tap = tap_loop.index
                row_scales_now = [
                    tile.splat(tile.element(row, tap, s_strides[1], f32, 4), fvec)
                    for row in scale_rows
                ]
                with cgutils.for_range(builder, flushes) as flush_loop:
                    start = builder.add(
                        builder.mul(tap, tap_pairs),
                        builder.mul(flush_loop.index, const(FLUSH_PAIRS)),
                    )
                    for acc in ints:
                        builder.store(zero_i, acc)
                    with cgutils.for_range(builder, const(FLUSH_PAIRS)) as pair_loop:
                        p = builder.add(start, pair_loop.index)
                        w_p = builder.gep(
                            w_block, [builder.add(builder.mul(p, tile.w_strides[1]), offset)]
                        )
                        weights = tile.load_vectors(w_p, wvec, vectors)
                        for r, x_row in enumerate(x_rows):
                            pair = tile.splat(tile.element(x_row, p, pair_stride, i32, 2), ivec)
                            inputs = builder.bitcast(pair, wvec)
                            for v, weight in enumerate(weights):
                                acc = ints[r * vectors + v]
                                builder.store(add_products(builder.load(acc), inputs, weight), acc)
                    for index, (acc, total) in enumerate(zip(ints, floats, strict=True)):
                        sums = builder.sitofp(builder.load(acc), fvec)
                        row_scale = row_scales_now[index // vectors]
                        builder.store(
                            builder.call(fma, [sums, row_scale, builder.load(total)]), total
                        )
            column_scales_now = tile.load_vectors(builder.gep(c_base, [column]), fvec, vectors)
            for index, (total, pointer) in enumerate(zip(floats, o_vectors, strict=True)):
                scale = column_scales_now[index % vectors]
                bias = builder.load(pointer, align=4)
                result = builder.call(fma, [builder.load(total), scale, bias])
                builder.store(result, pointer, align=4)
        return context.get_dummy_value()

    return signature, codegen


@jit
def int16_window_matmul(
    windows, packed, out, row_scales, column_scales, step, channels, path
):  # pragma: no cover - compiled
    """out [B, R, N] += windows [B, R, K] · W: windows of int16 codes (a strided view of the
    codes ``quantize_rows`` wrote, window r starting at row r·step, K = taps · ``channels``),
    W [K, N] packed by ``pack_int16_columns``; tiles of ``INT16_ROWS`` rows of the B · R, the
    rows after the last whole tile one by one (a lone row reads the weight once, as a tile
    does, without three idle rows); out holds the bias (or zeros) on entry; ``path`` a
    ``path_code`` (each compiled apart, only when called). Each row's sums are its own, in
    the same order in a tile or alone: the same in any batch, on any path."""
    numba.literally(path)
    total = windows.shape[0] * windows.shape[1]
    whole = total - total % INT16_ROWS
    whole_tiles = whole // INT16_ROWS
    tiles = whole_tiles + total - whole  # the whole tiles, then the rows after them alone
    blocks = packed.shape[0]
    # Large weights: each block read once a call; small ones: the windows read once a call.
    large = packed.size * 4 > INT16_CACHED_WEIGHT_BYTES
    rs, cs = row_scales, column_scales
    for index in range(blocks * tiles):
        b, tile = (index // tiles, index % tiles) if large else (index % blocks, index // blocks)
        first = tile * INT16_ROWS if tile < whole_tiles else whole + tile - whole_tiles
        if first < whole:
            _int16_tile(windows, packed, out, first, b, rs, cs, step, channels, path, INT16_ROWS)
        else:
            _int16_tile(windows, packed, out, first, b, rs, cs, step, channels, path, 1)


# One entry point a path, called from Python (a literal path given from Python would be
# dispatched again at every call).
@jit
def int16_window_matmul_vnni(
    windows, packed, out, row_scales, column_scales, step, channels
):  # pragma: no cover - compiled
    """``int16_window_matmul`` on zmm (AVX512_VNNI)."""
    int16_window_matmul(windows, packed, out, row_scales, column_scales, step, channels, 0)


@jit
def int16_window_matmul_avx_vnni(
    windows, packed, out, row_scales, column_scales, step, channels
):  # pragma: no cover - compiled
    """``int16_window_matmul`` on ymm (AVX-VNNI)."""
    int16_window_matmul(windows, packed, out, row_scales, column_scales, step, channels, 1)


@jit
def int16_window_matmul_avx2(
    windows, packed, out, row_scales, column_scales, step, channels
):  # pragma: no cover - compiled
    """``int16_window_matmul`` on ymm (AVX2)."""
    int16_window_matmul(windows, packed, out, row_scales, column_scales, step, channels, 2)


@jit
def int16_window_matmul_portable(
    windows, packed, out, row_scales, column_scales, step, channels
):  # pragma: no cover - compiled
    """``int16_window_matmul`` in portable vector code (NEON on aarch64)."""
    int16_window_matmul(windows, packed, out, row_scales, column_scales, step, channels, 3)


WINDOW_MATMULS = {
    "vnni": int16_window_matmul_vnni,
    "avx-vnni": int16_window_matmul_avx_vnni,
    "avx2": int16_window_matmul_avx2,
    "portable": int16_window_matmul_portable,
}
"""The window product of each path (``INT16_KERNELS``)."""


def warm_up(path: str) -> None:
    """Compile (or load from the disk cache) the int16 window kernels of ``path`` now, at
    model load: the window product on a conv's overlapping windows and on plain rows, and the
    row quantizations (one pass and two)."""
    channels = 2 * FLUSH_PAIRS
    x = np.zeros((1, INT16_ROWS + 1, channels), np.float32)
    codes = np.zeros(x.shape, np.int16)
    scales = np.zeros(x.shape[:2], np.float32)
    quantize_rows(x, codes, scales)
    two_passes = np.zeros((2, *x.shape[1:]), np.int16)
    quantize_two_passes(x[0], two_passes, np.zeros(two_passes.shape[:2], np.float32))
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
        WINDOW_MATMULS[path](windows, packed, out, scales, columns, 1, channels)
