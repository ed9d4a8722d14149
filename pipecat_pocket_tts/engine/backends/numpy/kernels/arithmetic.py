"""Which arithmetic Mimi's decoder and the sampler run in, and on which instructions they and
the FlowLM's int8 linears run, chosen at load from what the CPU reports.

- ``"fp32"``: today's kernels (float32 window products, BLAS): any CPU, the fallback.
- ``"bf16"``: bfloat16 dot products (``vdpbf16ps``, AVX512_BF16; ``bf16.py``) for the
  transformer's linears and two of SEANet's transposed convs, whose inputs and weights are
  rounded to bfloat16 while sums, biases, residuals and the streaming state stay float32. The
  other convs stay float32: rounding every conv to bfloat16 cost ~44 dB SNR against fp32 on
  the full-size random pack.
- ``"int16"``: int16 dot products (``int16.py``) for the transformer's linears and every SEANet
  conv and transposed conv that packs (all but the last, one channel wide): 16-bit weights a
  column, 13-bit inputs scaled row by row, exact int32 sums; ~62–63 dB against fp32 on the
  full-size random pack where "bf16" gave 46–50. It runs on the best of three x86 instruction
  paths the CPU has (``choose_int16_kernel``: AVX512_VNNI, AVX-VNNI, AVX2), each giving the
  same bits; elsewhere (aarch64) on the portable path, the same sums in plain vector code that
  LLVM turns into the CPU's own instructions (NEON), again the same bits.

``choose_arithmetic(requested, precision)``: the arithmetic a load runs — ``requested`` (the
``mimi_arithmetic`` argument), else the ``POCKET_TTS_MIMI_ARITHMETIC`` environment variable,
else ``"auto"``: with a narrow ``precision`` ("int8", "bf16": the caller traded exactness for
speed) the best this CPU has (numba installed), else ``"fp32"`` (precision "fp32" stays float32
end to end: parity with upstream): "int16" first (any CPU with AVX2 and FMA), then "bf16".
"auto" takes only what was measured faster than float32: "int16" on the portable path runs
where it is asked for (``mimi_arithmetic="int16"``) but is never chosen by "auto", as no ARM
CPU was at hand to time it. Asking for arithmetic or an instruction path the CPU lacks is a
``LoadOptionError`` saying so (never a silent fallback).

``choose_sampler_arithmetic(precision)``: the same choice for the sampler's flow net, "int16"
or "fp32" (``layers/sampler.py``), from ``POCKET_TTS_SAMPLER_ARITHMETIC``; "auto" follows the
FlowLM's precision as Mimi's does.

``choose_int16_kernel()`` and ``choose_int8_kernel()``: the instruction path of the int16 window
product and of the FlowLM's int8 linears (``POCKET_TTS_INT16_KERNEL``, ``POCKET_TTS_INT8_KERNEL``).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import NamedTuple

import numpy as np

from ....errors import LoadOptionError
from . import INT16_KERNELS, compiled

ARITHMETIC_ENV = "POCKET_TTS_MIMI_ARITHMETIC"
#: Its name until issue 49 ("units" now means CoreML's compute units only): refused, naming the
#: new one, so a setting is never silently dropped.
RENAMED_ENV = "POCKET_TTS_MIMI_UNITS"
_BEST_FIRST = ("int16", "bf16", "fp32")
MIMI_ARITHMETIC = ("auto", *_BEST_FIRST)
#: What each arithmetic needs beyond numba, as /proc/cpuinfo spells it ("": numba alone; int16
#: runs on the portable path anywhere).
_NEEDS = {"bf16": "avx512_bf16", "int16": ""}
SAMPLER_ARITHMETIC_ENV = "POCKET_TTS_SAMPLER_ARITHMETIC"
SAMPLER_ARITHMETIC = ("auto", "int16", "fp32")
INT16_KERNEL_ENV = "POCKET_TTS_INT16_KERNEL"
#: The path that is not an x86 instruction set: plain vector code, built for any CPU.
PORTABLE = "portable"
#: The CPU flag each path needs, as /proc/cpuinfo spells it (for the errors; "": numba alone).
INT16_FLAGS = {"vnni": "avx512_vnni", "avx-vnni": "avx_vnni", "avx2": "avx2", PORTABLE: ""}
#: How the load log names each path.
INT16_INSTRUCTIONS = {
    "vnni": "AVX512_VNNI vpdpwssd",
    "avx-vnni": "AVX-VNNI vpdpwssd on ymm",
    "avx2": "AVX2 vpmaddwd",
    PORTABLE: "portable vector code",
}


class Int16Weight(NamedTuple):
    """A weight packed for ``int16.int16_window_matmul``: codes [N / 32, K / 2, 32] uint32
    (int16 pairs), one float32 scale per output column [N], and the instruction path it runs
    on (``INT16_KERNELS``)."""

    codes: np.ndarray
    scales: np.ndarray
    path: str


def bf16_kernels() -> ModuleType | None:
    """The bfloat16 kernels module (warmed up at its first use: at model load) when numba is
    installed and numba compiles for a CPU with AVX512_BF16, else None."""
    if compiled.optional() is None:
        return None
    from . import bf16 as module

    return _warm(module) if module.BF16_DOT else None


def int16_kernels(path: str | None = None) -> ModuleType | None:
    """The int16 kernels module when numba is installed and compiles for a CPU with one of its
    paths (with ``path``: that one, warmed up at its first use), else None."""
    if compiled.optional() is None:
        return None
    from . import int16 as module

    if path is None:
        return module if module.INT16_DOT else None
    return _warm(module, path) if path in module.INT16_PATHS else None


def int8_tile_kernels(path: str) -> ModuleType | None:
    """The int8 tiles module (``int8_tiles.py``) warmed up on ``path`` ("vnni", "avx-vnni" or
    "portable") when numba compiles for a CPU with that path, else None."""
    if int16_kernels(path) is None or path not in ("vnni", "avx-vnni", PORTABLE):
        return None
    from . import int8_tiles as module

    return _warm(module, path)


@functools.cache
def _warm(module: ModuleType, *path: str) -> ModuleType:
    module.warm_up(*path)
    return module


def _available(arithmetic: str) -> bool:
    """Whether this process can run ``arithmetic``."""
    kernels = {"bf16": bf16_kernels, "int16": int16_kernels}.get(arithmetic)
    return kernels is None or kernels() is not None


def _measured(arithmetic: str) -> bool:
    """Whether "auto" takes ``arithmetic`` here: it runs, on a path timed faster than float32
    (int16: an x86 path, not the portable one)."""
    if arithmetic != "int16":
        return _available(arithmetic)
    kernels = int16_kernels()
    return kernels is not None and kernels.INT16_PATHS[0] != PORTABLE


def choose_among(
    setting: str,
    value: str,
    best_first: tuple[str, ...],
    available: Callable[[str], bool],
    needs: Mapping[str, str],
    fallback: str | None = None,
    auto_takes: Callable[[str], bool] | None = None,
) -> str:
    """``value`` of a kernel ``setting`` (as its errors name it): "auto" is the first of
    ``best_first`` that ``auto_takes`` (by default: that is ``available``; else ``fallback``,
    which nobody may ask for); a value ``needs`` names a CPU flag for ("": numba alone) must be
    available, or it is a ``LoadOptionError`` naming what is missing (never a silent fallback);
    the others of ``best_first`` stand."""
    choices = ("auto", *best_first)
    if value not in choices:
        raise LoadOptionError(f"{setting} must be one of {', '.join(choices)}, got {value!r}")
    if value == "auto":
        takes = auto_takes or available
        return next((choice for choice in best_first if takes(choice)), fallback)
    if value in needs and not available(value):
        flag = needs[value]
        missing = (
            f"numba and a CPU with {flag.upper()} ({flag} in /proc/cpuinfo)"
            if flag
            else "numba (the fast extra)"
        )
        raise LoadOptionError(
            f"{setting}={value!r} needs {missing}, which this process does not have: use 'auto'"
        )
    return value


def choose_arithmetic(requested: str | None = None, precision: str = "fp32") -> str:
    """The arithmetic Mimi runs in, one of ``MIMI_ARITHMETIC`` but "auto" (the module
    docstring); the argument, else ``POCKET_TTS_MIMI_ARITHMETIC``."""
    if os.environ.get(RENAMED_ENV):
        raise LoadOptionError(f"{RENAMED_ENV} is now {ARITHMETIC_ENV} (the same values)")
    arithmetic = requested or os.environ.get(ARITHMETIC_ENV) or "auto"
    if arithmetic == "auto" and precision == "fp32":
        return "fp32"
    return choose_among(
        "mimi_arithmetic", arithmetic, _BEST_FIRST, _available, _NEEDS, auto_takes=_measured
    )


def choose_sampler_arithmetic(precision: str = "fp32") -> str:
    """The arithmetic the sampler's flow net runs in, "int16" or "fp32":
    ``POCKET_TTS_SAMPLER_ARITHMETIC`` ("auto" when unset: with a narrow ``precision`` "int16"
    where this CPU runs it, else "fp32"; precision "fp32" stays float32: parity with upstream).
    "auto" takes the portable path's "int16" nowhere (``choose_arithmetic``). Asking for "int16"
    without numba is a ``LoadOptionError``."""
    arithmetic = os.environ.get(SAMPLER_ARITHMETIC_ENV) or "auto"
    if arithmetic == "auto" and precision == "fp32":
        return "fp32"
    return choose_among(
        SAMPLER_ARITHMETIC_ENV,
        arithmetic,
        SAMPLER_ARITHMETIC[1:],
        _available,
        _NEEDS,
        auto_takes=_measured,
    )


def choose_int16_kernel() -> str:
    """The instruction path of the int16 kernels: ``POCKET_TTS_INT16_KERNEL`` ("auto" when
    unset): "vnni" (AVX512_VNNI ``vpdpwssd`` on zmm), "avx-vnni" (the VEX ``vpdpwssd`` on ymm),
    "avx2" (``vpmaddwd`` and ``vpaddd``), "portable" (plain vector code, any CPU), or on "auto"
    the best this CPU has. Asking for one the CPU lacks is a ``LoadOptionError`` naming its
    flag."""
    return choose_among(
        INT16_KERNEL_ENV,
        os.environ.get(INT16_KERNEL_ENV) or "auto",
        INT16_KERNELS,
        lambda path: int16_kernels(path) is not None,
        INT16_FLAGS,
    )


INT8_KERNEL_ENV = "POCKET_TTS_INT8_KERNEL"


def choose_int8_kernel() -> str:
    """The int8 linears' kernel: ``POCKET_TTS_INT8_KERNEL`` ("auto" when unset): "vnni"
    (``int8_tiles.int8_matmul_vnni``: AVX512_VNNI ``vpdpwssd``), "avx-vnni"
    (``int8_matmul_avx_vnni``: the VEX ``vpdpwssd`` on ymm), "avx2" (``int8_matmul_int16``:
    ``vpmaddwd``), "portable" (the same integer sums in plain vector code, any CPU: NEON on
    aarch64), or on "auto" the widest x86 kernel this CPU has, else "float" (int8 widened to
    float32; "auto" never takes "portable", as no ARM CPU was at hand to time it). Asking for
    one the CPU lacks is a ``LoadOptionError``."""

    def has(kernel: str) -> bool:
        if kernel == "avx2":
            return bool(compiled.required().AVX2)
        return int8_tile_kernels(kernel) is not None

    return choose_among(
        INT8_KERNEL_ENV,
        os.environ.get(INT8_KERNEL_ENV) or "auto",
        INT16_KERNELS,  # the int8 kernels run on the int16 kernels' paths
        has,
        INT16_FLAGS,
        fallback="float",
        auto_takes=lambda kernel: kernel != PORTABLE and has(kernel),
    )


def pack_int16(matrix: np.ndarray, channels: int) -> Int16Weight | None:
    """``matrix`` [K, N] (taps ``channels`` deep) packed for the int16 kernel on the path
    chosen (``choose_int16_kernel``), or None where it does not pack."""
    from .int16 import fits_int16, pack_int16_columns

    if not fits_int16(*matrix.shape, channels):
        return None
    return Int16Weight(*pack_int16_columns(matrix, channels), choose_int16_kernel())


def describe_arithmetic(arithmetic: str) -> str:
    """A line for the load log and ``PocketTTS.kernels``: what Mimi's decoder runs on."""
    if arithmetic == "bf16":
        return (
            "Mimi decoder: bfloat16 dot products (AVX512_BF16 vdpbf16ps) in the transformer "
            "and two SEANet transposed convs, float32 elsewhere; frame blocks bit for bit"
        )
    if arithmetic == "int16":
        return (
            f"Mimi decoder: int16 dot products ({INT16_INSTRUCTIONS[choose_int16_kernel()]}) in "
            "the transformer and the SEANet convs; frame blocks bit for bit"
        )
    return "Mimi decoder: float32 (window kernels and BLAS)"


def describe_sampler(arithmetic: str) -> str:
    """A phrase for ``PocketTTS.kernels["flow_lm"]``: what the sampler's flow net runs on."""
    if arithmetic == "int16":
        return (
            f"sampler: int16 dot products ({INT16_INSTRUCTIONS[choose_int16_kernel()]}) on "
            "inputs in two passes (~26 bits), the adaLN modulations as one product, "
            "input_proj and the final linear float32"
        )
    if compiled.optional() is None:
        return "sampler: float32 (BLAS)"
    return "sampler: float32 (window kernels)"


def fits_bf16(depth: int, columns: int) -> bool:
    """Whether a [depth, columns] weight packs for the bfloat16 kernel."""
    from .bf16 import BF16_COLUMN_BLOCK

    return depth % 2 == 0 and columns % BF16_COLUMN_BLOCK == 0
