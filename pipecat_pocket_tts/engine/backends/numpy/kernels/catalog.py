"""The compiled kernels (numba: the optional ``fast`` extra), as one module.

Three families, each in its own file, on what they share (``base.py``: compile options,
float32 bit casts):

- ``matmul.py``: matmuls of a few rows at fp32, bf16 and int8 (``layers/linears.py``);
- ``layer.py``: one-pass ELU, GELU-tanh, LayerNorm, RoPE, one step's KV write and attention in
  one call, and the bfloat16 KV cache's rounding (``layers/blocks.py``, ``layers/kv_cache.py``,
  ``layers/streaming_conv.py``);
- ``window.py``: sliding windows times a packed weight, Mimi's convolutions
  (``layers/streaming_conv.py``).

The narrower arithmetic's kernels load apart, at their first use (``arithmetic.py``):
``int16.py`` (Mimi's and the sampler's int16 window product), ``int8_tiles.py`` (the FlowLM's
int8 tiles) and ``bf16.py``.

Callers reach every kernel as an attribute of this module, the one ``compiled.optional()`` /
``required()`` hands out after ``warm_up``. The kernels release the GIL and are serial:
sessions on different threads run them side by side, and numba's thread pool (unsafe for
concurrent callers under its default threading layer) is never used. Compiled code is cached
on disk (``cache=True``), so only the first process on a machine pays the JIT compile.
Importing this module needs numba.
"""

from __future__ import annotations

import numpy as np

from .layer import (
    elu_flat,
    gelu_tanh_flat,
    layer_norm_rows,
    rope_pairs,
    store_and_attend,
    store_bfloat16,
)
from .matmul import (
    AVX2,
    MADD_BLOCK,
    WIDEN_FROM_ROWS,
    bf16_matmul,
    f32_matmul,
    int8_matmul,
    int8_matmul_float,
    int8_matmul_int16,
    int8_matmul_portable,
)
from .window import COLUMN_BLOCK, WINDOW_ROWS, pack_columns, window_matmul

__all__ = [
    "AVX2",
    "COLUMN_BLOCK",
    "MADD_BLOCK",
    "WIDEN_FROM_ROWS",
    "WINDOW_ROWS",
    "bf16_matmul",
    "elu_flat",
    "f32_matmul",
    "gelu_tanh_flat",
    "int8_matmul",
    "int8_matmul_float",
    "int8_matmul_int16",
    "int8_matmul_portable",
    "layer_norm_rows",
    "pack_columns",
    "rope_pairs",
    "store_and_attend",
    "store_bfloat16",
    "warm_up",
    "window_matmul",
]

#: The modules that make up the kernels (a test that hides numba forgets all of them).
MODULES = ("base", "matmul", "layer", "window", "catalog")


def warm_up() -> None:
    """Compile (or load from the disk cache) every kernel now rather than on the first call,
    for writable weights and for read-only ones (memory-mapped from a checkpoint or the cached
    narrow copy: numba compiles each apart)."""
    x = np.zeros((1, 8), np.float32)
    out = np.empty((1, 6), np.float32)
    eps = np.float32(1e-5)
    for writable in (True, False):
        codes, scales = np.zeros((6, 8), np.int8), np.ones(6, np.float32)
        weight, bits = np.zeros((6, 8), np.float32), np.zeros((6, 8), np.uint16)
        vector = np.ones(8, np.float32)
        for array in (codes, scales, weight, bits, vector):
            array.flags.writeable = writable
        int8_matmul(x, codes, scales, out)
        f32_matmul(x, weight, out)
        bf16_matmul(x, bits, out)
        layer_norm_rows(x, vector, vector, eps, x)
    layer_norm_rows(x, None, None, eps, x)
    elu_flat(x[0], x[0])
    gelu_tanh_flat(x[0], x[0])
    pairs, table = np.zeros((1, 2, 8), np.float32), np.zeros((1, 4), np.float32)
    rope_pairs(pairs, table, table, pairs)
    entry, scores = np.zeros((1, 8), np.float32), np.empty(1, np.float32)
    cache = np.zeros((1, 4, 8), np.float32)
    store_and_attend(pairs[0], entry, entry, cache, cache, 0, np.float32(1.0), scores, pairs[0])
    padded = np.zeros((1, WINDOW_ROWS + 1, COLUMN_BLOCK), np.float32)
    seq, row, item = padded.strides
    windows = np.lib.stride_tricks.as_strided(
        padded, (1, WINDOW_ROWS, 2 * COLUMN_BLOCK), (seq, row, item)
    )
    packed = pack_columns(np.zeros((2 * COLUMN_BLOCK, COLUMN_BLOCK), np.float32))
    # Overlapping windows (a view of layout A) and a 1x1 conv's, which are C-contiguous.
    for view in (windows, np.zeros((1, WINDOW_ROWS, 2 * COLUMN_BLOCK), np.float32)):
        window_matmul(view, packed, np.zeros((1, WINDOW_ROWS, COLUMN_BLOCK), np.float32))
    narrow_cache = np.zeros((1, 4, 8), np.uint16)
    store_bfloat16(np.zeros((1, 1, 8), np.float32), narrow_cache, 0)
    store_and_attend(
        pairs[0], entry, entry, narrow_cache, narrow_cache, 0, np.float32(1.0), scores, pairs[0]
    )
