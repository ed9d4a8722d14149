"""Batched stages (step_batch, sample_batch, decode_batch) equal the solo stages per stream.

Streams sit at different KV lengths and positions, with different voices; configs: the tiny
standard structure, the small GQA structure (low-rank table, z_dim, drifting sampler,
separate Mimi decoder), a 24-layer standard config and the flow-matching fixture family.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from reference_fixtures import load_family, snr_db

from pipecat_pocket_tts.devpack import random_weights, tiny_config_dict
from pipecat_pocket_tts.engine.backends.base import Backend, VoiceKV
from pipecat_pocket_tts.engine.backends.numpy.backend import NumpyBackend
from pipecat_pocket_tts.engine.backends.numpy.weights.checkpoint import load_checkpoint
from pipecat_pocket_tts.engine.model.config import ModelConfig

MIN_SNR_DB = 60.0
KINDS = ("standard", "small", "standard_24l", "flow_matching")


@cache
def _backend(kind: str) -> NumpyBackend:
    if kind == "flow_matching":
        config, weights_path, _tokenizer, _arrays = load_family("tiny_flow_matching")
        return NumpyBackend(config, load_checkpoint(weights_path, config), sampler_steps=2)
    raw = tiny_config_dict("small" if kind == "small" else "standard")
    if kind == "standard_24l":
        raw["flow_lm"]["transformer"]["num_layers"] = 24
    config = ModelConfig.from_dict("english", raw)
    return NumpyBackend(config, random_weights(config, seed=3), sampler_steps=2)


@pytest.fixture(params=KINDS)
def backend(request) -> NumpyBackend:
    return _backend(request.param)


def _voice(backend: NumpyBackend, length: int, seed: int) -> VoiceKV:
    flow = backend.flow_lm
    rng = np.random.default_rng(seed)
    shape = (length, flow.kv_heads, flow.head_dim)
    return VoiceKV(
        keys=[rng.standard_normal(shape).astype(np.float32) for _ in range(flow.num_layers)],
        values=[rng.standard_normal(shape).astype(np.float32) for _ in range(flow.num_layers)],
    )


def _flow_states(backend: NumpyBackend, lengths=(3, 20, 41)) -> list:
    """One state per stream: a different voice, then a text prefill of a different length."""
    states = []
    rng = np.random.default_rng(7)
    for i, length in enumerate(lengths):
        state = backend.flow_state_from_voice(_voice(backend, 5 + 7 * i, seed=i))
        ids = rng.integers(0, backend.flow_lm.embed_table.shape[0], size=length)
        backend.prefill(state, backend.embed_text(ids))
        states.append(state)
    return states


def _noise(backend: Backend, streams: int, frames: int) -> np.ndarray:
    dim = backend.config.flow_lm.latent_dim
    return np.random.default_rng(11).standard_normal((frames, streams, dim)).astype(np.float32)


def _run_solo(backend: Backend, states, noise):
    """Per stream, frame by frame: step → sample. Returns hidden, eos, latents [F, B, ...]."""
    hidden, eos, latents = [], [], []
    previous = [None] * len(states)
    for frame_noise in noise:
        outs = [backend.step(s, p) for s, p in zip(states, previous, strict=True)]
        previous = [backend.sample(o.hidden, n) for o, n in zip(outs, frame_noise, strict=True)]
        hidden.append(np.stack([o.hidden for o in outs]))
        eos.append([o.eos_logit for o in outs])
        latents.append(np.stack(previous))
    return np.array(hidden), np.array(eos), np.array(latents)


def _run_batched(backend: Backend, states, noise):
    hidden, eos, latents = [], [], []
    previous = [None] * len(states)
    for frame_noise in noise:
        outs = backend.step_batch(states, previous)
        h = np.stack([o.hidden for o in outs])
        sampled = backend.sample_batch(h, frame_noise)
        previous = list(sampled)
        hidden.append(h)
        eos.append([o.eos_logit for o in outs])
        latents.append(sampled)
    return np.array(hidden), np.array(eos), np.array(latents)


def test_step_and_sample_batch_equal_solo_per_stream(backend):
    noise = _noise(backend, 3, 6)
    solo_states, batch_states = _flow_states(backend), _flow_states(backend)
    assert len({s.position for s in solo_states}) == 3  # different positions
    solo = _run_solo(backend, solo_states, noise)
    batched = _run_batched(backend, batch_states, noise)
    for got, want in zip(batched, solo, strict=True):
        assert got.shape == want.shape
        for b in range(3):
            assert snr_db(want[:, b], got[:, b]) >= MIN_SNR_DB
    for a, b in zip(solo_states, batch_states, strict=True):
        assert a.position == b.position
        p = a.position
        assert snr_db(a.keys[:, :, :p], b.keys[:, :, :p]) >= MIN_SNR_DB
        assert snr_db(a.values[:, :, :p], b.values[:, :, :p]) >= MIN_SNR_DB


def test_step_batch_of_one_and_empty(backend):
    (solo,), (batched,) = _flow_states(backend, (9,)), _flow_states(backend, (9,))
    want = backend.step(solo, None)
    (got,) = backend.step_batch([batched], [None])
    assert snr_db(want.hidden, got.hidden) >= MIN_SNR_DB
    assert backend.step_batch([], []) == []


def test_step_batch_treats_nan_latents_as_bos(backend):
    (a,), (b,) = _flow_states(backend, (4,)), _flow_states(backend, (4,))
    nan = np.full(backend.config.flow_lm.latent_dim, np.nan, dtype=np.float32)
    (from_none,) = backend.step_batch([a], [None])
    (from_nan,) = backend.step_batch([b], [nan])
    np.testing.assert_array_equal(from_none.hidden, from_nan.hidden)


def _mimi_states(backend: Backend, warmup=(0, 2, 5)):
    """Decoder states advanced by a different number of frames each."""
    rng = np.random.default_rng(5)
    dim = backend.config.flow_lm.latent_dim
    states = []
    for frames in warmup:
        state = backend.new_mimi_state()
        for _ in range(frames):
            backend.decode(state, rng.standard_normal(dim).astype(np.float32))
        states.append(state)
    return states


def _decoded_solo_and_batched(backend: Backend, frames: int, seed: int):
    """3 streams' audio [frames, 3, 1920] decoded alone and batched, from the same states."""
    dim = backend.config.flow_lm.latent_dim
    latents = np.random.default_rng(seed).standard_normal((frames, 3, dim)).astype(np.float32)
    solo_states, batch_states = _mimi_states(backend), _mimi_states(backend)
    solo = np.array(
        [[backend.decode(s, x) for s, x in zip(solo_states, row, strict=True)] for row in latents]
    )
    return solo, np.array([backend.decode_batch(batch_states, row) for row in latents])


def test_decode_batch_equals_solo_per_stream(backend):
    solo, batched = _decoded_solo_and_batched(backend, 7, seed=9)
    assert batched.shape == solo.shape == (7, 3, 1920)
    for b in range(3):
        assert snr_db(solo[:, b], batched[:, b]) >= MIN_SNR_DB


def test_streams_join_and_leave_between_batches(backend):
    """Each stream decodes its own latents in order, batched with whoever is there."""
    dim = backend.config.flow_lm.latent_dim
    latents = np.random.default_rng(2).standard_normal((3, 4, dim)).astype(np.float32)
    reference = _mimi_states(backend)
    want = [[backend.decode(reference[b], x) for x in latents[b]] for b in range(3)]
    states = _mimi_states(backend)
    done = [0, 0, 0]
    for group in ([0], [0, 1], [0, 1, 2], [1, 2], [2], [0, 2], [1]):
        out = backend.decode_batch(
            [states[b] for b in group], latents[group, [done[b] for b in group]]
        )
        for row, b in enumerate(group):
            assert snr_db(want[b][done[b]], out[row]) >= MIN_SNR_DB
            done[b] += 1
    assert done == [4, 4, 4]


def test_default_batched_stages_loop_over_solo_stages(backend):
    """What a backend without batching (CoreML) runs: ``Backend``'s looping defaults."""
    noise = _noise(backend, 2, 3)
    states = _flow_states(backend, (6, 13))
    previous = [None, None]
    for frame_noise in noise:
        outs = Backend.step_batch(backend, states, previous)
        hidden = np.stack([o.hidden for o in outs])
        previous = list(Backend.sample_batch(backend, hidden, frame_noise))
    reference = _run_solo(backend, _flow_states(backend, (6, 13)), noise)[2]
    np.testing.assert_array_equal(np.stack(previous), reference[-1])
    mimi = _mimi_states(backend, (0, 1))
    looped = Backend.decode_batch(backend, mimi, np.stack(previous))
    assert looped.shape == (2, 1920)
    fresh = _mimi_states(backend, (0, 1))
    solo = [backend.decode(s, x) for s, x in zip(fresh, previous, strict=True)]
    np.testing.assert_array_equal(looped, np.stack(solo))


def test_batched_stages_check_their_shapes(backend):
    dim = backend.config.flow_lm.latent_dim
    with pytest.raises(ValueError, match="states but"):
        backend.step_batch(_flow_states(backend, (2,)), [None, None])
    with pytest.raises(ValueError, match="noise"):
        backend.sample_batch(np.zeros((2, backend.config.flow_lm.head_input_dim)), np.zeros(dim))
    with pytest.raises(ValueError, match="latents"):
        backend.decode_batch(_mimi_states(backend, (0,)), np.zeros((2, dim)))


@pytest.mark.parametrize("group", [1, 2])
def test_decode_batch_in_stream_groups_equals_solo(backend, monkeypatch, group):
    """The last SEANet layers run a few streams at a time: the audio does not change."""
    from pipecat_pocket_tts.engine.backends.numpy.layers import mimi as mimi_module

    monkeypatch.setattr(mimi_module, "DECODE_GROUP", group)
    solo, batched = _decoded_solo_and_batched(backend, 3, seed=4)
    for b in range(3):
        assert snr_db(solo[:, b], batched[:, b]) >= MIN_SNR_DB
