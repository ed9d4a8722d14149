"""Which arithmetic units Mimi's decoder runs on, chosen at load from what the CPU reports.

- ``"fp32"``: today's kernels (float32 window products, BLAS): any CPU, the fallback.
- ``"bf16"``: bfloat16 dot products (``vdpbf16ps``, AVX512_BF16; ``bf16_kernels.py``) for
  the decoder transformer's linears and two of SEANet's transposed convs, whose inputs and
  weights are rounded to bfloat16 while sums, biases, residuals and the streaming state stay
  float32. The other convs stay float32: rounding every conv to bfloat16 cost ~44 dB SNR
  against fp32 on the full-size random pack.
- ``"int16"``: int16 dot products (``vpdpwssd``, AVX512_VNNI; ``int16_kernels.py``) for the
  transformer's linears and every SEANet conv and transposed conv that packs (all but the
  last, one channel wide): 16-bit weights a column, 13-bit inputs scaled row by row, exact
  int32 sums; ~62–63 dB against fp32 on the full-size random pack where "bf16" gave 46–50,
  at the speed of "bf16" (the same multiply-adds an instruction).

``choose_units(requested, precision)``: the units a load runs — ``requested`` (the
``mimi_units`` argument), else the ``POCKET_TTS_MIMI_UNITS`` environment variable, else
``"auto"``: with a narrow ``precision`` ("int8", "bf16": the caller traded exactness for speed)
the best of those this CPU has (numba installed), else ``"fp32"`` (precision "fp32" stays
float32 end to end: parity with upstream): "int16" first, then "bf16". Asking for units the
CPU lacks is a ``LoadOptionError`` saying so (never a silent fallback).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import NamedTuple

import numpy as np

from ....errors import LoadOptionError
from . import compiled

UNITS_ENV = "POCKET_TTS_MIMI_UNITS"
_BEST_FIRST = ("int16", "bf16", "fp32")
MIMI_UNITS = ("auto", *_BEST_FIRST)
#: What each of the units needs beyond numba, as /proc/cpuinfo spells it.
_NEEDS = {"bf16": "avx512_bf16", "int16": "avx512_vnni"}


class Int16Weight(NamedTuple):
    """A weight packed for ``int16_kernels.int16_window_matmul``: codes [N / 32, K / 2, 32]
    uint32 (int16 pairs) and one float32 scale per output column [N]."""

    codes: np.ndarray
    scales: np.ndarray


def bf16_kernels() -> ModuleType | None:
    """The bfloat16 kernels module (warmed up at its first use: at model load) when numba is
    installed and numba compiles for a CPU with AVX512_BF16, else None."""
    if compiled.optional() is None:
        return None
    from . import bf16 as module

    return _warm(module) if module.BF16_DOT else None


def int16_kernels() -> ModuleType | None:
    """The int16 kernels module (warmed up at its first use) when numba is installed and
    numba compiles for a CPU with AVX512_VNNI, else None."""
    if compiled.optional() is None:
        return None
    from . import int16 as module

    return _warm(module) if module.INT16_DOT else None


@functools.cache
def _warm(module: ModuleType) -> ModuleType:
    module.warm_up()
    return module


def _available(units: str) -> bool:
    """Whether this process can run ``units``."""
    kernels = {"bf16": bf16_kernels, "int16": int16_kernels}.get(units)
    return kernels is None or kernels() is not None


def choose_among(
    setting: str,
    value: str,
    best_first: tuple[str, ...],
    available: Callable[[str], bool],
    needs: Mapping[str, str],
    fallback: str | None = None,
) -> str:
    """``value`` of a kernel ``setting`` (as its errors name it): "auto" is the first of
    ``best_first`` that is ``available`` (else ``fallback``, which nobody may ask for); a value
    ``needs`` names a CPU flag for must be available, or it is a ``LoadOptionError`` naming the
    flag (never a silent fallback); the others of ``best_first`` stand."""
    choices = ("auto", *best_first)
    if value not in choices:
        raise LoadOptionError(f"{setting} must be one of {', '.join(choices)}, got {value!r}")
    if value == "auto":
        return next((choice for choice in best_first if available(choice)), fallback)
    if value in needs and not available(value):
        flag = needs[value]
        raise LoadOptionError(
            f"{setting}={value!r} needs numba and a CPU with {flag.upper()} ({flag} in "
            "/proc/cpuinfo), which this process does not have: use 'auto'"
        )
    return value


def choose_units(requested: str | None = None, precision: str = "fp32") -> str:
    """The units Mimi runs on, one of ``MIMI_UNITS`` but "auto" (the module docstring); the
    argument, else ``POCKET_TTS_MIMI_UNITS``."""
    units = requested or os.environ.get(UNITS_ENV) or "auto"
    if units == "auto" and precision == "fp32":
        return "fp32"
    return choose_among("mimi_units", units, _BEST_FIRST, _available, _NEEDS)


def describe_units(units: str) -> str:
    """A line for the load log and ``PocketTTS.kernels``: what Mimi's decoder runs on."""
    if units == "bf16":
        return (
            "Mimi decoder: bfloat16 dot products (AVX512_BF16 vdpbf16ps) in the transformer "
            "and two SEANet transposed convs, float32 elsewhere; frame blocks bit for bit"
        )
    if units == "int16":
        return (
            "Mimi decoder: int16 dot products (AVX512_VNNI vpdpwssd) in the transformer and "
            "the SEANet convs; frame blocks bit for bit"
        )
    return "Mimi decoder: float32 (window kernels and BLAS)"


def fits_bf16(depth: int, columns: int) -> bool:
    """Whether a [depth, columns] weight packs for the bfloat16 kernel."""
    from .bf16 import BF16_COLUMN_BLOCK

    return depth % 2 == 0 and columns % BF16_COLUMN_BLOCK == 0
