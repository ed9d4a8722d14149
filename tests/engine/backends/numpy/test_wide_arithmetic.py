"""Mimi in the CPU's widest arithmetic (``kernels/arithmetic.py``, ``kernels/bf16.py``) and
frame blocks (``decode_frames``): the choice at load, the kernel's arithmetic and
instruction, fidelity against fp32 frame by frame, and blocks decoding as their frames one by
one.

Every path this CPU supports runs; the bfloat16 path is skipped, saying why, on a CPU without
AVX512_BF16, where its fallback (fp32, and the error when asked for) is tested instead.
"""

from __future__ import annotations

import mimi_decoding
import numba
import numpy as np
import pytest
from mimi_decoding import (
    MIN_SNR_DB,
    frame_by_frame,
    in_blocks,
    level,
    quiet_latents,
    random_latents,
    tiny_family_audio,
)
from reference_fixtures import FAMILIES, snr_db

from pipecat_pocket_tts.engine import PocketTTS
from pipecat_pocket_tts.engine.backends.base import Backend
from pipecat_pocket_tts.engine.backends.numpy.kernels import arithmetic
from pipecat_pocket_tts.engine.backends.numpy.kernels import (
    bf16 as bf16_kernels,
)
from pipecat_pocket_tts.engine.backends.numpy.kernels.dispatch import window_product
from pipecat_pocket_tts.engine.backends.numpy.layers.linears import (
    from_bfloat16_bits,
    to_bfloat16_bits,
)
from pipecat_pocket_tts.engine.backends.numpy.layers.mimi import Mimi
from pipecat_pocket_tts.engine.errors import LoadOptionError
from pipecat_pocket_tts.engine.model.config import get_config

needs_bf16 = pytest.mark.skipif(
    arithmetic.bf16_kernels() is None,
    reason="this CPU has no AVX512_BF16 (or numba is missing): the bfloat16 path cannot run "
    "here; its fallback is tested by the tests without this mark",
)


@pytest.fixture
def full_mimi_weights() -> dict[str, np.ndarray]:
    return mimi_decoding.full_mimi_weights()


# -- the choice at load ------------------------------------------------------------------------
def test_without_the_arithmetic_auto_runs_fp32_and_asking_for_bf16_says_why(monkeypatch):
    monkeypatch.setattr(arithmetic, "bf16_kernels", lambda: None)  # a CPU without AVX512_BF16
    monkeypatch.setattr(arithmetic, "int16_kernels", lambda path=None: None)  # ... nor AVX2
    monkeypatch.delenv(arithmetic.ARITHMETIC_ENV, raising=False)
    assert arithmetic.choose_arithmetic(None, "int8") == "fp32"
    with pytest.raises(LoadOptionError, match="AVX512_BF16"):
        arithmetic.choose_arithmetic("bf16", "int8")
    monkeypatch.setenv(arithmetic.ARITHMETIC_ENV, "bf16")
    with pytest.raises(LoadOptionError, match="AVX512_BF16"):
        arithmetic.choose_arithmetic(None, "int8")


def test_an_unknown_arithmetic_is_a_named_error(monkeypatch):
    monkeypatch.setenv(arithmetic.ARITHMETIC_ENV, "fp8")
    with pytest.raises(LoadOptionError, match="mimi_arithmetic"):
        arithmetic.choose_arithmetic(None, "int8")


def test_the_old_environment_name_is_refused_naming_the_new_one(monkeypatch):
    monkeypatch.setenv(arithmetic.RENAMED_ENV, "fp32")
    with pytest.raises(LoadOptionError, match=arithmetic.ARITHMETIC_ENV):
        arithmetic.choose_arithmetic(None, "int8")


def test_fp32_precision_keeps_mimi_fp32_and_the_environment_overrides(monkeypatch):
    monkeypatch.delenv(arithmetic.ARITHMETIC_ENV, raising=False)
    assert arithmetic.choose_arithmetic(None, "fp32") == "fp32"  # parity with upstream untouched
    monkeypatch.setenv(arithmetic.ARITHMETIC_ENV, "fp32")
    assert arithmetic.choose_arithmetic(None, "int8") == "fp32"


@needs_bf16
def test_auto_takes_bf16_with_a_narrow_precision_and_the_model_says_so(
    engine_pack_dir, monkeypatch
):
    monkeypatch.delenv(arithmetic.ARITHMETIC_ENV, raising=False)
    # bf16 where int16 cannot run (a stand-in: every CPU with AVX512_BF16 has AVX2)
    monkeypatch.setattr(arithmetic, "int16_kernels", lambda path=None: None)
    assert arithmetic.choose_arithmetic(None, "int8") == "bf16"
    tts = PocketTTS.load(backend="numpy", model_dir=engine_pack_dir, precision="int8")
    assert tts.backend.mimi.arithmetic == "bf16"
    assert "vdpbf16ps" in tts.kernels["mimi"] and tts.kernels["flow_lm"].startswith("int8")


def test_fp32_models_say_their_kernels(engine_tts):
    assert engine_tts.kernels["mimi"].startswith("Mimi decoder: float32")


# -- the kernel ---------------------------------------------------------------------------------
@needs_bf16
@pytest.mark.parametrize(("rows", "depth", "columns"), [(4, 2, 32), (16, 512, 64), (8, 130, 96)])
def test_the_kernel_sums_bfloat16_products_in_float32(rows, depth, columns):
    rng = np.random.default_rng(rows)
    x = rng.standard_normal((rows, depth)).astype(np.float32)
    weight = rng.standard_normal((depth, columns)).astype(np.float32)
    packed = bf16_kernels.pack_bf16_columns(weight)
    out = window_product(x[None], rows, 1, 1, packed, None, arithmetic="bf16")[0]
    rounded_x = from_bfloat16_bits(to_bfloat16_bits(x)).reshape(x.shape)
    rounded_w = from_bfloat16_bits(to_bfloat16_bits(weight)).reshape(weight.shape)
    expected = rounded_x.astype(np.float64) @ rounded_w.astype(np.float64)
    assert np.abs(out - expected).max() <= 1e-5 * np.abs(expected).max()


@needs_bf16
def test_the_compiled_kernel_runs_the_bfloat16_dot_product_instruction():
    fresh = numba.njit(bf16_kernels.bf16_window_matmul.py_func)  # the cached one has no text
    packed = bf16_kernels.pack_bf16_columns(np.ones((2, 32), np.float32))
    fresh(np.ones((1, 4, 2), np.uint16), packed, np.zeros((1, 4, 32), np.float32))
    assembly = "".join(fresh.inspect_asm(signature) for signature in fresh.signatures)
    assert "vdpbf16ps" in assembly and "zmm" in assembly


# -- fidelity against fp32 frame by frame -------------------------------------------------------
@needs_bf16
def test_full_size_bf16_mimi_stays_within_the_bound_and_keeps_quiet_stretches_quiet(
    full_mimi_weights,
):
    # Random weights have no true silence: zero latents after loud ones give the quietest
    # stretch they can; no frame may get louder.
    config = get_config("english").mimi
    latents = quiet_latents()
    reference = frame_by_frame(Mimi(config, full_mimi_weights, arithmetic="fp32"), latents)[0]
    narrow = frame_by_frame(Mimi(config, full_mimi_weights, arithmetic="bf16"), latents)[0]
    assert snr_db(reference, narrow) >= MIN_SNR_DB
    quiet = level(reference) < np.median(level(reference))  # the quieter half
    assert np.all(level(narrow)[quiet] <= level(reference)[quiet] + 3.0)
    assert np.all(np.abs(level(narrow) - level(reference)) <= 0.1)  # measured: ≤ 0.01 dB


@needs_bf16
def test_full_size_random_weights_with_biases_stay_within_the_bound(full_mimi_weights):
    config = get_config("english").mimi
    latents = random_latents(24)
    reference = frame_by_frame(Mimi(config, full_mimi_weights, arithmetic="fp32"), latents)
    narrow = frame_by_frame(Mimi(config, full_mimi_weights, arithmetic="bf16"), latents)
    assert snr_db(reference, narrow) >= MIN_SNR_DB


@needs_bf16
@pytest.mark.parametrize("name", FAMILIES)
def test_each_tiny_family_stays_within_the_bound(name):
    audio = tiny_family_audio(name, ("fp32", "bf16"))
    assert snr_db(audio["fp32"], audio["bf16"]) >= MIN_SNR_DB


# -- frame blocks -------------------------------------------------------------------------------
@needs_bf16
def test_a_block_decodes_bit_for_bit_as_its_frames_in_bf16(full_mimi_weights):
    mimi = Mimi(get_config("english").mimi, full_mimi_weights, arithmetic="bf16")
    assert mimi.blocks_exact
    latents = random_latents(12, streams=3)
    np.testing.assert_array_equal(
        in_blocks(mimi, latents, (1, 3, 4, 2, 2)), frame_by_frame(mimi, latents)
    )


def test_fp32_blocks_match_frame_by_frame_within_float_rounding(full_mimi_weights):
    mimi = Mimi(get_config("english").mimi, full_mimi_weights, arithmetic="fp32")
    assert not mimi.blocks_exact  # the scheduler decodes fp32 frame by frame
    latents = random_latents(8, streams=2)
    frames = frame_by_frame(mimi, latents)
    assert snr_db(frames, in_blocks(mimi, latents, (3, 4, 1))) >= 110.0  # measured: ~123 dB


def test_a_backend_without_blocks_loops_its_frames(engine_tts):
    backend = engine_tts.backend
    latents = random_latents(5, streams=2)
    states = [backend.new_mimi_state() for _ in range(2)]
    looped = Backend.decode_frames(backend, states, latents)  # the default every backend has
    states = [backend.new_mimi_state() for _ in range(2)]
    one_by_one = np.stack([backend.decode_batch(states, latents[:, f]) for f in range(5)], 1)
    np.testing.assert_array_equal(looped, one_by_one)
