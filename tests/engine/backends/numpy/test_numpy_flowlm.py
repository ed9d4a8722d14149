"""NumPy FlowLM and sampler against upstream's golden stage outputs (every fixture family)."""

from __future__ import annotations

import dataclasses
from functools import cache

import numpy as np
import pytest
from reference_fixtures import FAMILIES, MAX_ABS_TOLERANCE, load_family, max_abs_error

from pipecat_pocket_tts.engine.backends.base import FlowState
from pipecat_pocket_tts.engine.backends.numpy.layers.flowlm import FlowLM
from pipecat_pocket_tts.engine.backends.numpy.layers.kv_cache import (
    CHUNK_POSITIONS,
    DEFAULT_CAPACITY,
    KVCache,
)
from pipecat_pocket_tts.engine.backends.numpy.layers.sampler import Sampler
from pipecat_pocket_tts.engine.backends.numpy.weights.checkpoint import load_checkpoint
from pipecat_pocket_tts.engine.errors import ContextOverflowError


@cache
def _family(name: str):
    config, weights_path, _tokenizer, arrays = load_family(name)
    weights = load_checkpoint(weights_path, config)
    return config, weights, arrays, FlowLM(config, weights)


def _voice_prompt(config, weights, arrays) -> np.ndarray:
    """[bos_before_voice?, voice conditioning…] as upstream prefills it."""
    rows = [arrays["voice_conditioning"]]
    if config.flow_lm.insert_bos_before_voice:
        rows.insert(0, weights["flow_lm.bos_before_voice"].reshape(1, -1))
    return np.concatenate(rows)


def _filled(state: KVCache) -> tuple[np.ndarray, np.ndarray]:
    """The filled K/V in the fixtures' layout [L, P, kv_heads, head_dim]."""
    p = state.position
    return state.keys[:, :, :p].transpose(0, 2, 1, 3), state.values[:, :, :p].transpose(0, 2, 1, 3)


@pytest.fixture(params=FAMILIES)
def family(request):
    return _family(request.param)


def test_text_embeddings(family):
    _config, _weights, arrays, flow = family
    got = flow.embed(arrays["text_ids"])
    assert got.dtype == np.float32
    assert max_abs_error(arrays["text_embeddings"], got) <= MAX_ABS_TOLERANCE


def test_voice_then_text_prefill_kv(family):
    config, weights, arrays, flow = family
    state = flow.new_state()
    flow.prefill(state, _voice_prompt(config, weights, arrays))
    keys, values = _filled(state)
    assert keys.shape == arrays["voice_k"].shape
    assert max_abs_error(arrays["voice_k"], keys) <= MAX_ABS_TOLERANCE
    assert max_abs_error(arrays["voice_v"], values) <= MAX_ABS_TOLERANCE
    flow.prefill(state, flow.embed(arrays["text_ids"]))
    keys, values = _filled(state)
    assert keys.shape == arrays["text_k"].shape
    assert max_abs_error(arrays["text_k"], keys) <= MAX_ABS_TOLERANCE
    assert max_abs_error(arrays["text_v"], values) <= MAX_ABS_TOLERANCE


def test_prefill_in_pieces_equals_prefill_at_once(family):
    _config, _weights, arrays, flow = family
    embeddings = flow.embed(arrays["text_ids"])
    whole, pieces = flow.new_state(), flow.new_state()
    flow.prefill(whole, embeddings)
    for row in embeddings:
        flow.prefill(pieces, row[None])
    assert whole.position == pieces.position == len(embeddings)
    for a, b in zip(_filled(whole), _filled(pieces), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_autoregressive_steps_hidden_and_eos(family):
    config, weights, arrays, flow = family
    state = flow.new_state()
    flow.prefill(state, _voice_prompt(config, weights, arrays))
    flow.prefill(state, flow.embed(arrays["text_ids"]))
    start = state.position
    for i, latent in enumerate(arrays["step_inputs"]):
        bos = np.isnan(latent).all()
        out = flow.step(state, None if bos else latent)
        assert out.hidden.shape == (config.flow_lm.head_input_dim,)
        assert max_abs_error(arrays["step_hidden"][i], out.hidden) <= MAX_ABS_TOLERANCE
        assert abs(out.eos_logit - float(arrays["step_eos"][i])) <= MAX_ABS_TOLERANCE
    assert state.position == start + len(arrays["step_inputs"])


def test_nan_latent_means_bos(family):
    config, _weights, arrays, flow = family
    base = flow.new_state()
    flow.prefill(base, flow.embed(arrays["text_ids"]))
    a, b = base.copy(), base.copy()
    out_none = flow.step(a, None)
    out_nan = flow.step(b, np.full(config.flow_lm.latent_dim, np.nan, np.float32))
    np.testing.assert_array_equal(out_none.hidden, out_nan.hidden)


@pytest.mark.parametrize("name", FAMILIES)
def test_sampler_matches_upstream(name):
    config, weights, arrays, _flow = _family(name)
    sampler = Sampler(config, weights, steps=int(arrays["sampler_steps"]))
    for hidden, noise, latent in zip(
        arrays["sampler_hidden"], arrays["sampler_noise"], arrays["sampler_latent"], strict=True
    ):
        got = sampler.sample(hidden, noise)
        assert got.shape == (config.flow_lm.latent_dim,)
        assert got.dtype == np.float32
        assert max_abs_error(latent, got) <= MAX_ABS_TOLERANCE


def test_lsd_four_steps_matches_upstream():
    config, weights, arrays, _flow = _family("tiny_lsd")
    sampler = Sampler(config, weights, steps=int(arrays["sampler4_steps"]))
    assert sampler.steps == 4
    for hidden, noise, latent in zip(
        arrays["sampler4_hidden"], arrays["sampler4_noise"], arrays["sampler4_latent"], strict=True
    ):
        assert max_abs_error(latent, sampler.sample(hidden, noise)) <= MAX_ABS_TOLERANCE


def test_pointwise_is_noise_plus_the_drifting_output():
    config, weights, arrays, _flow = _family("tiny_small")
    assert config.flow_lm.sampler.type == "drifting"
    pointwise_config = dataclasses.replace(
        config,
        flow_lm=dataclasses.replace(
            config.flow_lm,
            sampler=dataclasses.replace(config.flow_lm.sampler, type="pointwise"),
        ),
    )
    drifting = Sampler(config, weights)
    pointwise = Sampler(pointwise_config, weights)
    hidden, noise = arrays["sampler_hidden"][0], arrays["sampler_noise"][0]
    np.testing.assert_allclose(
        pointwise.sample(hidden, noise), noise + drifting.sample(hidden, noise), atol=1e-6
    )


def test_sampler_rejects_wrong_shapes():
    config, weights, _arrays, _flow = _family("tiny_lsd")
    sampler = Sampler(config, weights)
    with pytest.raises(ValueError, match="noise must be"):
        sampler.sample(np.zeros(config.flow_lm.head_input_dim, np.float32), np.zeros(3))
    with pytest.raises(ValueError, match="sampler steps"):
        Sampler(config, weights, steps=0)


# -- state ------------------------------------------------------------------------------------


def test_state_is_a_flow_state_with_the_documented_default_capacity():
    _config, _weights, _arrays, flow = _family("tiny_lsd")
    state = flow.new_state()
    as_protocol: FlowState = state  # the structural type the engine relies on
    assert callable(as_protocol.copy)
    assert state.position == 0
    assert state.capacity == DEFAULT_CAPACITY == 376 + CHUNK_POSITIONS == 660


def test_capacity_overflow_is_a_clear_error_and_leaves_the_state_intact():
    config, _weights, arrays, flow = _family("tiny_lsd")
    state = flow.new_state(capacity=16)
    embeddings = flow.embed(arrays["text_ids"])  # 14 tokens
    flow.prefill(state, embeddings)
    flow.step(state, None)
    flow.step(state, None)
    before = state.copy()
    with pytest.raises(ContextOverflowError, match="capacity of 16"):
        flow.step(state, None)
    with pytest.raises(ContextOverflowError, match="16 positions are filled and 2 more"):
        flow.prefill(state, embeddings[:2])
    assert state.position == 16
    for a, b in zip(_filled(before), _filled(state), strict=True):
        np.testing.assert_array_equal(a, b)
    assert config.flow_lm.latent_dim == 32


def test_copy_is_independent_and_copies_only_the_filled_part():
    _config, _weights, arrays, flow = _family("tiny_lsd")
    state = flow.new_state()
    flow.prefill(state, flow.embed(arrays["text_ids"]))
    clone = state.copy()
    assert clone.position == state.position and clone.capacity == state.capacity
    assert not np.shares_memory(clone.keys, state.keys)
    first = flow.step(clone, None)
    assert clone.position == state.position + 1
    again = flow.step(state, None)  # the original did not see the clone's step
    np.testing.assert_array_equal(first.hidden, again.hidden)
    bigger = state.copy(capacity=2000)
    assert bigger.capacity == 2000 and bigger.position == state.position
    with pytest.raises(ValueError, match="below the filled length"):
        state.copy(capacity=3)


def test_bad_token_ids_and_embeddings_are_rejected():
    config, _weights, _arrays, flow = _family("tiny_lsd")
    rows = config.flow_lm.lookup_table.n_bins + 1
    with pytest.raises(ValueError, match="token ids must lie in"):
        flow.embed(np.array([0, rows]))
    with pytest.raises(ValueError, match="1-D integer"):
        flow.embed(np.array([0.5]))
    with pytest.raises(ValueError, match="embeddings must be"):
        flow.prefill(flow.new_state(), np.zeros((2, 5), np.float32))
    assert flow.embed(np.array([], np.int64)).shape == (0, config.flow_lm.transformer.d_model)
