"""Error of narrow weights, ours beside upstream's: writes tests/fixtures/precision/errors.json.

For each golden fixture family (tests/fixtures/reference/<family>/, upstream fp32 stages on
random weights), on the SAME weights:

- upstream int8: ``TTSModel`` with its own quantization (``pocket_tts.quantization.
  apply_dynamic_int8`` with ``RECOMMENDED_CONFIG``, what ``load_model(quantize=True)`` runs:
  dynamic int8 on the attention and feed-forward linears), stages recorded by upstream code,
  against upstream fp32 (the fixture);
- ours: the NumPy backend at bf16 and int8 (one scale per output row), against our fp32
  (``tests/precision_stages.py``).

Signal-to-error in dB per stage (voice/text prefill K/V, teacher-forced steps, a whole
temperature-0 generation). Run with the reference venv, offline:

    /tmp/refvenv/bin/python tools/reference/precision_errors.py [--no-write]
    /tmp/refvenv/bin/python tools/reference/precision_errors.py --full english german_24l
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(Path(__file__).resolve().parent), str(REPO), str(REPO / "tests")]

import make_fixtures  # noqa: E402
import numpy as np  # noqa: E402
import precision_stages  # noqa: E402
import safetensors.torch  # noqa: E402
import torch  # noqa: E402
import upstream_reference as ref  # noqa: E402
from pocket_tts.quantization import RECOMMENDED_CONFIG, apply_dynamic_int8  # noqa: E402
from precision_stages import STAGES  # noqa: E402
from reference_fixtures import FAMILIES, load_family, snr_db  # noqa: E402

from pipecat_pocket_tts.engine.model.options import NUMPY_PRECISIONS  # noqa: E402

logging.getLogger("pocket_tts").setLevel(logging.ERROR)


def upstream_int8_errors(name: str) -> dict[str, float]:
    """Upstream's int8 against upstream's fp32 (the fixture), same weights and inputs."""
    _config, weights_path, tokenizer, arrays = load_family(name)
    raw_config, spec, seed = make_fixtures.FAMILIES[name]
    with tempfile.TemporaryDirectory() as tmp:
        model = ref.build_model(raw_config, tokenizer, Path(tmp), seed)
    model.load_state_dict(safetensors.torch.load_file(str(weights_path)), strict=True)
    quantized = copy.deepcopy(model)
    apply_dynamic_int8(quantized.flow_lm, RECOMMENDED_CONFIG)
    kinds = {type(m).__module__ + "." + type(m).__name__ for m in quantized.flow_lm.modules()}
    assert any("quantized" in k for k in kinds), f"nothing was quantized: {sorted(kinds)}"
    fp32 = ref.record_stages(model, spec)
    int8 = ref.record_stages(quantized, spec)
    for stage in STAGES:  # this run reproduces the committed fixture
        assert np.allclose(fp32[stage], arrays[stage], atol=1e-5, equal_nan=True), stage
    return {s: round(snr_db(fp32[s], int8[s]), 2) for s in STAGES}


def full_size_errors(name: str, work: Path, seed: int = 5) -> dict[str, dict[str, float]]:
    """The same comparison on a full-size packaged config (random perturbed weights)."""
    import yaml
    from pocket_tts.utils.config import CONFIGS_DIR

    from pipecat_pocket_tts.engine.model.config import ModelConfig

    work.mkdir(parents=True, exist_ok=True)
    tokenizer = work / "tokenizer.model"
    if not tokenizer.exists():
        ref.train_tokenizer(tokenizer, 4000, seed=0)
    raw = yaml.safe_load((CONFIGS_DIR / f"{name}.yaml").read_text(encoding="utf-8"))
    model = ref.build_model(raw, tokenizer, work, seed)
    ref.perturb(model, seed)
    spec = ref.StageSpec(text="Hello world, the quick brown fox jumps.", seed=seed)
    ref.calibrate(model, ref.prepare_voice_audio(ref.synthetic_voice(1.7, 7)), seed)
    fp32 = ref.record_stages(model, spec)
    weights_path = work / "model.safetensors"
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    safetensors.torch.save_file(state, str(weights_path))
    apply_dynamic_int8(model.flow_lm, RECOMMENDED_CONFIG)
    int8 = ref.record_stages(model, spec)
    del model
    for key in ("weights_path", "weights_path_without_voice_cloning"):
        raw.pop(key, None)
    raw["flow_lm"].pop("weights_path", None)
    raw["mimi"].pop("weights_path", None)
    config = ModelConfig.from_dict(name, raw)
    table = {"upstream_int8": {s: round(snr_db(fp32[s], int8[s]), 2) for s in STAGES}}
    ours = {p: precision_stages.run_stages(config, weights_path, fp32, p) for p in NUMPY_PRECISIONS}
    for precision in ("bf16", "int8"):
        table[f"ours_{precision}"] = {
            s: round(snr_db(ours["fp32"][s], ours[precision][s]), 2) for s in STAGES
        }
    return table


def print_table(table: dict[str, dict[str, dict[str, float]]]) -> None:
    columns = next(iter(table.values()))
    print(f"{'family':20s} {'stage':12s} " + " ".join(f"{k:>17s}" for k in columns))
    for name, rows in table.items():
        for stage in STAGES:
            cells = " ".join(f"{rows[k][stage]:17.1f}" for k in rows)
            print(f"{name:20s} {stage:12s} {cells}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument(
        "--full",
        nargs="+",
        metavar="CONFIG",
        help="instead: full-size packaged configs (e.g. english german_24l); print only",
    )
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "narrow_full")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.full:
        print_table({name: full_size_errors(name, args.work / name) for name in args.full})
        return
    table: dict[str, dict[str, dict[str, float]]] = {}
    for name in FAMILIES:
        table[name] = {
            "upstream_int8": upstream_int8_errors(name),
            "ours_bf16": precision_stages.stage_errors(name, "bf16"),
            "ours_int8": precision_stages.stage_errors(name, "int8"),
        }
    print_table(table)
    if not args.no_write:
        path = precision_stages.ERRORS_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        document = {
            "about": "signal-to-error dB vs fp32 of the same implementation, same weights "
            "(tools/reference/precision_errors.py)",
            "families": table,
        }
        path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
