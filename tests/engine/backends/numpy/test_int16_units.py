"""int16 dot products on AVX512_VNNI (``int16_kernels.py``): Mimi's decoder on ``"int16"``
units (its transformer's linears and its convs), the FlowLM's int8 linears on ``vpdpwssd``, the
choice of either at load, and their fidelity against fp32 frame by frame.

Every path this CPU supports runs; the VNNI paths are skipped, saying why, on a CPU without
AVX512_VNNI, where the fallback (the choice and the errors) is tested instead.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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

from pipecat_pocket_tts.devpack import random_weights
from pipecat_pocket_tts.engine import PocketTTS
from pipecat_pocket_tts.engine.backends.numpy.backend import NumpyBackend
from pipecat_pocket_tts.engine.backends.numpy.kernels import arithmetic as wide_units
from pipecat_pocket_tts.engine.backends.numpy.kernels import base as kernel_base
from pipecat_pocket_tts.engine.backends.numpy.kernels import compiled
from pipecat_pocket_tts.engine.backends.numpy.layers import linears
from pipecat_pocket_tts.engine.backends.numpy.layers.mimi import Mimi
from pipecat_pocket_tts.engine.backends.numpy.layers.streaming_conv import (
    StreamingConv1d,
    StreamingConvTranspose1d,
    window_product,
)
from pipecat_pocket_tts.engine.errors import LoadOptionError
from pipecat_pocket_tts.engine.model.config import get_config

needs_vnni = pytest.mark.skipif(
    wide_units.int16_kernels() is None,
    reason="this CPU has no AVX512_VNNI (or numba is missing): the int16 paths cannot run "
    "here; their fallback is tested by the tests without this mark",
)
needs_both = pytest.mark.skipif(
    wide_units.int16_kernels() is None or wide_units.bf16_kernels() is None,
    reason="this CPU lacks AVX512_VNNI or AVX512_BF16: int16 and bf16 cannot be compared here",
)


@pytest.fixture
def full_mimi_weights() -> dict[str, np.ndarray]:
    return mimi_decoding.full_mimi_weights()


# -- the choice at load ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("bf16", "int16", "best"),
    [(True, True, "int16"), (True, False, "bf16"), (False, True, "int16"), (False, False, "fp32")],
)
def test_auto_takes_the_best_units_the_cpu_has(monkeypatch, bf16, int16, best):
    monkeypatch.setattr(wide_units, "bf16_kernels", lambda: object() if bf16 else None)
    monkeypatch.setattr(wide_units, "int16_kernels", lambda: object() if int16 else None)
    monkeypatch.delenv(wide_units.UNITS_ENV, raising=False)
    assert wide_units.choose_units(None, "int8") == best
    assert wide_units.choose_units(None, "fp32") == "fp32"  # parity with upstream untouched


def test_asking_for_int16_without_vnni_names_the_flag(monkeypatch):
    monkeypatch.setattr(wide_units, "int16_kernels", lambda: None)  # a CPU without AVX512_VNNI
    with pytest.raises(LoadOptionError, match="AVX512_VNNI"):
        wide_units.choose_units("int16", "int8")
    monkeypatch.setenv(wide_units.UNITS_ENV, "int16")
    with pytest.raises(LoadOptionError, match="AVX512_VNNI"):
        wide_units.choose_units(None, "int8")


def test_int16_units_say_what_runs():
    said = wide_units.describe_units("int16")
    assert "vpdpwssd" in said and "transformer" in said and "frame blocks" in said


@needs_vnni
def test_an_int8_model_runs_int16_units_and_says_so(engine_pack_dir, monkeypatch):
    monkeypatch.delenv(wide_units.UNITS_ENV, raising=False)
    tts = PocketTTS.load(backend="numpy", model_dir=engine_pack_dir, precision="int8")
    assert tts.backend.mimi.units == "int16"
    assert "vpdpwssd" in tts.kernels["mimi"] and "AVX512_VNNI" in tts.kernels["flow_lm"]


# -- the window kernel --------------------------------------------------------------------------
def _quantized(x: np.ndarray) -> np.ndarray:
    """x [B, L, C] as the kernel reads it: each row's codes times its scale."""
    from pipecat_pocket_tts.engine.backends.numpy.kernels import int16 as int16_kernels

    codes = np.empty(x.shape, np.int16)
    scales = np.empty(x.shape[:2], np.float32)
    int16_kernels.quantize_rows(x, codes, scales)
    return codes.astype(np.float64) * scales[..., None].astype(np.float64)


@needs_vnni
@pytest.mark.parametrize(
    ("batch", "rows", "channels", "taps", "step", "columns"),
    [(1, 2, 32, 3, 1, 32), (3, 2, 64, 2, 2, 64), (5, 7, 32, 1, 1, 96), (2, 16, 512, 7, 1, 64)],
)
def test_the_kernel_sums_each_tap_at_its_rows_scale(batch, rows, channels, taps, step, columns):
    """Windows spanning rows of different loudness, across streams (B · rows not a multiple of
    the tile), every product exact in int32: the output is the float64 product of the
    quantized operands within float32 rounding."""
    from pipecat_pocket_tts.engine.backends.numpy.kernels import int16 as int16_kernels

    rng = np.random.default_rng(rows * channels)
    length = (rows - 1) * step + taps
    loudness = rng.uniform(1e-3, 30.0, (batch, length, 1)).astype(np.float32)
    x = rng.standard_normal((batch, length, channels)).astype(np.float32) * loudness
    weight = rng.standard_normal((taps * channels, columns)).astype(np.float32)
    packed = wide_units.Int16Weight(*int16_kernels.pack_int16_columns(weight, channels))
    bias = rng.standard_normal(columns).astype(np.float32)
    out = window_product(x, rows, step, taps, packed, bias, "int16")
    blocks, pairs, _ = packed.codes.shape  # int16 pairs: (row 2p, row 2p + 1) per column
    codes = packed.codes.view(np.int16).reshape(blocks, pairs, 32, 2).transpose(1, 3, 0, 2)
    codes = codes.reshape(2 * pairs, blocks * 32).astype(np.float64) * packed.scales
    q = _quantized(x)
    expected = (
        bias
        + np.stack(
            [
                np.stack([q[b, r * step : r * step + taps].reshape(-1) for r in range(rows)])
                for b in range(batch)
            ]
        )
        @ codes
    )
    assert np.abs(out - expected).max() <= 2e-6 * np.abs(expected).max()
    plain = (
        np.stack(
            [
                np.stack([x[b, r * step : r * step + taps].reshape(-1) for r in range(rows)])
                for b in range(batch)
            ]
        ).astype(np.float64)
        @ weight
        + bias
    )
    assert snr_db(plain, out) >= 60.0  # 13-bit rows, 16-bit columns: ~72 dB on noise


@needs_vnni
def test_no_sum_can_wrap_at_the_largest_codes():
    """Inputs and weights all at their largest: every flush holds the most a sum can, and the
    column's scale keeps it inside int32 (a wrap would flip the sign)."""
    from pipecat_pocket_tts.engine.backends.numpy.kernels import int16 as int16_kernels

    channels, taps, columns = 512, 7, 32
    for sign in (1.0, -1.0):
        weight = np.full((taps * channels, columns), sign, np.float32)
        packed = wide_units.Int16Weight(*int16_kernels.pack_int16_columns(weight, channels))
        x = np.full((1, 4 + taps - 1, channels), 1.0, np.float32)
        out = window_product(x, 4, 1, taps, packed, None, "int16")
        np.testing.assert_allclose(out, sign * taps * channels, rtol=1e-3)


@needs_vnni
def test_a_row_holding_nan_or_infinity_gives_nan_where_it_is_read():
    from pipecat_pocket_tts.engine.backends.numpy.kernels import int16 as int16_kernels

    x = np.ones((1, 6, 32), np.float32)
    x[0, 4, 3] = np.nan
    x[0, 1] = 0.0  # a silent row: scale 0, codes 0, no NaN
    packed = wide_units.Int16Weight(
        *int16_kernels.pack_int16_columns(np.ones((3 * 32, 32), np.float32), 32)
    )
    out = window_product(x, 4, 1, 3, packed, None, "int16")  # window r reads rows r … r + 2
    assert np.isfinite(out[0, :2]).all() and np.isnan(out[0, 2:]).all()
    np.testing.assert_allclose(out[0, 0], 2 * 32, rtol=1e-3)


@needs_vnni
def test_the_compiled_kernels_run_the_vnni_instruction():
    from pipecat_pocket_tts.engine.backends.numpy.kernels import int16 as int16_kernels

    fresh = numba.njit(int16_kernels.int16_window_matmul.py_func)  # the cached one has no text
    codes, scales = int16_kernels.pack_int16_columns(np.ones((32, 32), np.float32), 32)
    fresh(
        np.ones((1, 4, 32), np.int16),
        codes,
        np.zeros((1, 4, 32), np.float32),
        np.ones((1, 4), np.float32),
        scales,
        1,
        32,
    )
    assembly = "".join(fresh.inspect_asm(signature) for signature in fresh.signatures)
    assert "vpdpwssd" in assembly and "zmm" in assembly


@needs_vnni
def test_the_warm_up_compiled_every_int16_kernel_a_decode_runs():
    """In a fresh interpreter: convs and a transposed conv on int16, batched and solo, and int8
    linears on weights writable and read-only, compile nothing after the warm-up at load."""
    script = """
import numpy as np
from pipecat_pocket_tts.engine.backends.numpy.kernels import arithmetic as wide_units
from pipecat_pocket_tts.engine.backends.numpy.kernels import int16 as int16_kernels
from pipecat_pocket_tts.engine.backends.numpy.layers.streaming_conv import (
    StreamingConv1d, StreamingConvTranspose1d)
wide_units.int16_kernels()  # what a load does
kernels = (
    int16_kernels.int16_window_matmul, int16_kernels.quantize_rows, int16_kernels.int8_matmul_vnni
)
at_load = [set(k.signatures) for k in kernels]
rng = np.random.default_rng(0)
weight = rng.standard_normal((32, 32, 3)).astype(np.float32)
conv = StreamingConv1d(weight, np.zeros(32, np.float32))
one = StreamingConv1d(rng.standard_normal((64, 32, 1)).astype(np.float32), None)
up = StreamingConvTranspose1d(rng.standard_normal((32, 32, 4)).astype(np.float32), None, stride=2)
for layer in (conv, one, up):
    assert layer.use_int16()
x = np.ones((2, 4, 32), np.float32)
conv.call_batch(x, [conv.initial_history()] * 2, activate=True)
conv(x[0], conv.initial_history())
one.call_batch(x, [one.initial_history()] * 2)
up.call_batch(x, [up.initial_partial()] * 2, activate=True)
from pipecat_pocket_tts.engine.backends.numpy.layers.linears import make_linear, restore_linear
linear = make_linear(rng.standard_normal((64, 1024)).astype(np.float32), "int8")
arrays = {name: array.copy() for name, array in linear.arrays().items()}
for array in arrays.values():
    array.flags.writeable = False  # as memory-mapped from the narrow cache
for each in (linear, restore_linear("int8", arrays)):
    for rows in (1, 6, 16):
        each(np.ones((rows, 1024), np.float32))
added = [set(k.signatures) - before for k, before in zip(kernels, at_load)]
assert not any(added), added
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]


# -- fidelity against fp32 frame by frame -------------------------------------------------------
@needs_vnni
def test_full_size_int16_mimi_stays_within_the_bound_and_quiet_stays_quiet(full_mimi_weights):
    config = get_config("english").mimi
    for latents in (random_latents(24), quiet_latents()):
        reference = frame_by_frame(Mimi(config, full_mimi_weights, units="fp32"), latents)[0]
        wide = frame_by_frame(Mimi(config, full_mimi_weights, units="int16"), latents)[0]
        assert snr_db(reference, wide) >= 60.0  # measured: 63.0 random, 62.1 quiet
        assert np.all(np.abs(level(wide) - level(reference)) <= 0.1)  # measured: ≤ 0.01 dB


@needs_vnni
def test_int16_mimi_is_never_below_todays_int8_path():
    """Today's int8 path (the int8 FlowLM, Mimi float32) against fp32, teacher-forced step by
    step on the full-size random pack: its audio's SNR (measured 58.6 dB) is the floor the
    int16 Mimi must stay above on random and on quiet latents."""
    config = get_config("english")
    weights = random_weights(config, seed=1)
    exact = NumpyBackend(config, weights, precision="fp32", mimi_units="fp32")
    narrow = NumpyBackend(config, weights, precision="int8", mimi_units="fp32")
    rng = np.random.default_rng(0)
    prompt = rng.standard_normal((60, config.flow_lm.transformer.d_model)).astype(np.float32)
    states = [exact.new_flow_state(), narrow.new_flow_state()]
    for backend, state in zip((exact, narrow), states, strict=True):
        backend.prefill(state, prompt * np.float32(0.1))
    latent, pairs = None, []
    for _ in range(12):
        noise = (rng.standard_normal(config.flow_lm.latent_dim) * 0.7).astype(np.float32)
        outputs = [b.step(s, latent) for b, s in zip((exact, narrow), states, strict=True)]
        pairs.append(
            [b.sample(o.hidden, noise) for b, o in zip((exact, narrow), outputs, strict=True)]
        )
        latent = pairs[-1][0]  # both step on the fp32 latent: one step's error at a time
    audio = []
    for which in range(2):
        mimi_state = exact.new_mimi_state()
        audio.append(np.concatenate([exact.decode(mimi_state, pair[which]) for pair in pairs]))
    floor = snr_db(audio[0], audio[1])
    mimi = {k[len("mimi.") :]: v for k, v in weights.items() if k.startswith("mimi.")}
    for latents in (random_latents(24), quiet_latents()):
        reference = frame_by_frame(Mimi(config.mimi, mimi, units="fp32"), latents)[0]
        wide = frame_by_frame(Mimi(config.mimi, mimi, units="int16"), latents)[0]
        assert snr_db(reference, wide) >= floor


@needs_both
def test_int16_is_never_below_bf16(full_mimi_weights):
    config = get_config("english").mimi
    for latents in (random_latents(24), quiet_latents()):
        reference = frame_by_frame(Mimi(config, full_mimi_weights, units="fp32"), latents)[0]
        scores = {
            units: snr_db(
                reference, frame_by_frame(Mimi(config, full_mimi_weights, units=units), latents)[0]
            )
            for units in ("bf16", "int16")
        }
        assert scores["int16"] >= scores["bf16"]  # measured: 63.0 / 50.0, 62.1 / 46.2


@needs_vnni
@pytest.mark.parametrize("name", FAMILIES)
def test_each_tiny_family_stays_within_the_bound(name):
    audio = tiny_family_audio(name, ("fp32", "int16"))
    assert snr_db(audio["fp32"], audio["int16"]) >= MIN_SNR_DB


@needs_vnni
def test_a_block_decodes_bit_for_bit_as_its_frames_on_int16_units(full_mimi_weights):
    mimi = Mimi(get_config("english").mimi, full_mimi_weights, units="int16")
    assert mimi.blocks_exact  # each input row quantized alone, each window summed alone
    latents = random_latents(12, streams=3)
    np.testing.assert_array_equal(
        in_blocks(mimi, latents, (1, 3, 4, 2, 2)), frame_by_frame(mimi, latents)
    )


def test_convs_that_do_not_pack_stay_float32():
    """A conv one channel wide (Mimi's last) or dilated keeps the float32 paths."""
    rng = np.random.default_rng(0)
    last = StreamingConv1d(rng.standard_normal((1, 64, 3)).astype(np.float32), None)
    dilated = StreamingConv1d(rng.standard_normal((32, 64, 3)).astype(np.float32), None, dilation=2)
    depthwise = StreamingConvTranspose1d(
        rng.standard_normal((32, 1, 4)).astype(np.float32), None, stride=2, groups=32
    )
    assert not any(layer.use_int16() for layer in (last, dilated, depthwise))


# -- the FlowLM's int8 linears on vpdpwssd ------------------------------------------------------
@needs_vnni
@pytest.mark.parametrize("rows", [1, 3, 4, 6, 16])
@pytest.mark.parametrize("depth", [512, 4096])
def test_the_vnni_int8_matmul_matches_the_avx2_one(rows, depth):
    """The same integer products; up to 512 inputs the same float32 bits (one int32 sum either
    way), beyond that within float32 rounding (AVX2 adds its 512-input sums in float32)."""
    from pipecat_pocket_tts.engine.backends.numpy.kernels import int16 as int16_kernels

    kernels = compiled.required()
    rng = np.random.default_rng(rows + depth)
    codes, scales = linears.quantize_int8(rng.standard_normal((64, depth)).astype(np.float32))
    x = rng.standard_normal((rows, depth)).astype(np.float32)
    avx2, vnni = np.empty((rows, 64), np.float32), np.empty((rows, 64), np.float32)
    kernels.int8_matmul_int16(x, codes, scales, avx2)
    int16_kernels.int8_matmul_vnni(x, codes, scales, vnni)
    if depth <= 512:
        np.testing.assert_array_equal(vnni, avx2)
    else:
        assert np.abs(vnni - avx2).max() <= 1e-6 * np.abs(avx2).max()
    x[rows - 1, 5] = np.nan  # NaN stays NaN (the float kernel), in its row only
    int16_kernels.int8_matmul_vnni(x, codes, scales, vnni)
    assert np.isnan(vnni[rows - 1]).all()


@needs_vnni
def test_int8_linears_take_vnni_by_default_and_the_environment_overrides(monkeypatch):
    from pipecat_pocket_tts.engine.backends.numpy.kernels import int16 as int16_kernels

    weight = np.random.default_rng(0).standard_normal((64, 1024)).astype(np.float32)
    monkeypatch.delenv(linears.INT8_KERNEL_ENV, raising=False)
    assert linears.make_linear(weight, "int8")._matmul is int16_kernels.int8_matmul_vnni
    assert "AVX512_VNNI" in linears.how_linears_run("int8")
    monkeypatch.setenv(linears.INT8_KERNEL_ENV, "avx2")
    assert linears.make_linear(weight, "int8")._matmul is compiled.required().int8_matmul
    assert "(AVX2)" in linears.how_linears_run("int8")


def test_the_int8_kernel_choice_names_what_is_missing(monkeypatch):
    monkeypatch.setattr(linears, "int16_kernels", lambda: None)  # a CPU without AVX512_VNNI
    monkeypatch.setenv(linears.INT8_KERNEL_ENV, "vnni")
    with pytest.raises(LoadOptionError, match="AVX512_VNNI"):
        linears.choose_int8_kernel()
    monkeypatch.setenv(linears.INT8_KERNEL_ENV, "auto")
    assert linears.choose_int8_kernel() in ("avx2", "float")
    monkeypatch.setenv(linears.INT8_KERNEL_ENV, "sse")
    with pytest.raises(LoadOptionError, match=linears.INT8_KERNEL_ENV):
        linears.choose_int8_kernel()


def test_this_file_runs_every_path_the_cpu_supports():
    """The marks above skip only what this CPU lacks (the flags the machine reports; on
    aarch64 under qemu, /proc/cpuinfo is the x86 host's)."""
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    if kernel_base.X86_TARGET and "avx512_vnni" in flags and compiled.optional() is not None:
        assert wide_units.int16_kernels() is not None
