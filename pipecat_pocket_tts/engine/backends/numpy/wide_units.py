"""Which arithmetic units Mimi's decoder runs on, chosen at load from what the CPU reports.

- ``"fp32"``: today's kernels (float32 window products, BLAS): any CPU, the fallback.
- ``"bf16"``: bfloat16 dot products (``vdpbf16ps``, AVX512_BF16; ``bf16_kernels.py``) for
  the decoder transformer's linears and two of SEANet's transposed convs (``use_bf16``),
  whose inputs and weights are rounded to bfloat16 while sums, biases, residuals and the
  streaming state stay float32. The other layers stay float32: rounding every layer cost
  ~44 dB SNR against fp32 on the full-size random pack, these ≥ 46 dB (``test_wide_units.py``).

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
            "and two SEANet transposed convs, float32 elsewhere; frame blocks bit for bit"
        )
    return "Mimi decoder: float32 (window kernels and BLAS)"


def use_bf16(transformer: MimiTransformer, decoder: SEANet) -> None:
    """Put a Mimi decoder's transformer linears (those whose weights pack for it) and its
    dense transposed convs but the first on bfloat16 dot products; the first transposed conv
    runs the float32 window kernel (as every conv does), so each row of every layer sums alone
    (``blocks_exact``).

    Measured on the full-size random pack against fp32 frame by frame (a stretch of zero
    latents after loud ones, the quietest these weights give; random latents in brackets):
    the transformer alone 48.2 dB (63.6), with these two transposed convs 46.2 (~50), with all
    three 45.3 (48.0), with the first conv too 44.5 (46.6), every conv 44.3 (random): the
    residual, first and last convs stay float32.
    """
    from .streaming_conv import StreamingConvTranspose1d

    for layer in transformer.layers:
        for name in ("in_proj", "out_proj", "linear1", "linear2"):
            linear = getattr(layer, name)
            if fits_bf16(linear.shape[1], linear.shape[0]):
                object.__setattr__(layer, name, Bf16DotLinear(linear.dense()))
    transposed = [
        conv
        for conv in decoder.convs()
        if isinstance(conv, StreamingConvTranspose1d) and not conv.depthwise
    ]
    for index, conv in enumerate(transposed):
        if index == 0 or not conv.use_bf16():
            conv.use_windows()


def blocks_exact(transformer: MimiTransformer, decoder: SEANet) -> bool:
    """Whether a block of frames decodes bit for bit as its frames one by one: every
    transformer linear on the bfloat16 kernel and every dense transposed conv on it or the
    float32 window kernel (each row summed alone; BLAS's sums may follow the matrix's
    height). The attention runs frame by frame in a block (``MimiTransformer.call_batch``)."""
    from .streaming_conv import StreamingConvTranspose1d

    linears = [
        getattr(layer, name)
        for layer in transformer.layers
        for name in ("in_proj", "out_proj", "linear1", "linear2")
    ]
    transposed = [
        conv
        for conv in decoder.convs()
        if isinstance(conv, StreamingConvTranspose1d) and not conv.depthwise
    ]
    return (
        transformer.input_proj is None
        and transformer.output_proj is None
        and all(isinstance(linear, Bf16DotLinear) for linear in linears)
        and all(conv.bf16 is not None or conv.packed is not None for conv in transposed)
    )


def fits_bf16(depth: int, columns: int) -> bool:
    """Whether a [depth, columns] weight packs for the bfloat16 kernel."""
    from .bf16_kernels import BF16_COLUMN_BLOCK

    return depth % 2 == 0 and columns % BF16_COLUMN_BLOCK == 0


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
        from .streaming_conv import window_product

        x = np.ascontiguousarray(x, np.float32)
        return window_product(x[None], x.shape[0], 1, 1, self.packed, None, narrow=True)[0]

    @property
    def nbytes(self) -> int:
        return self.weight.nbytes + self.packed.nbytes

    def dense_rows(self, start: int, stop: int) -> np.ndarray:
        return self.weight[start:stop]

    def arrays(self) -> dict[str, np.ndarray]:
        return {"weight": self.weight}
