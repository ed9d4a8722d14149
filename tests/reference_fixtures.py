"""Load the golden upstream fixtures in tests/fixtures/reference/ (see the README there)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from pipecat_pocket_tts.engine.model.config import ModelConfig

FIXTURES_DIR = Path(__file__).resolve().parent / "fixtures" / "reference"
FAMILIES = ("tiny_lsd", "tiny_small", "tiny_inner512", "tiny_flow_matching")

# Parity tolerances every backend test uses against these fixtures.
MAX_ABS_TOLERANCE = 1e-4  # latents, hidden states, embeddings, K/V, EOS logits
MIN_AUDIO_SNR_DB = 60.0  # decoded audio


def load_family(name: str) -> tuple[ModelConfig, Path, Path, dict[str, np.ndarray]]:
    """(config, model.safetensors path, tokenizer.model path, stage arrays) of one family."""
    folder = FIXTURES_DIR / name
    if not folder.is_dir():
        raise FileNotFoundError(
            f"no reference fixture {name!r} in {FIXTURES_DIR}; choose one of {FAMILIES} or "
            "regenerate with /tmp/refvenv/bin/python tools/reference/make_fixtures.py"
        )
    raw = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    config = ModelConfig.from_dict(name, raw)
    with np.load(folder / "stages.npz") as npz:
        arrays = {key: npz[key] for key in npz.files}
    return config, folder / "model.safetensors", folder / "tokenizer.model", arrays


def snr_db(reference: np.ndarray, actual: np.ndarray) -> float:
    """Signal-to-error ratio in dB of ``actual`` against ``reference`` (inf when identical)."""
    reference = np.asarray(reference, dtype=np.float64)
    actual = np.asarray(actual, dtype=np.float64)
    if reference.shape != actual.shape:
        raise ValueError(f"shape mismatch: reference {reference.shape}, actual {actual.shape}")
    error = float(np.sum((reference - actual) ** 2))
    signal = float(np.sum(reference**2))
    if error == 0.0:
        return float("inf")
    return 10.0 * float(np.log10(signal / error))


def max_abs_error(reference: np.ndarray, actual: np.ndarray) -> float:
    """Largest absolute difference, NaN positions of ``reference`` (the BOS row) excluded."""
    reference = np.asarray(reference, dtype=np.float64)
    actual = np.asarray(actual, dtype=np.float64)
    if reference.shape != actual.shape:
        raise ValueError(f"shape mismatch: reference {reference.shape}, actual {actual.shape}")
    keep = ~np.isnan(reference)
    return float(np.max(np.abs(reference[keep] - actual[keep]), initial=0.0))
