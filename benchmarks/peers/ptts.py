"""This engine beside Gradium's Rust ``ptts`` 0.4.2 on the same random weights, alternated.

Both load the full-size random ``english`` pack (``benchmarks.peers.ptts_pack`` converts it for
ptts, which quantizes it to q8_0 at load; ours runs int8). Each run is a fresh child process of
one engine at one pool size (ours: the scheduler's threads; ptts: ``set_num_threads``, beside the
two worker threads each of its streams starts); the runs alternate ours, ptts, ours, ... at each
size, ``--repeats`` times. Every stream speaks the same sentence with EOS off (both run to the
same frame budget, 84 frames). A child prints, after one warm-up stream:

- lone: a stream's wall-clock real-time factor (audio s / wall s), its first audio (from the
  call to the first samples) and the process CPU ms per 80 ms frame;
- many: ``--streams`` streams at once, read flat out: the real-time streams the process carries
  (audio s / wall s) and its CPU ms per frame.

Printed: every run with the load average, then per engine and pool size the medians, and the
ratios ours / ptts (lone: each at its best pool size). Usage (ptts in its own environment, e.g.
``python -m venv /tmp/pttsvenv && /tmp/pttsvenv/bin/pip install ptts==0.4.2``, or this
checkout's ``ptts`` extra):

    python -m benchmarks.peers.ptts [--ptts-python /tmp/pttsvenv/bin/python] [--threads 1,2]
        [--streams 8] [--repeats 3] [--work /tmp/bench_capacity]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from benchmarks.common import FRAME_SECONDS, module_command, tree_env

TEXT = "Hello there, how are you doing today?"
MODULE = "benchmarks.peers.ptts"
SAMPLE_RATE = 24000


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ptts-python", default=sys.executable, help="a Python with ptts")
    parser.add_argument("--threads", default="1,2", help="pool sizes to run")
    parser.add_argument("--streams", type=int, default=8, help="streams of the 'many' run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench_capacity"))
    parser.add_argument("--side", choices=("ours", "ptts"), help=argparse.SUPPRESS)
    parser.add_argument("--pack", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args()


class Meter:
    """Wall and process CPU seconds from its start."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def read(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall, time.process_time() - self.cpu


def measure(speak, streams: int) -> dict:
    """``speak(seed, on_audio)`` runs one stream, calling ``on_audio(samples)`` per piece →
    the lone and the many figures."""
    speak(0, lambda samples: None)  # warm-up
    first: list[float] = []
    samples = [0]
    meter = Meter()

    def on_lone(piece) -> None:
        if not first:
            first.append(time.perf_counter() - meter.wall)
        samples[0] += len(piece)

    speak(1, on_lone)
    wall, cpu = meter.read()
    frames = samples[0] / SAMPLE_RATE / FRAME_SECONDS
    lone = {"rtf": frames * FRAME_SECONDS / wall, "first_ms": 1e3 * first[0]}
    lone["cpu_ms"] = 1e3 * cpu / frames
    counts = [0] * streams

    def run(i: int) -> None:
        def count(piece, i=i) -> None:
            counts[i] += len(piece)

        speak(10 + i, count)

    readers = [threading.Thread(target=run, args=(i,)) for i in range(streams)]
    meter = Meter()
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join()
    wall, cpu = meter.read()
    frames = sum(counts) / SAMPLE_RATE / FRAME_SECONDS
    many = {"streams": frames * FRAME_SECONDS / wall, "cpu_ms": 1e3 * cpu / frames}
    return {"lone": lone, "many": many, "frames": frames / streams}


def ours(pack: Path, threads: int, streams: int) -> dict:
    """Our engine: int8, ``threads`` scheduler threads, no admission limit."""
    from pipecat_pocket_tts.engine import PocketTTS

    tts = PocketTTS.load(
        "english",
        backend="numpy",
        model_dir=pack,
        precision="int8",
        threads=threads,
        max_streams=None,
    )

    def speak(seed: int, on_audio) -> None:
        session = tts.session(seed=seed, eos_threshold=1e9)
        session.enqueue(TEXT)
        session.finish()
        for frame in session:
            on_audio(frame.samples)

    return measure(speak, streams)


def ptts_side(pack: Path, threads: int, streams: int) -> dict:
    """ptts: ``set_num_threads(threads)`` before the load, q8_0, EOS off."""
    import ptts

    ptts.set_num_threads(threads)
    tts = ptts.TTS(str(pack), lang="en", quant="q8_0", eos_threshold=1e9)

    def speak(seed: int, on_audio) -> None:
        with tts.stream(TEXT, voice="alba", seed=seed) as audio:
            for chunk in audio:
                on_audio(chunk)

    return measure(speak, streams)


def child(args: argparse.Namespace) -> None:
    threads = int(args.threads)
    run = ours if args.side == "ours" else ptts_side
    print(json.dumps(run(args.pack, threads, args.streams)), flush=True)


def alternate(args: argparse.Namespace) -> None:
    from benchmarks.capacity.ceiling import cpu_line
    from benchmarks.common import build_files
    from benchmarks.peers.ptts_pack import convert

    pack, _ = build_files(args.work)
    converted = convert(args.work, args.work / "ptts_english")
    sizes = [int(size) for size in args.threads.split(",")]
    results: dict[tuple[str, int], list[dict]] = {}
    print(f"{cpu_line()}; {args.streams} streams in 'many'")
    for repeat in range(args.repeats):
        for threads in sizes:
            for side, python, folder in (
                ("ours", sys.executable, pack),
                ("ptts", args.ptts_python, converted),
            ):
                command = module_command(
                    MODULE,
                    "--side",
                    side,
                    "--pack",
                    str(folder),
                    "--threads",
                    str(threads),
                    "--streams",
                    str(args.streams),
                    python=python,
                )
                load = os.getloadavg()[0]
                done = subprocess.run(
                    command, env=tree_env(), capture_output=True, text=True, check=False
                )
                if done.returncode:
                    sys.exit(f"{side} failed:\n{done.stderr[-3000:]}")
                result = json.loads(done.stdout.strip().splitlines()[-1])
                results.setdefault((side, threads), []).append(result)
                lone, many = result["lone"], result["many"]
                print(
                    f"run {repeat + 1} {side:4} {threads} threads (load {load:.1f}): lone "
                    f"{lone['rtf']:.2f}x real time, first audio {lone['first_ms']:.0f} ms, "
                    f"{lone['cpu_ms']:.1f} CPU ms/frame; {args.streams} streams: "
                    f"{many['streams']:.1f} real-time streams, {many['cpu_ms']:.1f} CPU ms/frame",
                    flush=True,
                )
    summarize(results, sizes, args.streams)


def summarize(results: dict[tuple[str, int], list[dict]], sizes: list[int], streams: int) -> None:
    """Medians per engine and pool size, and the ratios ours / ptts."""

    def median(side: str, threads: int, part: str, key: str) -> float:
        return statistics.median(run[part][key] for run in results[(side, threads)])

    print(
        f"\n{'medians':<10}{'threads':>8}{'lone x RT':>11}{'first ms':>10}{'CPU ms/f':>10}"
        f"{f'{streams} streams':>12}{'CPU ms/f':>10}"
    )
    for side in ("ours", "ptts"):
        for threads in sizes:
            print(
                f"{side:<10}{threads:>8}{median(side, threads, 'lone', 'rtf'):>11.2f}"
                f"{median(side, threads, 'lone', 'first_ms'):>10.0f}"
                f"{median(side, threads, 'lone', 'cpu_ms'):>10.1f}"
                f"{median(side, threads, 'many', 'streams'):>12.1f}"
                f"{median(side, threads, 'many', 'cpu_ms'):>10.1f}"
            )
    best = {
        side: max(sizes, key=lambda t, side=side: median(side, t, "lone", "rtf"))
        for side in ("ours", "ptts")
    }
    lone = median("ours", best["ours"], "lone", "rtf") / median("ptts", best["ptts"], "lone", "rtf")
    print(
        f"\nlone stream, each at its best pool size (ours {best['ours']}, ptts {best['ptts']} "
        f"threads): ours / ptts = {lone:.2f}"
    )
    for threads in sizes:
        many = median("ours", threads, "many", "streams") / median(
            "ptts", threads, "many", "streams"
        )
        print(f"{streams} streams on {threads} threads: ours / ptts = {many:.2f}")


def main() -> None:
    args = parse_args()
    if args.side is not None:
        child(args)
    else:
        alternate(args)


if __name__ == "__main__":
    main()
