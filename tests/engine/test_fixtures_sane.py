"""The golden upstream fixtures load, parse with our config module and match the contract."""

from __future__ import annotations

import numpy as np
import pytest
import sentencepiece as spm
from reference_fixtures import (
    FAMILIES,
    FIXTURES_DIR,
    load_family,
    max_abs_error,
    snr_db,
)
from safetensors.numpy import load_file

FRAME = 1920
LATENT = 32
FLOAT_KEYS_MAY_HOLD_NAN = {"step_inputs"}


@pytest.fixture(scope="module", params=FAMILIES)
def family(request: pytest.FixtureRequest):
    return request.param, *load_family(request.param)


def test_every_family_is_small_and_complete() -> None:
    for name in FAMILIES:
        folder = FIXTURES_DIR / name
        names = {p.name for p in folder.iterdir()}
        core = {"config.json", "model.safetensors", "tokenizer.model", "stages.npz"}
        assert core <= names
        size = sum((folder / n).stat().st_size for n in core)
        assert size < 1.5e6, f"{name} is {size / 1e6:.2f} MB"
        extras = names - core - {"__pycache__"}
        assert extras <= {"cloning.npz", "timestamps.json"}, f"unexpected files in {name}: {extras}"
        if extras:
            extra_size = sum((folder / n).stat().st_size for n in extras)
            assert extra_size < 0.2e6, f"{name} extras are {extra_size / 1e6:.2f} MB"


def test_config_and_tokenizer(family) -> None:
    name, config, _weights, tokenizer_path, arrays = family
    assert config.name == name
    processor = spm.SentencePieceProcessor(model_file=str(tokenizer_path))
    assert processor.vocab_size() == config.flow_lm.lookup_table.n_bins
    ids = arrays["text_ids"]
    assert ids.dtype == np.int64 and ids.ndim == 1 and len(ids) > 0
    assert ids.max() < config.flow_lm.lookup_table.n_bins


def test_weights_match_config(family) -> None:
    _name, config, weights, _tok, _arrays = family
    tensors = load_file(str(weights))
    flow = config.flow_lm
    d_model = flow.transformer.d_model
    assert all(t.dtype == np.float32 for t in tensors.values())
    assert all(np.isfinite(t).all() for t in tensors.values())
    rows = flow.lookup_table.rank or flow.lookup_table.dim
    assert tensors["flow_lm.conditioner.embed.weight"].shape == (flow.lookup_table.n_bins + 1, rows)
    kv_width = (
        flow.transformer.query_dim + 2 * flow.transformer.kv_heads * flow.transformer.head_dim
    )
    in_proj = tensors["flow_lm.transformer.layers.0.self_attn.in_proj.weight"]
    assert in_proj.shape == (kv_width, d_model)
    latent_width = config.mimi.inner_dim or config.mimi.seanet.dimension
    assert tensors["flow_lm.speaker_proj_weight"].shape == (d_model, latent_width)
    assert ("flow_lm.bos_before_voice" in tensors) == flow.insert_bos_before_voice
    assert ("flow_lm.z_proj.weight" in tensors) == (flow.z_dim is not None)
    # Perturbed: no parameter left at a constant value (the sinusoid `freqs` tables are fixed).
    for key, tensor in tensors.items():
        if tensor.size > 1 and not key.endswith(".freqs"):
            assert np.ptp(tensor) > 0, f"{key} is constant"


def test_stage_shapes(family) -> None:
    _name, config, _weights, _tok, a = family
    flow = config.flow_lm
    d_model, head = flow.transformer.d_model, flow.head_input_dim
    layers, kv_heads, head_dim = (
        flow.transformer.num_layers,
        flow.transformer.kv_heads,
        (flow.transformer.head_dim),
    )
    n = len(a["text_ids"])
    assert a["text_embeddings"].shape == (n, d_model)
    assert a["voice_audio"].ndim == 1 and a["voice_audio"].size % FRAME == 0
    frames = a["voice_audio"].size // FRAME
    latent_width = config.mimi.inner_dim or config.mimi.seanet.dimension
    assert a["voice_latents"].shape == (frames, latent_width)
    assert a["voice_conditioning"].shape == (frames, d_model)
    prefix = frames + int(flow.insert_bos_before_voice)
    for kind in ("k", "v"):
        assert a[f"voice_{kind}"].shape == (layers, prefix, kv_heads, head_dim)
        assert a[f"text_{kind}"].shape == (layers, prefix + n, kv_heads, head_dim)
        np.testing.assert_array_equal(a[f"text_{kind}"][:, :prefix], a[f"voice_{kind}"])
    steps = a["step_inputs"].shape[0]
    assert a["step_inputs"].shape == (steps, LATENT)
    assert a["step_hidden"].shape == (steps, head) and a["step_eos"].shape == (steps,)
    rows = a["sampler_hidden"].shape[0]
    assert a["sampler_hidden"].shape == (rows, head)
    assert a["sampler_noise"].shape == a["sampler_latent"].shape == (rows, LATENT)
    assert a["sampler_steps"].dtype == np.int64 and int(a["sampler_steps"]) >= 1
    for key in a:
        if key.startswith("sampler") and key.endswith("_steps") and key != "sampler_steps":
            extra = key.removesuffix("_steps")
            assert a[f"{extra}_hidden"].shape[1] == head
            assert a[f"{extra}_noise"].shape == a[f"{extra}_latent"].shape
    f = a["mimi_latents"].shape[0]
    assert f >= 20 and a["mimi_latents"].shape == (f, LATENT)
    assert a["mimi_audio"].shape == (f, FRAME)
    g = a["gen_latents"].shape[0]
    assert g >= 20 and a["gen_latents"].shape == (g, LATENT)
    assert a["gen_eos_logits"].shape == (g,) and a["gen_audio"].shape == (g * FRAME,)


def test_sampler_step_counts() -> None:
    assert int(load_family("tiny_lsd")[3]["sampler4_steps"]) == 4
    assert int(load_family("tiny_flow_matching")[3]["sampler_steps"]) == 16


def test_no_nan_but_the_bos_row(family) -> None:
    _name, _config, _weights, _tok, arrays = family
    for key, value in arrays.items():
        if value.dtype.kind != "f":
            continue
        if key in FLOAT_KEYS_MAY_HOLD_NAN:
            assert np.isnan(value[0]).all(), "step_inputs row 0 must be NaN (BOS)"
            assert np.isfinite(value[1:]).all()
        else:
            assert np.isfinite(value).all(), f"{key} has NaN/inf"


def test_audio_is_not_silent_nor_clipping(family) -> None:
    _name, _config, _weights, _tok, arrays = family
    for key in ("voice_audio", "mimi_audio", "gen_audio"):
        audio = arrays[key].reshape(-1)
        rms = float(np.sqrt(np.mean(audio**2)))
        assert 0.02 < rms < 0.5, f"{key} rms {rms}"
        assert np.abs(audio).max() < 1.0, f"{key} clips"
        assert abs(float(audio.mean())) < 0.5 * rms, f"{key} is mostly a DC offset"


def test_first_step_is_shared_by_steps_and_generation(family) -> None:
    """Both start from the same text-prefilled state with a BOS input."""
    _name, _config, _weights, _tok, a = family
    assert max_abs_error(a["step_hidden"][0], a["gen_hidden"][0]) == 0.0
    assert a["step_eos"][0] == a["gen_eos_logits"][0]


def test_helpers() -> None:
    x = np.linspace(-1, 1, 100, dtype=np.float32)
    assert snr_db(x, x) == float("inf")
    assert abs(snr_db(x, x * 1.001) - 60.0) < 0.01
    with pytest.raises(ValueError):
        snr_db(x, x[:10])
    ref = np.array([[np.nan, np.nan], [1.0, 2.0]])
    assert max_abs_error(ref, np.array([[5.0, 5.0], [1.0, 2.5]])) == 0.5
    with pytest.raises(FileNotFoundError):
        load_family("no_such_family")
