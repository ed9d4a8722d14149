"""Our full-size random ``english`` pack converted for Gradium's Rust runtime ``ptts`` 0.4.2.

``ptts`` loads a local folder with no hub access when it holds:

- ``config.json`` in its own schema (``flow_lm``: the FlowLM's sizes; ``mimi``: the codec's,
  flattened; ``temp``, ``lsd_decode_steps``, ``eos_threshold``, an empty ``fuser`` and
  ``conditioners``), written here from the pack's config;
- ``model.safetensors`` with upstream's key names: the very tensors of our pack, less those
  ptts 0.4.2 refuses (``flow_lm.bos_before_voice``, the voice-cloning speaker projection, the
  Mimi encoder side, which a benchmark of speech never runs);
- ``tokenizer.json`` (copied; a SentencePiece ``.model`` is refused);
- ``voices/NAME.safetensors`` holding ``emb`` [T, d_model]: a conditioning sequence, which
  ptts prefills per stream. Our voices are prefilled KV states, so the voice here is a random
  sequence of the same length (``VOICE_FRAMES`` frames after the BOS-before-voice vector):
  the same work, not the same sound.

The weights are quantized by ptts at load (``quant="q8_0"``). Usage:

    python -m benchmarks.peers.ptts_pack [--work /tmp/bench_capacity] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import numpy as np

from benchmarks.common import VOICE_FRAMES, build_files

VOICE = "alba"
#: Tensors of our pack that ptts 0.4.2 does not load (it refuses unused ones).
DROPPED_PREFIXES = (
    "flow_lm.bos_before_voice",
    "flow_lm.speaker_proj_weight",
    "mimi.encoder.",
    "mimi.encoder_transformer.",
    "mimi.downsample.",
)


def ptts_config(config: dict) -> dict:
    """ptts's ``config.json`` for our registry config (``english``'s sizes), EOS as upstream's.

    Args:
        config: The pack's upstream-layout config (``benchmarks.common.upstream_config``).

    Returns:
        The config in ptts's schema.
    """
    flow, mimi = config["flow_lm"], config["mimi"]
    transformer, seanet, codec = flow["transformer"], mimi["seanet"], mimi["transformer"]
    return {
        "flow_lm": {
            "d_model": transformer["d_model"],
            "num_heads": transformer["num_heads"],
            "num_layers": transformer["num_layers"],
            "dim_feedforward": transformer["d_model"] * transformer["hidden_scale"],
            "max_period": float(transformer["max_period"]),
            "n_bins": flow["lookup_table"]["n_bins"],
            "lut_dim": flow["lookup_table"]["dim"],
            "flow_dim": flow["flow"]["dim"],
            "flow_depth": flow["flow"]["depth"],
            "ldim": mimi["quantizer"]["dimension"],
        },
        "mimi": {
            "channels": mimi["channels"],
            "sample_rate": mimi["sample_rate"],
            "frame_rate": mimi["frame_rate"],
            "dimension": seanet["dimension"],
            "quantizer_dimension": mimi["quantizer"]["dimension"],
            "quantizer_output_dimension": mimi["quantizer"]["output_dimension"],
            "n_filters": seanet["n_filters"],
            "n_residual_layers": seanet["n_residual_layers"],
            "ratios": seanet["ratios"],
            "kernel_size": seanet["kernel_size"],
            "last_kernel_size": seanet["last_kernel_size"],
            "residual_kernel_size": seanet["residual_kernel_size"],
            "dilation_base": seanet["dilation_base"],
            "compress": seanet["compress"],
            "transformer_d_model": codec["d_model"],
            "transformer_num_heads": codec["num_heads"],
            "transformer_num_layers": codec["num_layers"],
            "transformer_layer_scale": codec["layer_scale"],
            "transformer_context": codec["context"],
            "transformer_max_period": 10000.0,
            "transformer_dim_feedforward": codec["dim_feedforward"],
            "downsample_channel_wise": False,
        },
        "temp": 0.7,
        "lsd_decode_steps": 1,
        "eos_threshold": -4.0,
        "conditioners": [],
        "fuser": {"sum": [], "streaming_sum": [], "prepend": [], "cross": []},
        "model_id": None,
    }


def convert(work: Path, out: Path) -> Path:
    """Write the ptts folder of the full-size pack in ``work`` (built if missing) to ``out``.

    Args:
        work: The folder of our pack (``benchmarks.common.build_files``).
        out: The folder to write.

    Returns:
        ``out``.
    """
    from safetensors.numpy import load_file, save_file

    pack, config_path = build_files(work)
    if (out / "config.json").exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    weights = load_file(pack / "model.safetensors")
    bos = weights["flow_lm.bos_before_voice"].reshape(1, -1)
    kept = {name: array for name, array in weights.items() if not name.startswith(DROPPED_PREFIXES)}
    save_file(kept, out / "model.safetensors")
    shutil.copy(pack / "tokenizer.json", out / "tokenizer.json")
    rng = np.random.default_rng(0)
    frames = rng.standard_normal((VOICE_FRAMES, bos.shape[1])).astype(np.float32)
    (out / "voices").mkdir(exist_ok=True)
    emb = np.concatenate([bos, np.float32(0.1) * frames]).astype(np.float32)
    save_file({"emb": emb}, out / "voices" / f"{VOICE}.safetensors")
    config = json.loads(config_path.read_text())
    (out / "config.json").write_text(json.dumps(ptts_config(config), indent=1))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench_capacity"))
    parser.add_argument("--out", type=Path, help="default: WORK/ptts_english")
    args = parser.parse_args()
    out = convert(args.work, args.out or args.work / "ptts_english")
    print(f"ptts pack: {out}")


if __name__ == "__main__":
    main()
