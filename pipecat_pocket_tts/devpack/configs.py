"""Tiny model configs in upstream's schema, for packs that build and run in seconds."""

from __future__ import annotations

from typing import Any, Literal


def tiny_config_dict(kind: Literal["standard", "small"] = "standard") -> dict[str, Any]:
    """A tiny model config in upstream's schema (what ``config.json`` of a pack holds).

    ``standard`` has the structure of the 6-layer packs (LSD sampler, BOS before voice, one
    SEANet/transformer for both Mimi sides) with small widths. ``small`` has the structure of
    the 2026-10 small English models: grouped-query attention with a separate attention width,
    a low-rank token table, ``z_dim``, the drifting sampler and a separate, narrower Mimi
    decoder. Both keep Mimi's real framing: SEANet ratios 6·5·4 and an upsample stride of 16,
    so one latent frame is 1920 samples at 24 kHz.

    Args:
        kind: "standard" or "small".

    Returns:
        A fresh dict, safe to change.
    """
    seanet = {
        "channels": 1,
        "compress": 2,
        "dilation_base": 2,
        "dimension": 32,
        "kernel_size": 7,
        "last_kernel_size": 3,
        "n_filters": 4,
        "n_residual_layers": 1,
        "pad_mode": "constant",
        "ratios": [6, 5, 4],
        "residual_kernel_size": 3,
    }
    mimi_transformer = {
        "context": 250,
        "d_model": 32,
        "dim_feedforward": 64,
        "input_dimension": 32,
        "layer_scale": 0.01,
        "num_heads": 2,
        "num_layers": 1,
        "output_dimensions": [32],
    }
    mimi: dict[str, Any] = {
        "channels": 1,
        "dtype": "float32",
        "frame_rate": 12.5,
        "inner_dim": 32,
        "outer_dim": 32,
        "quantizer": {"dimension": 32, "output_dimension": 32},
        "sample_rate": 24000,
        "seanet": seanet,
        "transformer": mimi_transformer,
    }
    if kind == "standard":
        return {
            "default_temperature": 0.3,
            "flow_lm": {
                "dtype": "float32",
                "flow": {"depth": 2, "dim": 64},
                "insert_bos_before_voice": True,
                "lookup_table": {"dim": 64, "n_bins": 512, "tokenizer": "sentencepiece"},
                "transformer": {
                    "d_model": 64,
                    "hidden_scale": 2,
                    "max_period": 10000,
                    "num_heads": 4,
                    "num_layers": 2,
                },
            },
            "mimi": mimi,
            "replace_characters": {"\u2018": "'", "\u2019": "'"},
        }
    if kind == "small":
        mimi["outer_dim"] = 16
        mimi["quantizer"] = {"dimension": 32, "output_dimension": 16}
        mimi["decoder_seanet"] = {**seanet, "dimension": 16, "kernel_size": 3}
        mimi["decoder_transformer"] = {
            **mimi_transformer,
            "context": 50,
            "d_model": 16,
            "dim_feedforward": 48,
            "input_dimension": 16,
            "num_heads": 2,
            "num_layers": 2,
            "output_dimensions": [16],
        }
        return {
            "default_eos_threshold": -1.0,
            "default_temperature": 0.3,
            "flow_lm": {
                "dtype": "float32",
                "flow": {"depth": 2, "dim": 32, "type": "drifting"},
                "insert_bos_before_voice": True,
                "lookup_table": {
                    "dim": 48,
                    "n_bins": 512,
                    "rank": 16,
                    "tokenizer": "sentencepiece",
                },
                "transformer": {
                    "attn_dim": 64,
                    "d_model": 48,
                    "dim_feedforward": 96,
                    "hidden_scale": 1,
                    "max_period": 10000,
                    "num_heads": 4,
                    "num_kv_heads": 2,
                    "num_layers": 2,
                },
                "z_dim": 24,
            },
            "mimi": mimi,
            "replace_characters": {"\u2013": ",", "\u2014": ",", "\u2018": "'", "\u2019": "'"},
        }
    raise ValueError(f"unknown tiny config kind {kind!r}: use 'standard' or 'small'")
