"""The most streams this machine's pool can carry in real time, and where its CPU time goes.

Full-size ``english`` with random weights (the pack ``bench_capacity.py`` writes). N sessions on
one scheduler each speak the same sentence with EOS disabled (~7 s of audio each) and are read
as fast as frames come, so the pool never waits for a listener. Printed per N:

- audio seconds produced per wall second: the real-time streams the pool sustains flat out
  (the ceiling ``bench_capacity.py`` approaches with real-time listeners and a margin);
- process CPU ms per frame, and how much of it the backend's stages took (thread CPU time in
  the FlowLM step, the sampler, the Mimi decode and the prefills): the rest is the
  scheduler, the sessions and the readers.

Usage:

    python benchmarks/bench_ceiling.py [--sizes 4,8,12] [--precision int8] [--threads 2]
        [--work /tmp/bench_capacity]
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from full_size_pack import build_files

from pipecat_pocket_tts.engine import PocketTTS

TEXT = "Hello there, how are you doing today?"
STAGES = ("prefill", "step", "sample", "decode", "step_batch", "sample_batch", "decode_batch")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4,8,12")
    parser.add_argument("--precision", default="int8", choices=("fp32", "bf16", "int8"))
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="pool threads")
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench_capacity"))
    return parser.parse_args()


class StageClock:
    """Thread CPU seconds spent in the backend's stage methods (wraps them on the instance)."""

    def __init__(self, backend) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self._lock = threading.Lock()
        for name in STAGES:
            if hasattr(backend, name):
                setattr(backend, name, self._timed(name, getattr(backend, name)))

    def _timed(self, name: str, method):
        def timed(*args, **kwargs):
            start = time.thread_time()
            try:
                return method(*args, **kwargs)
            finally:
                spent = time.thread_time() - start
                with self._lock:
                    self.seconds[name] += spent

        return timed

    def total(self) -> float:
        with self._lock:
            return sum(self.seconds.values())

    def reset(self) -> None:
        with self._lock:
            self.seconds.clear()


def run(tts: PocketTTS, clock: StageClock, n: int) -> dict:
    """n sessions read flat out → frames, wall and CPU seconds, stage CPU seconds."""
    sessions = [tts.session(seed=i, eos_threshold=1e9) for i in range(n)]
    frames = [0] * n

    def read(i: int) -> None:
        for _frame in sessions[i]:
            frames[i] += 1

    readers = [threading.Thread(target=read, args=(i,)) for i in range(n)]
    clock.reset()
    cpu, wall = time.process_time(), time.perf_counter()
    for session, reader in zip(sessions, readers, strict=True):
        session.enqueue(TEXT)
        session.finish()
        reader.start()
    for reader in readers:
        reader.join()
    return {
        "frames": sum(frames),
        "wall": time.perf_counter() - wall,
        "cpu": time.process_time() - cpu,
        "stages": clock.total(),
    }


def main() -> None:
    args = parse_args()
    pack, _ = build_files(args.work)
    tts = PocketTTS.load(
        "english",
        backend="numpy",
        model_dir=pack,
        precision=args.precision,
        threads=args.threads,
        max_streams=None,
    )
    for _ in tts.stream(TEXT):  # warm-up: kernels, caches, the scheduler's cost estimates
        pass
    clock = StageClock(tts.backend)
    frame_seconds = 1.0 / tts.config.mimi.frame_rate
    print(f"english, {args.precision}, {args.threads} pool threads, streams read flat out")
    print(f"{'N':>4}{'real-time streams':>19}{'CPU ms/frame':>14}{'in stages':>11}")
    for n in (int(size) for size in args.sizes.split(",")):
        result = run(tts, clock, n)
        streams = result["frames"] * frame_seconds / result["wall"]
        per_frame = 1e3 * result["cpu"] / result["frames"]
        share = result["stages"] / result["cpu"]
        print(f"{n:>4}{streams:>19.1f}{per_frame:>14.2f}{share:>10.1%}", flush=True)


if __name__ == "__main__":
    main()
