"""Compare any ``Backend`` with recorded upstream stage arrays (NumPy only, no torch).

Each check feeds the backend the *reference* inputs of its stage, so errors do not compound,
except the final temperature-0 generation, which runs the whole loop on the backend alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipecat_pocket_tts.engine.backends.base import Backend, VoiceKV

MAX_ABS_TOLERANCE = 1e-4
MIN_AUDIO_SNR_DB = 60.0


@dataclass(frozen=True)
class Check:
    """One compared stage: its metric, the measured value and whether it is in tolerance."""

    stage: str
    metric: str  # "max_abs" or "snr_db"
    value: float

    @property
    def passed(self) -> bool:
        if self.metric == "snr_db":
            return self.value >= MIN_AUDIO_SNR_DB
        return self.value <= MAX_ABS_TOLERANCE

    def __str__(self) -> str:
        mark = "ok " if self.passed else "BAD"
        return f"{mark} {self.stage:28s} {self.metric:8s} {self.value:.3g}"


def max_abs(reference: np.ndarray, actual: np.ndarray) -> float:
    """Largest absolute difference over the finite entries of ``reference``."""
    reference = np.asarray(reference, dtype=np.float64)
    actual = np.asarray(actual, dtype=np.float64)
    if reference.shape != actual.shape:
        return float("inf")
    keep = np.isfinite(reference)
    return float(np.max(np.abs(reference[keep] - actual[keep]), initial=0.0))


def snr_db(reference: np.ndarray, actual: np.ndarray) -> float:
    """Signal-to-error ratio in dB (inf when identical, -inf on a shape mismatch)."""
    reference = np.asarray(reference, dtype=np.float64)
    actual = np.asarray(actual, dtype=np.float64)
    if reference.shape != actual.shape:
        return float("-inf")
    error = float(np.sum((reference - actual) ** 2))
    return float("inf") if error == 0 else 10 * float(np.log10(np.sum(reference**2) / error))


def _kv_arrays(voice: VoiceKV) -> tuple[np.ndarray, np.ndarray]:
    """[L, P, kv_heads, head_dim] keys and values of a VoiceKV."""
    return np.stack(voice.keys), np.stack(voice.values)


def _voice_prefix(backend: Backend, conditioning: np.ndarray) -> np.ndarray:
    bos = backend.bos_before_voice()
    return conditioning if bos is None else np.concatenate([bos[None], conditioning])


def run_parity(
    backend: Backend,
    arrays: dict[str, np.ndarray],
    *,
    sampler_backends: dict[str, Backend] | None = None,
    voice: VoiceKV | None = None,
) -> list[Check]:
    """Every stage of ``backend`` against ``arrays`` (the fixture specs of stages.npz).

    ``sampler_backends`` maps an extra sampler prefix (e.g. "sampler4") to a backend built with
    that many decode steps; ``voice`` is an upstream-exported voice to start the text from.
    """
    a = arrays
    checks: list[Check] = []

    def check(stage: str, value: float, metric: str = "max_abs") -> None:
        checks.append(Check(stage, metric, value))

    check("embed_text", max_abs(a["text_embeddings"], backend.embed_text(a["text_ids"])))
    check("encode", max_abs(a["voice_conditioning"], backend.encode(a["voice_audio"])))

    state = backend.new_flow_state()
    backend.prefill(state, _voice_prefix(backend, a["voice_conditioning"]))
    voice_k, voice_v = _kv_arrays(backend.voice_from_flow_state(state))
    check("voice prefill K", max_abs(a["voice_k"], voice_k))
    check("voice prefill V", max_abs(a["voice_v"], voice_v))

    if voice is not None:
        state = backend.flow_state_from_voice(voice)
        check("voice file K (upstream)", max_abs(a["voice_k"], np.stack(voice.keys)))
    backend.prefill(state, a["text_embeddings"])
    text_k, text_v = _kv_arrays(backend.voice_from_flow_state(state))
    check("text prefill K", max_abs(a["text_k"], text_k))
    check("text prefill V", max_abs(a["text_v"], text_v))

    hidden, eos = [], []
    for row in a["step_inputs"]:
        out = backend.step(state, None if np.isnan(row).all() else row)
        hidden.append(out.hidden)
        eos.append(out.eos_logit)
    check("step hidden", max_abs(a["step_hidden"], np.stack(hidden)))
    check("step eos logit", max_abs(a["step_eos"], np.asarray(eos)))

    samplers = {"sampler": backend, **(sampler_backends or {})}
    for prefix, sampler in samplers.items():
        rows = zip(a[f"{prefix}_hidden"], a[f"{prefix}_noise"], strict=True)
        latents = [sampler.sample(h, n) for h, n in rows]
        steps = int(a[f"{prefix}_steps"])
        check(f"{prefix} ({steps} steps)", max_abs(a[f"{prefix}_latent"], np.stack(latents)))

    mimi_state = backend.new_mimi_state()
    audio = np.stack([backend.decode(mimi_state, latent) for latent in a["mimi_latents"]])
    check("mimi decode", snr_db(a["mimi_audio"], audio), "snr_db")
    check("mimi decode max_abs", max_abs(a["mimi_audio"], audio))

    checks.extend(_generation(backend, a))
    return checks


def _generation(backend: Backend, a: dict[str, np.ndarray]) -> list[Check]:
    """Temperature-0 generation on the backend alone, from its own voice and text prefill."""
    state = backend.new_flow_state()
    backend.prefill(state, _voice_prefix(backend, a["voice_conditioning"]))
    backend.prefill(state, backend.embed_text(a["text_ids"]))
    mimi_state = backend.new_mimi_state()
    zeros = np.zeros(a["gen_latents"].shape[1], dtype=np.float32)
    latent = None
    latents, logits, audio = [], [], []
    for _ in range(len(a["gen_latents"])):
        out = backend.step(state, latent)
        latent = backend.sample(out.hidden, zeros)
        latents.append(latent)
        logits.append(out.eos_logit)
        audio.append(backend.decode(mimi_state, latent))
    return [
        Check("generation latents", "max_abs", max_abs(a["gen_latents"], np.stack(latents))),
        Check("generation eos logits", "max_abs", max_abs(a["gen_eos_logits"], np.array(logits))),
        Check("generation audio", "snr_db", snr_db(a["gen_audio"], np.concatenate(audio))),
    ]
