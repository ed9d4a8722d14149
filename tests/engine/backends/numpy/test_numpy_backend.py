"""NumpyBackend end to end against upstream: a temperature-0 generation, codec, voices, errors."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from reference_fixtures import (
    FAMILIES,
    MAX_ABS_TOLERANCE,
    MIN_AUDIO_SNR_DB,
    load_family,
    max_abs_error,
    snr_db,
)

from pipecat_pocket_tts.engine.backends.base import Backend, VoiceKV
from pipecat_pocket_tts.engine.backends.numpy.backend import NumpyBackend
from pipecat_pocket_tts.engine.backends.numpy.weights.checkpoint import (
    is_cloning_key,
    load_checkpoint,
)
from pipecat_pocket_tts.engine.errors import (
    CloningUnavailableError,
    ContextOverflowError,
    VoiceFileError,
)


@cache
def _loaded(name: str):
    config, weights_path, _tokenizer, arrays = load_family(name)
    backend = NumpyBackend.from_files(
        config, weights_path, sampler_steps=int(arrays["sampler_steps"])
    )
    return backend, arrays


def _voice_state(backend: NumpyBackend, conditioning: np.ndarray):
    """A FlowState prefilled with [bos_before_voice?, voice conditioning…]."""
    state = backend.new_flow_state()
    bos = backend.bos_before_voice()
    if backend.config.flow_lm.insert_bos_before_voice:
        assert bos is not None and bos.shape == (backend.config.flow_lm.transformer.d_model,)
        backend.prefill(state, bos[None, :])
    else:
        assert bos is None
    backend.prefill(state, conditioning)
    return state


def _generate(backend: NumpyBackend, state, frames: int):
    """Temperature 0: step from BOS, sample with zero noise, feed each latent back."""
    latent_dim = backend.config.flow_lm.latent_dim
    mimi_state = backend.new_mimi_state()
    latent, latents, eos, hidden, audio = None, [], [], [], []
    for _ in range(frames):
        out = backend.step(state, latent)
        latent = backend.sample(out.hidden, np.zeros(latent_dim, np.float32))
        latents.append(latent)
        eos.append(out.eos_logit)
        hidden.append(out.hidden)
        audio.append(backend.decode(mimi_state, latent))
    return np.array(latents), np.array(eos), np.array(hidden), np.concatenate(audio)


@pytest.mark.parametrize("name", FAMILIES)
def test_temperature_zero_generation_matches_upstream(name):
    backend, arrays = _loaded(name)
    state = _voice_state(backend, arrays["voice_conditioning"])
    backend.prefill(state, backend.embed_text(arrays["text_ids"]))
    frames = len(arrays["gen_latents"])
    assert frames >= 20
    latents, eos, hidden, audio = _generate(backend, state, frames)
    assert max_abs_error(arrays["gen_latents"], latents) <= MAX_ABS_TOLERANCE
    assert max_abs_error(arrays["gen_eos_logits"], eos) <= MAX_ABS_TOLERANCE
    assert max_abs_error(arrays["gen_hidden"], hidden) <= MAX_ABS_TOLERANCE
    assert audio.dtype == np.float32 and audio.shape == arrays["gen_audio"].shape
    assert snr_db(arrays["gen_audio"], audio) >= MIN_AUDIO_SNR_DB


@pytest.mark.parametrize("name", FAMILIES)
def test_decode_denormalizes_sampled_latents(name):
    backend, arrays = _loaded(name)
    mimi_state = backend.new_mimi_state()
    audio = np.stack([backend.decode(mimi_state, latent) for latent in arrays["mimi_latents"]])
    assert snr_db(arrays["mimi_audio"], audio) >= MIN_AUDIO_SNR_DB


@pytest.mark.parametrize("name", FAMILIES)
def test_encode_gives_voice_conditioning(name):
    backend, arrays = _loaded(name)
    assert backend.has_voice_cloning
    conditioning = backend.encode(arrays["voice_audio"])
    assert conditioning.shape == arrays["voice_conditioning"].shape
    assert max_abs_error(arrays["voice_conditioning"], conditioning) <= MAX_ABS_TOLERANCE


def test_backend_identity_and_sampler_steps():
    backend, _arrays = _loaded("tiny_lsd")
    assert isinstance(backend, Backend)
    assert backend.name == "numpy"
    assert backend.sampler.steps == 1
    config, weights_path, _tokenizer, _ = load_family("tiny_lsd")
    four = NumpyBackend.from_files(config, weights_path, sampler_steps=4)
    assert four.sampler.steps == 4


def test_voice_roundtrip_continues_identically():
    backend, arrays = _loaded("tiny_small")
    state = _voice_state(backend, arrays["voice_conditioning"])
    voice = backend.voice_from_flow_state(state)
    assert voice.length == state.position
    assert voice.keys[0].shape == (state.position, *arrays["voice_k"].shape[2:])
    np.testing.assert_allclose(np.stack(voice.keys), arrays["voice_k"], atol=MAX_ABS_TOLERANCE)
    restored = backend.flow_state_from_voice(voice)
    assert restored.position == voice.length
    assert restored.capacity >= voice.length + 284
    text = backend.embed_text(arrays["text_ids"])
    for s in (state, restored):
        backend.prefill(s, text)
    a = backend.step(state, None)
    b = backend.step(restored, None)
    np.testing.assert_array_equal(a.hidden, b.hidden)


def test_long_voices_get_room_for_a_chunk():
    backend, _arrays = _loaded("tiny_lsd")
    flow = backend.flow_lm
    length = 900  # longer than the default capacity
    rng = np.random.default_rng(0)
    keys = [
        rng.standard_normal((length, flow.kv_heads, flow.head_dim)).astype(np.float32)
        for _ in range(flow.num_layers)
    ]
    state = backend.flow_state_from_voice(VoiceKV(keys=keys, values=keys))
    assert state.position == length and state.capacity == length + 284
    backend.prefill(state, np.zeros((50, flow.d_model), np.float32))
    for _ in range(234):
        backend.step(state, None)
    with pytest.raises(ContextOverflowError):
        backend.step(state, None)


def test_voices_of_another_model_are_rejected():
    backend, _arrays = _loaded("tiny_lsd")
    flow = backend.flow_lm
    wrong_layers = VoiceKV(
        keys=[np.zeros((3, flow.kv_heads, flow.head_dim), np.float32)] * 7,
        values=[np.zeros((3, flow.kv_heads, flow.head_dim), np.float32)] * 7,
    )
    with pytest.raises(VoiceFileError, match="layers"):
        backend.flow_state_from_voice(wrong_layers)
    bad = np.zeros((3, flow.kv_heads + 1, flow.head_dim), np.float32)
    wrong_heads = VoiceKV(keys=[bad] * flow.num_layers, values=[bad] * flow.num_layers)
    with pytest.raises(VoiceFileError, match="another model"):
        backend.flow_state_from_voice(wrong_heads)


def test_packs_without_cloning_weights_refuse_to_encode():
    config, weights_path, _tokenizer, arrays = load_family("tiny_lsd")
    full = load_checkpoint(weights_path, config)
    for weights in (
        {k: v for k, v in full.items() if not is_cloning_key(k)},
        {k: (np.zeros_like(v) if is_cloning_key(k) else v) for k, v in full.items()},
    ):
        backend = NumpyBackend(config, weights)
        assert not backend.has_voice_cloning
        with pytest.raises(CloningUnavailableError, match="voice-cloning"):
            backend.encode(arrays["voice_audio"])
        # Everything else still works (predefined voices).
        state = _voice_state(backend, arrays["voice_conditioning"])
        backend.prefill(state, backend.embed_text(arrays["text_ids"]))
        out = backend.step(state, None)
        assert np.all(np.isfinite(out.hidden))


def test_sessions_are_independent_across_threads():
    """Two sequences stepped concurrently give the same results as sequentially."""
    from concurrent.futures import ThreadPoolExecutor

    backend, arrays = _loaded("tiny_lsd")
    base = _voice_state(backend, arrays["voice_conditioning"])
    backend.prefill(base, backend.embed_text(arrays["text_ids"]))

    def run(_):
        return _generate(backend, base.copy(), 8)[0]

    with ThreadPoolExecutor(2) as pool:
        first, second = pool.map(run, range(2))
    np.testing.assert_array_equal(first, second)
    assert max_abs_error(arrays["gen_latents"][:8], first) <= MAX_ABS_TOLERANCE
