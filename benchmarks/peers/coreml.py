"""Time to first audio and real-time factor, per stage, of the CoreML backend on a Mac.

Loads a v2.1 pack (HF cache or ``--model-dir``), warms the models up, then synthesizes the text
``--runs`` times through ``PocketTTS.stream`` and reports:

- load time and first-run (CoreML specialization) time;
- time to first audio (from the ``stream`` call to the first 80 ms frame), median and worst;
- wall time and real-time factor (compute seconds per audio second; RTFx = 1 / RTF);
- per stage (cond_prefill, flowlm, flow_decoder, mimi_decoder): calls, ms per call, and the
  stage's own real-time factor (its total time per audio second), plus host-side time.

    python -m benchmarks.peers.coreml --language english --runs 5
    python -m benchmarks.peers.coreml --model-dir ~/packs/v2.1/english --precision int8 \\
        --compute-units no-ane,mimi=cpu-gpu --json results.json

``--standins`` runs the same measurement anywhere on a tiny random pack with the Linux
stand-in models (numbers meaningless; checks the script itself).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pipecat_pocket_tts.engine import PocketTTS
from pipecat_pocket_tts.engine.backends.coreml import cli_options as cli
from pipecat_pocket_tts.engine.backends.coreml.backend import StageModels

TEXT = (
    "The weather today is mild, with a light breeze from the west. In the afternoon, clouds "
    "will gather, and there is a small chance of rain before the evening."
)
STAGES = ("cond_prefill", "flowlm", "flow_decoder", "mimi_decoder")


@dataclass
class StageClock:
    """Wall time and call count of one model's predictions (thread-safe)."""

    seconds: float = 0.0
    calls: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reset(self) -> None:
        with self.lock:
            self.seconds, self.calls = 0.0, 0


class Timed:
    """A ``CoreMLModel`` proxy that times every ``predict``."""

    def __init__(self, model, clock: StageClock) -> None:
        self.model, self.clock = model, clock

    @property
    def inputs(self):
        return self.model.inputs

    @property
    def outputs(self):
        return self.model.outputs

    def predict(self, feeds):
        start = time.perf_counter()
        out = self.model.predict(feeds)
        elapsed = time.perf_counter() - start
        with self.clock.lock:
            self.clock.seconds += elapsed
            self.clock.calls += 1
        return out


def instrument(tts: PocketTTS) -> dict[str, StageClock]:
    clocks = {stage: StageClock() for stage in STAGES}
    models = tts.backend.models
    tts.backend.models = StageModels(
        *(Timed(getattr(models, stage), clocks[stage]) for stage in STAGES)
    )
    return clocks


def load(args: argparse.Namespace) -> PocketTTS:
    if args.standins:
        return load_standins(args)
    options = cli.backend_options(args)
    return PocketTTS.load(args.language, backend="coreml", model_dir=args.model_dir, **options)


def load_standins(args: argparse.Namespace) -> PocketTTS:
    """A tiny random pack on the Linux stand-ins (checks the script, not CoreML)."""
    import tempfile

    from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict
    from pipecat_pocket_tts.engine.backends import find_pack_files
    from pipecat_pocket_tts.engine.backends.coreml.backend import CoreMLBackend
    from pipecat_pocket_tts.engine.backends.numpy.backend import NumpyBackend
    from pipecat_pocket_tts.engine.text.tokenizer import Tokenizer
    from tests.coreml_standins import standin_models, write_coreml_pack

    folder = Path(tempfile.mkdtemp(prefix="bench_coreml_"))
    config = tiny_config_dict("standard")
    config["mimi"]["transformer"]["num_layers"] = 2
    numpy_dir = build_pack(folder / "numpy", config, voices=("alba",))
    numpy_pack = find_pack_files("english", model_dir=numpy_dir)
    reference = NumpyBackend.from_files(numpy_pack.config, numpy_pack.weights, sampler_steps=8)
    models = standin_models(reference)
    pack_dir = write_coreml_pack(folder / "coreml", numpy_dir, reference, models)
    pack = find_pack_files("english", model_dir=pack_dir, backend_kind="coreml")
    backend = CoreMLBackend.from_pack(
        pack,
        model_loader=lambda path, unit: {
            "cond_prefill.mlmodelc": models.cond_prefill,
            "flowlm_step.mlmodelc": models.flowlm,
            "flow_decoder_fused.mlmodelc": models.flow_decoder,
            "mimi_decoder.mlmodelc": models.mimi_decoder,
        }[path.name],
    )
    tokenizer = Tokenizer.from_file(pack.tokenizer)
    return PocketTTS(config=pack.config, backend=backend, tokenizer=tokenizer, pack=pack)


def run_once(tts: PocketTTS, args: argparse.Namespace) -> tuple[float, float, int]:
    """(time to first audio, wall time, samples) of one synthesis through ``stream``."""
    start = time.perf_counter()
    first = None
    samples = 0
    for frame in tts.stream(args.text, voice=args.voice, seed=args.seed, **generation(args)):
        if first is None:
            first = time.perf_counter() - start
        samples += frame.samples.size
    return first or 0.0, time.perf_counter() - start, samples


def generation(args: argparse.Namespace) -> dict:
    return {"max_frames": args.max_frames} if args.max_frames else {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--language", default="english")
    parser.add_argument("--model-dir", default=None)
    parser.add_argument("--voice", default=None)
    parser.add_argument("--text", default=TEXT)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-frames", type=int, default=None, help="cap frames per chunk")
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    parser.add_argument("--standins", action="store_true", help="tiny stand-in pack (no Mac)")
    cli.add_arguments(parser)
    args = parser.parse_args(argv)

    start = time.perf_counter()
    tts = load(args)
    load_seconds = time.perf_counter() - start
    clocks = instrument(tts)
    warm_ttfa, warm_wall, _ = run_once(tts, args)  # CoreML specializes on first predictions

    ttfas, walls, seconds_of_audio = [], [], 0.0
    for clock in clocks.values():
        clock.reset()
    for _ in range(args.runs):
        ttfa, wall, samples = run_once(tts, args)
        ttfas.append(ttfa)
        walls.append(wall)
        seconds_of_audio += samples / tts.sample_rate
    audio_per_run = seconds_of_audio / max(1, args.runs)
    total_wall = sum(walls)

    backend = tts.backend
    units = getattr(backend, "compute_units", {})
    print(f"pack {tts.pack_name} · precision {getattr(backend, 'precision', '?')} · units {units}")
    print(
        f"load {load_seconds:.2f} s · first run {warm_wall:.2f} s (TTFA {warm_ttfa * 1e3:.0f} ms)"
    )
    print(
        f"{args.runs} runs of {audio_per_run:.2f} s audio: TTFA median "
        f"{statistics.median(ttfas) * 1e3:.1f} ms, worst {max(ttfas) * 1e3:.1f} ms; "
        f"RTF {total_wall / seconds_of_audio:.3f} (RTFx {seconds_of_audio / total_wall:.2f})"
    )
    print(f"{'stage':<14}{'calls/run':>10}{'ms/call':>10}{'ms/run':>10}{'RTF':>8}")
    stage_total = 0.0
    results = {}
    for stage, clock in clocks.items():
        stage_total += clock.seconds
        per_call = clock.seconds / clock.calls * 1e3 if clock.calls else 0.0
        rtf = clock.seconds / seconds_of_audio
        results[stage] = {"calls": clock.calls, "ms_per_call": per_call, "rtf": rtf}
        print(
            f"{stage:<14}{clock.calls / args.runs:>10.1f}{per_call:>10.2f}"
            f"{clock.seconds / args.runs * 1e3:>10.1f}{rtf:>8.3f}"
        )
    host = max(0.0, total_wall - stage_total)
    print(
        f"{'host/other':<14}{'':>10}{'':>10}{host / args.runs * 1e3:>10.1f}"
        f"{host / seconds_of_audio:>8.3f}  (Mimi overlaps FlowLM: stages may exceed wall)"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "language": tts.pack_name,
                    "precision": getattr(backend, "precision", None),
                    "compute_units": units,
                    "load_s": load_seconds,
                    "first_run_s": warm_wall,
                    "ttfa_ms": [t * 1e3 for t in ttfas],
                    "rtf": total_wall / seconds_of_audio,
                    "audio_s_per_run": audio_per_run,
                    "stages": results,
                },
                indent=2,
            )
        )
    return 0 if np.isfinite(total_wall) else 1


if __name__ == "__main__":
    sys.exit(main())
