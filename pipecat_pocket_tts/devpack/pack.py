"""One random-weight pack: config, weights, tokenizer and voices in the real file layout."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from ..engine.atomic_files import atomic_write_bytes
from ..engine.backends.numpy.backend import NumpyBackend
from ..engine.model.config import ModelConfig, get_config
from .tokenizer import TokenizerFormat, write_tokenizer
from .voices import write_random_voices
from .weights import calibrated_output_layer, random_weights, round_to_bfloat16, write_safetensors

#: Voices written by default: the English default voice.
DEFAULT_VOICES = ("alba",)


def build_pack(
    folder: str | os.PathLike[str],
    config: str | Mapping[str, Any],
    *,
    seed: int = 0,
    voices: Sequence[str] = DEFAULT_VOICES,
    tokenizer_format: TokenizerFormat | None = None,
    dtype: Literal["float32", "bfloat16"] = "float32",
    with_cloning: bool = True,
    language: str | None = None,
    eos_logit: float = 0.0,
    voice_frames: int = 12,
) -> Path:
    """Write a random-weight pack into ``folder``.

    Args:
        folder: Where to write the pack; made if missing.
        config: A registry name (e.g. "english": no config.json is written, the pack stands
            for that config) or an upstream-schema dict (e.g. ``tiny_config_dict()``, written
            as config.json).
        seed: Seeds the weights, the tokenizer and the voices.
        voices: The voice names to prefill.
        tokenizer_format: "model" (SentencePiece) or "json" (HF tokenizers); default: what
            the config's ``lookup_table.tokenizer`` says.
        dtype: How the weights are stored.
        with_cloning: Include the encoder-side weights voice cloning needs.
        language: The config name the voices are stamped with (default: the registry name,
            or "english" for dicts); load the pack under that name.
        eos_logit: The constant the EOS head outputs.
        voice_frames: Random conditioning frames per voice, prefilled through the NumPy
            backend.

    Returns:
        The folder.

    Raises:
        UnknownLanguageError: ``config`` names no registry config.
        ValueError: An unknown ``tokenizer_format``.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if isinstance(config, str):
        model_config = get_config(config)
        raw: dict[str, Any] | None = None
        name = language or config
    else:
        raw = copy.deepcopy(dict(config))
        name = language or "english"
        model_config = ModelConfig.from_dict(name, raw)
    kind = model_config.flow_lm.lookup_table.tokenizer
    fmt: TokenizerFormat = tokenizer_format or ("json" if kind == "tokenizers" else "model")
    if fmt not in ("model", "json"):
        raise ValueError(f"tokenizer_format={fmt!r}: use 'model' or 'json'")

    if raw is not None:
        raw["flow_lm"]["lookup_table"]["tokenizer"] = (
            "tokenizers" if fmt == "json" else "sentencepiece"
        )
        raw["flow_lm"]["lookup_table"].pop("tokenizer_path", None)
        raw["flow_lm"]["dtype"] = raw["mimi"]["dtype"] = dtype
        atomic_write_bytes(folder / "config.json", json.dumps(raw, indent=2).encode())
        model_config = ModelConfig.from_dict(name, copy.deepcopy(raw))

    write_tokenizer(folder, model_config.flow_lm.lookup_table.n_bins, fmt, seed)
    for stale in ("tokenizer.json", "tokenizer.model"):
        if not stale.endswith(fmt):
            (folder / stale).unlink(missing_ok=True)

    weights = random_weights(
        model_config, seed=seed, eos_logit=eos_logit, with_cloning=with_cloning
    )
    # Compute the voices and the calibration with what the file holds.
    if dtype == "bfloat16":
        weights = {k: round_to_bfloat16(v) for k, v in weights.items()}
    backend = NumpyBackend(model_config, weights)
    weights.update(calibrated_output_layer(backend, weights, seed=seed))
    write_safetensors(folder / "model.safetensors", weights, dtype=dtype)
    if voices:
        # Voices only use the FlowLM, which calibration leaves untouched.
        write_random_voices(folder, backend, voices, seed=seed, frames=voice_frames)
    return folder
