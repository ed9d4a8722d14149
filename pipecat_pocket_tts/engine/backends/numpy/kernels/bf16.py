"""bfloat16 dot products on AVX512_BF16 (numba): Mimi's convolutions and linears, two
products an instruction lane.

``vdpbf16ps`` multiplies 32 pairs of bfloat16 and adds each pair's two products into one of 16
float32 lanes: twice the multiply-adds of a float32 FMA of the same width (on AMD Zen 4, whose
512-bit datapaths are two 256-bit halves, twice the multiply-adds a cycle of the float32 kernels).
The sums stay float32; only the operands are rounded to bfloat16 (8 bits of mantissa).

``bf16_window_matmul`` is ``window_kernels.window_matmul`` in that arithmetic: windows of a
time-major input (each window K bfloat16 in a row of memory: a conv's taps, a transposed
conv's blocks, or a plain row of a linear's input) times a weight packed once at load, four
windows by 32 output columns a tile, 8 accumulators of 16 floats in registers. The input is
rounded to bfloat16 on its way into the padded buffer the windows read (``to_bf16``,
``elu_to_bf16``, rounding to nearest even), so the streaming state (histories, partials,
the attention cache) stays float32.

The instruction is LLVM's ``llvm.x86.avx512bf16.dpbf16ps.512`` (llvmlite spells no bfloat
type: ``_BFloat`` writes it); the callers compile and run it only where ``BF16_DOT`` (numba
compiles for a CPU with ``avx512bf16``). ``tests/engine/backends/numpy/test_wide_arithmetic.py``
reads the instruction back from the compiled assembly.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from .base import bits_of_float32, compiles_for, jit, jit_nan_safe
from .layer import _exp_minus_one
from .window import TileAddresses

BF16_ROWS = 4
"""Windows (output rows) a tile computes together."""
BF16_LANES = 16
"""float32 lanes of one accumulator (a 512-bit register)."""
BF16_COLUMN_BLOCK = 2 * BF16_LANES
"""Output columns a tile computes together; packed weights are cut in blocks this wide."""
BF16_CACHED_WEIGHT_BYTES = 256 * 1024
"""As ``window_kernels.CACHED_WEIGHT_BYTES``: larger packed weights are walked block by block
over every stream."""


def host_has_bf16_dot() -> bool:
    """Whether numba compiles for a CPU with AVX512_BF16 (``kernel_base.compiles_for``)."""
    return compiles_for("avx512bf16", "avx512f")


BF16_DOT = host_has_bf16_dot()
"""Whether this process can run ``bf16_window_matmul``."""


def pack_bf16_columns(matrix: np.ndarray) -> np.ndarray:
    """matrix [K, N] float32 (K even, N a multiple of 32) → packed [N / 32, K / 2, 32] uint32:
    lane c of pair p holds bfloat16(matrix[2p, c]) in its low half and matrix[2p + 1, c] in
    its high half (``vdpbf16ps``'s pairs), rounded to nearest even."""
    k, n = matrix.shape
    if k % 2 or n % BF16_COLUMN_BLOCK:
        raise ValueError(f"a [{k}, {n}] weight does not pack in bfloat16 pairs of 32 columns")
    narrow = np.empty(k * n, np.uint16)
    to_bf16(np.ascontiguousarray(matrix, np.float32).reshape(-1), narrow)
    bits = narrow.reshape(k, n).astype(np.uint32)
    pairs = bits[0::2] | (bits[1::2] << np.uint32(16))  # [K/2, N]
    blocks = pairs.reshape(k // 2, n // BF16_COLUMN_BLOCK, BF16_COLUMN_BLOCK).transpose(1, 0, 2)
    return np.ascontiguousarray(blocks)


@jit_nan_safe
def _bf16_bits(value):  # pragma: no cover - compiled
    """float32 → its bfloat16 bit pattern (uint16), nearest even; NaN → 0x7FC0 (as
    ``linears.to_bfloat16_bits``)."""
    bits = np.int64(bits_of_float32(value)) & np.int64(0xFFFFFFFF)
    rounded = (bits + np.int64(0x7FFF) + ((bits >> np.int64(16)) & np.int64(1))) >> 16
    return np.uint16(np.int64(0x7FC0) if value != value else rounded & np.int64(0xFFFF))


@jit_nan_safe
def to_bf16(x, out):  # pragma: no cover - compiled
    """x [n] f32 → out [n] uint16 bfloat16 bits (both contiguous), nearest even."""
    for i in range(x.shape[0]):
        out[i] = _bf16_bits(x[i])


@jit_nan_safe
def elu_to_bf16(x, out):  # pragma: no cover - compiled
    """ELU (alpha 1, as ``layer_kernels.elu_flat``) of x [n] f32 → out [n] bfloat16 bits."""
    for i in range(x.shape[0]):
        v = x[i]
        y = _exp_minus_one(max(min(v, np.float32(0.0)), np.float32(-87.0)))
        y = v if v > np.float32(0.0) else y
        out[i] = _bf16_bits(v if v != v else y)


class _BFloat(ir.Type):
    """LLVM's ``bfloat`` (llvmlite has no such type): the intrinsic's operand element."""

    def _to_string(self) -> str:
        return "bfloat"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _BFloat)

    def __hash__(self) -> int:
        return hash("bfloat")


@intrinsic
def _bf16_tile(typingctx, windows, packed, out, first, block):  # pragma: no cover - compiled
    """Rows ``first … first + 3`` of the flattened windows (``TileAddresses``):
    out[row, 32·block : 32·block + 32] += windows[row, :] · packed[block] (windows [B, R, K]
    uint16 bfloat16 bits, any strides, each window's K elements one run of memory; packed
    [blocks, K/2, 32] uint32; out [B, R, N] f32)."""
    fits = (
        all(isinstance(a, types.Array) and a.ndim == 3 for a in (windows, packed, out))
        and windows.dtype == types.uint16
        and packed.dtype == types.uint32
        and out.dtype == types.float32
    )
    if not fits:
        return None
    signature = types.none(windows, packed, out, first, block)

    def codegen(context, builder, sig, args):
        tile = TileAddresses(context, builder, sig, args, BF16_ROWS)
        i32, f32 = ir.IntType(32), ir.FloatType()
        fvec, ivec = ir.VectorType(f32, BF16_LANES), ir.VectorType(i32, BF16_LANES)
        bvec = ir.VectorType(_BFloat(), 2 * BF16_LANES)
        dot = cgutils.get_or_insert_function(
            builder.module,
            ir.FunctionType(fvec, [fvec, bvec, bvec]),
            "llvm.x86.avx512bf16.dpbf16ps.512",
        )
        pair_stride = builder.mul(tile.x_strides[2], tile.const(2))
        x_rows = tile.windows()
        w_block = tile.weight_block(args[4])
        o_vectors = tile.outputs(builder.mul(args[4], tile.const(4 * BF16_COLUMN_BLOCK)), fvec, 2)
        sums = tile.accumulators(o_vectors)
        with cgutils.for_range(builder, tile.w_shape[1]) as loop:
            p = loop.index
            w_p = builder.gep(w_block, [builder.mul(p, tile.w_strides[1])])
            weights = tile.load_vectors(w_p, ivec, 2)
            for r, x_row in enumerate(x_rows):
                pair = tile.splat(tile.element(x_row, p, pair_stride, i32, 2), ivec)
                for v, weight in enumerate(weights):
                    acc = sums[r * 2 + v]
                    pairs = [builder.bitcast(pair, bvec), builder.bitcast(weight, bvec)]
                    builder.store(builder.call(dot, [builder.load(acc), *pairs]), acc)
        tile.write_back(sums, o_vectors)
        return context.get_dummy_value()

    return signature, codegen


@jit
def bf16_window_matmul(windows, packed, out):  # pragma: no cover - compiled
    """out [B, R, N] += windows [B, R, K] · W, windows bfloat16 bits (uint16; may be a strided
    view whose rows overlap), W [K, N] packed by ``pack_bf16_columns`` into [N / 32, K / 2, 32]
    uint32; B · R a multiple of ``BF16_ROWS`` (tiles may span streams); out holds the bias (or
    zeros) on entry. Each row's sums are its own: the same in any batch."""
    total = windows.shape[0] * windows.shape[1]
    blocks = packed.shape[0]
    if packed.size * 4 > BF16_CACHED_WEIGHT_BYTES:
        for b in range(blocks):  # large weights: each block read once a call
            for first in range(0, total, BF16_ROWS):
                _bf16_tile(windows, packed, out, first, b)
    else:
        for first in range(0, total, BF16_ROWS):  # small weights: windows read once a call
            for b in range(blocks):
                _bf16_tile(windows, packed, out, first, b)


def warm_up() -> None:
    """Compile (or load from the disk cache) the bfloat16 kernels now, at model load."""
    x = np.zeros(2 * BF16_COLUMN_BLOCK, np.float32)
    bits = np.empty(x.size, np.uint16)
    to_bf16(x, bits)
    elu_to_bf16(x, bits)
    packed = pack_bf16_columns(np.zeros((2, BF16_COLUMN_BLOCK), np.float32))
    narrow = np.zeros((1, BF16_ROWS + 1, 2), np.uint16)
    out = np.zeros((1, BF16_ROWS, BF16_COLUMN_BLOCK), np.float32)
    seq, row, item = narrow.strides
    windows = np.lib.stride_tricks.as_strided(narrow, (1, BF16_ROWS, 2), (seq, row, item))
    for view in (windows, narrow[:, :BF16_ROWS]):  # overlapping windows, and plain rows
        bf16_window_matmul(view, packed, out)
