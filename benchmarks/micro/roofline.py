"""What a stream-frame costs in arithmetic, and how fast this machine's cores can do arithmetic.

Used by ``benchmarks.micro.batch_stages --roofline``:

- ``stage_macs`` counts the multiply-adds of one stream-frame in each batched stage (FlowLM
  step, sampler, Mimi decode) from the shapes of the loaded model;
- ``register_rates`` runs loops that never touch memory (one thread, numba): fp32 FMAs
  (``vfmadd``, 8 multiply-adds an instruction) and int16 multiply-adds (``vpmaddwd`` then
  ``vpaddd``, 16 an instruction pair, the only integer form that sums in int32 without
  saturating): the ceiling of each kind of arithmetic on one core;
- ``sgemm_rate`` times one large float32 matrix product (NumPy's BLAS, one thread): what a
  tuned kernel sustains when the shapes are kind.
"""

from __future__ import annotations

import time

import numpy as np

INDEPENDENT_CHAINS = 12  # register accumulators: more than latency × issue rate of either kind


def stage_macs(backend, kv_length: int) -> dict[str, int]:
    """Multiply-adds of one stream-frame → {"step", "sample", "decode"} for a NumpyBackend.

    ``kv_length``: positions the FlowLM step attends over (voice, text and audio so far).
    Elementwise work (norms, activations, softmax) is not counted.
    """
    flow = backend.flow_lm
    step = flow.input_linear.size + flow.out_eos_w.size + _linear_macs(flow.layers)
    step += flow.num_layers * 2 * kv_length * flow.num_heads * flow.head_dim  # q·k and p·v

    sample = backend.sampler.multiply_adds()
    return {"step": step, "sample": sample, "decode": _mimi_decode_macs(backend.mimi)}


def _linear_macs(layers) -> int:
    """Multiply-adds of one row through the linears of transformer layers."""
    linears = [(l.in_proj, l.out_proj, l.linear1, l.linear2) for l in layers]  # noqa: E741
    return sum(linear.shape[0] * linear.shape[1] for group in linears for linear in group)


def _mimi_decode_macs(mimi) -> int:
    """Multiply-adds of one Mimi decode frame: projection, upsampling, transformer, SEANet."""
    from pipecat_pocket_tts.engine.backends.numpy.layers.streaming_conv import StreamingConv1d

    macs = mimi.latent_projection.size
    rows = 1  # frames of the current layer per latent frame
    if mimi.upsample is not None:
        macs += mimi.upsample.weight_size  # depthwise: every tap of each channel, once
        rows = mimi.upsample.stride
    transformer = mimi.decoder_transformer
    macs += rows * _linear_macs(transformer.layers)
    macs += len(transformer.layers) * rows * 2 * transformer.context * transformer.d_model
    for conv in mimi.decoder.convs():
        if isinstance(conv, StreamingConv1d):
            rows //= conv.stride
            macs += rows * conv.weight_size
        else:  # transposed: every input frame meets every (padded) tap block
            macs += rows * conv.weight_size
            rows *= conv.stride
    return macs


def register_rates(iterations: int = 20_000_000) -> dict[str, float]:
    """Multiply-adds per second of one thread in register-only loops → {"fp32 FMA",
    "int16 vpmaddwd+vpaddd"} (best of five); empty without numba or AVX2."""
    try:
        loops = _register_loops()
    except ImportError:
        return {}
    rates = {}
    for name, (loop, per_instruction) in loops.items():
        loop(10)
        best = min(_seconds(loop, iterations) for _ in range(5))
        rates[name] = iterations * INDEPENDENT_CHAINS * per_instruction / best
    return rates


def _seconds(loop, iterations: int) -> float:
    start = time.perf_counter()
    loop(iterations)
    return time.perf_counter() - start


def _register_loops() -> dict:
    """Compiled loops of INDEPENDENT_CHAINS accumulators, one multiply-add each a turn."""
    import numba
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    from pipecat_pocket_tts.engine.backends.numpy.kernels.matmul import AVX2

    i16, i32, f32 = ir.IntType(16), ir.IntType(32), ir.FloatType()
    v8i, v8f, v16 = ir.VectorType(i32, 8), ir.VectorType(f32, 8), ir.VectorType(i16, 16)

    def build(kind: str):
        @intrinsic
        def run(typingctx, n):
            def codegen(context, builder, signature, args):
                module = builder.module
                vector = v8f if kind == "fma" else v8i
                if kind == "fma":
                    op = cgutils.get_or_insert_function(
                        module, ir.FunctionType(v8f, [v8f] * 3), "llvm.fma.v8f32"
                    )
                else:
                    op = cgutils.get_or_insert_function(
                        module, ir.FunctionType(v8i, [v16, v16]), "llvm.x86.avx2.pmadd.wd"
                    )
                accs = [
                    cgutils.alloca_once_value(builder, ir.Constant(vector, None))
                    for _ in range(INDEPENDENT_CHAINS)
                ]
                with cgutils.for_range(builder, args[0]) as loop:
                    # An operand that changes every turn, so nothing is hoisted out.
                    turn = builder.trunc(loop.index, i32)
                    turn = builder.insert_element(ir.Constant(v8i, None), turn, i32(0))
                    previous = [builder.load(acc) for acc in accs]
                    for j, acc in enumerate(accs):
                        other = previous[(j + 1) % INDEPENDENT_CHAINS]
                        if kind == "fma":
                            value = builder.call(
                                op, [previous[j], builder.bitcast(turn, v8f), other]
                            )
                        else:
                            product = builder.call(
                                op, [builder.bitcast(other, v16), builder.bitcast(turn, v16)]
                            )
                            value = builder.add(previous[j], product)
                        builder.store(value, acc)
                total = ir.Constant(ir.DoubleType(), 0.0)
                for acc in accs:  # keep every chain alive
                    lane = builder.extract_element(builder.bitcast(builder.load(acc), v8i), i32(0))
                    total = builder.fadd(total, builder.sitofp(lane, ir.DoubleType()))
                return total

            return types.float64(n), codegen

        @numba.njit(nogil=True)
        def loop(n):
            return run(n)

        return loop

    loops = {"fp32 FMA": (build("fma"), 8)}
    if AVX2:
        loops["int16 vpmaddwd+vpaddd"] = (build("madd"), 16)
    return loops


def sgemm_rate(size: int = 2048, repeats: int = 5) -> float:
    """Multiply-adds per second of a [size, size] float32 product by BLAS (best of repeats)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return size**3 / best
