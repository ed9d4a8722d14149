"""int8 text prefill through the kernel in blocks against BLAS on widened weights, A/B.

An int8 linear takes inputs of up to ``linears.int8_chunked_max_rows`` rows through its
kernel, ``KERNEL_MAX_ROWS`` rows at a time, and longer ones through BLAS on weights widened
to fp32. This times one text prefill (after the voice) at int8 with that limit and with the
float kernel's, 32, alternating in one process (one BLAS thread). Full-size packs, random
weights, built by the devpack under ``--work`` when missing. Usage:

    python -m benchmarks.micro.int8_prefill [--packs english german_24l]
        [--tokens 20 40 50] [--rounds 5] [--work /tmp/narrow_packs]

Prints the median wall ms of each limit and their ratio (the first round is a warm-up).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from benchmarks.common import cap_blas_threads, registry_pack

cap_blas_threads(1)

import numpy as np  # noqa: E402

from pipecat_pocket_tts.engine import PocketTTS  # noqa: E402
from pipecat_pocket_tts.engine.backends.numpy.layers import linears  # noqa: E402

FLOAT_KERNEL_LIMIT = 32


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packs", nargs="+", default=["english", "german_24l"])
    parser.add_argument("--tokens", type=int, nargs="+", default=[20, 40, 50])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--work", type=Path, default=Path("/tmp/narrow_packs"))
    return parser.parse_args()


def prefill_ms(backend, voice, embeddings: np.ndarray) -> float:
    state = backend.flow_state_from_voice(voice)
    start = time.perf_counter()
    backend.prefill(state, embeddings)
    return (time.perf_counter() - start) * 1e3


def main() -> None:
    args = parse_args()
    package_limits = dict(linears.INT8_CHUNKED_MAX_ROWS)
    float_limits = dict.fromkeys(package_limits, FLOAT_KERNEL_LIMIT)
    for name in args.packs:
        folder = registry_pack(args.work, name)
        tts = PocketTTS.load(name, backend="numpy", model_dir=folder, precision="int8")
        backend = tts.backend
        limit = linears.int8_chunked_max_rows(linears.load_kernels())
        voice = backend.voice_from_flow_state(tts.voice_state("alba"))
        for tokens in args.tokens:
            embeddings = backend.embed_text(np.arange(tokens) % 1000)
            times: dict[str, list[float]] = {"package": [], "float": []}
            for _ in range(args.rounds):
                for label, limits in (("package", package_limits), ("float", float_limits)):
                    linears.INT8_CHUNKED_MAX_ROWS.update(limits)
                    times[label].append(prefill_ms(backend, voice, embeddings))
            linears.INT8_CHUNKED_MAX_ROWS.update(package_limits)
            ours = statistics.median(times["package"][1:])
            theirs = statistics.median(times["float"][1:])
            print(
                f"{name:12s} {tokens:3d} tokens: limit {limit} {ours:6.0f} ms, "
                f"limit {FLOAT_KERNEL_LIMIT} {theirs:6.0f} ms ({ours / theirs:.2f}×)",
                flush=True,
            )


if __name__ == "__main__":
    main()
