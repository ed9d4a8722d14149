"""How soon the first compile of an install says so: process start to the stderr line.

    python -m benchmarks.micro.compile_notice                      # this checkout, 5 runs
    python -m benchmarks.micro.compile_notice --against /work/main  # the other checkout and
        # this one alternating, each run a fresh process with an empty kernel cache

Each run starts the installed ``pipecat-pocket-tts`` command (``warmup`` by default, or
``say`` with a random-weight pack) with ``NUMBA_CACHE_DIR`` an empty temporary folder, reads
its stderr until the line "compiling the numba kernels ..." arrives, then stops it (the
compile itself is not waited for). The time is wall time from just before the process is
started to the line's arrival, so it includes Python's start and the imports before the line.
Issue 33's goal: within one second.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import REPO

COMPILE_LINE = "compiling the numba kernels"


def seconds_to_line(checkout: Path, argv: list[str]) -> float:
    """One fresh process of ``checkout``: seconds from its start to the compile line."""
    command = shutil.which("pipecat-pocket-tts") or str(
        Path(sys.executable).with_name("pipecat-pocket-tts")
    )
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "PYTHONPATH": str(checkout), "NUMBA_CACHE_DIR": cache}
        started = time.perf_counter()
        process = subprocess.Popen(
            [command, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env
        )
        try:
            for line in process.stderr:
                if line.startswith(COMPILE_LINE):
                    return time.perf_counter() - started
            raise RuntimeError(f"{checkout}: the command ended without the compile line")
        finally:
            process.kill()
            process.communicate()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--against", type=Path, help="another checkout, run alternately")
    parser.add_argument("--say", action="store_true", help="`say` on a tiny pack, not `warmup`")
    args = parser.parse_args()

    argv = ["warmup"]
    pack_folder = None
    if args.say:
        from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict

        pack_folder = tempfile.TemporaryDirectory()
        pack = build_pack(Path(pack_folder.name), tiny_config_dict("standard"))
        out = Path(pack_folder.name) / "out.wav"
        argv = ["say", "Hi.", "-o", str(out), "--model-dir", str(pack)]

    checkouts = ([args.against] if args.against else []) + [REPO]
    times: dict[Path, list[float]] = {checkout: [] for checkout in checkouts}
    for _ in range(args.runs):
        for checkout in checkouts:
            times[checkout].append(seconds_to_line(checkout, argv))
    print(f"command: pipecat-pocket-tts {' '.join(argv[:1])}; load average {os.getloadavg()}")
    for checkout, seconds in times.items():
        runs = ", ".join(f"{s:.2f}" for s in seconds)
        print(f"{checkout}: median {statistics.median(seconds):.2f} s  (runs: {runs})")
    if args.against:
        ratio = statistics.median(times[args.against]) / statistics.median(times[REPO])
        print(f"ratio {args.against.name} / this checkout: {ratio:.2f}")
    if pack_folder is not None:
        pack_folder.cleanup()


if __name__ == "__main__":
    main()
