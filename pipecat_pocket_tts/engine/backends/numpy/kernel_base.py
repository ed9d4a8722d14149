"""What the numba kernels share: the compile options and the float32 bit casts.

``jit`` compiles with full fast math (the matmuls); ``jit_nan_safe`` with fast math that keeps
NaN and infinity meaning what they mean (the activations, LayerNorm, attention: NaN passes
through); ``inline`` is ``jit_nan_safe`` inlined into its callers. Every kernel releases the GIL,
is serial and is cached on disk. Importing this module needs numba.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

# error_model="numpy": a float division by zero gives inf/NaN as in NumPy, rather than a check
# and a ZeroDivisionError branch that keeps LLVM from vectorizing the loop.
_options = {"cache": True, "nogil": True, "boundscheck": False, "error_model": "numpy"}
jit = numba.njit(fastmath=True, **_options)
# Fast math that keeps NaN and infinity meaning what they mean (the ELU passes NaN through).
_FINITE_FAST = {"contract", "afn", "reassoc", "nsz", "arcp"}
jit_nan_safe = numba.njit(fastmath=_FINITE_FAST, **_options)
inline = numba.njit(fastmath=_FINITE_FAST, inline="always", **_options)


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


FLOAT32_EXPONENT = np.int32(0x7F800000)
