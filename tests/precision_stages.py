"""Our stage outputs at a precision on the golden fixture families, and their error vs fp32.

The same stages upstream's fixture records (``tools/reference/upstream_reference.py``): voice
and text prefill K/V, teacher-forced steps (hidden, EOS), and a whole temperature-0
generation (latents, hidden, audio). ``tools/reference/precision_errors.py`` puts these beside
upstream's own int8 and writes ``fixtures/precision/errors.json``; ``test_precision.py`` checks
them against it.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import numpy as np
from reference_fixtures import load_family, snr_db

from pipecat_pocket_tts.engine.backends.numpy.backend import NumpyBackend
from pipecat_pocket_tts.engine.model.config import ModelConfig

ERRORS_FILE = Path(__file__).resolve().parent / "fixtures" / "precision" / "errors.json"
#: The stages compared, in the fixture's key names.
STAGES = (
    "voice_k",
    "text_k",
    "text_v",
    "step_hidden",
    "step_eos",
    "gen_latents",
    "gen_hidden",
    "gen_audio",
)


@cache
def our_stages(name: str, precision: str) -> dict[str, np.ndarray]:
    """Run the fixture's stages of family ``name`` on our NumPy backend at ``precision``."""
    config, weights_path, _tokenizer, arrays = load_family(name)
    return run_stages(config, weights_path, arrays, precision)


def run_stages(
    config: ModelConfig, weights_path: Path, arrays: dict[str, np.ndarray], precision: str
) -> dict[str, np.ndarray]:
    """The stages of a recorded upstream run (its inputs in ``arrays``) on our backend."""
    backend = NumpyBackend.from_files(
        config, weights_path, sampler_steps=int(arrays["sampler_steps"]), precision=precision
    )
    out: dict[str, np.ndarray] = {}
    state = backend.new_flow_state()
    bos = backend.bos_before_voice()
    if bos is not None:
        backend.prefill(state, bos[None, :])
    backend.prefill(state, arrays["voice_conditioning"])
    out["voice_k"] = _kv(backend, state)[0]
    backend.prefill(state, backend.embed_text(arrays["text_ids"]))
    out["text_k"], out["text_v"] = _kv(backend, state)

    forced = state.copy()
    hidden, eos = [], []
    for latent in arrays["step_inputs"]:
        step = backend.step(forced, latent)
        hidden.append(step.hidden)
        eos.append(step.eos_logit)
    out["step_hidden"], out["step_eos"] = np.array(hidden), np.array(eos, np.float32)

    latent_dim = config.flow_lm.latent_dim
    mimi_state = backend.new_mimi_state()
    latent, latents, hidden, audio = None, [], [], []
    for _ in range(len(arrays["gen_latents"])):
        step = backend.step(state, latent)
        latent = backend.sample(step.hidden, np.zeros(latent_dim, np.float32))
        latents.append(latent)
        hidden.append(step.hidden)
        audio.append(backend.decode(mimi_state, latent))
    out["gen_latents"], out["gen_hidden"] = np.array(latents), np.array(hidden)
    out["gen_audio"] = np.concatenate(audio)
    return out


def _kv(backend: NumpyBackend, state) -> tuple[np.ndarray, np.ndarray]:
    """[layers, T, kv_heads, head_dim] keys and values, as the fixture stores them."""
    voice = backend.voice_from_flow_state(state)
    return np.stack(voice.keys), np.stack(voice.values)


def stage_errors(name: str, precision: str) -> dict[str, float]:
    """Signal-to-error (dB) of each stage at ``precision`` against our fp32."""
    reference, narrow = our_stages(name, "fp32"), our_stages(name, precision)
    return {stage: round(snr_db(reference[stage], narrow[stage]), 2) for stage in STAGES}


def recorded_errors() -> dict:
    """The committed measurement (``fixtures/precision/errors.json``)."""
    return json.loads(ERRORS_FILE.read_text(encoding="utf-8"))
