"""What the numba kernels share: the compile options and the float32 bit casts.

``jit`` compiles with full fast math (the matmuls); ``jit_nan_safe`` with fast math that keeps
NaN and infinity meaning what they mean (the activations, LayerNorm, attention: NaN passes
through); ``inline`` is ``jit_nan_safe`` inlined into its callers. Every kernel releases the GIL,
is serial and is cached on disk. Importing this module needs numba.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import binding, ir
from numba.core import cgutils, types
from numba.extending import intrinsic

# error_model="numpy": a float division by zero gives inf/NaN as in NumPy, rather than a check
# and a ZeroDivisionError branch that keeps LLVM from vectorizing the loop.
_options = {"cache": True, "nogil": True, "boundscheck": False, "error_model": "numpy"}
jit = numba.njit(fastmath=True, **_options)
# Fast math that keeps NaN and infinity meaning what they mean (the ELU passes NaN through).
_FINITE_FAST = {"contract", "afn", "reassoc", "nsz", "arcp"}
jit_nan_safe = numba.njit(fastmath=_FINITE_FAST, **_options)
inline = numba.njit(fastmath=_FINITE_FAST, inline="always", **_options)


def target_name() -> str:
    """The CPU family numba compiles for, from LLVM's process triple: "aarch64" on Graviton
    and Apple Silicon (whose triple says "arm64"), "x86_64" on Intel and AMD."""
    family = binding.get_process_triple().split("-", 1)[0]
    return "aarch64" if family == "arm64" else family


X86_TARGET = target_name() in ("x86_64", "i386", "i486", "i586", "i686")
"""Whether the x86 kernels (AVX2 ``vpmaddwd``, AVX512_VNNI ``vpdpwssd``, AVX512_BF16
``vdpbf16ps``) can be built at all: elsewhere (aarch64) every choice takes the plain path."""


def compiles_for(*features: str) -> bool:
    """Whether numba compiles for an x86 CPU with every one of ``features`` (LLVM's x86 names,
    such as "avx2" or "avx512vnni"): ``NUMBA_CPU_FEATURES`` / ``NUMBA_CPU_NAME`` override the
    host (a portable cache built for a generic CPU takes the narrower kernels).

    Never on another CPU family (aarch64), whatever ``NUMBA_CPU_FEATURES`` lists: the kernels
    these features choose call x86 intrinsics, which LLVM cannot build there (a fatal error
    that ends the process). Nor where LLVM cannot read the host's features (as numba, which
    then compiles for none), nor the host's AVX ones under ``NUMBA_ENABLE_AVX=0``.
    """
    if not X86_TARGET:
        return False
    listed = numba.config.CPU_FEATURES
    if listed is not None:
        return all(f"+{feature}" in listed.split(",") for feature in features)
    if numba.config.CPU_NAME not in (None, "host"):
        return False
    try:
        host = binding.get_host_cpu_features()
    except RuntimeError:  # LLVM cannot tell this host's features
        return False
    if not numba.config.ENABLE_AVX and any(f.startswith("avx") for f in features):
        return False  # numba turns the host's AVX features off
    return all(bool(host.get(feature, False)) for feature in features)


def row_pointers(builder, array, index_tuple, count: int, element: ir.Type) -> list[ir.Value]:
    """LLVM IR: pointers (to ``element``) to the first item of the rows ``index_tuple[0 …
    count - 1]`` of a 2-D C array (an intrinsic's ``make_array`` struct)."""
    stride = cgutils.unpack_tuple(builder, array.strides, 2)[0]
    base = builder.bitcast(array.data, ir.IntType(8).as_pointer())
    return [
        builder.bitcast(
            builder.gep(base, [builder.mul(builder.extract_value(index_tuple, j), stride)]),
            element.as_pointer(),
        )
        for j in range(count)
    ]


@intrinsic
def float32_from_bits(typingctx, bits):  # pragma: no cover - compiled
    """The float32 whose bit pattern is the int32 ``bits`` (a register move, no memory)."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())

    return types.float32(types.int32), codegen


@intrinsic
def bits_of_float32(typingctx, value):  # pragma: no cover - compiled
    """The int32 bit pattern of the float32 ``value``."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.int32(types.float32), codegen


@intrinsic
def prefetch(typingctx, array, row, column):  # pragma: no cover - compiled
    """Ask the CPU to bring the cache line of ``array[row, column]`` (a 2-D array) into its
    caches: LLVM's generic ``llvm.prefetch``, a hint on every target (it never faults, and
    does nothing where the CPU has no such instruction)."""

    def codegen(context, builder, signature, args):
        arr = context.make_array(signature.args[0])(context, builder, args[0])
        place = cgutils.get_item_pointer(
            context, builder, signature.args[0], arr, [args[1], args[2]], wraparound=False
        )
        pointer = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        hint = cgutils.get_or_insert_function(
            builder.module,
            ir.FunctionType(ir.VoidType(), [pointer, i32, i32, i32]),
            "llvm.prefetch.p0i8",
        )
        # A read (0), kept in every cache level (3), of data (1).
        builder.call(hint, [builder.bitcast(place, pointer), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return types.none(array, types.intp, types.intp), codegen


FLOAT32_EXPONENT = np.int32(0x7F800000)
