"""Full-size parity check: upstream pocket-tts vs our NumPy backend on random full-size weights.

Not run in CI (minutes, ~2 GB of RAM and disk for the 24-layer model). Run from the repo root
with the system Python (the one with our package's dependencies):

    python tools/reference/check_full_size.py [--configs english english_2026-04_24l ...]
        [--keep DIR] [--refpython /tmp/refvenv/bin/python]

For every config it launches the reference venv on this same file (``--build``): that builds
the packaged upstream YAML (weights paths removed, a 4000-piece SentencePiece tokenizer trained
here) with perturbed random weights, and writes model.safetensors, voice.safetensors (upstream's
export_model_state of the voice prompt), tokenizer.model, config.json and stages.npz (same
arrays as the tiny fixtures). Then it loads ``NumpyBackend.from_files`` on the same files and
prints max-abs errors / SNR per stage. Exit status 1 when any stage is out of tolerance.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DEFAULT_CONFIGS = ("english", "english_2026-04_24l", "english_7m_2026-10")
DEFAULT_REFPYTHON = "/tmp/refvenv/bin/python"
VOCAB = 4000


# ----------------------------------------------------------------------------------------------
# Reference side (runs in the torch venv)
# ----------------------------------------------------------------------------------------------
def build_reference(name: str, out: Path, seed: int) -> None:
    """Build upstream ``name`` with random weights and record its stages into ``out``."""
    import numpy as np
    import safetensors.torch
    import torch
    import yaml

    sys.path.insert(0, str(HERE))
    import upstream_reference as ref
    from pocket_tts.models.model_state import export_model_state
    from pocket_tts.utils.config import CONFIGS_DIR

    out.mkdir(parents=True, exist_ok=True)
    tokenizer = out.parent / "tokenizer.model"
    if not tokenizer.exists():
        ref.train_tokenizer(tokenizer, VOCAB, seed=0)
    (out / "tokenizer.model").write_bytes(tokenizer.read_bytes())
    config = yaml.safe_load((CONFIGS_DIR / f"{name}.yaml").read_text(encoding="utf-8"))
    assert config["flow_lm"]["lookup_table"]["n_bins"] == VOCAB

    t0 = time.monotonic()
    model = ref.build_model(config, out / "tokenizer.model", out, seed)
    ref.perturb(model, seed)
    lsd = config["flow_lm"]["flow"].get("type", "lsd") == "lsd"
    spec = ref.StageSpec(
        text="Hello world, the quick brown fox jumps.",
        seed=seed,
        extra_sampler_steps=(4,) if lsd else (),
    )
    voice_audio = ref.prepare_voice_audio(ref.synthetic_voice(spec.voice_seconds, spec.voice_seed))
    ref.calibrate(model, voice_audio, seed)
    print(f"[{name}] built and perturbed in {time.monotonic() - t0:.1f} s", flush=True)

    t0 = time.monotonic()
    arrays = ref.record_stages(model, spec)
    print(f"[{name}] upstream stages recorded in {time.monotonic() - t0:.1f} s", flush=True)
    np.savez(out / "stages.npz", **arrays)
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    safetensors.torch.save_file(state, str(out / "model.safetensors"))
    with torch.no_grad():
        voice_state = model.get_state_for_audio_prompt(torch.from_numpy(arrays["voice_raw"])[None])
    export_model_state(voice_state, out / "voice.safetensors")

    for key in ("weights_path", "weights_path_without_voice_cloning"):
        config.pop(key, None)
    config["flow_lm"].pop("weights_path", None)
    config["mimi"].pop("weights_path", None)
    config["flow_lm"]["lookup_table"]["tokenizer"] = "sentencepiece"
    config["flow_lm"]["lookup_table"]["tokenizer_path"] = "tokenizer.model"
    ref.dump_json(out / "config.json", config)


# ----------------------------------------------------------------------------------------------
# Our side (system Python, no torch)
# ----------------------------------------------------------------------------------------------
def load_upstream_voice(path: Path):
    """An upstream-exported voice state (``<module>/cache`` [2, 1, T, H, D]) as a VoiceKV."""
    from safetensors.numpy import load_file

    from pipecat_pocket_tts.engine.backends.base import VoiceKV

    tensors = load_file(str(path))
    layers = sorted(
        {k.split("/")[0] for k in tensors if k.endswith("/cache")},
        key=lambda m: int(m.split(".")[2]),
    )
    keys, values = [], []
    for module in layers:
        cache = tensors[f"{module}/cache"]
        filled = int(tensors[f"{module}/offset"].reshape(-1)[0])
        keys.append(cache[0, 0, :filled])
        values.append(cache[1, 0, :filled])
    return VoiceKV(keys=keys, values=values)


def compare(name: str, folder: Path) -> bool:
    """Run our NumPy backend on ``folder``'s files and print the per-stage errors."""
    import numpy as np

    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(REPO))
    from parity import run_parity

    from pipecat_pocket_tts.engine.backends.numpy.backend import NumpyBackend
    from pipecat_pocket_tts.engine.model.config import ModelConfig

    config = ModelConfig.from_dict(name, json.loads((folder / "config.json").read_text()))
    with np.load(folder / "stages.npz") as npz:
        arrays = {k: npz[k] for k in npz.files}
    weights = folder / "model.safetensors"
    t0 = time.monotonic()
    backend = NumpyBackend.from_files(config, weights, sampler_steps=int(arrays["sampler_steps"]))
    extra = {
        key.removesuffix("_steps"): NumpyBackend.from_files(
            config, weights, sampler_steps=int(arrays[key])
        )
        for key in arrays
        if key.startswith("sampler") and key.endswith("_steps") and key != "sampler_steps"
    }
    voice = load_upstream_voice(folder / "voice.safetensors")
    checks = run_parity(backend, arrays, sampler_backends=extra, voice=voice)
    print(f"[{name}] our backend: {time.monotonic() - t0:.1f} s")
    for check in checks:
        print(f"    {check}")
    return all(check.passed for check in checks)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=list(DEFAULT_CONFIGS))
    parser.add_argument("--keep", type=Path, help="write the models here and keep them")
    parser.add_argument("--refpython", default=DEFAULT_REFPYTHON)
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("--build", help=argparse.SUPPRESS)  # internal: reference side
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build:
        build_reference(args.build, args.out, args.seed)
        return 0

    ok = True
    with tempfile.TemporaryDirectory(prefix="pocket-full-size-") as tmp:
        root = args.keep or Path(tmp)
        for name in args.configs:
            folder = root / name
            cmd = [args.refpython, __file__, "--build", name, "--out", str(folder)]
            subprocess.run([*cmd, "--seed", str(args.seed)], check=True, cwd=REPO)
            ok = compare(name, folder) and ok
            if args.keep is None:
                for path in folder.iterdir():
                    path.unlink()
    print("ALL STAGES IN TOLERANCE" if ok else "SOME STAGES OUT OF TOLERANCE")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
