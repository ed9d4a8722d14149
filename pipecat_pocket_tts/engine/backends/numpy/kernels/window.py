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
load. The transposed convs stay on BLAS in "fp32" arithmetic, which won on their wide outputs.

A tile is four consecutive rows of the flattened B · R windows, so it may span streams
(``TileAddresses``, which the bfloat16 and int16 kernels' tiles use too): two streams of two
windows fill one tile. Each row's sums are its own, whatever the tile holds.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from .base import jit

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


class TileAddresses:
    """Where a tile's windows and output vectors lie (LLVM IR, for the window kernels'
    intrinsics). A tile is ``rows`` consecutive rows of the flattened ``B · R`` windows, so it
    may span streams: row ``first + r`` is window ``(first + r) % R`` of stream
    ``(first + r) // R``, read and written through each array's own strides."""

    def __init__(self, context, builder, sig, args, rows: int) -> None:
        self.builder = builder
        self.intp = context.get_value_type(types.intp)
        x_arr, w_arr, o_arr = (
            context.make_array(sig.args[i])(context, builder, args[i]) for i in range(3)
        )
        self.x, self.w, self.o = x_arr, w_arr, o_arr
        self.x_strides = cgutils.unpack_tuple(builder, x_arr.strides, 3)
        self.w_strides = cgutils.unpack_tuple(builder, w_arr.strides, 3)
        self.o_strides = cgutils.unpack_tuple(builder, o_arr.strides, 3)
        self.w_shape = cgutils.unpack_tuple(builder, w_arr.shape, 3)
        per_seq = cgutils.unpack_tuple(builder, x_arr.shape, 3)[1]
        first = args[3]
        self.places = []  # (stream, window) of each row of the tile
        for r in range(rows):
            flat = builder.add(first, self.const(r))
            seq = builder.sdiv(flat, per_seq)
            self.places.append((seq, builder.sub(flat, builder.mul(seq, per_seq))))

    def const(self, value: int) -> ir.Constant:
        return ir.Constant(self.intp, value)

    def _bytes(self, array) -> ir.Value:
        return self.builder.bitcast(array.data, ir.IntType(8).as_pointer())

    def windows(self) -> list[ir.Value]:
        """A byte pointer to the start of each row's window."""
        b, (s0, s1) = self.builder, self.x_strides[:2]
        base = self._bytes(self.x)
        return [b.gep(base, [b.add(b.mul(seq, s0), b.mul(row, s1))]) for seq, row in self.places]

    def weight_block(self, block: ir.Value) -> ir.Value:
        """A byte pointer to packed weight block ``block``."""
        return self.builder.gep(self._bytes(self.w), [self.builder.mul(block, self.w_strides[0])])

    def load_vectors(self, start: ir.Value, vector: ir.VectorType, count: int) -> list:
        """``count`` consecutive vectors loaded from the byte pointer ``start``."""
        bits = getattr(vector.element, "width", 32)  # an int's width; float32 has none
        b, width = self.builder, vector.count * bits // 8
        return [
            b.load(b.bitcast(b.gep(start, [self.const(width * v)]), vector.as_pointer()), align=4)
            for v in range(count)
        ]

    def element(
        self, start: ir.Value, index: ir.Value, step: ir.Value, kind: ir.Type, align: int
    ) -> ir.Value:
        """The ``kind`` value ``index`` steps of ``step`` bytes from the byte pointer ``start``
        (a window's element, or a pair of 16-bit ones read as one int32: ``align`` 2)."""
        b = self.builder
        pointer = b.bitcast(b.gep(start, [b.mul(index, step)]), kind.as_pointer())
        return b.load(pointer, align=align)

    def splat(self, value: ir.Value, vector: ir.VectorType) -> ir.Value:
        """``value`` in every lane of a ``vector`` (a broadcast)."""
        b, lane = self.builder, ir.IntType(32)
        single = b.insert_element(ir.Constant(vector, None), value, lane(0))
        everywhere = ir.Constant(ir.VectorType(lane, vector.count), None)  # lane 0 each time
        return b.shuffle_vector(single, ir.Constant(vector, None), everywhere)

    def accumulators(self, pointers: list) -> list:
        """One register-held sum per output vector, starting from what the output holds (the
        bias); ``write_back`` stores them."""
        b = self.builder
        return [cgutils.alloca_once_value(b, b.load(p, align=4)) for p in pointers]

    def write_back(self, sums: list, pointers: list) -> None:
        for acc, pointer in zip(sums, pointers, strict=True):
            self.builder.store(self.builder.load(acc), pointer, align=4)

    def outputs(self, column_bytes: ir.Value, vector: ir.VectorType, count: int) -> list:
        """Pointers to ``count`` consecutive vectors of each row's output from byte
        ``column_bytes`` on, row by row."""
        b, (s0, s1) = self.builder, self.o_strides[:2]
        base, width = self._bytes(self.o), vector.count * 4
        pointers = []
        for seq, row in self.places:
            start = b.gep(base, [b.add(b.add(b.mul(seq, s0), b.mul(row, s1)), column_bytes)])
            pointers += [
                b.bitcast(b.gep(start, [self.const(width * v)]), vector.as_pointer())
                for v in range(count)
            ]
        return pointers


@intrinsic
def _window_tile(typingctx, windows, packed, out, first, block):  # pragma: no cover - compiled
    """Rows ``first … first + 3`` of the flattened windows: out[row, 16·block : 16·block + 16]
    += windows[row, :] · packed[block] (windows [B, R, K] f32 of any strides; packed
    [blocks, K, 16] and out [B, R, N] f32 with unit strides in their last axis)."""
    fits = all(isinstance(a, types.Array) and a.ndim == 3 for a in (windows, packed, out)) and all(
        a.dtype == types.float32 for a in (windows, packed, out)
    )
    if not fits:
        return None
    signature = types.none(windows, packed, out, first, block)

    def codegen(context, builder, sig, args):
        tile = TileAddresses(context, builder, sig, args, WINDOW_ROWS)
        f32 = ir.FloatType()
        vec = ir.VectorType(f32, 8)
        x_rows = tile.windows()
        w_block = tile.weight_block(args[4])
        column = builder.mul(args[4], tile.const(4 * COLUMN_BLOCK))
        o_vectors = tile.outputs(column, vec, COLUMN_VECTORS)
        sums = tile.accumulators(o_vectors)
        with cgutils.for_range(builder, tile.w_shape[1]) as loop:
            k = loop.index
            w_k = builder.gep(w_block, [builder.mul(k, tile.w_strides[1])])
            weights = tile.load_vectors(w_k, vec, COLUMN_VECTORS)
            for r, x_row in enumerate(x_rows):
                splat = tile.splat(tile.element(x_row, k, tile.x_strides[2], f32, 4), vec)
                for v, weight in enumerate(weights):
                    acc = sums[r * COLUMN_VECTORS + v]
                    product = builder.fmul(splat, weight, flags=("fast",))
                    builder.store(builder.fadd(builder.load(acc), product, flags=("fast",)), acc)
        tile.write_back(sums, o_vectors)
        return context.get_dummy_value()

    return signature, codegen


@jit
def window_matmul(windows, packed, out):  # pragma: no cover - compiled
    """out [B, R, N] += windows [B, R, K] · W, W [K, N] packed by ``pack_columns`` into
    packed [N / 16, K, 16]. B · R a multiple of ``WINDOW_ROWS`` (a tile may take rows of two
    streams: a stream of 2 windows fills half a tile, not a whole one); ``windows`` may be a
    strided view whose rows overlap (the windows of a conv); out holds the bias (or zeros) on
    entry. Each row's sums are its own: the same in any batch."""
    total = windows.shape[0] * windows.shape[1]
    blocks = packed.shape[0]
    if packed.size * 4 > CACHED_WEIGHT_BYTES:
        for b in range(blocks):  # large weights: each block read once a call
            for first in range(0, total, WINDOW_ROWS):
                _window_tile(windows, packed, out, first, b)
    else:
        for first in range(0, total, WINDOW_ROWS):  # small weights: windows read once a call
            for b in range(blocks):
                _window_tile(windows, packed, out, first, b)
