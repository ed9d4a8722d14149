"""The compiled layer kernels (numba: LayerNorm, GELU, RoPE, one step's attention) against the
NumPy code they stand in for, and a FlowLM step and a Mimi decode with and without them."""

from __future__ import annotations

import numpy as np
import pytest
from fresh_python import run_python
from reference_fixtures import FAMILIES, load_family, snr_db

from pipecat_pocket_tts.engine.backends.numpy.backend import NumpyBackend
from pipecat_pocket_tts.engine.backends.numpy.kernels import catalog as kernels
from pipecat_pocket_tts.engine.backends.numpy.kernels.base import X86_TARGET
from pipecat_pocket_tts.engine.backends.numpy.layers import blocks as layers
from pipecat_pocket_tts.engine.backends.numpy.layers import kv_cache
from pipecat_pocket_tts.engine.backends.numpy.weights.checkpoint import load_checkpoint


@pytest.fixture
def numpy_only(monkeypatch: pytest.MonkeyPatch):
    """Call ``numpy_only()`` to run the rest of a test with the NumPy layers."""
    assert layers._kernels is not None and kv_cache._kernels is not None, "numba is installed here"

    def switch() -> None:
        monkeypatch.setattr(layers, "_kernels", None)
        monkeypatch.setattr(kv_cache, "_kernels", None)

    return switch


def test_compiled_gelu_equals_numpys(numpy_only) -> None:
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((3, 1000)) * 4).astype(np.float32)
    x[0, :7] = [np.nan, -1e4, 1e4, -20.0, 0.0, -0.0, 1e-30]
    got = layers.gelu_tanh(x)
    strided = layers.gelu_tanh(x[:, ::3])
    numpy_only()
    expected = layers.gelu_tanh(x)
    assert np.isnan(got[0, 0]) and got.shape == x.shape and got.dtype == np.float32
    np.testing.assert_allclose(got[:, 1:], expected[:, 1:], rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(strided, layers.gelu_tanh(x[:, ::3]), rtol=2e-6, atol=1e-7)
    assert got[0, 2] == 1e4 and abs(got[0, 1]) < 1e-30


@pytest.mark.parametrize("affine", [True, False])
def test_compiled_layer_norm_equals_numpys(numpy_only, affine: bool) -> None:
    rng = np.random.default_rng(6)
    x = (rng.standard_normal((2, 5, 64)) * 3 + 1).astype(np.float32)
    weight = rng.standard_normal(64).astype(np.float32) if affine else None
    bias = rng.standard_normal(64).astype(np.float32) if affine else None
    if affine:  # weights memory-mapped from a checkpoint are read-only
        weight.flags.writeable = bias.flags.writeable = False
    got = layers.layer_norm(x, weight, bias, 1e-5)
    row = layers.layer_norm(x[0, 0], weight, bias, 1e-5)  # one vector, as a solo step has
    view = layers.layer_norm(x[:, ::2], weight, bias, 1e-5)  # not contiguous
    numpy_only()
    np.testing.assert_allclose(got, layers.layer_norm(x, weight, bias, 1e-5), atol=2e-6)
    np.testing.assert_allclose(row, got[0, 0], atol=2e-6)
    np.testing.assert_allclose(view, layers.layer_norm(x[:, ::2], weight, bias, 1e-5), atol=2e-6)
    assert got.shape == x.shape and row.shape == (64,)


def test_compiled_rope_equals_numpys(numpy_only) -> None:
    rng = np.random.default_rng(7)
    qkv = rng.standard_normal((5, 3 * 4 * 16)).astype(np.float32)
    pairs = qkv[:, : 2 * 4 * 16].reshape(5, 8, 16)  # a view with the rows' stride, as in FlowLM
    cos, sin = layers.rope_tables(np.arange(10, 15), 16, 10_000.0)
    got = layers.apply_rope(pairs, cos, sin)
    numpy_only()
    np.testing.assert_allclose(got, layers.apply_rope(pairs, cos, sin), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", FAMILIES)
def test_steps_with_the_compiled_attention_equal_numpys(numpy_only, name: str) -> None:
    # Every fixture family (GQA among them): the prefill and eight steps, solo and batched.
    config, weights_path, _tokenizer, _arrays = load_family(name)
    backend = NumpyBackend(config, load_checkpoint(weights_path, config))
    rng = np.random.default_rng(8)
    d = config.flow_lm.transformer.d_model
    prompts = [rng.standard_normal((n, d)).astype(np.float32) for n in (9, 14)]
    latents = rng.standard_normal((8, 2, config.flow_lm.latent_dim)).astype(np.float32)

    def run() -> np.ndarray:
        solo, pair = backend.new_flow_state(), [backend.new_flow_state() for _ in prompts]
        backend.prefill(solo, prompts[0])
        for state, prompt in zip(pair, prompts, strict=True):
            backend.prefill(state, prompt)
        out = []
        for step in latents:
            out.append(backend.step(solo, step[0]).hidden)
            out += [o.hidden for o in backend.step_batch(pair, list(step))]
        return np.stack(out)

    compiled = run()
    numpy_only()
    assert snr_db(run(), compiled) >= 100


def test_decode_with_the_compiled_layers_equals_numpys(numpy_only) -> None:
    config, weights_path, _tokenizer, _arrays = load_family(FAMILIES[0])
    backend = NumpyBackend(config, load_checkpoint(weights_path, config))
    latents = np.random.default_rng(9).standard_normal((6, config.flow_lm.latent_dim))

    def run() -> np.ndarray:
        state = backend.new_mimi_state()
        return np.concatenate([backend.decode(state, z.astype(np.float32)) for z in latents])

    compiled = run()
    numpy_only()
    assert snr_db(run(), compiled) >= 100


def _attention(q: np.ndarray, keys: np.ndarray, values: np.ndarray, scale: float) -> np.ndarray:
    """One position's attention in NumPy: q [H, Dh] over keys and values [kv_heads, P, Dh]."""
    group = q.shape[0] // keys.shape[0]
    scores = np.einsum("hd,hpd->hp", q, np.repeat(keys, group, axis=0)) * scale
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    return np.einsum("hp,hpd->hd", weights, np.repeat(values, group, axis=0))


@pytest.mark.parametrize("length", [1, 3, 4, 5, 9, 16, 23])
def test_attention_kernel_writes_the_entry_then_reads_only_the_filled_positions(length) -> None:
    # Positions past the one written (a cache's unfilled capacity) never reach the output;
    # lengths on and off the kernel's blocks of four positions; two query heads a kv head.
    rng = np.random.default_rng(10)
    q = rng.standard_normal((4, 8)).astype(np.float32)
    key, value = rng.standard_normal((2, 2, 8)).astype(np.float32)
    keys = rng.standard_normal((2, 30, 8)).astype(np.float32)
    values = rng.standard_normal((2, 30, 8)).astype(np.float32)
    position = length - 1
    out = np.empty((4, 8), np.float32)
    args = (position, np.float32(0.5), np.empty(length, np.float32))
    kernels.store_and_attend(q, key, value, keys, values, *args, out)
    np.testing.assert_array_equal(keys[:, position], key)
    np.testing.assert_array_equal(values[:, position], value)
    expected = _attention(q, keys[:, :length], values[:, :length], 0.5)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    keys[:, length:], values[:, length:] = np.nan, np.nan
    again = np.empty_like(out)
    kernels.store_and_attend(q, key, value, keys, values, *args, again)
    np.testing.assert_array_equal(out, again)


def test_attention_kernel_stores_a_bfloat16_entry_as_the_prefill_does() -> None:
    # The step's write and the prefill's (``store_bfloat16``) round every value alike, NaN,
    # infinities, -0, subnormals and ties among them; the attention reads the cache widened.
    rng = np.random.default_rng(11)
    key = rng.standard_normal((2, 8)).astype(np.float32)
    key[0, :7] = [np.nan, np.inf, -np.inf, -0.0, 1e-40, 1.0 + 2**-8, 1.0 + 3 * 2**-8]
    value = -key
    q = rng.standard_normal((2, 8)).astype(np.float32)
    stepped = np.zeros((2, 2, 12, 8), np.uint16)
    prefilled = np.zeros_like(stepped)
    out = np.empty((2, 8), np.float32)
    kernels.store_and_attend(
        q, key, value, stepped[0], stepped[1], 6, np.float32(0.5), np.empty(7, np.float32), out
    )
    kernels.store_bfloat16(key[None], prefilled[0], 6)
    kernels.store_bfloat16(value[None], prefilled[1], 6)
    np.testing.assert_array_equal(stepped, prefilled)
    finite = np.abs(key).max(axis=1) < np.inf
    widened = (stepped.astype(np.uint32) << 16).view(np.float32)
    expected = _attention(q, widened[0, :, :7], widened[1, :, :7], 0.5)
    np.testing.assert_allclose(out[finite], expected[finite], rtol=1e-5, atol=1e-6)


AVX2_ATTENTION = """
import numpy as np
from pipecat_pocket_tts.engine.backends.numpy.kernels import catalog
rng = np.random.default_rng(0)
q = rng.standard_normal((4, 64)).astype(np.float32)
entry = rng.standard_normal((2, 64)).astype(np.float32)
keys, values = np.zeros((2, 2, 20, 64), np.uint16)
keys[:, :9] = rng.integers(0x3C00, 0x4000, (2, 9, 64))
values[:, :9] = rng.integers(0xBC00, 0xC000, (2, 9, 64))
prefilled = keys.copy()
catalog.store_bfloat16(entry[None], prefilled, 9)
out, scratch = np.empty((4, 64), np.float32), np.empty(10, np.float32)
catalog.store_and_attend(q, entry, entry, keys, values, 9, np.float32(0.125), scratch, out)
np.testing.assert_array_equal(keys, prefilled)
wide = lambda bits: (bits[:, :10].astype(np.uint32) << 16).view(np.float32)
k, v = np.repeat(wide(keys), 2, 0), np.repeat(wide(values), 2, 0)
scores = np.einsum("hd,hpd->hp", q, k) * 0.125
weights = np.exp(scores - scores.max(-1, keepdims=True))
weights /= weights.sum(-1, keepdims=True)
np.testing.assert_allclose(out, np.einsum("hp,hpd->hd", weights, v), rtol=1e-5, atol=1e-6)
"""


@pytest.mark.skipif(not X86_TARGET, reason="Haswell is an x86 CPU: numba compiles for aarch64 here")
def test_on_an_avx2_build_one_steps_write_and_attention_are_right():
    """In a fresh interpreter compiling for Haswell (AVX2, no AVX-512): the step's entry is
    stored as the prefill stores it, and the attention equals NumPy's on the widened cache."""
    settings = {"NUMBA_CPU_NAME": "haswell", "NUMBA_CPU_FEATURES": "+avx2,+fma"}
    run_python(AVX2_ATTENTION, settings)
