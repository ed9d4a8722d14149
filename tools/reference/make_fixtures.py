"""Regenerate the golden reference fixtures in tests/fixtures/reference/ from upstream pocket-tts.

Run with the reference venv (torch 2.13.0 + pocket-tts 4.0.1), offline:

    /tmp/refvenv/bin/python tools/reference/make_fixtures.py [family ...]

Each family is a tiny model with the structure of a real upstream config, random weights
(every tensor perturbed), a SentencePiece tokenizer trained here, and the stage outputs upstream
computes for a synthetic voice prompt and a short text. See tests/fixtures/reference/README.md.
"""

from __future__ import annotations

import argparse
import copy
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import safetensors.torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import upstream_reference as ref

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "reference"
TEXT = "Hello world, the quick brown fox jumps."


def _seanet(dimension: int, n_filters: int, kernel_size: int = 7) -> dict[str, Any]:
    return {
        "dimension": dimension,
        "channels": 1,
        "n_filters": n_filters,
        "n_residual_layers": 1,
        "ratios": [6, 5, 4],
        "kernel_size": kernel_size,
        "residual_kernel_size": 3,
        "last_kernel_size": 3,
        "dilation_base": 2,
        "pad_mode": "constant",
        "compress": 2,
    }


def _mimi_transformer(d_model: int, heads: int, layers: int, ffn: int, context: int) -> dict:
    return {
        "d_model": d_model,
        "num_heads": heads,
        "num_layers": layers,
        "layer_scale": 0.01,
        "context": context,
        "dim_feedforward": ffn,
        "input_dimension": d_model,
        "output_dimensions": [d_model],
    }


def _mimi(inner_dim: int, seanet_dim: int = 40) -> dict[str, Any]:
    """The standard Mimi layout (english.yaml) with small widths."""
    return {
        "dtype": "float32",
        "sample_rate": 24000,
        "inner_dim": inner_dim,
        "outer_dim": seanet_dim,
        "channels": 1,
        "frame_rate": 12.5,
        "seanet": _seanet(seanet_dim, 4),
        "transformer": _mimi_transformer(seanet_dim, 4, 2, seanet_dim, 250),
        "quantizer": {"dimension": 32, "output_dimension": seanet_dim},
    }


def _flow_lm(
    d_model: int,
    heads: int,
    layers: int,
    flow_type: str,
    *,
    n_bins: int = 256,
    insert_bos: bool = True,
    **transformer_extra: Any,
) -> dict[str, Any]:
    return {
        "insert_bos_before_voice": insert_bos,
        "dtype": "float32",
        "flow": {"depth": 2, "dim": 32, "type": flow_type},
        "transformer": {
            "d_model": d_model,
            "hidden_scale": 2,
            "max_period": 10000,
            "num_heads": heads,
            "num_layers": layers,
            **transformer_extra,
        },
        "lookup_table": {
            "dim": d_model,
            "n_bins": n_bins,
            "tokenizer": "sentencepiece",
            "tokenizer_path": "tokenizer.model",
        },
    }


def _tiny_lsd() -> dict[str, Any]:
    return {
        "default_temperature": 0.3,
        "replace_characters": {"\u2019": "'", "\u2018": "'"},
        "flow_lm": _flow_lm(48, 4, 2, "lsd"),
        "mimi": _mimi(inner_dim=32),
    }


def _tiny_small() -> dict[str, Any]:
    """english_7m/2m_2026-10 style: GQA, attn_dim != d_model, low-rank table, z_proj,
    drifting head, smaller decoder side (decoder_seanet / decoder_transformer, context 50)."""
    flow_lm = _flow_lm(40, 4, 3, "drifting", attn_dim=32, num_kv_heads=2, dim_feedforward=56)
    flow_lm["transformer"]["hidden_scale"] = 1
    flow_lm["lookup_table"]["rank"] = 16
    flow_lm["z_dim"] = 24
    mimi = _mimi(inner_dim=32)
    mimi["outer_dim"] = 24
    mimi["quantizer"]["output_dimension"] = 24
    mimi["decoder_seanet"] = _seanet(24, 3, kernel_size=3)
    mimi["decoder_transformer"] = _mimi_transformer(24, 2, 3, 48, 50)
    return {
        "default_temperature": 0.3,
        "replace_characters": {"\u2013": ",", "\u2014": ",", "\u2019": "'", "\u2018": "'"},
        "flow_lm": flow_lm,
        "mimi": mimi,
        "default_eos_threshold": -1.0,
    }


def _tiny_inner512() -> dict[str, Any]:
    """english_2026-01 style: mimi.inner_dim equals the SEANet dimension (the voice latents are
    seanet-dimension wide, not 32), no bos_before_voice, pointwise head, space padding."""
    return {
        "pad_with_spaces_for_short_inputs": True,
        "flow_lm": _flow_lm(48, 4, 2, "pointwise", insert_bos=False),
        "mimi": _mimi(inner_dim=40),
    }


def _tiny_flow_matching() -> dict[str, Any]:
    return {
        "flow_lm": _flow_lm(32, 2, 1, "flow_matching"),
        "mimi": _mimi(inner_dim=32, seanet_dim=32),
    }


FAMILIES: dict[str, tuple[dict[str, Any], ref.StageSpec, int]] = {
    "tiny_lsd": (_tiny_lsd(), ref.StageSpec(text=TEXT, extra_sampler_steps=(4,)), 11),
    "tiny_small": (_tiny_small(), ref.StageSpec(text=TEXT), 22),
    "tiny_inner512": (_tiny_inner512(), ref.StageSpec(text="Hello there, voice."), 33),
    "tiny_flow_matching": (
        _tiny_flow_matching(),
        ref.StageSpec(text=TEXT, sampler_steps=16),
        44,
    ),
}


def make_family(name: str) -> dict[str, int]:
    """Write tests/fixtures/reference/<name>/ and return the file sizes in bytes."""
    config, spec, seed = FAMILIES[name]
    folder = FIXTURES / name
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = ref.train_tokenizer(
        folder / "tokenizer.model", config["flow_lm"]["lookup_table"]["n_bins"], seed
    )
    with tempfile.TemporaryDirectory() as tmp:
        model = ref.build_model(config, tokenizer, Path(tmp), seed)
    untouched = ref.perturb(model, seed)
    voice_audio = ref.prepare_voice_audio(ref.synthetic_voice(spec.voice_seconds, spec.voice_seed))
    scales = ref.calibrate(model, voice_audio, seed)
    arrays = ref.record_stages(model, spec)

    state = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
    safetensors.torch.save_file(state, str(folder / "model.safetensors"))
    _check_reload(config, tokenizer, folder, seed, arrays)
    np.savez_compressed(folder / "stages.npz", **arrays)
    ref.dump_json(folder / "config.json", copy.deepcopy(config))
    sizes = {p.name: p.stat().st_size for p in sorted(folder.iterdir())}
    print(f"{name}: untouched={untouched} scales={scales}")
    for key, value in arrays.items():
        print(f"  {key:22s} {value.dtype!s:8s} {value.shape}")
    print(f"  sizes: {sizes}  total={sum(sizes.values()) / 1e6:.2f} MB")
    return sizes


def _check_reload(
    config: dict, tokenizer: Path, folder: Path, seed: int, arrays: dict[str, np.ndarray]
) -> None:
    """The saved safetensors, loaded into a fresh upstream model, reproduce the voice stage."""
    import torch

    with tempfile.TemporaryDirectory() as tmp:
        fresh = ref.build_model(config, tokenizer, Path(tmp), seed + 1000)
    state = safetensors.torch.load_file(str(folder / "model.safetensors"))
    fresh.load_state_dict(state, strict=True)
    with torch.no_grad():
        audio = torch.from_numpy(arrays["voice_audio"])[None, None]
        conditioning = fresh._encode_audio(audio)[0].numpy()
    err = float(np.abs(conditioning - arrays["voice_conditioning"]).max())
    assert err == 0.0, f"reloaded weights differ: {err}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("families", nargs="*", help=f"default: all of {', '.join(FAMILIES)}")
    args = parser.parse_args()
    unknown = sorted(set(args.families) - set(FAMILIES))
    if unknown:
        parser.error(f"unknown families {unknown}; choose from {list(FAMILIES)}")
    for name in args.families or FAMILIES:
        make_family(name)


if __name__ == "__main__":
    main()
