"""What the finite-weights check adds to loading a pack (NumPy backend).

    python -m pipecat_pocket_tts.devpack /tmp/x --config english   # full size, ~440 MB
    python -m benchmarks.micro.finite_check /tmp/x --config english

Side by side in one run, alternating: ``load_checkpoint`` (memory-mapped, with the check) vs
the same read without it, then the check alone over the loaded weights; median of N rounds.
Optionally drops the page cache first (root only) to show the cold-disk case.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from pipecat_pocket_tts.engine.backends.numpy.weights.checkpoint import (
    check_weights,
    iter_safetensors,
    load_checkpoint,
)
from pipecat_pocket_tts.engine.backends.numpy.weights.finite import check_finite_weights
from pipecat_pocket_tts.engine.model.config import get_config


def _drop_caches() -> bool:
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pack", type=Path)
    parser.add_argument("--config", default="english")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cold", action="store_true", help="drop the page cache before each")
    args = parser.parse_args()
    config = get_config(args.config)
    path = args.pack / "model.safetensors"

    def without_check():
        weights = dict(iter_safetensors(path))
        check_weights(weights, config, source=str(path))
        return weights

    timings: dict[str, list[float]] = {"without check": [], "with check": [], "check alone": []}
    for _ in range(args.rounds):
        for name, load in (("without check", without_check), ("with check", load_checkpoint)):
            if args.cold and not _drop_caches():
                raise SystemExit("--cold needs root (writes /proc/sys/vm/drop_caches)")
            start = time.perf_counter()
            weights = load(path, config) if load is load_checkpoint else load()
            timings[name].append(time.perf_counter() - start)
        start = time.perf_counter()
        check_finite_weights(weights)
        timings["check alone"].append(time.perf_counter() - start)
    size = sum(w.nbytes for w in weights.values()) / 1e6
    print(f"{path} ({size:.0f} MB fp32), {args.rounds} rounds{' cold' if args.cold else ''}:")
    for name, values in timings.items():
        print(f"  {name:14s} median {statistics.median(values) * 1000:8.1f} ms")
    added = statistics.median(timings["with check"]) - statistics.median(timings["without check"])
    print(f"  added by the check: {added * 1000:.1f} ms")


if __name__ == "__main__":
    main()
