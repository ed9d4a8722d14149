"""Full-size community-config parity: upstream's --config against ours on random weights.

Not run in CI (about a minute a config). From the repo root with the system Python:

    python tools/reference/check_config_full_size.py [--configs english english_2m_2026-10]
        [--keep DIR] [--refpython /tmp/refvenv/bin/python]

For each packaged upstream config it launches the reference venv on this file (``--build``):
a copy of the YAML as ``czech.yaml`` (the issue-51 scenario) with random, calibrated weights
and a 4000-piece SentencePiece tokenizer named by path and the three text options set
(make_config_fixture's), loaded as ``--config`` loads it; upstream clones a voice, exports it
and speaks make_config_fixture's text at temperature 0. Then ``PocketTTS.load`` reads the same
YAML and speaks with the exported voice; the SNR and both lengths are printed. Exit status 1
when the lengths differ or the SNR is under 60 dB.
"""

from __future__ import annotations

import argparse
import copy
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DEFAULT_CONFIGS = ("english", "english_2m_2026-10")
DEFAULT_REFPYTHON = "/tmp/refvenv/bin/python"
MIN_SNR_DB = 60.0


def build_reference(name: str, out: Path, seed: int = 5) -> None:
    """Reference side (torch venv): weights, czech.yaml, the exported voice, upstream's audio."""
    import numpy as np
    import safetensors.torch
    import torch
    import yaml

    sys.path.insert(0, str(HERE))
    import upstream_reference as ref
    from make_config_fixture import TEXT, TEXT_OPTIONS, VOICE_SEED
    from pocket_tts import TTSModel
    from pocket_tts.models.model_state import export_model_state
    from pocket_tts.utils.config import CONFIGS_DIR

    out.mkdir(parents=True, exist_ok=True)
    tokenizer = out / "tokenizer.model"
    ref.train_tokenizer(tokenizer, 4000, seed=0)
    config = yaml.safe_load((CONFIGS_DIR / f"{name}.yaml").read_text(encoding="utf-8"))
    model = ref.build_model(config, tokenizer, out, seed)
    ref.perturb(model, seed)
    ref.calibrate(model, ref.prepare_voice_audio(ref.synthetic_voice(3.0, VOICE_SEED)), seed)
    state_dict = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
    safetensors.torch.save_file(state_dict, str(out / "model.safetensors"))
    community = copy.deepcopy(config)
    community.pop("weights_path_without_voice_cloning", None)
    community["weights_path"] = str(out / "model.safetensors")
    community["flow_lm"]["lookup_table"]["tokenizer"] = "sentencepiece"
    community["flow_lm"]["lookup_table"]["tokenizer_path"] = str(tokenizer)
    community.update(copy.deepcopy(TEXT_OPTIONS))
    (out / "czech.yaml").write_text(yaml.safe_dump(community, allow_unicode=True), "utf-8")
    upstream = TTSModel.load_model(config=str(out / "czech.yaml"), temp=0.0)
    prompt = torch.from_numpy(ref.synthetic_voice(3.0, VOICE_SEED))[None]
    with torch.no_grad():
        state = upstream.get_state_for_audio_prompt(prompt)
        export_model_state(state, out / "voice.safetensors")
        audio = upstream.generate_audio(state, TEXT).numpy().astype(np.float32)
    np.save(out / "upstream.npy", audio.reshape(-1))
    (out / "text.txt").write_text(TEXT, encoding="utf-8")


def compare(out: Path) -> tuple[float, int, int]:
    """Our side: the SNR of our audio against upstream's, our length, upstream's length."""
    import numpy as np

    sys.path.insert(0, str(REPO))
    from pipecat_pocket_tts.engine import PocketTTS

    expected = np.load(out / "upstream.npy")
    text = (out / "text.txt").read_text(encoding="utf-8")
    with PocketTTS.load(str(out / "czech.yaml"), backend="numpy") as tts:
        audio = tts.synthesize(text, voice=str(out / "voice.safetensors"), temperature=0.0)
    if audio.shape != expected.shape:
        return float("-inf"), audio.size, expected.size
    error = float(np.sum((expected.astype(np.float64) - audio) ** 2))
    signal = float(np.sum(expected.astype(np.float64) ** 2))
    snr = float("inf") if error == 0 else 10 * float(np.log10(signal / error))
    return snr, audio.size, expected.size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="*", default=list(DEFAULT_CONFIGS))
    parser.add_argument("--keep", type=Path, help="keep the built files in this folder")
    parser.add_argument("--refpython", default=DEFAULT_REFPYTHON)
    parser.add_argument("--build", nargs=2, metavar=("CONFIG", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build:
        build_reference(args.build[0], Path(args.build[1]))
        return
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        for name in args.configs:
            out = root / name
            command = [args.refpython, __file__, "--build", name, str(out)]
            subprocess.run(command, check=True, env={"HF_HUB_OFFLINE": "1", "PATH": ""})
            snr, ours, theirs = compare(out)
            ok = ours == theirs and snr >= MIN_SNR_DB
            failed |= not ok
            print(f"{name} as czech.yaml: SNR {snr:.1f} dB, {ours} samples (upstream {theirs})")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
