"""Compiled products of sliding windows with a packed weight: Mimi's convolutions (numba).

A causal conv of stride s and dilation 1 on a time-major input ``padded [T, C_in]`` is a
matrix product whose row r is the window ``padded[r·s : r·s + K]`` flattened, K·C_in floats
in a row of memory. ``window_matmul`` reads those windows where they lie (a strided view, no
im2col copy) and multiplies them by the weight packed in blocks of 16 output columns, four
windows at a time: 8 accumulators of 8 floats stay in registers for the whole reduction, each
weight vector loaded once feeds four FMAs.

Against OpenBLAS on the Mimi decoder's convs (full-size ``english``, 6 streams, one thread,
each conv timed both ways in one process), the narrow ones gain most (1.5–1.7× at 32 output
columns): OpenBLAS packs both operands for every call, here the weight is packed once, at
load. The transposed convs stay on BLAS, which won on their wide outputs.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from .kernel_base import jit

WINDOW_ROWS = 4
"""Windows (output frames) a tile computes together."""
COLUMN_VECTORS = 2
"""8-float vectors of output columns a tile holds: 4 · 2 accumulators in registers."""
COLUMN_BLOCK = 8 * COLUMN_VECTORS
"""Output columns a tile computes together; packed weights are cut in blocks this wide."""
CACHED_WEIGHT_BYTES = 256 * 1024
"""Packed weights above this size are walked block by block over every stream (each block
read once from memory per call); smaller ones stream by stream (each stream's windows read
once)."""


def pack_columns(matrix: np.ndarray) -> np.ndarray:
    """matrix [K, N] float32 (N a multiple of ``COLUMN_BLOCK``) → packed [N / 16, K, 16]."""
    k, n = matrix.shape
    if n % COLUMN_BLOCK:
        raise ValueError(f"{n} output columns are not a multiple of {COLUMN_BLOCK}")
    blocks = matrix.reshape(k, n // COLUMN_BLOCK, COLUMN_BLOCK).transpose(1, 0, 2)
    return np.ascontiguousarray(blocks, dtype=np.float32)


@intrinsic
def _window_tile(typingctx, windows, packed, out, seq, row, block):  # pragma: no cover - compiled
    """out[seq, row : row + 4, 16·block : 16·block + 16] += windows[seq, row : row + 4, :] ·
    packed[block] (windows [B, R, K] f32 of any strides; packed [blocks, K, 16] and out
    [B, R, N] f32 with unit strides in their last axis)."""
    fits = all(isinstance(a, types.Array) and a.ndim == 3 for a in (windows, packed, out)) and all(
        a.dtype == types.float32 for a in (windows, packed, out)
    )
    if not fits:
        return None
    signature = types.none(windows, packed, out, seq, row, block)

    def codegen(context, builder, sig, args):
        x_arr, w_arr, o_arr = (
            context.make_array(sig.args[i])(context, builder, args[i]) for i in range(3)
        )
        seq_, row_, block_ = args[3], args[4], args[5]
        i8, i32, f32 = ir.IntType(8), ir.IntType(32), ir.FloatType()
        vec = ir.VectorType(f32, 8)
        intp = context.get_value_type(types.intp)

        def const(value: int) -> ir.Constant:
            return ir.Constant(intp, value)

        def byte_pointer(array) -> ir.Value:
            return builder.bitcast(array.data, i8.as_pointer())

        x_strides = cgutils.unpack_tuple(builder, x_arr.strides, 3)
        w_strides = cgutils.unpack_tuple(builder, w_arr.strides, 3)
        o_strides = cgutils.unpack_tuple(builder, o_arr.strides, 3)
        k_count = cgutils.unpack_tuple(builder, w_arr.shape, 3)[1]
        x_seq = builder.gep(byte_pointer(x_arr), [builder.mul(seq_, x_strides[0])])
        x_rows = [
            builder.gep(x_seq, [builder.mul(builder.add(row_, const(r)), x_strides[1])])
            for r in range(WINDOW_ROWS)
        ]
        w_block = builder.gep(byte_pointer(w_arr), [builder.mul(block_, w_strides[0])])
        o_seq = builder.gep(byte_pointer(o_arr), [builder.mul(seq_, o_strides[0])])
        column = builder.mul(block_, const(4 * COLUMN_BLOCK))
        o_vectors = []
        for r in range(WINDOW_ROWS):
            start = builder.add(builder.mul(builder.add(row_, const(r)), o_strides[1]), column)
            o_row = builder.gep(o_seq, [start])
            o_vectors += [
                builder.bitcast(builder.gep(o_row, [const(32 * v)]), vec.as_pointer())
                for v in range(COLUMN_VECTORS)
            ]
        sums = [cgutils.alloca_once_value(builder, builder.load(p, align=4)) for p in o_vectors]
        lanes = ir.Constant(ir.VectorType(i32, 8), None)  # all-zero mask: lane 0 everywhere
        with cgutils.for_range(builder, k_count) as loop:
            k = loop.index
            w_k = builder.gep(w_block, [builder.mul(k, w_strides[1])])
            weights = [
                builder.load(
                    builder.bitcast(builder.gep(w_k, [const(32 * v)]), vec.as_pointer()), align=4
                )
                for v in range(COLUMN_VECTORS)
            ]
            for r, x_row in enumerate(x_rows):
                x_at = builder.gep(x_row, [builder.mul(k, x_strides[2])])
                x_value = builder.load(builder.bitcast(x_at, f32.as_pointer()), align=4)
                value = builder.insert_element(ir.Constant(vec, None), x_value, i32(0))
                splat = builder.shuffle_vector(value, ir.Constant(vec, None), lanes)
                for v, weight in enumerate(weights):
                    acc = sums[r * COLUMN_VECTORS + v]
                    product = builder.fmul(splat, weight, flags=("fast",))
                    builder.store(builder.fadd(builder.load(acc), product, flags=("fast",)), acc)
        for acc, pointer in zip(sums, o_vectors, strict=True):
            builder.store(builder.load(acc), pointer, align=4)
        return context.get_dummy_value()

    return signature, codegen


@jit
def window_matmul(windows, packed, out):  # pragma: no cover - compiled
    """out [B, R, N] += windows [B, R, K] · W, W [K, N] packed by ``pack_columns`` into
    packed [N / 16, K, 16]. R a multiple of ``WINDOW_ROWS``; ``windows`` may be a strided view
    whose rows overlap (the windows of a conv); out holds the bias (or zeros) on entry."""
    batch, rows = windows.shape[0], windows.shape[1]
    blocks = packed.shape[0]
    if packed.size * 4 > CACHED_WEIGHT_BYTES:
        for b in range(blocks):  # large weights: each block read once a call
            for s in range(batch):
                for r in range(0, rows, WINDOW_ROWS):
                    _window_tile(windows, packed, out, s, r, b)
    else:
        for s in range(batch):  # small weights: each stream's windows read once a call
            for b in range(blocks):
                for r in range(0, rows, WINDOW_ROWS):
                    _window_tile(windows, packed, out, s, r, b)
