"""Which path a layer's product runs: the window kernels at each arithmetic, the weights
packed for them, and the ELU, compiled or in NumPy.

The layers (``layers/streaming_conv.py``, ``layers/linears.py``) hold the model's math; they
ask this module for the products. With numba (the ``fast`` extra), ``window_product`` reads
the windows of a time-major input where they lie and multiplies them by a weight packed once
at construction: float32 (``window.window_matmul``), bfloat16 (``bf16.bf16_window_matmul``)
or int16 (``int16.int16_window_matmul``), as the arithmetic chosen at load says
(``arithmetic.py``). Without numba the layers keep their BLAS paths (``compiled_kernels()``
is then None) and ``elu`` runs in NumPy.

The kernels are imported and compiled at model load (``NumpyBackend``), never at import; a
test sets ``_kernels`` to None to run NumPy alone.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
from numpy.lib.stride_tricks import as_strided

from . import compiled
from .arithmetic import Int16Weight, bf16_kernels, int16_kernels

_kernels = compiled.AT_FIRST_USE


def compiled_kernels() -> ModuleType | None:
    """The compiled kernels module, or None: NumPy and BLAS run."""
    return compiled.resolve(_kernels)


def pack_fp32(matrix: np.ndarray) -> np.ndarray | None:
    """``matrix`` [K, N] packed for ``window_matmul``, or None (no numba, or N not a multiple
    of its column block)."""
    kernels = compiled_kernels()
    if kernels is None or matrix.shape[1] % kernels.COLUMN_BLOCK:
        return None
    return kernels.pack_columns(matrix)


def tiled_rows(batch: int, rows: int, tile: int) -> int:
    """The fewest rows ≥ ``rows`` per stream that make ``batch`` streams' rows whole tiles."""
    while (batch * rows) % tile:
        rows += 1
    return rows


def window_product(
    padded: np.ndarray,
    rows: int,
    step: int,
    width: int,
    packed: np.ndarray | Int16Weight,
    bias: np.ndarray | None,
    arithmetic: str = "fp32",
) -> np.ndarray:
    """Multiply windows of a padded input by a packed weight, each row summed alone.

    Row r of stream b is the window of ``width`` frames of ``padded[b]`` from frame r·step
    (one run of memory, read where it lies). The kernels take the B · rows windows four at a
    time, across streams: where B · rows is not a multiple of four, rows past the input's end
    read zero frames (a copy extended with them) and are dropped (int16: its kernel takes the
    last rows one by one instead). Each row's sums are its own, so a row gives the same bits
    in any batch.

    Args:
        padded: The input, float32 [B, L, C].
        rows: Output rows per stream.
        step: Frames between the starts of two windows.
        width: Frames in a window.
        packed: The weight: from ``pack_columns`` for "fp32", ``pack_bf16_columns`` for
            "bf16", an ``Int16Weight`` for "int16".
        bias: Added to every row, [N], or None.
        arithmetic: "fp32", "bf16" (the input rounded once to bfloat16) or "int16" (each
            input row quantized once, ``quantize_rows``).

    Returns:
        float32 [B, rows, N].
    """
    batch, length, channels = padded.shape
    if arithmetic == "int16":
        kernels = int16_kernels(packed.path)
        tile = 1
    elif arithmetic == "bf16":
        kernels = bf16_kernels()
        tile = kernels.BF16_ROWS
    else:
        kernels = compiled_kernels()
        tile = kernels.WINDOW_ROWS
    tiles = tiled_rows(batch, rows, tile)
    needed = max(length, (tiles - 1) * step + width)
    scales = None
    if arithmetic == "int16":
        source = np.empty((batch, needed, channels), np.int16)
        scales = np.empty((batch, needed), np.float32)
        source[:, length:] = 0
        scales[:, length:] = 0.0
        kernels.quantize_rows(np.ascontiguousarray(padded), source, scales)
    elif arithmetic == "bf16":
        source = np.zeros((batch, needed, channels), np.uint16)
        for b in range(batch):
            flat = np.ascontiguousarray(padded[b]).reshape(-1)
            kernels.to_bf16(flat, source[b, :length].reshape(-1))
    elif needed > length:
        source = np.zeros((batch, needed, channels), np.float32)
        source[:, :length] = padded
    else:
        source = padded
    seq, row, item = source.strides
    windows = as_strided(source, (batch, tiles, width * channels), (seq, row * step, item))
    blocks, _, block = (packed.codes if isinstance(packed, Int16Weight) else packed).shape
    out = np.empty((batch, tiles, blocks * block), np.float32)
    out[:] = 0.0 if bias is None else bias
    if arithmetic == "int16":
        kernels.WINDOW_MATMULS[packed.path](
            windows, packed.codes, out, scales, packed.scales, step, channels
        )
    elif arithmetic == "bf16":
        kernels.bf16_window_matmul(windows, packed, out)
    else:
        kernels.window_matmul(windows, packed, out)
    return out if tiles == rows else out[:, :rows]


def two_pass_product(x: np.ndarray, packed: Int16Weight) -> np.ndarray:
    """x · W on the int16 kernel with each row of x held to about 26 bits: its 13-bit codes
    and those of its residual (``int16.quantize_two_passes``) run as two rows each, and the
    two products are added; each row summed alone (the same bits in any batch).

    Args:
        x: The input, float32 [n, C].
        packed: The weight [C, N], an ``Int16Weight`` packed with taps ``C`` deep.

    Returns:
        float32 [n, N].
    """
    kernels = int16_kernels(packed.path)
    rows, channels = x.shape
    codes = np.empty((2, rows, channels), np.int16)
    scales = np.empty((2, rows), np.float32)
    kernels.quantize_two_passes(np.ascontiguousarray(x, np.float32), codes, scales)
    blocks, _, block = packed.codes.shape
    out = np.zeros((2, rows, blocks * block), np.float32)
    matmul = kernels.WINDOW_MATMULS[packed.path]
    matmul(codes, packed.codes, out, scales, packed.scales, 1, channels)
    out[0] += out[1]
    return out[0]


def elu(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """ELU (alpha 1) of a float32 array, compiled where numba is installed.

    The compiled one-pass kernel (``layer.elu_flat``) is about 5× quicker than ``elu_numpy``
    on the decoder's activations; they agree within 2e-7.

    Args:
        x: The input, float32.
        out: Where to write the result (same shape; may be ``x``), or None for a new array.

    Returns:
        The ELU of ``x`` (``out`` when given).
    """
    if out is None:
        out = np.empty(x.shape, np.float32)
    kernels = compiled_kernels()
    if kernels is None:
        return elu_numpy(x, out)
    _elu_blocks(kernels, x, out)
    return out


def _elu_blocks(kernels: ModuleType, x: np.ndarray, out: np.ndarray) -> None:
    """The compiled ELU on each C-contiguous block of x and out (a view per leading index
    where they are not contiguous as a whole, such as an input written into a padded one)."""
    if x.flags.c_contiguous and out.flags.c_contiguous:
        kernels.elu_flat(x.reshape(-1), out.reshape(-1))
        return
    if x.ndim == 1:
        # Strided vectors do not occur in the decoder; they are handled all the same.
        out[:] = elu_numpy(np.ascontiguousarray(x))
        return
    for x_block, out_block in zip(x, out, strict=True):
        _elu_blocks(kernels, x_block, out_block)


def elu_numpy(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """ELU (alpha 1) as max(x, exp(-|x|) - 1), written into ``out`` when given.

    For x ≤ 0 that is exp(x) - 1; for x > 0, exp(-x) - 1 < 0 < x. ``exp`` - 1 rather than
    ``expm1`` (NumPy's float32 exp is vectorized and ~8× faster; the difference, ≤ 1 ulp of
    1.0, is far below the float32 noise of the convs), and no ``minimum`` pass (slower than
    ``abs`` in NumPy): 5 cheap passes and one exp.
    """
    out = np.abs(x, out=out)
    np.negative(out, out=out)
    np.exp(out, out=out)
    out -= np.float32(1.0)
    return np.maximum(x, out, out=out)
