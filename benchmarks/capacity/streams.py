"""How many concurrent streams one process serves in real time: batched vs per-session vs upstream.

Full-size ``english`` with random weights (a pack written by ``devpack``; upstream loads the
same weights, tokenizer and voice). For each N, N streams start together, each speaking the
same sentence with EOS disabled (every stream runs to upstream's frame limit, ~7 s of audio),
and each is consumed in real time from its first frame. With ``--stagger S`` stream i is
requested S·i seconds after the first, so it starts while the streams before it speak (time to
first audio at that load rather than in one burst). Per N and column:

- stalls @200/@500 ms: streams whose playback, started one buffer after their first frame,
  ever waits for a frame (a frame arriving after first + buffer + index · 80 ms);
- time to first audio p50/p95/max (from the request; p95 is the value at rank
  round(0.95·(N-1)) of the N sorted, so the 11th of 12) and "x single": that p95 over the
  column's single-stream figure, the N=1 row's p50. The N=1 row runs ``--single-runs``
  streams (default 5) one after another, each alone, so that figure is not one sample;
- core-seconds per audio-second (process CPU time / audio produced);
- RSS (peak) and per-stream memory ((peak - idle) / N).

Columns: ``batched`` (one scheduler per model: batched ticks on a pool of usable-core threads)
and ``upstream`` (pocket-tts 4.0.1, one process per stream, one torch thread each; needs
/tmp/refvenv); ``batched-int8`` is ``batched`` with the FlowLM linears at int8
(``precision="int8"``, the ``fast`` extra); a ``-auto`` ending (``batched-auto``,
``batched-int8-auto``) loads with ``max_streams="auto"``: the streams beyond what the measured
cost keeps in real time wait for a slot (counted in "waited"; their time to first audio counts
the wait). Every
(column, N) runs in fresh processes, one after the other. Usage:

    python -m benchmarks.capacity.streams [--sizes 1,2,4,8,12,16,24]
        [--modes batched,batched-int8,upstream] [--upstream-max 8]
        [--stagger 0.5] [--single-runs 5] [--work /tmp/bench_capacity]

A column stops growing N after two runs in a row where every stream stalls at 500 ms (later
rows print "-"), unless ``--every-n``.
The machine may be shared: the load average is printed with each row.
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

from benchmarks.common import (
    FRAME_SECONDS,
    UPSTREAM_PYTHON,
    build_files,
    module_command,
    pack_files,
    percentile,
    stalls,
    tree_env,
)

TEXT = "Hello there, how are you doing today?"
WARM_UP = "Warm up, please."
BUFFERS = (0.2, 0.5)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,2,4,8,12,16,24")
    parser.add_argument("--modes", default="batched,batched-int8,upstream")
    parser.add_argument("--upstream-max", type=int, default=8, help="largest upstream N (memory)")
    parser.add_argument("--every-n", action="store_true", help="never stop a column early")
    parser.add_argument(
        "--stagger",
        type=float,
        default=0.0,
        help="seconds between the streams' requests (0: all at once; e.g. 0.5: stream i "
        "arrives while the i before it speak)",
    )
    parser.add_argument(
        "--single-runs",
        type=int,
        default=5,
        help="streams the N=1 row runs one after another (its TTFA p50 is the single-stream "
        "figure the ratio column divides by)",
    )
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench_capacity"))
    parser.add_argument("--child", nargs=2, metavar=("MODE", "N"), help=argparse.SUPPRESS)
    parser.add_argument("--upstream-worker", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args()


def wait_until(moment: float) -> None:
    """Sleep until ``time.perf_counter()`` reaches ``moment`` (the staggered requests)."""
    time.sleep(max(0.0, moment - time.perf_counter()))


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PeakRSS:
    """Samples this process's RSS every 50 ms until stopped; ``peak`` in bytes."""

    def __init__(self) -> None:
        self.peak = rss_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, rss_bytes())

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return max(self.peak, rss_bytes())


# -- ours: one process, N sessions -----------------------------------------------------------


def run_ours(mode: str, n: int, pack: Path) -> dict:
    from pipecat_pocket_tts.engine import PocketTTS

    precision = "int8" if "-int8" in mode else "fp32"
    max_streams = "auto" if mode.endswith("-auto") else None
    tts = PocketTTS.load(
        "english",
        backend="numpy",
        model_dir=pack,
        precision=precision,
        max_streams=max_streams,
    )
    for _ in tts.stream(WARM_UP):
        pass
    idle = rss_bytes()
    peak = PeakRSS()
    streams: list[dict] = []
    waited: set[int] = set()
    cpu = wall = 0.0
    for _ in range(ARGS.single_runs if n == 1 else 1):  # N=1: streams one after another
        run_streams, run_cpu, run_wall = run_sessions(tts, n, waited, len(streams))
        streams += run_streams
        cpu, wall = cpu + run_cpu, wall + run_wall
    return {
        "streams": streams,
        "cpu": cpu,
        "wall": wall,
        "rss_peak": peak.stop(),
        "rss_idle": idle,
        "threads": threading.active_count(),
        "waited": len(waited),
    }


def run_sessions(tts, n: int, waited: set[int], first_seed: int) -> tuple[list, float, float]:
    """n sessions speaking TEXT (requested ``--stagger`` apart), each consumed in real time →
    (per stream: its frames' arrival times from its request, CPU seconds, wall seconds)."""
    streams: list[dict] = [{} for _ in range(n)]
    seeds = range(first_seed, first_seed + n)
    sessions = [
        tts.session(seed=i, eos_threshold=1e9, on_admission_wait=lambda _e, i=i: waited.add(i))
        for i in seeds
    ]

    def consume(i: int) -> None:
        session, record = sessions[i], streams[i]
        arrivals = record["arrivals"] = []
        for _frame in session:
            arrivals.append(time.perf_counter() - record["requested"])

    consumers = [threading.Thread(target=consume, args=(i,)) for i in range(n)]
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for i, session in enumerate(sessions):
        wait_until(wall0 + i * ARGS.stagger)
        streams[i]["requested"] = time.perf_counter()
        session.enqueue(TEXT)
        session.finish()
        consumers[i].start()
    for consumer in consumers:
        consumer.join()
    for record in streams:
        record.pop("requested")
    return streams, time.process_time() - cpu0, time.perf_counter() - wall0


# -- upstream: one process per stream -----------------------------------------------------------


def upstream_worker(config_path: Path, pack: Path) -> None:
    """Load upstream, warm up, say "ready", wait for "go", stream TEXT, print the timings."""
    import resource

    import torch
    from pocket_tts import TTSModel

    torch.set_num_threads(1)
    model = TTSModel.load_model(config=config_path)
    voice = model.get_state_for_audio_prompt(pack / "embeddings" / "alba.safetensors")
    for _ in model.generate_audio_stream(voice, WARM_UP):
        pass
    model.eos_threshold = 1e9
    idle = rss_bytes()
    print("ready", flush=True)
    sys.stdin.readline()
    cpu0, start = time.process_time(), time.perf_counter()
    arrivals = []
    for chunk in model.generate_audio_stream(voice, TEXT):
        done = time.perf_counter() - start
        arrivals += [done] * max(1, int(chunk.shape[-1]) // 1920)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    result = {"arrivals": arrivals, "cpu": time.process_time() - cpu0, "rss": peak, "idle": idle}
    print(json.dumps(result), flush=True)


def run_upstream(n: int, config_path: Path, pack: Path) -> dict:
    command = module_command(
        __spec__.name, "--upstream-worker", "--work", str(ARGS.work), python=UPSTREAM_PYTHON
    )
    env = tree_env(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    workers = [
        subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        for _ in range(n)
    ]
    for worker in workers:
        assert worker.stdout.readline().strip() == "ready"
    wall0 = time.perf_counter()
    for i, worker in enumerate(workers):
        wait_until(wall0 + i * ARGS.stagger)
        worker.stdin.write("go\n")
        worker.stdin.flush()
    results = [json.loads(worker.stdout.readline()) for worker in workers]
    wall = time.perf_counter() - wall0
    for worker in workers:
        worker.wait()
    return {
        "streams": [{"arrivals": r["arrivals"]} for r in results],
        "cpu": sum(r["cpu"] for r in results),
        "wall": wall,
        "rss_peak": sum(r["rss"] for r in results),
        "rss_idle": 0,
        "threads": n,
    }


def merge_runs(results: list[dict]) -> dict:
    """Runs one after another as one result: their streams, CPU and wall time summed."""
    merged = dict(results[0])
    merged["streams"] = [stream for result in results for stream in result["streams"]]
    for key in ("cpu", "wall"):
        merged[key] = sum(result[key] for result in results)
    merged["rss_peak"] = max(result["rss_peak"] for result in results)
    return merged


# -- the table --------------------------------------------------------------------------------


def summarize(result: dict, n: int) -> dict:
    arrivals = [s["arrivals"] for s in result["streams"] if s.get("arrivals")]
    first = [a[0] for a in arrivals]
    audio = sum(len(a) for a in arrivals) * FRAME_SECONDS
    return {
        "stall200": sum(stalls(a, 0.2) for a in arrivals),
        "stall500": sum(stalls(a, 0.5) for a in arrivals),
        "ttfa50": 1e3 * statistics.median(first),
        "ttfa95": 1e3 * percentile(first, 0.95),
        "ttfa_max": 1e3 * max(first),
        "core_per_audio": result["cpu"] / audio,
        "rss": result["rss_peak"] / 2**20,
        "per_stream": (result["rss_peak"] - result["rss_idle"]) / 2**20 / n,
        "frames": sum(len(a) for a in arrivals),
        "waited": result.get("waited", 0),
    }


def run_child(mode: str, n: int) -> dict:
    command = module_command(__spec__.name, "--child", mode, str(n), "--work", str(ARGS.work))
    command += ["--stagger", str(ARGS.stagger)]
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=tree_env())
    if done.returncode != 0:
        raise RuntimeError(f"{mode} N={n} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    if ARGS.upstream_worker:
        pack, config_path = pack_files(ARGS.work)
        upstream_worker(config_path, pack)
        return
    if ARGS.child:
        mode, n = ARGS.child[0], int(ARGS.child[1])
        print(json.dumps(run_ours(mode, n, pack_files(ARGS.work)[0])))
        return
    ARGS.work.mkdir(parents=True, exist_ok=True)
    pack, config_path = build_files(ARGS.work)
    sizes = [int(n) for n in ARGS.sizes.split(",")]
    modes = ARGS.modes.split(",")
    if "upstream" in modes and not (UPSTREAM_PYTHON.parent.parent / ".ready").exists():
        print("no /tmp/refvenv/.ready: the upstream column is skipped")
        modes.remove("upstream")
    rows: dict[tuple[str, int], dict | None] = {}
    for mode in modes:
        saturated = 0
        for n in sizes:
            stop = saturated >= 2 and not ARGS.every_n
            if stop or (mode == "upstream" and n > ARGS.upstream_max):
                rows[mode, n] = None
                continue
            if mode != "upstream":
                result = run_child(mode, n)
            else:  # N=1: processes one after another, as ours runs streams
                results = [
                    run_upstream(n, config_path, pack)
                    for _ in range(ARGS.single_runs if n == 1 else 1)
                ]
                result = merge_runs(results)
            row = rows[mode, n] = summarize(result, n)
            row["load"] = os.getloadavg()[0]
            print(
                f"{mode:>12} N={n:<3} {json.dumps({k: round(v, 2) for k, v in row.items()})}",
                flush=True,
            )
            saturated = saturated + 1 if row["stall500"] == n else 0
    print_table(sizes, modes, rows)


def print_table(sizes: list[int], modes: list[str], rows: dict) -> None:
    print(f"\n{TEXT!r}, EOS off, each stream consumed in real time from its first frame")
    if ARGS.stagger:
        print(f"stream i requested {ARGS.stagger} s after stream i - 1 (time to first audio from")
        print("its own request, so the later streams start while the earlier ones speak)")
    if 1 in sizes:
        print(f"N=1: {ARGS.single_runs} streams one after another; 'x single': TTFA p95 over")
        print("the column's N=1 TTFA p50")
    print(
        f"{'N':>3} {'column':<17} {'stall@200':>9} {'stall@500':>9} {'TTFA p50':>9} "
        f"{'TTFA p95':>9} {'max':>6} {'x single':>8} {'waited':>6} {'core-s/s':>9} "
        f"{'RSS MB':>7} {'MB/stream':>9} {'load':>5}"
    )
    for n in sizes:
        for mode in modes:
            row = rows.get((mode, n))
            if row is None:
                print(f"{n:>3} {mode:<17} {'-':>9}")
                continue
            single = rows.get((mode, 1))
            ratio = f"{row['ttfa95'] / single['ttfa50']:.2f}" if single else "-"
            print(
                f"{n:>3} {mode:<17} {row['stall200']:>9} {row['stall500']:>9} "
                f"{row['ttfa50']:>9.0f} {row['ttfa95']:>9.0f} {row['ttfa_max']:>6.0f} "
                f"{ratio:>8} {row.get('waited', 0):>6} {row['core_per_audio']:>9.2f} "
                f"{row['rss']:>7.0f} {row['per_stream']:>9.0f} {row['load']:>5.1f}"
            )
    for mode in modes:
        ok = [n for n in sizes if rows.get((mode, n)) and rows[mode, n]["stall200"] == 0]
        print(f"{mode}: most streams with no stall at 200 ms: {max(ok) if ok else 0}")


ARGS = parse_args()

if __name__ == "__main__":
    main()
