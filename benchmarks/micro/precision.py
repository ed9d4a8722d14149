"""FlowLM precision (fp32 / bf16 / int8) on the NumPy backend, side by side in one run.

For each full-size random-weight pack (built by the devpack) × precision × thread count, a
fresh child process measures:

- load time and resident memory after load (VmRSS), and after speaking (VmRSS, VmHWM peak);
- time to first audio of a stream (voice state ready beforehand, as in a running service);
- the stream's real-time factor (audio seconds / wall seconds, ``--frames`` frames), from the
  request (``rtf``) and from its first frame on (``rtf_steady``: how fast it streams once
  speaking, the text prefill left out);
- the same from its first frame on for ``LONG_TEXT``, four sentences (``rtf_steady_long``): each
  sentence is a chunk that pays its own text prefill, and random weights end a chunk after a
  few frames (real speech has ~3 frames per text token), so this one is bound by the prefills;
  ``frames`` / ``frames_long`` count the frames each figure covers;
- the FlowLM step alone (median ms over ``--steps`` steps after the voice and text prefill);
- with ``--step-ab R``: the FlowLM step of every precision again, all loaded in ONE process per
  pack and alternating for R rounds, so each round's ratio to fp32 pairs figures taken side by
  side (separate processes a minute apart can differ by ±20% on a shared machine);
- with ``--memory``: resident memory after speaking by mapping (checkpoint, cached narrow
  copy, numba's LLVM library, other files, anonymous) and the runtime alone (no model).

``fp32-numpy`` is fp32 in a process that cannot import numba (what an install without the
``fast`` extra runs: BLAS linears, NumPy's ELU); plain ``fp32`` runs the compiled fp32 kernels
whenever numba is installed.

Narrow loads use the cached narrow copy (``narrow_cache.py``) once it exists: the first
narrow child of a pack writes it.

Configurations run round-robin ``--rounds`` times (medians reported), so slow phases of a
shared machine hit every configuration alike; ratios are to fp32 at the same thread count.

    python -m benchmarks.micro.precision [--packs english german_24l french_24l]
        [--precisions fp32 fp32-numpy bf16 int8] [--threads 1 2] [--rounds 2] [--work /tmp/packs]
        [--memory] [--step-ab 10]

``--threads`` caps the BLAS threads (the numba kernels are single-threaded at any count).
Packs missing under ``--work`` are built there first
(``python -m pipecat_pocket_tts.devpack DIR --config X``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import cap_blas_threads, module_command, proc_status, registry_pack, tree_env

TEXT = "The quick brown fox jumps over the lazy dog, and then it runs far away into the woods."
LONG_TEXT = " ".join(
    (
        TEXT,
        "It stops by a river to drink, looks back at the farm, and listens to the wind.",
        "Night falls slowly over the hills while the farmer counts his hens again.",
        "Nobody notices the fox until the morning, when the dog finally wakes up and barks.",
    )
)
FRAME_SECONDS = 0.08
NUMPY_ONLY = "fp32-numpy"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packs", nargs="+", default=["english", "german_24l", "french_24l"])
    parser.add_argument("--precisions", nargs="+", default=["fp32", "bf16", "int8"])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--frames", type=int, default=40, help="frames per measured stream")
    parser.add_argument("--steps", type=int, default=20, help="timed FlowLM steps")
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench_precision_packs"))
    parser.add_argument(
        "--memory",
        action="store_true",
        help="also print where each configuration's resident memory is (after speaking)",
    )
    parser.add_argument(
        "--step-ab",
        type=int,
        metavar="ROUNDS",
        default=0,
        help="also time the FlowLM step of every precision in ONE process per pack, "
        "alternating precisions for ROUNDS rounds (paired ratios to fp32)",
    )
    parser.add_argument(
        "--child", nargs=2, metavar=("PACK_DIR", "PRECISION"), help=argparse.SUPPRESS
    )
    parser.add_argument("--child-ab", metavar="PACK_DIR", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def resident_by_mapping() -> dict[str, float]:
    """Resident MB of this process by what is mapped (``/proc/self/smaps``): the checkpoint,
    the cached narrow copy, numba's LLVM library, other files, anonymous memory."""
    out = dict.fromkeys(("weights", "narrow_copy", "llvmlite_lib", "files", "anon"), 0.0)
    kind = "anon"
    with open("/proc/self/smaps") as f:
        for line in f:
            fields = line.split()
            if not fields[0].endswith(":"):  # a mapping's first line: range, perms, …, path
                path = fields[5] if len(fields) > 5 else ""
                if path.endswith("model.safetensors"):
                    kind = "weights"
                elif path.endswith(".safetensors") and "/narrow/" in path:
                    kind = "narrow_copy"
                elif "llvmlite" in path:
                    kind = "llvmlite_lib"
                elif path.startswith("/"):
                    kind = "files"
                else:
                    kind = "anon"
            elif fields[0] == "Rss:":
                out[kind] += int(fields[1]) / 1024
    return out


def engine_precision(precision: str) -> str:
    """The ``precision=`` a label loads; ``fp32-numpy`` first makes numba unimportable here."""
    if precision == NUMPY_ONLY:
        sys.modules["numba"] = None  # type: ignore[assignment]  # import numba → ImportError
        return "fp32"
    return precision


def baseline(precision: str) -> dict[str, float]:
    """Resident memory of the runtime alone: Python, NumPy and the package (and the compiled
    kernels, numba and LLVM, unless ``fp32-numpy``), no model loaded."""
    engine_precision(precision)
    import pipecat_pocket_tts.engine  # noqa: F401

    before = proc_status(("VmRSS", "VmHWM"))["VmRSS"]
    if precision != NUMPY_ONLY:
        from pipecat_pocket_tts.engine.backends.numpy.kernels import compiled

        compiled.required()
    return {"python_numpy_mb": before, "with_kernels_mb": proc_status(("VmRSS", "VmHWM"))["VmRSS"]}


def child(pack_dir: str, precision: str, frames: int, steps: int) -> dict[str, float]:
    """One configuration in this fresh process (threads already capped by the parent)."""
    precision = engine_precision(precision)

    from pipecat_pocket_tts.engine import PocketTTS

    start = time.perf_counter()
    language = Path(pack_dir).name  # packs are built in folders named after their config
    tts = PocketTTS.load(language, backend="numpy", model_dir=pack_dir, precision=precision)
    load_s = time.perf_counter() - start
    after_load = proc_status(("VmRSS", "VmHWM"))["VmRSS"]
    tts.voice_state("alba")  # a service has its voice ready before the first text

    count, first, wall = timed_stream(tts, TEXT, frames)
    count_long, first_long, wall_long = timed_stream(tts, LONG_TEXT, 4 * frames)
    spoken = proc_status(("VmRSS", "VmHWM"))
    by_mapping = resident_by_mapping()

    stepper = Stepper(tts)
    stepper.seconds(2)  # warm
    times = stepper.seconds(steps)
    return {
        "load_s": load_s,
        "rss_load_mb": after_load,
        "rss_spoken_mb": spoken["VmRSS"],
        "peak_mb": spoken["VmHWM"],
        "first_audio_ms": first * 1e3,
        "rtf": count * FRAME_SECONDS / wall,
        "rtf_steady": (count - 1) * FRAME_SECONDS / max(wall - first, 1e-9),
        "rtf_steady_long": (count_long - 1) * FRAME_SECONDS / max(wall_long - first_long, 1e-9),
        "frames": count,
        "frames_long": count_long,
        "step_ms": statistics.median(times[2:]) * 1e3,
        **{f"rss_{k}_mb": v for k, v in by_mapping.items()},
    }


class Stepper:
    """FlowLM steps of one model after the voice and a 30-token text prefill, each step fed
    the previous step's output (as a stream is), timed one by one."""

    def __init__(self, tts) -> None:
        import numpy as np

        self._np = np
        self.backend = tts.backend
        voice = self.backend.voice_from_flow_state(tts.voice_state("alba"))
        self.state = self.backend.flow_state_from_voice(voice)
        self.backend.prefill(self.state, self.backend.embed_text(np.arange(30) % 1000))
        self.latent = None

    def seconds(self, steps: int) -> list[float]:
        """Wall seconds of each of the next ``steps`` steps."""
        times = []
        for _ in range(steps):
            begin = time.perf_counter()
            out = self.backend.step(self.state, self.latent)
            times.append(time.perf_counter() - begin)
            self.latent = self._np.tanh(out.hidden[: self.backend.config.flow_lm.latent_dim])
        return times


def child_step_ab(pack_dir: str, precisions: list[str], rounds: int, steps: int) -> dict:
    """Every precision's step in this one process, precisions alternating each round: the
    median ms per precision and the median over rounds of each round's ratio to fp32."""
    from pipecat_pocket_tts.engine import PocketTTS

    language = Path(pack_dir).name
    steppers = {
        p: Stepper(PocketTTS.load(language, backend="numpy", model_dir=pack_dir, precision=p))
        for p in precisions
    }
    for stepper in steppers.values():
        stepper.seconds(3)  # warm: the first touches of each model's pages
    per_round: dict[str, list[float]] = {p: [] for p in precisions}
    for _ in range(rounds):
        for precision, stepper in steppers.items():
            per_round[precision].append(statistics.median(stepper.seconds(steps)) * 1e3)
    out = {p: {"step_ms": statistics.median(v)} for p, v in per_round.items()}
    for precision, values in per_round.items():
        ratios = [v / f for v, f in zip(values, per_round["fp32"], strict=True)]
        out[precision]["ratio"] = statistics.median(ratios)
        out[precision]["ratio_range"] = [min(ratios), max(ratios)]
    return out


def run_step_ab(args: argparse.Namespace, folder: Path) -> dict:
    """``child_step_ab`` for one pack in a fresh process, one BLAS thread."""
    env = cap_blas_threads(1, tree_env())
    precisions = ["fp32"] + [p for p in args.precisions if p not in ("fp32", NUMPY_ONLY)]
    cmd = module_command(__spec__.name, "--child-ab", str(folder), "--precisions", *precisions)
    cmd += ["--step-ab", str(args.step_ab), "--steps", str(args.steps)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{folder.name} step A/B: {done.stderr[-800:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def print_step_ab(args: argparse.Namespace, folders: dict[str, Path]) -> None:
    print(
        f"\nFlowLM step, every precision in one process, alternating ({args.step_ab} rounds of "
        f"{args.steps} steps, one thread): median ms; ratio to fp32 = median of the rounds' "
        "ratios [lowest, highest]"
    )
    for pack, folder in folders.items():
        figures = run_step_ab(args, folder)
        cells = [
            f"{p} {f['step_ms']:.2f} ms"
            + (
                ""
                if p == "fp32"
                else f" ({f['ratio']:.2f}× [{f['ratio_range'][0]:.2f}, {f['ratio_range'][1]:.2f}])"
            )
            for p, f in figures.items()
        ]
        print(f"{pack:12s} " + "; ".join(cells), flush=True)


def timed_stream(tts, text: str, frames: int) -> tuple[int, float, float]:
    """Stream ``text`` (at most ``frames`` frames): (frames, seconds to the first, seconds)."""
    start = time.perf_counter()
    first = 0.0
    count = 0
    for _frame in tts.stream(text, voice="alba", seed=0, max_frames=frames):
        if count == 0:
            first = time.perf_counter() - start
        count += 1
    return count, first, time.perf_counter() - start


def run_child(args: argparse.Namespace, folder: Path, precision: str, threads: int) -> dict:
    env = cap_blas_threads(threads, tree_env())
    cmd = module_command(__spec__.name, "--child", str(folder), precision)
    cmd += ["--frames", str(args.frames), "--steps", str(args.steps)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{folder.name} {precision} t{threads}: {done.stderr[-800:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    args = parse_args()
    if args.child_ab:
        print(json.dumps(child_step_ab(args.child_ab, args.precisions, args.step_ab, args.steps)))
        return
    if args.child:
        pack_dir, precision = args.child
        if pack_dir == "-":
            print(json.dumps(baseline(precision)))
        else:
            print(json.dumps(child(pack_dir, precision, args.frames, args.steps)))
        return
    folders = {name: registry_pack(args.work, name) for name in args.packs}
    configs = [(p, q, t) for p in args.packs for t in args.threads for q in args.precisions]
    results: dict[tuple, list[dict]] = {c: [] for c in configs}
    for round_index in range(args.rounds):
        for pack, precision, threads in configs:
            figures = run_child(args, folders[pack], precision, threads)
            results[(pack, precision, threads)].append(figures)
            print(f"round {round_index + 1}: {pack} {precision} t{threads} {figures}", flush=True)

    keys = (
        "step_ms",
        "rtf",
        "rtf_steady",
        "rtf_steady_long",
        "frames",
        "frames_long",
        "first_audio_ms",
        "rss_load_mb",
        "rss_spoken_mb",
        "peak_mb",
        "load_s",
    )
    print(f"\nmedians of {args.rounds} rounds; (×) = ratio to fp32 at the same threads")
    print(f"{'pack':12s} {'prec':5s} {'thr':>3s} " + " ".join(f"{k:>18s}" for k in keys))
    for pack, precision, threads in configs:
        med = {
            k: statistics.median(r[k] for r in results[(pack, precision, threads)]) for k in keys
        }
        base_runs = results.get((pack, "fp32", threads))
        cells = []
        for k in keys:
            if base_runs and precision != "fp32":
                base = statistics.median(r[k] for r in base_runs)
                cells.append(f"{med[k]:9.2f} ({med[k] / base:4.2f}×)")
            else:
                cells.append(f"{med[k]:18.2f}")
        print(f"{pack:12s} {precision:5s} {threads:3d} " + " ".join(cells))
    if args.memory:
        print_memory(args, configs, results)
    if args.step_ab:
        print_step_ab(args, folders)


def print_memory(args: argparse.Namespace, configs: list[tuple], results: dict) -> None:
    """Resident MB after speaking by mapping, and the runtime alone (no model), per precision."""
    parts = ("weights", "narrow_copy", "llvmlite_lib", "files", "anon")
    print("\nresident MB after speaking, by mapping (medians); runtime alone = no model loaded")
    print(f"{'pack':12s} {'prec':5s} {'thr':>3s} " + " ".join(f"{p:>12s}" for p in parts))
    for pack, precision, threads in configs:
        runs = results[(pack, precision, threads)]
        cells = [f"{statistics.median(r[f'rss_{p}_mb'] for r in runs):12.1f}" for p in parts]
        print(f"{pack:12s} {precision:5s} {threads:3d} " + " ".join(cells))
    for precision in args.precisions:
        alone = [run_child(args, Path("-"), precision, 1) for _ in range(args.rounds)]
        base = statistics.median(r["python_numpy_mb"] for r in alone)
        kernels = statistics.median(r["with_kernels_mb"] for r in alone)
        print(
            f"runtime alone {precision}: Python + NumPy + package {base:.1f} MB, "
            f"with the kernels (numba, LLVM) {kernels:.1f} MB"
        )


if __name__ == "__main__":
    main()
