"""Which arithmetic units Mimi's decoder runs on, chosen at load from what the CPU reports.

- ``"fp32"``: today's kernels (float32 window products, BLAS): any CPU, the fallback.
- ``"bf16"``: bfloat16 dot products (``vdpbf16ps``, AVX512_BF16; ``bf16_kernels.py``) for
  the decoder transformer's linears and two of SEANet's transposed convs (``mimi.use_bf16``),
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

from ...errors import LoadOptionError
from . import compiled

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


def fits_bf16(depth: int, columns: int) -> bool:
    """Whether a [depth, columns] weight packs for the bfloat16 kernel."""
    from .bf16_kernels import BF16_COLUMN_BLOCK

    return depth % 2 == 0 and columns % BF16_COLUMN_BLOCK == 0
