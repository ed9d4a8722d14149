"""The FlowLM transformer's linears at a chosen precision: ONE way to apply a linear.

``make_linear(weight [out, in], precision)`` returns a callable ``linear(x [n, in]) → [n, out]``
(bias-free). Every attention and feed-forward linear of the FlowLM transformer (in_proj,
out_proj, linear1, linear2) is applied through one, so a solo step, a batched step and the
prefill all compute it the same way; the sampler head's and Mimi's transformer's
linears are fp32 ones, or run a wider arithmetic's window kernel (``DotLinear``,
``Int16Linear``).

- ``"fp32"``: the float32 weight (memory-mapped from the file when it is fp32 there).
- ``"bf16"``: bfloat16 weights (round to nearest even; exact for bf16 checkpoints), half the bytes.
- ``"int8"``: symmetric int8 weights with one float32 scale per output row, a quarter of the
  bytes (per-row scales let the kernel stream four rows at once; their error is measured in
  ``tests/fixtures/precision/errors.json`` beside upstream's own int8).

Up to ``KERNEL_MAX_ROWS`` rows (steps and small batches) run numba kernels (``kernels.py``, the
``fast`` extra): always for the narrow precisions, and for fp32 when numba is installed (else
BLAS; the kernel reads the weight once where OpenBLAS packs it for every product of a few
rows); int8 takes prefills up to ``INT8_CHUNKED_MAX_ROWS`` through its kernel too, in blocks.
Longer inputs use BLAS, narrow weights widened ``WIDEN_ROWS`` rows at a time (never a whole
fp32 copy). Activations are float32, except in the int8 kernels on AVX2, AVX-VNNI and
AVX512_VNNI hosts (and on the portable path where asked for), which round each row of x to
int16 for integer products (``kernels.int8_matmul_int16``, ``int8_tiles.INT8_MATMULS``:
``choose_int8_kernel``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TypeAlias

import numpy as np

from ....model.options import NUMPY_PRECISIONS
from ..kernels import compiled
from ..kernels.arithmetic import (
    PORTABLE,
    Int16Weight,
    choose_int8_kernel,
    int8_tile_kernels,
    pack_int16,
)
from ..kernels.dispatch import two_pass_product, window_product
from .blocks import linear_rows

Shape: TypeAlias = tuple[int, ...]
#: Longest input [n, in] a kernel takes in one call (longer: BLAS, or int8 in row blocks).
KERNEL_MAX_ROWS = 16
#: Longest input the int8 kernel still takes, KERNEL_MAX_ROWS rows at a time, by kernel
#: (``kernels.AVX2``): a text prefill, and a voice's, through the integer kernel took 0.30-0.67x
#: of widening the weights for BLAS from 20 to 96 rows and 0.84x at 128 (six layers, one
#: thread); the float kernel was quicker up to ~48 rows (at 20: 72 ms against 106 ms).
INT8_CHUNKED_MAX_ROWS = {"int16": 8 * KERNEL_MAX_ROWS, "float": 2 * KERNEL_MAX_ROWS}
#: Output rows of a narrow weight widened at a time for inputs too long for its kernel.
WIDEN_ROWS = 256


def check_precision(precision: object) -> str:
    """Return ``precision`` if the NumPy backend knows it, else raise ``ValueError``."""
    if precision not in NUMPY_PRECISIONS:
        raise ValueError(
            f"precision must be one of {', '.join(NUMPY_PRECISIONS)} on the numpy backend, "
            f"got {precision!r}"
        )
    return precision  # type: ignore[return-value]


def load_kernels() -> ModuleType:
    """The compiled kernels module, or ``PrecisionUnavailableError`` naming the extra."""
    return compiled.required()


def int8_chunked_max_rows(kernels: ModuleType) -> int:
    """Longest input [n, in] an int8 linear runs through ``kernels`` (longer: BLAS)."""
    return INT8_CHUNKED_MAX_ROWS["int16" if kernels.AVX2 else "float"]


def how_linears_run(precision: str) -> str:
    """A line for the load log: how this process runs linears at ``precision``."""
    if precision == "fp32":
        return "float32 (compiled kernels for steps)" if compiled.optional() else "float32 (BLAS)"
    if precision == "bf16":
        return "bfloat16 weights widened to float32 in numba kernels"
    kernel = choose_int8_kernel()
    if kernel in ("vnni", "avx-vnni"):
        isa = "AVX512_VNNI" if kernel == "vnni" else "AVX-VNNI"
        return f"int8 weights, int16-rounded activations, integer dot products ({isa})"
    if kernel == "avx2":
        return "int8 weights, int16-rounded activations, integer multiply-adds (AVX2)"
    if kernel == PORTABLE:
        return (
            "int8 weights, int16-rounded activations, integer dot products (portable vector code)"
        )
    from ..kernels.base import X86_TARGET, target_name

    cpu = "no AVX2" if X86_TARGET else f"{target_name()}: no x86 integer kernels"
    return f"int8 weights widened to float32 in numba kernels ({cpu})"


def _int8_matmul(kernels: ModuleType, depth: int) -> Callable[..., None]:
    """The kernel an int8 linear of ``depth`` inputs runs (``choose_int8_kernel``)."""
    kernel = choose_int8_kernel()
    tiles = int8_tile_kernels(kernel) if kernel != "avx2" else None
    if tiles is not None and tiles.fits_tiles(depth):
        return tiles.INT8_MATMULS[kernel]
    return kernels.int8_matmul_portable if kernel == PORTABLE else kernels.int8_matmul


class Linear:
    """A bias-free linear ``x [n, in] → [n, out]``; subclasses hold the weight their way."""

    precision = "fp32"

    def __init__(self, shape: tuple[int, int]) -> None:
        # (out, in), as the checkpoint stores the weight.
        self.shape = shape

    def __call__(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    @property
    def nbytes(self) -> int:
        raise NotImplementedError

    def dense(self) -> np.ndarray:
        """The weight as float32 [out, in] (what this linear multiplies by)."""
        return self.dense_rows(0, self.shape[0])

    def dense_rows(self, start: int, stop: int) -> np.ndarray:
        """Output rows [start, stop) of the weight as float32 [stop - start, in]."""
        raise NotImplementedError

    def _widened_matmul(self, x: np.ndarray) -> np.ndarray:
        """x [n, in] · Wᵀ by BLAS on the weight widened ``WIDEN_ROWS`` output rows at a time
        (long inputs: the prefill), so no fp32 copy of the whole weight is ever made."""
        # One layout, so one rounding (as in ``DenseLinear``).
        x = np.ascontiguousarray(x, np.float32)
        out = np.empty((x.shape[0], self.shape[0]), np.float32)
        for start in range(0, self.shape[0], WIDEN_ROWS):
            stop = min(start + WIDEN_ROWS, self.shape[0])
            out[:, start:stop] = x @ self.dense_rows(start, stop).T
        return out

    def arrays(self) -> dict[str, np.ndarray]:
        """The arrays that hold the weight, by name (what ``restore_linear`` takes back)."""
        raise NotImplementedError


class DenseLinear(Linear):
    """float32 weight: the compiled kernel for up to ``KERNEL_MAX_ROWS`` rows when numba is
    installed (it reads the weight once, where BLAS packs it for every product), else BLAS."""

    def __init__(self, weight: np.ndarray) -> None:
        super().__init__(weight.shape)
        self.weight = weight
        # Shape-only models make these too: nothing is compiled before the first call.
        self._kernels = compiled.AT_FIRST_USE

    def __call__(self, x: np.ndarray) -> np.ndarray:
        n = x.shape[0]
        # C-contiguous for every path: BLAS takes a transposed layout through other kernels
        # on some CPUs (AVX-512 OpenBLAS), whose sums round differently.
        x = np.ascontiguousarray(x, np.float32)
        kernels = compiled.resolve(self._kernels)
        if kernels is not None and n <= KERNEL_MAX_ROWS:
            out = np.empty((n, self.shape[0]), np.float32)
            kernels.f32_matmul(x, self.weight, out)
            return out
        # A few rows (a batched step): one matrix-vector product each.
        if n > 1:
            return linear_rows(x, self.weight)
        return x @ self.weight.T

    @property
    def nbytes(self) -> int:
        return self.weight.nbytes

    def dense(self) -> np.ndarray:
        return self.weight

    def dense_rows(self, start: int, stop: int) -> np.ndarray:
        return self.weight[start:stop]

    def arrays(self) -> dict[str, np.ndarray]:
        return {"weight": self.weight}


class Bf16Linear(Linear):
    """bfloat16 weight (uint16 bit patterns)."""

    precision = "bf16"

    def __init__(self, bits: np.ndarray, kernels: ModuleType) -> None:
        """``bits`` [out, in] uint16: the bfloat16 bit patterns of the weight."""
        super().__init__(bits.shape)
        self.bits = bits
        self._kernels = kernels

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if x.shape[0] > KERNEL_MAX_ROWS:
            return self._widened_matmul(x)
        x = np.ascontiguousarray(x, np.float32)
        out = np.empty((x.shape[0], self.shape[0]), np.float32)
        self._kernels.bf16_matmul(x, self.bits, out)
        return out

    @property
    def nbytes(self) -> int:
        return self.bits.nbytes

    def dense_rows(self, start: int, stop: int) -> np.ndarray:
        return from_bfloat16_bits(self.bits[start:stop])

    def arrays(self) -> dict[str, np.ndarray]:
        return {"bits": self.bits}


class WindowLinear(Linear):
    """A float32 weight packed once for the float32 window kernel: x [n, in] → [n, out], four
    rows by 16 columns a tile, each row summed alone (the same bits at any batch size) with no
    horizontal sums (the sampler's linears: 0.42 → 0.33 ms a stream at 16 rows, where
    ``f32_matmul`` sums pairs of rows against four weight rows)."""

    def __init__(self, packed: np.ndarray) -> None:
        """``packed`` [out / 16, in, 16]: the weight [out, in] as ``pack_columns`` packs its
        transpose (the only copy kept)."""
        blocks, width, block = packed.shape
        super().__init__((blocks * block, width))
        self.packed = packed

    def __call__(self, x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, np.float32)
        return window_product(x[None], x.shape[0], 1, 1, self.packed, None)[0]

    @property
    def nbytes(self) -> int:
        return self.packed.nbytes

    def dense_rows(self, start: int, stop: int) -> np.ndarray:
        # Row o of the weight is in block o // 16.
        rows = self.packed.transpose(0, 2, 1).reshape(self.shape)
        return np.ascontiguousarray(rows[start:stop])


def packed_linear(weight: np.ndarray) -> Linear:
    """A float32 linear on the window kernel (``WindowLinear``) where numba is installed and
    the output width packs for it, else a ``DenseLinear``."""
    weight = np.asarray(weight, np.float32)
    kernels = compiled.optional()
    if kernels is None or weight.shape[0] % kernels.COLUMN_BLOCK:
        return DenseLinear(weight)
    return WindowLinear(kernels.pack_columns(np.ascontiguousarray(weight.T)))


class Int8Linear(Linear):
    """int8 weight with one float32 scale per output row."""

    precision = "int8"

    def __init__(self, codes: np.ndarray, scales: np.ndarray, kernels: ModuleType) -> None:
        """``codes`` [out, in] int8 and ``scales`` [out] float32 (``quantize_int8``)."""
        super().__init__(codes.shape)
        self.codes, self.scales = codes, scales
        self._kernels = kernels
        self._matmul = _int8_matmul(kernels, codes.shape[1])

    def __call__(self, x: np.ndarray) -> np.ndarray:
        n = x.shape[0]
        if n > int8_chunked_max_rows(self._kernels):
            return self._widened_matmul(x)
        x = np.ascontiguousarray(x, np.float32)
        out = np.empty((n, self.shape[0]), np.float32)
        # Blocks of rows, each a contiguous view.
        for start in range(0, n, KERNEL_MAX_ROWS):
            stop = start + KERNEL_MAX_ROWS
            self._matmul(x[start:stop], self.codes, self.scales, out[start:stop])
        return out

    @property
    def nbytes(self) -> int:
        return self.codes.nbytes + self.scales.nbytes

    def dense_rows(self, start: int, stop: int) -> np.ndarray:
        rows = self.codes[start:stop].astype(np.float32)
        rows *= self.scales[start:stop, None]
        return rows

    def arrays(self) -> dict[str, np.ndarray]:
        return {"codes": self.codes, "scales": self.scales}


class DotLinear(Linear):
    """A float32 weight run by the window kernel of a wider arithmetic (Mimi's transformer).

    x [n, in] → [n, out], each row summed alone. "bf16": x and the weight rounded to
    bfloat16, sums in float32; "int16": each row of x quantized to 13 bits with its own scale,
    each column of the weight to 16 bits, exact int32 sums (``kernels/arithmetic.py``).
    """

    def __init__(self, weight: np.ndarray, arithmetic: str) -> None:
        """Pack ``weight`` [out, in] for the kernel of ``arithmetic`` ("bf16" or "int16")."""
        super().__init__(weight.shape)
        self.weight, self.arithmetic = weight, arithmetic
        self.precision = f"{arithmetic}-dot"
        columns = np.ascontiguousarray(weight.T)
        if arithmetic == "int16":
            self.packed: np.ndarray | Int16Weight | None = pack_int16(columns, weight.shape[1])
        else:
            from ..kernels.bf16 import pack_bf16_columns

            self.packed = pack_bf16_columns(columns)

    @staticmethod
    def fits(arithmetic: str, shape: tuple[int, int]) -> bool:
        """Whether a weight [out, in] packs for the kernel of ``arithmetic``."""
        out, width = shape
        if arithmetic == "int16":
            from ..kernels.int16 import fits_int16

            return fits_int16(width, out, width)
        from ..kernels.arithmetic import fits_bf16

        return fits_bf16(width, out)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, np.float32)
        return window_product(x[None], x.shape[0], 1, 1, self.packed, None, self.arithmetic)[0]

    @property
    def nbytes(self) -> int:
        packed = self.packed
        parts = packed[:2] if isinstance(packed, Int16Weight) else (packed,)
        return self.weight.nbytes + sum(part.nbytes for part in parts)

    def dense_rows(self, start: int, stop: int) -> np.ndarray:
        return self.weight[start:stop]

    def arrays(self) -> dict[str, np.ndarray]:
        return {"weight": self.weight}


class Int16Linear(Linear):
    """Float32 weights stacked along their outputs and packed once for the int16 window kernel,
    only the packed codes kept: x [n, in] → [n, out], each row of x quantized to 13 bits with
    its own scale (or, in two passes, to about 26: its codes and its residual's, two products
    added, ``two_pass_product``), each column of the weight to 16 bits, exact int32 sums; each
    row summed alone (the same bits at any batch size, on every int16 instruction path). A
    stack gives the same bits as its parts one by one (each column has its own scale and
    sums)."""

    precision = "int16-dot"

    def __init__(self, packed: Int16Weight, passes: int = 1) -> None:
        """``packed``: codes [out / 32, in / 2, 32] and scales [out] (``pack_int16``);
        ``passes``: 1 (13-bit inputs) or 2 (about 26-bit inputs, twice the products)."""
        if passes not in (1, 2):
            raise ValueError(f"an int16 linear runs in 1 or 2 passes, got {passes}")
        blocks, pairs, block = packed.codes.shape
        super().__init__((blocks * block, 2 * pairs))
        self.packed, self.passes = packed, passes

    @classmethod
    def stacked(cls, weights: Sequence[np.ndarray], passes: int = 1) -> Int16Linear | None:
        """The product by ``weights`` [out_i, in] stacked along the outputs (one weight walk
        for all) in ``passes``, or None where one of them does not pack (``DotLinear.fits``)."""
        if not all(DotLinear.fits("int16", weight.shape) for weight in weights):
            return None
        parts = [
            pack_int16(np.ascontiguousarray(np.asarray(w, np.float32).T), w.shape[1])
            for w in weights
        ]
        codes = np.concatenate([part.codes for part in parts])
        scales = np.concatenate([part.scales for part in parts])
        return cls(Int16Weight(codes, scales, parts[0].path), passes)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, np.float32)
        if self.passes == 2:
            return two_pass_product(x, self.packed)
        return window_product(x[None], x.shape[0], 1, 1, self.packed, None, "int16")[0]

    @property
    def nbytes(self) -> int:
        return self.packed.codes.nbytes + self.packed.scales.nbytes

    def dense_rows(self, start: int, stop: int) -> np.ndarray:
        # Lane c of pair p holds (row 2p, row 2p + 1) of column c, low half first.
        blocks, pairs, block = self.packed.codes.shape
        codes = self.packed.codes.view(np.int16).reshape(blocks, pairs, block, 2)
        columns = codes.transpose(0, 2, 1, 3).reshape(self.shape)[start:stop]
        return columns.astype(np.float32) * self.packed.scales[start:stop, None]

    def arrays(self) -> dict[str, np.ndarray]:
        return {"codes": self.packed.codes, "scales": self.packed.scales}


def make_linear(weight: np.ndarray | Linear, precision: str = "fp32") -> Linear:
    """The linear of ``weight`` [out, in] at ``precision`` (a built one passes through).

    Raises ``PrecisionUnavailableError`` for a narrow precision without numba.
    """
    check_precision(precision)
    if isinstance(weight, Linear):
        if weight.precision != precision:
            raise ValueError(f"a {weight.precision} linear was given where {precision} is loaded")
        return weight
    weight = np.asarray(weight, np.float32)
    if weight.ndim != 2:
        raise ValueError(f"a linear weight must be [out, in], got shape {weight.shape}")
    if precision == "fp32":
        return DenseLinear(weight)
    kernels = load_kernels()
    if precision == "bf16":
        return Bf16Linear(to_bfloat16_bits(weight), kernels)
    return Int8Linear(*quantize_int8(weight), kernels)


def narrow_layout(precision: str, shape: tuple[int, int]) -> dict[str, tuple[np.dtype, Shape]]:
    """The arrays (name → dtype, shape) a ``precision`` linear of weight ``shape`` holds."""
    out, width = shape
    if precision == "bf16":
        return {"bits": (np.dtype(np.uint16), (out, width))}
    if precision == "int8":
        return {
            "codes": (np.dtype(np.int8), (out, width)),
            "scales": (np.dtype(np.float32), (out,)),
        }
    raise ValueError(f"precision {precision!r} has no narrow layout")


def restore_linear(precision: str, arrays: dict[str, np.ndarray]) -> Linear:
    """A narrow linear from the arrays ``Linear.arrays`` gave (as ``narrow_layout`` lays out)."""
    kernels = load_kernels()
    if precision == "bf16":
        return Bf16Linear(arrays["bits"], kernels)
    if precision == "int8":
        return Int8Linear(arrays["codes"], arrays["scales"], kernels)
    raise ValueError(f"precision {precision!r} has no narrow layout")


def quantize_int8(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8: weight [out, in] → codes [out, in] int8, scales [out] float32.

    Each row's scale maps its largest magnitude to 127 (an all-zero row gets scale 1).
    """
    scales = np.abs(weight).max(axis=1) / np.float32(127.0)
    scales[scales == 0] = 1.0
    codes = np.rint(weight / scales[:, None])
    np.clip(codes, -127, 127, out=codes)
    return codes.astype(np.int8), scales.astype(np.float32)


def to_bfloat16_bits(weight: np.ndarray) -> np.ndarray:
    """float32 → bfloat16 bit patterns (uint16), rounding to nearest even (NaN stays NaN)."""
    weight = np.ascontiguousarray(weight, np.float32)
    bits = weight.view(np.uint32)
    rounded = bits >> 16
    rounded &= 1
    rounded += 0x7FFF
    # This wraps only for negative NaN patterns, fixed below.
    rounded += bits
    rounded >>= 16
    out = rounded.astype(np.uint16)
    nan = np.isnan(weight)
    if nan.any():
        out[nan] = 0x7FC0
    return out


def from_bfloat16_bits(bits: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns (uint16) → the float32 values they hold (exact), a new array."""
    return (bits.astype(np.uint32) << 16).view(np.float32)
