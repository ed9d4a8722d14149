"""The most streams this machine's pool can carry in real time, and where its CPU time goes.

Full-size ``english`` with random weights (``benchmarks.common.build_files``, the pack
``benchmarks.capacity.streams`` measures). N sessions on one scheduler each speak the same sentence
with EOS disabled (~7 s of audio each) and are read as fast as frames come, so the pool never waits
for a listener. Printed per N:

- audio seconds produced per wall second: the real-time streams the pool sustains flat out
  (the ceiling ``benchmarks.capacity.streams`` approaches with real-time listeners and a margin);
- process CPU ms per frame, and how much of it the backend's stages took (thread CPU time in
  the FlowLM step, the sampler, the Mimi decode and the prefills): the rest is the
  scheduler, the sessions and the readers; then each stage's CPU ms per frame.

The first line names the CPU's vector flags and the kernels the load chose (``PocketTTS.kernels``).
``--against OLD_CHECKOUT`` runs this checkout and an older one (e.g. ``git worktree add /tmp/base
<commit>``) in fresh child processes, alternated ``--repeats`` times, each child the old or new
tree's own script (``bench_ceiling.py`` in a tree from before the benchmarks package), and prints
every run and, per N, the median of new / old (ratios of runs taken side by side: the machine may be
shared; the load average is printed with each run). Usage:

    python -m benchmarks.capacity.ceiling [--sizes 4,8,12] [--precision int8] [--threads 2]
        [--work /tmp/bench_capacity] [--against /tmp/base --repeats 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

from benchmarks.common import REPO, build_files, has_module, module_command, tree_env
from pipecat_pocket_tts.engine import PocketTTS

TEXT = "Hello there, how are you doing today?"
STAGES = (
    "prefill",
    "step",
    "sample",
    "decode",
    "step_batch",
    "sample_batch",
    "decode_batch",
    "decode_frames",
)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4,8,12")
    parser.add_argument("--precision", default="int8", choices=("fp32", "bf16", "int8"))
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="pool threads")
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench_capacity"))
    parser.add_argument("--against", type=Path, help="an older checkout to alternate with")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each tree (--against)")
    return parser.parse_args()


VECTOR_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16")


def cpu_line() -> str:
    """The CPU's model and which of ``VECTOR_FLAGS`` it reports (Linux /proc/cpuinfo)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "CPU: unknown (no /proc/cpuinfo)"
    fields = dict(line.split(":", 1) for line in text.splitlines()[:40] if ":" in line)
    flags = set(fields.get("flags\t\t", fields.get("flags", "")).split())
    model = fields.get("model name\t", "?").strip()
    shown = " ".join(flag for flag in VECTOR_FLAGS if flag in flags)
    return f"CPU: {model}, {os.cpu_count()} cores; flags: {shown}"


def against(args: argparse.Namespace) -> None:
    """Alternate the old checkout and this one, ``args.repeats`` child runs each."""
    import statistics
    import subprocess

    trees = {"old": args.against.resolve(), "new": REPO}
    rows: dict[tuple[str, int], list[float]] = defaultdict(list)
    cpu: dict[tuple[str, int], list[float]] = defaultdict(list)
    print(cpu_line(), flush=True)
    for repeat in range(args.repeats):
        for label, tree in trees.items():
            options = [
                f"--sizes={args.sizes}",
                f"--precision={args.precision}",
                f"--threads={args.threads}",
                f"--work={args.work}",
            ]
            # Each tree runs its own script: an older tree's flat one, or this module.
            if has_module(tree, __spec__.name):
                command = module_command(__spec__.name, *options)
            else:
                command = [sys.executable, str(tree / "benchmarks" / "bench_ceiling.py"), *options]
            env = tree_env(tree)
            load = os.getloadavg()[0]
            out = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
            for line in out.stdout.splitlines():
                parts = line.split()
                if len(parts) == 4 and parts[0].isdigit():
                    rows[(label, int(parts[0]))].append(float(parts[1]))
                    cpu[(label, int(parts[0]))].append(float(parts[2]))
                    print(f"run {repeat} {label:3s} (load {load:.1f}): {line.strip()}", flush=True)
                elif line.startswith("kernels"):
                    print(f"run {repeat} {label:3s}: {line}", flush=True)
    # Wall-clock streams follow the machine's other load; CPU ms per frame much less: the
    # streams the cores could carry at that cost is cores x 80 ms / (CPU ms per frame).
    frame_ms = 80.0
    print(
        f"{'N':>4}{'streams old':>12}{'new':>7}{'new/old':>9}"
        f"{'CPU ms/frame old':>18}{'new':>7}{'old/new':>9}{'CPU streams old':>17}{'new':>7}"
        "  (medians; per-run ratios of neighbouring runs)"
    )
    for n in (int(size) for size in args.sizes.split(",")):
        old, new = rows[("old", n)], rows[("new", n)]
        wall = [b / a for a, b in zip(old, new, strict=False)]
        old_cpu, new_cpu = cpu[("old", n)], cpu[("new", n)]
        saved = [a / b for a, b in zip(old_cpu, new_cpu, strict=False)]
        cores = args.threads
        print(
            f"{n:>4}{statistics.median(old):>12.1f}{statistics.median(new):>7.1f}"
            f"{statistics.median(wall):>8.2f}x"
            f"{statistics.median(old_cpu):>18.2f}{statistics.median(new_cpu):>7.2f}"
            f"{statistics.median(saved):>8.2f}x"
            f"{cores * frame_ms / statistics.median(old_cpu):>17.1f}"
            f"{cores * frame_ms / statistics.median(new_cpu):>7.1f}"
        )
        print(
            f"      wall ratios {', '.join(f'{r:.2f}' for r in wall)}; "
            f"CPU ratios {', '.join(f'{r:.2f}' for r in saved)}"
        )


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
    with clock._lock:
        by_stage = dict(clock.seconds)
    return {
        "frames": sum(frames),
        "wall": time.perf_counter() - wall,
        "cpu": time.process_time() - cpu,
        "stages": clock.total(),
        "by_stage": by_stage,
    }


def main() -> None:
    args = parse_args()
    if args.against is not None:
        against(args)
        return
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
    print(cpu_line())
    print(f"kernels: {getattr(tts, 'kernels', {}) or 'as this checkout had them'}")
    print(f"english, {args.precision}, {args.threads} pool threads, streams read flat out")
    print(f"{'N':>4}{'real-time streams':>19}{'CPU ms/frame':>14}{'in stages':>11}")
    for n in (int(size) for size in args.sizes.split(",")):
        result = run(tts, clock, n)
        streams = result["frames"] * frame_seconds / result["wall"]
        per_frame = 1e3 * result["cpu"] / result["frames"]
        share = result["stages"] / result["cpu"]
        print(f"{n:>4}{streams:>19.1f}{per_frame:>14.2f}{share:>10.1%}", flush=True)
        stages = ", ".join(
            f"{name} {1e3 * seconds / result['frames']:.2f}"
            for name, seconds in sorted(result["by_stage"].items(), key=lambda kv: -kv[1])
        )
        print(f"      CPU ms per frame by stage: {stages}", flush=True)


if __name__ == "__main__":
    main()
