"""The CoreML backend on Linux, with stand-in models that compute through the NumPy stages.

The stand-ins (``coreml_standins.py``) have the v2.1 input names and shapes and converter-style
output names numbered in a shuffled order; they keep no state, so the audio equals the NumPy
backend's only if the backend feeds every cache, position and Mimi tensor back correctly.
"""

from __future__ import annotations

import platform
from pathlib import Path

import numpy as np
import pytest
from coreml_standins import Setup, standin_loader, tiny_config

from pipecat_pocket_tts.devpack import tiny_config_dict
from pipecat_pocket_tts.engine import PocketTTS
from pipecat_pocket_tts.engine.backends import find_pack_files, resolve_backend_name
from pipecat_pocket_tts.engine.backends.coreml.backend import CoreMLBackend
from pipecat_pocket_tts.engine.backends.coreml.compiled_models import CompiledModel
from pipecat_pocket_tts.engine.backends.coreml.io_specs import mimi_state_layout
from pipecat_pocket_tts.engine.errors import (
    BackendUnavailableError,
    CloningUnavailableError,
    ContextOverflowError,
    PackFilesMissingError,
    VoiceFileError,
    WeightsMismatchError,
)
from pipecat_pocket_tts.engine.model.options import LoadOptions
from pipecat_pocket_tts.engine.voices.voice import Voice

TEXT = "Hello there, this is a small test of the voice."


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Setup:
    return Setup(tmp_path_factory.mktemp("coreml"), tiny_config())


def run_stages(backend, voice: Voice, ids: np.ndarray, frames: int, seed: int = 0):
    """Voice + text prefill, then ``frames`` step → sample → decode; returns the arrays."""
    state = backend.flow_state_from_voice(voice.kv)
    backend.prefill(state, backend.embed_text(ids))
    mimi = backend.new_mimi_state()
    rng = np.random.default_rng(seed)
    latent, latents, eos, audio = None, [], [], []
    for _ in range(frames):
        out = backend.step(state, latent)
        latent = backend.sample(out.hidden, (rng.standard_normal(32) * 0.6).astype(np.float32))
        latents.append(latent)
        eos.append(out.eos_logit)
        audio.append(backend.decode(mimi, latent))
    return np.array(latents), np.array(eos), np.concatenate(audio)


def test_stages_equal_numpy_across_the_mimi_ring(setup: Setup) -> None:
    """40 frames: the 256-slot Mimi attention ring wraps after 16 frames."""
    ids = np.arange(3, 40)
    ref = run_stages(setup.reference, setup.voice, ids, 40)
    got = run_stages(setup.backend, setup.voice, ids, 40)
    for expected, actual in zip(ref, got, strict=True):
        np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-5)
    assert np.abs(got[2]).max() > 0.01


@pytest.mark.parametrize("seed", [3, 11])
def test_engine_gives_the_same_audio_as_numpy(setup: Setup, seed: int) -> None:
    numpy_engine, coreml_engine = setup.engines()
    kwargs = {"seed": seed, "eos_threshold": 50.0, "max_frames": 24}
    expected = numpy_engine.synthesize(TEXT, **kwargs)
    actual = coreml_engine.synthesize(TEXT, **kwargs)
    assert actual.shape == expected.shape and actual.size >= 24 * 1920
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-5)
    streamed = np.concatenate([f.samples for f in coreml_engine.stream(TEXT, **kwargs)])
    np.testing.assert_array_equal(streamed, actual)


def test_first_step_sends_nan_then_the_sampled_latent(setup: Setup) -> None:
    setup.record()
    latents, _, _ = run_stages(setup.backend, setup.voice, np.arange(3, 9), 4)
    calls = setup.models.flowlm.calls
    setup.record(False)
    assert np.isnan(calls[0]["sequence"]).all()
    np.testing.assert_array_equal(calls[0]["bos_emb"], setup.reference.flow_lm.bos_emb)
    for k in range(1, 4):
        assert not np.isnan(calls[k]["sequence"]).any()
        np.testing.assert_array_equal(calls[k]["sequence"].reshape(-1), latents[k - 1])


def test_caches_and_positions_are_fed_back(setup: Setup) -> None:
    setup.record()
    run_stages(setup.backend, setup.voice, np.arange(3, 9), 5)
    prefill, step = setup.models.cond_prefill, setup.models.flowlm
    setup.record(False)
    voice_len, n = setup.voice.length, setup.config.num_layers
    assert [float(c["position0"][0]) for c in prefill.calls] == [voice_len]
    kv = setup.backend.io_specs.step.kv
    chain = [(prefill.results[0], setup.backend.io_specs.prefill.kv)] + [
        (r, kv) for r in step.results
    ]
    for k, call in enumerate(step.calls):
        previous, binding = chain[k]
        for i in range(n):
            np.testing.assert_array_equal(call[f"cache{i}"], previous[binding.cache_outputs[i]])
            np.testing.assert_array_equal(
                call[f"position{i}"], previous[binding.position_outputs[i]]
            )
            assert call[f"position{i}"][0] == voice_len + 6 + k
    # Layers hold different data, so a layer mix-up could not go unnoticed.
    last = step.calls[-1]
    assert not np.array_equal(last["cache0"], last["cache1"])


def test_all_mimi_state_tensors_are_fed_back(setup: Setup) -> None:
    setup.record()
    run_stages(setup.backend, setup.voice, np.arange(3, 9), 4)
    mimi = setup.models.mimi_decoder
    setup.record(False)
    layout = mimi_state_layout(setup.config)
    assert len(layout) == 24 and sum(s.size == 0 for s in layout) == 3
    specs = setup.backend.io_specs.mimi
    assert {name for _, name in specs.feedback} == {s.name for s in layout}
    for spec in layout:  # the first frame starts from zeros (no mimi_init_state files)
        assert mimi.calls[0][spec.name].shape == spec.shape
        assert not mimi.calls[0][spec.name].any()
    changed = set()
    for k in range(1, 4):
        for output, name in specs.feedback:
            np.testing.assert_array_equal(mimi.calls[k][name], mimi.results[k - 1][output])
            if mimi.calls[k][name].any():
                changed.add(name)
    assert {"upsample_partial", "attn0_cache", "attn1_offset", "conv_final_prev"} <= changed


@pytest.mark.parametrize(
    ("order", "heads_last", "mimi_naming"),
    [
        ("grouped", False, "suffixed"),
        ("interleaved", True, "anonymous"),
        ("grouped", True, "converter"),
    ],
)
def test_output_layouts_and_namings(
    tmp_path: Path, order: str, heads_last: bool, mimi_naming: str
) -> None:
    other = Setup(
        tmp_path,
        tiny_config_dict("standard"),
        order=order,
        heads_last=heads_last,
        mimi_naming=mimi_naming,
    )
    ids = np.arange(3, 20)
    ref = run_stages(other.reference, other.voice, ids, 18)
    got = run_stages(other.backend, other.voice, ids, 18)
    for expected, actual in zip(ref, got, strict=True):
        np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-5)


def test_24_layer_pack(tmp_path: Path) -> None:
    config = tiny_config()
    config["flow_lm"]["transformer"]["num_layers"] = 24
    deep = Setup(tmp_path, config)
    assert deep.backend.io_specs.step.kv.num_layers == 24
    state = deep.backend.flow_state_from_voice(deep.voice.kv)
    assert len(state.caches) == 24 and state.caches[23].shape[2] == 512
    numpy_engine, coreml_engine = deep.engines()
    kwargs = {"seed": 5, "eos_threshold": 50.0, "max_frames": 12}
    np.testing.assert_allclose(
        coreml_engine.synthesize(TEXT, **kwargs),
        numpy_engine.synthesize(TEXT, **kwargs),
        rtol=0,
        atol=1e-5,
    )
    with pytest.raises(WeightsMismatchError, match="24 layers"):
        CoreMLBackend(get_six_layer_config(), deep.models, deep.backend.constants)


def get_six_layer_config():
    from pipecat_pocket_tts.engine.model.config import ModelConfig

    return ModelConfig.from_dict("english", tiny_config())


@pytest.mark.parametrize(("window", "rows", "calls"), [(8, 20, [8, 8, 4]), (256, 300, [256, 44])])
def test_long_conditioning_is_windowed(
    setup: Setup, tmp_path: Path, window: int, rows: int, calls: list[int]
) -> None:
    from coreml_standins import cond_prefill_standin

    prefill = cond_prefill_standin(setup.reference, window=window)
    prefill.record = True
    models = type(setup.models)(
        prefill, setup.models.flowlm, setup.models.flow_decoder, setup.models.mimi_decoder
    )
    backend = CoreMLBackend(setup.config, models, setup.backend.constants)
    conditioning = (
        np.random.default_rng(1)
        .standard_normal((rows, setup.config.flow_lm.transformer.d_model))
        .astype(np.float32)
    )
    state = backend.new_flow_state()
    backend.prefill(state, conditioning)
    assert [int(c["valid_len"][0]) for c in prefill.calls] == calls
    assert [int(c["position0"][0]) for c in prefill.calls] == list(np.cumsum([0, *calls[:-1]]))
    assert state.position == rows
    expected = setup.reference.new_flow_state()
    setup.reference.prefill(expected, conditioning)
    got = backend.voice_from_flow_state(state)
    want = setup.reference.voice_from_flow_state(expected)
    for a, b in zip(got.keys + got.values, want.keys + want.values, strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-5)


def test_voice_is_copied_into_zeroed_512_slot_caches(setup: Setup) -> None:
    state = setup.backend.flow_state_from_voice(setup.voice.kv)
    length = setup.voice.length
    assert state.position == length and state.capacity == 512
    for i, cache in enumerate(state.caches):
        assert cache.shape == (2, 1, 512, 4, 16) and cache.dtype == np.float32
        np.testing.assert_array_equal(cache[0, 0, :length], setup.voice.kv.keys[i])
        np.testing.assert_array_equal(cache[1, 0, :length], setup.voice.kv.values[i])
        assert not cache[:, :, length:].any()
    copy = state.copy()
    copy.caches[0][0, 0, 0] += 1
    assert not np.array_equal(copy.caches[0], state.caches[0])
    back = setup.backend.voice_from_flow_state(state)
    np.testing.assert_array_equal(back.keys[1], setup.voice.kv.keys[1])


def test_context_limits_and_bad_inputs(setup: Setup) -> None:
    backend = setup.backend
    d = setup.config.flow_lm.transformer.d_model
    state = backend.new_flow_state()
    with pytest.raises(ContextOverflowError, match="512"):
        backend.prefill(state, np.zeros((513, d), np.float32))
    assert state.position == 0
    backend.prefill(state, np.zeros((512, d), np.float32))
    with pytest.raises(ContextOverflowError):
        backend.step(state, None)
    with pytest.raises(ValueError, match="token ids"):
        backend.embed_text(np.array([0, 10**6]))
    wrong = Voice.load(setup.pack.voice_path("alba"))
    wrong.kv.keys.pop()
    with pytest.raises(VoiceFileError):
        backend.flow_state_from_voice(wrong.kv)
    with pytest.raises(CloningUnavailableError, match="numpy"):
        backend.encode(np.zeros(1920, np.float32))


def test_from_pack_precision_and_compute_units(setup: Setup) -> None:
    loader = standin_loader(setup.models)
    CoreMLBackend.from_pack(setup.pack, model_loader=loader)
    assert loader.loaded == [
        ("cond_prefill.mlmodelc", "all"),
        ("flowlm_step.mlmodelc", "all"),
        ("flow_decoder_fused.mlmodelc", "all"),
        ("mimi_decoder.mlmodelc", "cpu-only"),
    ]
    loader.loaded.clear()
    backend = CoreMLBackend.from_pack(
        setup.pack,
        LoadOptions(
            backend="coreml",
            precision="int8",
            compute_units={"preset": "no-ane", "mimi": "cpu-gpu"},
        ),
        model_loader=loader,
    )
    assert backend.precision == "int8"
    assert loader.loaded == [
        ("cond_prefill.mlmodelc", "cpu-gpu"),
        ("flowlm_stepv2.mlmodelc", "cpu-gpu"),
        ("flow_decoder_fused.mlmodelc", "cpu-gpu"),
        ("mimi_decoder.mlmodelc", "cpu-gpu"),
    ]
    with pytest.raises(ValueError, match="precision"):
        CoreMLBackend.from_pack(setup.pack, LoadOptions(precision="fp8"), model_loader=loader)
    with pytest.raises(ValueError, match="preset"):  # refused as the options are made
        CoreMLBackend.from_pack(setup.pack, LoadOptions(compute_units="gpu"), model_loader=loader)
    with pytest.raises(TypeError, match="CoreML pack"):
        CoreMLBackend.from_pack(setup.numpy_pack, model_loader=loader)


def test_missing_model_folder(setup: Setup, tmp_path: Path) -> None:
    import shutil

    copy = shutil.copytree(setup.coreml_dir, tmp_path / "pack")
    shutil.rmtree(copy / "mimi_decoder.mlmodelc")
    pack = find_pack_files("english", model_dir=copy, backend_kind="coreml")
    with pytest.raises(PackFilesMissingError, match="mimi_decoder"):
        CoreMLBackend.from_pack(pack, model_loader=standin_loader(setup.models))


@pytest.mark.skipif(platform.system() == "Darwin", reason="checks the non-Apple behaviour")
def test_coreml_is_refused_off_apple(setup: Setup) -> None:
    assert resolve_backend_name("auto") == "numpy"
    with pytest.raises(BackendUnavailableError, match="backend='numpy'"):
        PocketTTS.load("english", backend="coreml", model_dir=setup.coreml_dir)
    with pytest.raises(BackendUnavailableError, match="Apple"):
        CompiledModel(setup.coreml_dir / "cond_prefill.mlmodelc")
    tts = PocketTTS.load("english", backend="auto", model_dir=setup.numpy_dir)
    assert tts.backend.name == "numpy"


def test_auto_prefers_coreml_only_where_a_pack_exists(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pipecat_pocket_tts.engine.backends as backends

    monkeypatch.setattr(backends, "coreml_unavailable_reason", lambda: None)  # "on a Mac"
    assert resolve_backend_name("auto") == "coreml"
    assert resolve_backend_name("auto", pack_name="french_24l") == "coreml"
    assert resolve_backend_name("auto", pack_name="dutch") == "numpy"
    assert resolve_backend_name("auto", pack_name="english_7m_2026-10") == "numpy"
    assert resolve_backend_name("auto", pack_name="english", model_dir=setup.coreml_dir) == "coreml"
    assert resolve_backend_name("auto", pack_name="english", model_dir=setup.numpy_dir) == "numpy"
    assert (
        resolve_backend_name("coreml", pack_name="dutch") == "coreml"
    )  # explicit: not second-guessed
