"""Which arithmetic units Mimi's decoder runs on, chosen at load from what the CPU reports.

- ``"fp32"``: today's kernels (float32 window products, BLAS): any CPU, the fallback.
- ``"bf16"``: bfloat16 dot products (``vdpbf16ps``, AVX512_BF16; ``bf16_kernels.py``) for
  the decoder transformer's linears and the SEANet layers ``BF16_LAYERS`` names, whose inputs
  and weights are rounded to bfloat16 while sums, biases, residuals and the streaming state
  stay float32. The other layers stay float32: rounding every layer cost ~44 dB SNR against
  fp32 on the full-size random pack, these ~47 dB (``test_wide_units.py``).

``choose_units(requested, precision)``: the units a load runs — ``requested`` (the
``mimi_units`` argument), else the ``POCKET_TTS_MIMI_UNITS`` environment variable, else
``"auto"``: with a narrow ``precision`` ("int8", "bf16": the caller traded exactness for speed)
``"bf16"`` where the CPU has AVX512_BF16 and numba is installed, else ``"fp32"`` (precision
"fp32" stays float32 end to end: parity with upstream). Asking for ``"bf16"`` where the CPU
lacks it is a ``LoadOptionError`` saying so (never a silent fallback).
"""

from __future__ import annotations

import functools
import os
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ...errors import LoadOptionError
from . import compiled
from .linears import Linear

if TYPE_CHECKING:
    from .mimi import MimiTransformer
    from .seanet import SEANet

UNITS_ENV = "POCKET_TTS_MIMI_UNITS"
MIMI_UNITS = ("auto", "fp32", "bf16")


def bf16_kernels() -> ModuleType | None:
    """The bfloat16 kernels module (warmed up at its first use: at model load) when numba is
    installed and numba compiles for a CPU with AVX512_BF16, else None."""
    if compiled.optional() is None:
        return None
    from . import bf16_kernels as module

    if not module.BF16_DOT:
        return None
    _warm(module)
    return module


@functools.cache
def _warm(module: ModuleType) -> None:
    module.warm_up()


def choose_units(requested: str | None = None, precision: str = "fp32") -> str:
    """The units Mimi runs on: "fp32" or "bf16" (see the module docstring)."""
    units = requested or os.environ.get(UNITS_ENV) or "auto"
    if units not in MIMI_UNITS:
        raise LoadOptionError(
            f"mimi_units must be one of {', '.join(MIMI_UNITS)} (argument or {UNITS_ENV}), "
            f"got {units!r}"
        )
    if units == "auto":
        narrow = precision != "fp32"
        return "bf16" if narrow and bf16_kernels() is not None else "fp32"
    if units == "bf16" and bf16_kernels() is None:
        raise LoadOptionError(
            "mimi_units='bf16' needs numba and a CPU with AVX512_BF16 (avx512_bf16 in "
            "/proc/cpuinfo), which this process does not have: use 'auto' or 'fp32'"
        )
    return units


def describe_units(units: str) -> str:
    """A line for the load log and ``PocketTTS.kernels``: what Mimi's decoder runs on."""
    if units == "bf16":
        return (
            "Mimi decoder: bfloat16 dot products (AVX512_BF16 vdpbf16ps) in the transformer "
            "and the large SEANet layers, float32 elsewhere"
        )
    return "Mimi decoder: float32 (window kernels and BLAS)"


BF16_SEANET = ("transposed", "first")
"""The SEANet decoder layers bfloat16 runs: its dense transposed convs and its first conv (the
largest weights; each alone costs ~52-54 dB SNR on the full-size random pack, a residual
conv ~55, so the residual and last convs stay float32)."""


def use_bf16(
    transformer: MimiTransformer, decoder: SEANet, seanet: tuple[str, ...] = BF16_SEANET
) -> None:
    """Put a Mimi decoder's transformer linears and the SEANet layers ``seanet`` names on
    bfloat16 dot products (those whose weights pack for them)."""
    from .streaming_conv import StreamingConvTranspose1d

    transformer.attention_kernel = bf16_kernels()  # the same sums in a block as frame by frame
    for layer in transformer.layers:
        for name in ("in_proj", "out_proj", "linear1", "linear2"):
            linear = getattr(layer, name)
            if fits_bf16(linear.shape[1], linear.shape[0]):
                object.__setattr__(layer, name, Bf16DotLinear(linear.dense()))
    convs = decoder.convs()
    for index, conv in enumerate(convs):
        transposed = isinstance(conv, StreamingConvTranspose1d)
        if (
            ("transposed" in seanet and transposed)
            or ("first" in seanet and index == 0)
            or ("residual" in seanet and not transposed and 0 < index < len(convs) - 1)
        ):
            conv.use_bf16()


def fits_bf16(depth: int, columns: int) -> bool:
    """Whether a [depth, columns] weight packs for the bfloat16 kernel."""
    from .bf16_kernels import BF16_COLUMN_BLOCK

    return depth % 2 == 0 and columns % BF16_COLUMN_BLOCK == 0


def bf16_window_product(
    padded: np.ndarray,
    rows: int,
    step: int,
    width: int,
    packed: np.ndarray,
    bias: np.ndarray | None,
) -> np.ndarray:
    """padded [B, L, C] float32 → [B, rows, N]: row r of stream b is the window of ``width``
    frames of padded[b] from frame r·step, times the weight ``packed`` (``pack_bf16_columns``
    of a [width·C, N] matrix), plus ``bias`` [N]. The windows are read in bfloat16 (padded
    rounded once, nearest even); rows past the input's end (up to the kernel's tile of four)
    read zero frames and are dropped."""
    kernels = bf16_kernels()
    assert kernels is not None
    batch, length, channels = padded.shape
    tiles = -(-rows // kernels.BF16_ROWS) * kernels.BF16_ROWS
    needed = (tiles - 1) * step + width
    narrow = np.zeros((batch, max(length, needed), channels), np.uint16)
    if length == narrow.shape[1] and padded.flags.c_contiguous:
        kernels.to_bf16(padded.reshape(-1), narrow.reshape(-1))
    else:
        for b in range(batch):
            kernels.to_bf16(
                np.ascontiguousarray(padded[b]).reshape(-1), narrow[b, :length].reshape(-1)
            )
    seq, row, item = narrow.strides
    windows = as_strided(narrow, (batch, tiles, width * channels), (seq, row * step, item))
    out = np.empty((batch, tiles, packed.shape[0] * packed.shape[2]), np.float32)
    out[:] = 0.0 if bias is None else bias
    kernels.bf16_window_matmul(windows, packed, out)
    return out if tiles == rows else out[:, :rows]


class Bf16DotLinear(Linear):
    """A float32 weight run by bfloat16 dot products: x [n, in] → [n, out], x and the weight
    rounded to bfloat16, sums in float32 (Mimi's transformer under ``"bf16"`` units)."""

    precision = "bf16-dot"

    def __init__(self, weight: np.ndarray) -> None:
        super().__init__(weight.shape)
        from .bf16_kernels import pack_bf16_columns

        self.weight = weight
        self.packed = pack_bf16_columns(np.ascontiguousarray(weight.T))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, np.float32)
        return bf16_window_product(x[None], x.shape[0], 1, 1, self.packed, None)[0]

    @property
    def nbytes(self) -> int:
        return self.weight.nbytes + self.packed.nbytes

    def dense_rows(self, start: int, stop: int) -> np.ndarray:
        return self.weight[start:stop]

    def arrays(self) -> dict[str, np.ndarray]:
        return {"weight": self.weight}
