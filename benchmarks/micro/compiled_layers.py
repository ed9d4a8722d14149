"""The compiled layer kernels (LayerNorm, GELU, RoPE, one step's attention) on and off, A/B.

Full-size configs, random weights, one BLAS thread, numba installed. In one process, the same
FlowLM step (solo and batched) and Mimi decode run with the kernels and with NumPy's code for
those layers (the module switches ``layers._kernels`` / ``kv_cache._kernels``), alternating
every round so a shared machine's drift falls on both alike. The linears run the same way in
both (compiled or BLAS as ``linears.py`` decides), except in the row ``mimi linears``: the
same decode with the Mimi transformer's linears through the compiled fp32 kernel (what
``linears.DenseLinear`` does for up to 16 rows, one stream's frame) against BLAS. Usage:

    python -m benchmarks.micro.compiled_layers [--configs english german_24l]
        [--precisions fp32 int8] [--batch 1,8] [--rounds 8]

Prints CPU ms per call (the calling thread's, median over rounds) and the ratio on ÷ off.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial

from benchmarks.common import cap_blas_threads


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=["english", "german_24l"])
    parser.add_argument("--precisions", nargs="+", default=["fp32", "int8"])
    parser.add_argument("--batch", default="1,8", help="streams per FlowLM step / Mimi decode")
    parser.add_argument("--rounds", type=int, default=8)
    return parser.parse_args()


ARGS = parse_args()
cap_blas_threads(1)

import numpy as np  # noqa: E402

from pipecat_pocket_tts.devpack import random_weights  # noqa: E402
from pipecat_pocket_tts.engine.backends.numpy.backend import NumpyBackend  # noqa: E402
from pipecat_pocket_tts.engine.backends.numpy.layers import blocks as layers  # noqa: E402
from pipecat_pocket_tts.engine.backends.numpy.layers import kv_cache  # noqa: E402
from pipecat_pocket_tts.engine.model.config import get_config  # noqa: E402

KERNELS = layers._kernels
CALLS_PER_ROUND = 3


def switch(on: bool) -> None:
    layers._kernels = kv_cache._kernels = KERNELS if on else None


def mimi_linears_switch(backend: NumpyBackend) -> Callable[[bool], None]:
    """Switches the compiled kernel of the Mimi decoder transformer's linears on and off."""
    linears = [
        linear
        for layer in backend.mimi.decoder_transformer.layers
        for linear in (layer.in_proj, layer.out_proj, layer.linear1, layer.linear2)
    ]

    def switch_linears(on: bool) -> None:
        for linear in linears:
            linear._kernels = KERNELS if on else None

    return switch_linears


def a_b(work: Callable[[], object], switch: Callable[[bool], None] = switch) -> tuple[float, float]:
    """Median CPU ms per call of ``work`` with the kernels on and off, rounds interleaved."""
    times: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(ARGS.rounds):
        for on in (True, False):
            switch(on)
            work()  # the first call after a switch is not timed
            start = time.thread_time()
            for _ in range(CALLS_PER_ROUND):
                work()
            times[on].append((time.thread_time() - start) / CALLS_PER_ROUND * 1000)
    switch(True)
    return statistics.median(times[True]), statistics.median(times[False])


def main() -> None:
    if KERNELS is None:
        sys.exit("numba is not installed: pip install -e '.[fast]'")
    sizes = [int(size) for size in ARGS.batch.split(",")]
    print(f"{'config':<12}{'precision':<11}{'stage':<14}{'B':>3}{'on ms':>10}{'off ms':>10}  ratio")
    for name in ARGS.configs:
        config = get_config(name)
        weights = random_weights(config, seed=1)
        rng = np.random.default_rng(0)
        d, latent_dim = config.flow_lm.transformer.d_model, config.flow_lm.latent_dim
        for precision in ARGS.precisions:
            backend = NumpyBackend(config, weights, precision=precision)
            for batch in sizes:
                states = []
                for b in range(batch):  # a voice-sized prefill, every stream at its own length
                    state = backend.new_flow_state()
                    backend.prefill(state, rng.standard_normal((150 + 10 * b, d)).astype("f4"))
                    states.append(state)
                latents = rng.standard_normal((batch, latent_dim)).astype(np.float32)
                mimi = [backend.new_mimi_state() for _ in range(batch)]
                decode = partial(backend.decode_batch, mimi, latents)
                stages = {
                    "flowlm step": (partial(backend.step_batch, states, list(latents)), switch),
                    "mimi decode": (decode, switch),
                    "mimi linears": (decode, mimi_linears_switch(backend)),
                }
                for stage, (work, switch_kernels) in stages.items():
                    if stage.startswith("mimi") and precision != ARGS.precisions[0]:
                        continue  # Mimi stays fp32 at every precision
                    on, off = a_b(work, switch_kernels)
                    print(
                        f"{name:<12}{precision:<11}{stage:<14}{batch:>3}{on:>10.1f}{off:>10.1f}"
                        f"  {on / off:.3f}",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
