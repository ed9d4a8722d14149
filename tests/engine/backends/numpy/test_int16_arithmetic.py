"""int16 dot products (``kernels/int16.py``, ``kernels/int8_tiles.py``): Mimi's decoder in
``"int16"`` arithmetic (its transformer's linears and its convs) on each instruction path
(AVX512_VNNI, AVX-VNNI, AVX2, and the portable one every CPU runs), the FlowLM's int8 linears
in whole-sum tiles (``vpdpwssd`` on zmm and ymm, and portable), the choice of either at load,
the same bits on every path, and their fidelity against fp32 frame by frame.

Every path this CPU supports runs; the others are skipped, saying why, and the fallback (the
choice and the errors) is tested always. ``.ci/aarch64`` runs this file on arm64 under
emulation, where the portable path is the one that runs.
"""

from __future__ import annotations

import functools
import logging
import os
from pathlib import Path
from types import SimpleNamespace

import mimi_decoding
import numba
import numpy as np
import pytest
from fresh_python import run_python
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
from pipecat_pocket_tts.engine.backends.numpy.kernels import arithmetic, compiled
from pipecat_pocket_tts.engine.backends.numpy.kernels import base as kernel_base
from pipecat_pocket_tts.engine.backends.numpy.kernels.base import compiles_for
from pipecat_pocket_tts.engine.backends.numpy.kernels.dispatch import window_product
from pipecat_pocket_tts.engine.backends.numpy.layers import linears
from pipecat_pocket_tts.engine.backends.numpy.layers.mimi import Mimi
from pipecat_pocket_tts.engine.backends.numpy.layers.streaming_conv import (
    StreamingConv1d,
    StreamingConvTranspose1d,
)
from pipecat_pocket_tts.engine.errors import LoadOptionError
from pipecat_pocket_tts.engine.model.config import get_config

PATHS = arithmetic.INT16_KERNELS
HERE = tuple(path for path in PATHS if arithmetic.int16_kernels(path) is not None)
"""The int16 paths this process runs, best first."""


PORTABLE = arithmetic.PORTABLE


def _path(path: str):
    """``path`` as a test parameter, skipped (saying why) where this CPU lacks it."""
    flag = arithmetic.INT16_FLAGS[path]
    missing = f"this CPU has no {flag.upper()} (or numba is missing)" if flag else "no numba"
    return pytest.param(
        path,
        marks=pytest.mark.skipif(
            path not in HERE,
            reason=f"{missing}: the {path} path cannot run here; the fallback is tested by the "
            "tests without this mark",
        ),
    )


each_path = pytest.mark.parametrize("path", [_path(path) for path in PATHS])
each_vnni_path = pytest.mark.parametrize("path", [_path(path) for path in PATHS[:2]])
each_tile_path = pytest.mark.parametrize(
    "path", [_path(path) for path in ("vnni", "avx-vnni", PORTABLE)]
)
needs_int16 = pytest.mark.skipif(not HERE, reason="numba is missing: int16 cannot run here")


def _int16_module(*paths: str) -> SimpleNamespace:
    """A stand-in for the int16 kernels module on a CPU that runs ``paths``, best first."""
    return SimpleNamespace(INT16_PATHS=paths)


needs_two_paths = pytest.mark.skipif(
    len(HERE) < 2, reason="this CPU runs fewer than two int16 paths: nothing to compare"
)
needs_both = pytest.mark.skipif(
    not HERE or arithmetic.bf16_kernels() is None,
    reason="this CPU lacks AVX2 or AVX512_BF16: int16 and bf16 cannot be compared here",
)


@pytest.fixture
def full_mimi_weights() -> dict[str, np.ndarray]:
    return mimi_decoding.full_mimi_weights()


@pytest.fixture
def on_path(monkeypatch):
    """Set the int16 path loads choose (``POCKET_TTS_INT16_KERNEL``)."""
    return lambda path: monkeypatch.setenv(arithmetic.INT16_KERNEL_ENV, path)


@functools.cache
def _decoded(path: str, which: str) -> np.ndarray:
    """The full-size random pack's audio [F, frame], frame by frame, on ``path`` ("fp32":
    float32 Mimi) from random or quiet latents (``which``): decoded once for every test."""
    latents = random_latents(24) if which == "random" else quiet_latents()
    config, weights = get_config("english").mimi, mimi_decoding.full_mimi_weights()
    if path == "fp32":
        return frame_by_frame(Mimi(config, weights, arithmetic="fp32"), latents)[0]
    before = os.environ.get(arithmetic.INT16_KERNEL_ENV)
    os.environ[arithmetic.INT16_KERNEL_ENV] = path
    try:
        mimi = Mimi(config, weights, arithmetic="int16")
    finally:
        if before is None:
            del os.environ[arithmetic.INT16_KERNEL_ENV]
        else:
            os.environ[arithmetic.INT16_KERNEL_ENV] = before
    assert {conv.int16.path for conv in mimi.decoder.convs() if conv.int16 is not None} == {path}
    return frame_by_frame(mimi, latents)[0]


# -- the choice at load ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("bf16", "int16", "best"),
    [(True, True, "int16"), (True, False, "bf16"), (False, True, "int16"), (False, False, "fp32")],
)
def test_auto_takes_the_best_arithmetic_the_cpu_has(monkeypatch, bf16, int16, best):
    module = _int16_module("avx2", PORTABLE)
    monkeypatch.setattr(arithmetic, "bf16_kernels", lambda: object() if bf16 else None)
    monkeypatch.setattr(arithmetic, "int16_kernels", lambda path=None: module if int16 else None)
    monkeypatch.delenv(arithmetic.ARITHMETIC_ENV, raising=False)
    assert arithmetic.choose_arithmetic(None, "int8") == best
    assert arithmetic.choose_arithmetic(None, "fp32") == "fp32"  # parity with upstream untouched


@pytest.mark.parametrize("bf16", [True, False])
def test_auto_never_takes_the_portable_path_but_a_request_runs_it(monkeypatch, bf16):
    """No ARM CPU was at hand to time the portable path against float32: "auto" keeps what
    was measured there (float32), and asking for int16 runs it."""
    module = _int16_module(PORTABLE)
    monkeypatch.setattr(arithmetic, "bf16_kernels", lambda: object() if bf16 else None)
    monkeypatch.setattr(arithmetic, "int16_kernels", lambda path=None: module)
    for name in (arithmetic.ARITHMETIC_ENV, arithmetic.SAMPLER_ARITHMETIC_ENV):
        monkeypatch.delenv(name, raising=False)
    assert arithmetic.choose_arithmetic(None, "int8") == ("bf16" if bf16 else "fp32")
    assert arithmetic.choose_sampler_arithmetic("int8") == "fp32"
    assert arithmetic.choose_arithmetic("int16", "int8") == "int16"
    monkeypatch.setenv(arithmetic.SAMPLER_ARITHMETIC_ENV, "int16")
    assert arithmetic.choose_sampler_arithmetic("int8") == "int16"


@pytest.mark.parametrize(
    ("has", "best"),
    [
        (("vnni", "avx-vnni", "avx2"), "vnni"),
        (("avx-vnni", "avx2"), "avx-vnni"),  # Intel from 12th gen
        (("avx2",), "avx2"),  # AMD Zen 2/3, older Intel
        ((PORTABLE,), PORTABLE),  # aarch64
    ],
)
def test_auto_takes_the_best_int16_path_the_cpu_has(monkeypatch, has, best):
    monkeypatch.setattr(
        arithmetic, "int16_kernels", lambda path=None: object() if path in has else None
    )
    monkeypatch.delenv(arithmetic.INT16_KERNEL_ENV, raising=False)
    assert arithmetic.choose_int16_kernel() == best
    monkeypatch.setenv(arithmetic.INT16_KERNEL_ENV, has[-1])
    assert arithmetic.choose_int16_kernel() == has[-1]


def test_asking_for_int16_without_numba_says_so(monkeypatch):
    monkeypatch.setattr(arithmetic, "int16_kernels", lambda path=None: None)  # no numba
    with pytest.raises(LoadOptionError, match=r"needs numba \(the fast extra\)"):
        arithmetic.choose_arithmetic("int16", "int8")
    monkeypatch.setenv(arithmetic.ARITHMETIC_ENV, "int16")
    with pytest.raises(LoadOptionError, match="numba"):
        arithmetic.choose_arithmetic(None, "int8")
    monkeypatch.setenv(arithmetic.SAMPLER_ARITHMETIC_ENV, "int16")
    with pytest.raises(LoadOptionError, match="numba"):
        arithmetic.choose_sampler_arithmetic("int8")


@pytest.mark.parametrize(("path", "flag"), [("vnni", "AVX512_VNNI"), ("avx-vnni", "AVX_VNNI")])
def test_asking_for_a_path_the_cpu_lacks_names_its_flag(monkeypatch, path, flag):
    monkeypatch.setattr(
        arithmetic, "int16_kernels", lambda p=None: object() if p in (None, "avx2") else None
    )
    monkeypatch.setenv(arithmetic.INT16_KERNEL_ENV, path)
    with pytest.raises(LoadOptionError, match=flag):
        arithmetic.choose_int16_kernel()
    monkeypatch.setenv(arithmetic.INT16_KERNEL_ENV, "sse")
    with pytest.raises(LoadOptionError, match=arithmetic.INT16_KERNEL_ENV):
        arithmetic.choose_int16_kernel()


@pytest.mark.parametrize(
    ("path", "said"),
    [
        ("vnni", "AVX512_VNNI vpdpwssd"),
        ("avx-vnni", "AVX-VNNI vpdpwssd"),
        ("avx2", "vpmaddwd"),
        (PORTABLE, "portable vector code"),
    ],
)
def test_int16_arithmetic_says_what_runs(monkeypatch, path, said):
    monkeypatch.setattr(arithmetic, "choose_int16_kernel", lambda: path)
    line = arithmetic.describe_arithmetic("int16")
    assert said in line and "transformer" in line and "frame blocks" in line


@each_path
def test_an_int8_model_runs_int16_arithmetic_and_says_so(
    engine_pack_dir, monkeypatch, on_path, path, caplog
):
    on_path(path)
    monkeypatch.delenv(arithmetic.ARITHMETIC_ENV, raising=False)
    if path == PORTABLE and not kernel_base.X86_TARGET:  # "auto" keeps float32 there
        monkeypatch.setenv(arithmetic.ARITHMETIC_ENV, "int16")
    with caplog.at_level(logging.INFO):
        tts = PocketTTS.load(backend="numpy", model_dir=engine_pack_dir, precision="int8")
    assert tts.backend.mimi.arithmetic == "int16"
    said = arithmetic.INT16_INSTRUCTIONS[path]
    assert said in tts.kernels["mimi"] and said in caplog.text
    if path in ("vnni", "avx-vnni") and arithmetic.choose_int8_kernel() == path:
        assert ("AVX512_VNNI" if path == "vnni" else "AVX-VNNI") in tts.kernels["flow_lm"]


# -- the window kernel --------------------------------------------------------------------------
def _quantized(x: np.ndarray) -> np.ndarray:
    """x [B, L, C] as the kernel reads it: each row's codes times its scale."""
    from pipecat_pocket_tts.engine.backends.numpy.kernels import int16 as int16_kernels

    codes = np.empty(x.shape, np.int16)
    scales = np.empty(x.shape[:2], np.float32)
    int16_kernels.quantize_rows(x, codes, scales)
    return codes.astype(np.float64) * scales[..., None].astype(np.float64)


def _packed(weight: np.ndarray, channels: int, path: str) -> arithmetic.Int16Weight:
    from pipecat_pocket_tts.engine.backends.numpy.kernels import int16 as int16_kernels

    return arithmetic.Int16Weight(*int16_kernels.pack_int16_columns(weight, channels), path)


@each_path
@pytest.mark.parametrize(
    ("batch", "rows", "channels", "taps", "step", "columns"),
    [(1, 2, 32, 3, 1, 32), (3, 2, 64, 2, 2, 64), (5, 7, 32, 1, 1, 96), (2, 16, 512, 7, 1, 64)],
)
def test_the_kernel_sums_each_tap_at_its_rows_scale(
    path, batch, rows, channels, taps, step, columns
):
    """Windows spanning rows of different loudness, across streams (B · rows not a multiple of
    the tile), every product exact in int32: the output is the float64 product of the
    quantized operands within float32 rounding, and the same bits on every path."""
    rng = np.random.default_rng(rows * channels)
    length = (rows - 1) * step + taps
    loudness = rng.uniform(1e-3, 30.0, (batch, length, 1)).astype(np.float32)
    x = rng.standard_normal((batch, length, channels)).astype(np.float32) * loudness
    weight = rng.standard_normal((taps * channels, columns)).astype(np.float32)
    packed = _packed(weight, channels, path)
    bias = rng.standard_normal(columns).astype(np.float32)
    out = window_product(x, rows, step, taps, packed, bias, "int16")
    for other in HERE:  # the same bits on every path this CPU runs
        again = window_product(x, rows, step, taps, packed._replace(path=other), bias, "int16")
        np.testing.assert_array_equal(again, out)
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


@each_path
def test_no_sum_can_wrap_at_the_largest_codes(path):
    """Inputs and weights all at their largest: every flush holds the most a sum can, and the
    column's scale keeps it inside int32 (a wrap would flip the sign)."""
    channels, taps, columns = 512, 7, 32
    for sign in (1.0, -1.0):
        packed = _packed(np.full((taps * channels, columns), sign, np.float32), channels, path)
        x = np.full((1, 4 + taps - 1, channels), 1.0, np.float32)
        out = window_product(x, 4, 1, taps, packed, None, "int16")
        np.testing.assert_allclose(out, sign * taps * channels, rtol=1e-3)


@each_path
def test_a_row_holding_nan_or_infinity_gives_nan_where_it_is_read(path):
    x = np.ones((1, 6, 32), np.float32)
    x[0, 4, 3] = np.nan
    x[0, 1] = 0.0  # a silent row: scale 0, codes 0, no NaN
    packed = _packed(np.ones((3 * 32, 32), np.float32), 32, path)
    out = window_product(x, 4, 1, 3, packed, None, "int16")  # window r reads rows r … r + 2
    assert np.isfinite(out[0, :2]).all() and np.isnan(out[0, 2:]).all()
    np.testing.assert_allclose(out[0, 0], 2 * 32, rtol=1e-3)


@each_path
def test_the_compiled_kernels_run_the_paths_instruction(path):
    from pipecat_pocket_tts.engine.backends.numpy.kernels import int16 as int16_kernels

    fresh = numba.njit(int16_kernels.int16_window_matmul.py_func)  # the cached one has no text
    codes, scales = int16_kernels.pack_int16_columns(np.ones((32, 32), np.float32), 32)
    out, rows = np.zeros((1, 4, 32), np.float32), np.ones((1, 4), np.float32)
    fresh(
        np.ones((1, 4, 32), np.int16),
        codes,
        out,
        rows,
        scales,
        1,
        32,
        int16_kernels.path_code(path),
    )
    assembly = "".join(fresh.inspect_asm(signature) for signature in fresh.signatures)
    if not kernel_base.X86_TARGET:  # NEON's widening multiply (measured: smull, uzp1/2, add)
        assert path == PORTABLE and "smull" in assembly.split()
        return
    dots = [line for line in assembly.splitlines() if "vpmaddwd" in line or "vpdpwssd" in line]
    if path == PORTABLE:  # LLVM finds the x86 instruction in the plain vector code
        assert dots
        return
    register = "zmm" if path == "vnni" else "ymm"
    assert dots and all(register in line for line in dots)
    if path == "avx2":  # LLVM fuses vpmaddwd and vpaddd into vpdpwssd where the CPU has VNNI
        fused = compiles_for("avxvnni") or compiles_for("avx512vnni", "avx512vl")
        assert ("vpdpwssd" if fused else "vpmaddwd") in assembly
    else:
        assert "vpdpwssd" in assembly


@each_path
def test_the_warm_up_compiled_every_int16_kernel_a_decode_runs(path):
    """In a fresh interpreter on ``path``: convs and a transposed conv on int16, batched and
    solo, int8 linears on weights writable and read-only, and the sampler's two-pass int16
    linears compile nothing after the warm-up at load."""
    script = """
import numpy as np
from pipecat_pocket_tts.engine.backends.numpy.kernels import arithmetic, compiled
from pipecat_pocket_tts.engine.backends.numpy.kernels.base import compiles_for
from pipecat_pocket_tts.engine.backends.numpy.kernels import int16 as int16_kernels
from pipecat_pocket_tts.engine.backends.numpy.layers.streaming_conv import (
    StreamingConv1d, StreamingConvTranspose1d)
from pipecat_pocket_tts.engine.backends.numpy.layers.linears import (
    Int16Linear, make_linear, restore_linear)
path = arithmetic.choose_int16_kernel()  # what a load does
arithmetic.choose_int8_kernel()
kernels = [int16_kernels.WINDOW_MATMULS[path], int16_kernels.quantize_rows]
kernels.append(int16_kernels.quantize_two_passes)
if path != "avx2":
    from pipecat_pocket_tts.engine.backends.numpy.kernels import int8_tiles
    kernels.append(int8_tiles.INT8_MATMULS[path])
else:
    kernels.append(compiled.required().int8_matmul)
at_load = [set(k.signatures) for k in kernels]
rng = np.random.default_rng(0)
weight = rng.standard_normal((32, 32, 3)).astype(np.float32)
conv = StreamingConv1d(weight, np.zeros(32, np.float32))
one = StreamingConv1d(rng.standard_normal((64, 32, 1)).astype(np.float32), None)
up = StreamingConvTranspose1d(rng.standard_normal((32, 32, 4)).astype(np.float32), None, stride=2)
for layer in (conv, one, up):
    assert layer.use_int16() and layer.int16.path == path
x = np.ones((2, 4, 32), np.float32)
conv.call_batch(x, [conv.initial_history()] * 2, activate=True)
conv(x[0], conv.initial_history())
one.call_batch(x, [one.initial_history()] * 2)
up.call_batch(x, [up.initial_partial()] * 2, activate=True)
linear = make_linear(rng.standard_normal((64, 1024)).astype(np.float32), "int8")
arrays = {name: array.copy() for name, array in linear.arrays().items()}
for array in arrays.values():
    array.flags.writeable = False  # as memory-mapped from the narrow cache
for each in (linear, restore_linear("int8", arrays)):
    for rows in (1, 6, 16):
        each(np.ones((rows, 1024), np.float32))
two_passes = Int16Linear.stacked([rng.standard_normal((64, 128)).astype(np.float32)], passes=2)
for rows in (1, 3, 16):
    two_passes(np.ones((rows, 128), np.float32))
added = [set(k.signatures) - before for k, before in zip(kernels, at_load)]
assert not any(added), added
"""
    run_python(script, {arithmetic.INT16_KERNEL_ENV: path, arithmetic.INT8_KERNEL_ENV: path}, 600)


# -- the same bits on every path, and fidelity against fp32 frame by frame -----------------------
@needs_two_paths
@pytest.mark.parametrize("which", ["random", "quiet"])
def test_every_path_decodes_the_full_size_pack_bit_for_bit_alike(which):
    best = _decoded(HERE[0], which)
    for path in HERE[1:]:
        np.testing.assert_array_equal(_decoded(path, which), best)


@each_path
def test_full_size_int16_mimi_stays_within_the_bound_and_quiet_stays_quiet(path):
    for which in ("random", "quiet"):
        reference, wide = _decoded("fp32", which), _decoded(path, which)
        assert snr_db(reference, wide) >= max(MIN_SNR_DB, 60.0)  # measured: 63.0 / 62.1
        assert np.all(np.abs(level(wide) - level(reference)) <= 0.01)


@functools.cache
def _todays_int8_floor() -> float:
    """Today's int8 path (the int8 FlowLM, Mimi float32) against fp32, teacher-forced step by
    step on the full-size random pack: its audio's SNR (measured 58.6 dB)."""
    config = get_config("english")
    weights = random_weights(config, seed=1)
    exact = NumpyBackend(config, weights, precision="fp32", mimi_arithmetic="fp32")
    narrow = NumpyBackend(config, weights, precision="int8", mimi_arithmetic="fp32")
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
    return snr_db(audio[0], audio[1])


@each_path
def test_int16_mimi_is_never_below_todays_int8_path(path):
    """The floor is today's int8 path's SNR; every int16 path stays above it on random and on
    quiet latents."""
    floor = _todays_int8_floor()
    for which in ("random", "quiet"):
        assert snr_db(_decoded("fp32", which), _decoded(path, which)) >= floor


@needs_both
def test_int16_is_never_below_bf16(full_mimi_weights):
    config = get_config("english").mimi
    for which, latents in (("random", random_latents(24)), ("quiet", quiet_latents())):
        reference = _decoded("fp32", which)
        bf16 = frame_by_frame(Mimi(config, full_mimi_weights, arithmetic="bf16"), latents)[0]
        assert snr_db(reference, _decoded(HERE[0], which)) >= snr_db(reference, bf16)


@each_path
@pytest.mark.parametrize("name", FAMILIES)
def test_each_tiny_family_stays_within_the_bound(name, path, on_path):
    on_path(path)
    audio = tiny_family_audio(name, ("fp32", "int16"))
    assert snr_db(audio["fp32"], audio["int16"]) >= MIN_SNR_DB


@needs_int16
def test_a_block_decodes_bit_for_bit_as_its_frames_in_int16(full_mimi_weights):
    mimi = Mimi(get_config("english").mimi, full_mimi_weights, arithmetic="int16")
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


# -- the FlowLM's int8 linears in tiles ---------------------------------------------------------
@each_tile_path
@pytest.mark.parametrize("rows", [1, 3, 4, 6, 16])
@pytest.mark.parametrize("depth", [512, 4096])
def test_the_tiled_int8_matmul_matches_the_two_row_one(path, rows, depth):
    """The same integer products; up to 512 inputs the same float32 bits as the two-row kernel
    (AVX2's, or the portable one where there is no AVX2: one int32 sum either way), beyond that
    within float32 rounding (it adds its 512-input sums in float32); every tile path the same
    bits at any depth."""
    from pipecat_pocket_tts.engine.backends.numpy.kernels import int8_tiles

    kernels = compiled.required()
    two_rows = kernels.int8_matmul_int16 if "avx2" in HERE else kernels.int8_matmul_portable
    rng = np.random.default_rng(rows + depth)
    codes, scales = linears.quantize_int8(rng.standard_normal((64, depth)).astype(np.float32))
    x = rng.standard_normal((rows, depth)).astype(np.float32)
    avx2, vnni = np.empty((rows, 64), np.float32), np.empty((rows, 64), np.float32)
    two_rows(x, codes, scales, avx2)
    matmul = int8_tiles.INT8_MATMULS[path]
    matmul(x, codes, scales, vnni)
    if depth <= 512:
        np.testing.assert_array_equal(vnni, avx2)
    else:
        assert np.abs(vnni - avx2).max() <= 1e-6 * np.abs(avx2).max()
    for other in (p for p in HERE if p in int8_tiles.INT8_MATMULS):
        again = np.empty_like(vnni)
        int8_tiles.INT8_MATMULS[other](x, codes, scales, again)
        np.testing.assert_array_equal(again, vnni)
    x[rows - 1, 5] = np.nan  # NaN stays NaN (the float kernel), in its row only
    matmul(x, codes, scales, vnni)
    assert np.isnan(vnni[rows - 1]).all()


@each_vnni_path
def test_int8_linears_take_the_chosen_vnni_path_and_the_environment_overrides(monkeypatch, path):
    from pipecat_pocket_tts.engine.backends.numpy.kernels import int8_tiles

    weight = np.random.default_rng(0).standard_normal((64, 1024)).astype(np.float32)
    monkeypatch.delenv(arithmetic.INT8_KERNEL_ENV, raising=False)
    assert linears.make_linear(weight, "int8")._matmul is int8_tiles.INT8_MATMULS[HERE[0]]
    monkeypatch.setenv(arithmetic.INT8_KERNEL_ENV, path)
    assert linears.make_linear(weight, "int8")._matmul is int8_tiles.INT8_MATMULS[path]
    assert ("AVX512_VNNI" if path == "vnni" else "AVX-VNNI") in linears.how_linears_run("int8")
    monkeypatch.setenv(arithmetic.INT8_KERNEL_ENV, "avx2")
    assert linears.make_linear(weight, "int8")._matmul is compiled.required().int8_matmul
    assert "(AVX2)" in linears.how_linears_run("int8")


@needs_int16
@pytest.mark.parametrize("rows", [1, 2, 3, 4, 7])
@pytest.mark.parametrize("depth", [48, 512, 1056])
def test_the_portable_int8_kernels_sum_the_integer_products_exactly(rows, depth):
    """On integer inputs whose largest is 32767 (each row's int16 codes are the inputs, its
    scale 1) and weight scales of 1, every sum stays below 2^24: each output is the exact
    integer dot product, on the two-row kernel and on the tiles (depths that are a multiple of
    32), whatever CPU compiles them (aarch64 under emulation too)."""
    from pipecat_pocket_tts.engine.backends.numpy.kernels import int8_tiles

    kernels = compiled.required()
    rng = np.random.default_rng(rows * depth)
    weight = rng.integers(-3, 4, (8, depth), dtype=np.int8)
    x = rng.integers(-99, 100, (rows, depth)).astype(np.float32)
    x[:, depth // 2] = 32767.0
    exact = (x.astype(np.int64) @ weight.astype(np.int64).T).astype(np.float32)
    ones = np.ones(8, np.float32)
    matmuls = [kernels.int8_matmul_portable]
    if int8_tiles.fits_tiles(depth):
        matmuls.append(int8_tiles.INT8_MATMULS[PORTABLE])
    for matmul in matmuls:
        out = np.full((rows, 8), np.nan, np.float32)
        matmul(x, weight, ones, out)
        np.testing.assert_array_equal(out, exact)


@needs_int16
def test_int8_linears_run_the_portable_path_where_asked_and_auto_never_takes_it(monkeypatch):
    from pipecat_pocket_tts.engine.backends.numpy.kernels import int8_tiles

    kernels = compiled.required()
    rng = np.random.default_rng(0)
    tiled = rng.standard_normal((64, 1024)).astype(np.float32)
    odd = rng.standard_normal((64, 1000)).astype(np.float32)  # not a multiple of 32
    monkeypatch.setenv(arithmetic.INT8_KERNEL_ENV, PORTABLE)
    assert linears.make_linear(tiled, "int8")._matmul is int8_tiles.INT8_MATMULS[PORTABLE]
    assert linears.make_linear(odd, "int8")._matmul is kernels.int8_matmul_portable
    assert "portable vector code" in linears.how_linears_run("int8")
    monkeypatch.setenv(arithmetic.INT8_KERNEL_ENV, "auto")
    assert arithmetic.choose_int8_kernel() != PORTABLE
    monkeypatch.setattr(kernels, "AVX2", False)  # a CPU with no x86 kernel (aarch64)
    monkeypatch.setattr(
        arithmetic, "int8_tile_kernels", lambda k: int8_tiles if k == PORTABLE else None
    )
    assert arithmetic.choose_int8_kernel() == "float"


@pytest.mark.parametrize(("path", "flag"), [("vnni", "AVX512_VNNI"), ("avx-vnni", "AVX_VNNI")])
def test_the_int8_kernel_choice_names_what_is_missing(monkeypatch, path, flag):
    monkeypatch.setattr(arithmetic, "int8_tile_kernels", lambda kernel: None)  # no VNNI at all
    monkeypatch.setenv(arithmetic.INT8_KERNEL_ENV, path)
    with pytest.raises(LoadOptionError, match=flag):
        arithmetic.choose_int8_kernel()
    monkeypatch.setenv(arithmetic.INT8_KERNEL_ENV, "auto")
    assert arithmetic.choose_int8_kernel() in ("avx2", "float")
    monkeypatch.setenv(arithmetic.INT8_KERNEL_ENV, "sse")
    with pytest.raises(LoadOptionError, match=arithmetic.INT8_KERNEL_ENV):
        arithmetic.choose_int8_kernel()


def test_this_file_runs_every_path_the_cpu_supports():
    """The marks above skip only what this CPU lacks (the flags the machine reports; on
    aarch64 under qemu, /proc/cpuinfo is the x86 host's)."""
    flags = Path("/proc/cpuinfo").read_text().split() if Path("/proc/cpuinfo").exists() else []
    if compiled.optional() is None:
        return
    assert PORTABLE in HERE  # on any CPU
    if not kernel_base.X86_TARGET:
        return
    for path, flag in arithmetic.INT16_FLAGS.items():
        if flag in flags and (path != "vnni" or "avx512bw" in flags):
            assert path in HERE, path
