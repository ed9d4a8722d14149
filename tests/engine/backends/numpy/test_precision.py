"""bf16 and int8 FlowLM linears on the NumPy backend: error bounds, end to end, named errors."""

from __future__ import annotations

import numpy as np
import pytest
from precision_stages import STAGES, recorded_errors, stage_errors
from reference_fixtures import FAMILIES, snr_db

from pipecat_pocket_tts.engine import PocketTTS, PrecisionUnavailableError
from pipecat_pocket_tts.engine.backends.numpy.kernels import arithmetic
from pipecat_pocket_tts.engine.backends.numpy.kernels.catalog import WIDEN_FROM_ROWS
from pipecat_pocket_tts.engine.backends.numpy.layers import kv_cache, linears
from pipecat_pocket_tts.engine.backends.numpy.layers.kv_cache import KVCache
from pipecat_pocket_tts.engine.backends.numpy.layers.linears import (
    KERNEL_MAX_ROWS,
    Bf16Linear,
    DenseLinear,
    Int8Linear,
    from_bfloat16_bits,
    make_linear,
    quantize_int8,
    to_bfloat16_bits,
)
from pipecat_pocket_tts.engine.backends.numpy.weights import narrow_cache

NARROW = ("bf16", "int8")
#: Slack under the committed measurement (the kernels' summation order may differ by CPU).
MEASUREMENT_SLACK_DB = 1.0
TEXT = "Hello there, this is a test of narrow weights."
#: End-to-end audio SNR vs fp32 measured on the devpack tiny packs (this text, temperature 0);
#: the bound is the measurement less 3 dB (a different devpack seed moves it by about that).
SYNTHESIS_SNR_DB = {
    ("standard", "bf16"): 44.7,
    ("standard", "int8"): 39.8,
    ("small", "bf16"): 52.2,
    ("small", "int8"): 40.1,
}


@pytest.fixture(scope="module", autouse=True)
def _private_narrow_cache(tmp_path_factory):
    """Cached narrow copies go to a temporary folder, not the user's cache; Mimi and the sampler
    stay fp32 (these tests measure the FlowLM's precision; ``test_wide_arithmetic.py`` Mimi's
    arithmetic, ``test_sampler_arithmetic.py`` the sampler's)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(narrow_cache.CACHE_ENV, str(tmp_path_factory.mktemp("narrow_cache")))
        patch.setenv(arithmetic.ARITHMETIC_ENV, "fp32")
        patch.setenv(arithmetic.SAMPLER_ARITHMETIC_ENV, "fp32")
        yield


# -- error against the measurement and against upstream's own int8 ---------------------------
@pytest.mark.parametrize("precision", NARROW)
@pytest.mark.parametrize("name", FAMILIES)
def test_stage_errors_stay_within_the_measurement(name, precision):
    recorded = recorded_errors()["families"][name]
    measured = stage_errors(name, precision)
    for stage in STAGES:
        bound = recorded[f"ours_{precision}"][stage] - MEASUREMENT_SLACK_DB
        assert measured[stage] >= bound, (stage, measured[stage], bound)


@pytest.mark.parametrize("precision", NARROW)
@pytest.mark.parametrize("name", FAMILIES)
def test_we_are_at_least_as_close_to_fp32_as_upstream_int8(name, precision):
    upstream = recorded_errors()["families"][name]["upstream_int8"]
    measured = stage_errors(name, precision)
    closer = {stage: (measured[stage], upstream[stage]) for stage in STAGES}
    assert all(ours >= theirs for ours, theirs in closer.values()), closer


# -- every config family end to end ------------------------------------------------------------
@pytest.fixture(scope="module")
def packs(engine_pack_dir, engine_small_pack_dir):
    return {"standard": engine_pack_dir, "small": engine_small_pack_dir}


@pytest.fixture(scope="module")
def fp32_audio(packs):
    return {
        kind: PocketTTS.load(backend="numpy", model_dir=folder).synthesize(
            TEXT, voice="alba", temperature=0.0
        )
        for kind, folder in packs.items()
    }


@pytest.mark.parametrize("precision", NARROW)
@pytest.mark.parametrize("kind", ("standard", "small"))
def test_each_precision_speaks_every_family(packs, fp32_audio, kind, precision):
    tts = PocketTTS.load(backend="numpy", model_dir=packs[kind], precision=precision)
    assert tts.backend.precision == precision
    assert f"precision={precision!r}" in repr(tts)
    audio = tts.synthesize(TEXT, voice="alba", temperature=0.0)
    reference = fp32_audio[kind]
    assert audio.shape == reference.shape and audio.dtype == np.float32
    assert snr_db(reference, audio) >= SYNTHESIS_SNR_DB[(kind, precision)] - 3.0


def test_int8_clones_a_voice_and_keeps_sampler_and_mimi_in_fp32(packs):
    tts = PocketTTS.load(backend="numpy", model_dir=packs["standard"], precision="int8")
    layer = tts.backend.flow_lm.layers[0]
    for linear in (layer.in_proj, layer.out_proj, layer.linear1, layer.linear2):
        assert isinstance(linear, Int8Linear)
        assert linear.codes.dtype == np.int8
    assert tts.backend.flow_lm.embed_table.dtype == np.float32
    rng = np.random.default_rng(3)
    recording = (0.1 * rng.standard_normal(24_000 * 2)).astype(np.float32)
    voice = tts.clone_voice(recording, sample_rate=24_000)
    audio = tts.synthesize("Cloned.", voice=voice, temperature=0.0)
    assert audio.size > 0 and np.isfinite(audio).all()


def test_fp32_stays_the_default_and_dense(packs):
    tts = PocketTTS.load(backend="numpy", model_dir=packs["standard"])
    assert tts.backend.precision == "fp32"
    assert isinstance(tts.backend.flow_lm.layers[0].linear1, DenseLinear)


def test_auto_backend_keeps_a_narrow_precision(packs):
    tts = PocketTTS.load(backend="auto", model_dir=packs["standard"], precision="int8")
    if tts.backend.name == "numpy":
        assert tts.backend.precision == "int8"


def test_unknown_precision_is_a_value_error(packs):
    with pytest.raises(ValueError, match="fp32, bf16, int8"):
        PocketTTS.load(backend="numpy", model_dir=packs["standard"], precision="fp16")


# -- without numba: a named error, never a silent fp32 ------------------------------------------
@pytest.mark.parametrize("precision", NARROW)
def test_missing_numba_is_a_named_error(packs, no_numba, precision):
    with pytest.raises(PrecisionUnavailableError, match=r"pip install numba"):
        PocketTTS.load(backend="numpy", model_dir=packs["standard"], precision=precision)
    assert PocketTTS.load(backend="numpy", model_dir=packs["standard"]).backend.precision == "fp32"


# -- the linear seam ---------------------------------------------------------------------------
# The float int8 kernel widens its weight rows from WIDEN_FROM_ROWS rows (even and odd counts).
WIDENED = (WIDEN_FROM_ROWS - 1, WIDEN_FROM_ROWS, WIDEN_FROM_ROWS + 1)


def int16_rounding_bound(x: np.ndarray, dense: np.ndarray) -> np.ndarray:
    """[n, out] bound on the error of x [n, in] · dense [out, in]ᵀ when each row of x is
    rounded to int16 steps of max |x| / 32767: half a step per input, times |weight|."""
    step = np.abs(x).max(axis=1, keepdims=True).astype(np.float64) / 32767
    return 0.5 * step * np.abs(dense.astype(np.float64)).sum(axis=1)[None, :]


@pytest.mark.parametrize(
    "rows",
    (1, 2, 3, *WIDENED, KERNEL_MAX_ROWS, KERNEL_MAX_ROWS + 1, 2 * KERNEL_MAX_ROWS + 1, 129),
)
@pytest.mark.parametrize(
    "shape", ((96, 64), (41, 56), (23, 200), (2, 8), (2 * linears.WIDEN_ROWS + 89, 32))
)
def test_narrow_linears_multiply_by_their_dense_weight(rows, shape):
    rng = np.random.default_rng(rows)
    weight = rng.standard_normal(shape).astype(np.float32)
    x = rng.standard_normal((rows, shape[1])).astype(np.float32)
    weight.flags.writeable = False  # as a memory-mapped checkpoint hands it over
    for precision in ("fp32", *NARROW):
        linear = make_linear(weight, precision)
        out = linear(x)
        expected = x.astype(np.float64) @ linear.dense().T.astype(np.float64)
        assert out.shape == (rows, shape[0]) and out.dtype == np.float32
        # int8 on an AVX2 host rounds x to int16 (kernels.int8_matmul_int16) in its kernel
        kernel_rows = linears.int8_chunked_max_rows(linears.load_kernels())
        rounded = precision == "int8" and rows <= kernel_rows
        slack = int16_rounding_bound(x, linear.dense()) if rounded else 0.0
        assert np.all(np.abs(out - expected) <= slack + 1e-4 * (1 + np.abs(expected)))
        np.testing.assert_array_equal(linear(x.T.copy().T), out)  # non-contiguous input


@pytest.mark.parametrize("shape", ((96, 64), (41, 56), (23, 200), (2, 8)))
def test_the_float_int8_kernel_multiplies_by_the_dense_weight(monkeypatch, shape):
    # What hosts without AVX2 (nor AVX512_VNNI) run (ARM64, older x86): activations stay float32.
    kernels = linears.load_kernels()
    monkeypatch.setattr(kernels, "int8_matmul", kernels.int8_matmul_float)
    monkeypatch.setattr(linears, "int8_tile_kernels", lambda kernel: None)
    rng = np.random.default_rng(shape[0])
    linear = make_linear(rng.standard_normal(shape).astype(np.float32), "int8")
    for rows in (1, 2, 3, *WIDENED, KERNEL_MAX_ROWS):
        x = rng.standard_normal((rows, shape[1])).astype(np.float32)
        expected = x.astype(np.float64) @ linear.dense().T.astype(np.float64)
        np.testing.assert_allclose(linear(x), expected, rtol=1e-4, atol=1e-4)


def test_fp32_linears_of_a_few_rows_run_the_compiled_kernel(monkeypatch):
    weight = np.random.default_rng(0).standard_normal((30, 40)).astype(np.float32)
    linear = make_linear(weight, "fp32")
    calls = []
    kernels = linears.load_kernels()  # the module the linear resolves to
    kernel = kernels.f32_matmul
    monkeypatch.setattr(
        kernels, "f32_matmul", lambda *args: calls.append(args[0].shape) or kernel(*args)
    )
    linear(np.ones((KERNEL_MAX_ROWS, 40), np.float32))
    linear(np.ones((KERNEL_MAX_ROWS + 1, 40), np.float32))  # a prefill: BLAS
    assert calls == [(KERNEL_MAX_ROWS, 40)]


def test_int8_prefills_run_the_kernel_in_blocks_up_to_its_limit(monkeypatch):
    weight = np.random.default_rng(1).standard_normal((30, 40)).astype(np.float32)
    linear = make_linear(weight, "int8")
    limit = linears.int8_chunked_max_rows(linear._kernels)
    assert limit == (8 if linear._kernels.AVX2 else 2) * KERNEL_MAX_ROWS
    calls = []
    kernel = linear._matmul  # the kernel chosen at construction (``choose_int8_kernel``)
    monkeypatch.setattr(
        linear, "_matmul", lambda *args: calls.append(args[0].shape[0]) or kernel(*args)
    )
    linear(np.ones((limit, 40), np.float32))
    assert calls == [KERNEL_MAX_ROWS] * (limit // KERNEL_MAX_ROWS)
    calls.clear()
    linear(np.ones((limit + 1, 40), np.float32))  # longer: BLAS on widened rows
    assert calls == []


def test_int8_keeps_one_scale_per_output_row():
    weight = np.zeros((3, 128), np.float32)
    weight[1, :64] = 2.0
    weight[1, 64:] = -0.5
    weight[2, 5] = -4.0
    codes, scales = quantize_int8(weight)
    assert codes.dtype == np.int8 and scales.shape == (3,)
    assert np.all(codes[0] == 0) and scales[0] == 1.0  # an all-zero row
    assert np.all(codes[1, :64] == 127) and np.all(codes[1, 64:] == -32)  # rint(-0.5 / (2 / 127))
    np.testing.assert_allclose(scales[1:], [2.0 / 127, 4.0 / 127])
    assert codes[2, 5] == -127 and np.count_nonzero(codes[2]) == 1


def test_bfloat16_rounds_to_nearest_even():
    values = np.array([1.0, 1.0 + 2**-8, 1.0 + 3 * 2**-8, -2.5, np.inf], np.float32)
    bits = to_bfloat16_bits(values)
    widened = (bits.astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_array_equal(widened, [1.0, 1.0, 1.0 + 2**-6, -2.5, np.inf])
    assert np.isnan(
        (to_bfloat16_bits(np.array([np.nan], np.float32)).astype(np.uint32) << 16).view(np.float32)
    ).all()


def test_a_built_linear_passes_through_only_at_its_precision():
    weight = np.ones((4, 16), np.float32)
    built = make_linear(weight, "bf16")
    assert isinstance(built, Bf16Linear) and make_linear(built, "bf16") is built
    assert built.nbytes == weight.nbytes // 2
    assert make_linear(weight, "int8").nbytes < weight.nbytes // 3
    with pytest.raises(ValueError, match="bf16 linear"):
        make_linear(built, "int8")


def test_warm_up_compiles_the_kernels_for_read_only_weights_too():
    # Weights memory-mapped from a checkpoint or the narrow copy are read-only, which numba
    # compiles apart: warmed up at load, the first step of a fresh machine compiles nothing.
    kernels = linears.load_kernels()
    for kernel in (kernels.f32_matmul, kernels.int8_matmul, kernels.bf16_matmul):
        weights = {signature[1].mutable for signature in kernel.signatures}
        assert weights == {True, False}, kernel
    norm_weights = {
        signature[1].mutable
        for signature in kernels.layer_norm_rows.signatures
        if hasattr(signature[1], "mutable")  # an array, not None
    }
    assert norm_weights == {True, False}


# -- the bfloat16 KV cache of the narrow precisions --------------------------------------------
@pytest.mark.parametrize("precision", ("fp32", *NARROW))
def test_narrow_precisions_keep_the_kv_cache_in_bfloat16(packs, precision):
    backend = PocketTTS.load(
        backend="numpy", model_dir=packs["standard"], precision=precision
    ).backend
    narrow = precision != "fp32"
    voice = backend.voice_from_flow_state(backend.new_flow_state())
    for state in (backend.new_flow_state(), backend.flow_state_from_voice(voice)):
        assert state.bfloat16 is narrow
        assert state.keys.dtype == state.values.dtype == (np.uint16 if narrow else np.float32)
    fp32 = KVCache(2, 3, 8, 10)
    assert KVCache(2, 3, 8, 10, bfloat16=True).keys.nbytes == fp32.keys.nbytes // 2


def _awkward_entries() -> np.ndarray:
    """[3, 2, 8] f32 entries with NaN, ±inf, -0, a subnormal and halfway values."""
    entries = np.random.default_rng(5).standard_normal((3, 2, 8)).astype(np.float32)
    entries[0, 0, :7] = [np.nan, np.inf, -np.inf, -0.0, 1e-40, 1.0 + 2**-8, 1.0 + 3 * 2**-8]
    return entries


@pytest.mark.parametrize("compiled", (True, False))
def test_a_bfloat16_cache_stores_entries_rounded_to_nearest_even(monkeypatch, compiled):
    if not compiled:  # the NumPy rounding, as without numba
        monkeypatch.setattr(kv_cache, "_kernels", None)
    keys, values = _awkward_entries(), -_awkward_entries()
    state = KVCache(2, 2, 8, 10, bfloat16=True)
    state.write(1, 4, keys, values)
    for stored, entries in ((state.keys, keys), (state.values, values)):
        np.testing.assert_array_equal(
            stored[1, :, 4:7], to_bfloat16_bits(entries).transpose(1, 0, 2)
        )
        assert not stored[0].any() and not stored[1, :, :4].any() and not stored[1, :, 7:].any()
    widened = (to_bfloat16_bits(keys).astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_array_equal(state.keys_f32(1, 4, 7), widened.transpose(1, 0, 2))
    assert state.position == 0  # writing is not advancing


def test_a_step_attends_over_a_bfloat16_cache_as_over_its_float32_widening(packs, monkeypatch):
    """The compiled one-position attention reads the bfloat16 cache; the NumPy path reads its
    widened float32 copy: the same step, to float32 rounding. (bf16 linears: int8 ones round
    their inputs to int16 steps, which turn a float32 rounding difference into a step.)"""
    backend = PocketTTS.load(backend="numpy", model_dir=packs["standard"], precision="bf16").backend
    flow = backend.flow_lm
    start = backend.new_flow_state()
    flow.prefill(start, backend.embed_text(np.arange(12) % 50))
    compiled_state, numpy_state = start.copy(), start.copy()
    assert compiled_state.bfloat16
    latent = np.full(flow.latent_dim, 0.1, np.float32)
    compiled_out = [flow.step(compiled_state, latent).hidden for _ in range(3)]
    monkeypatch.setattr(kv_cache, "_kernels", None)
    numpy_out = [flow.step(numpy_state, latent).hidden for _ in range(3)]
    for a, b in zip(compiled_out, numpy_out, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    # The keys the steps wrote: the same values, stored to bfloat16 (a float32 rounding
    # difference may land a value on the next bfloat16 step: one step of 2^-8 at most).
    np.testing.assert_allclose(
        from_bfloat16_bits(compiled_state.keys), from_bfloat16_bits(numpy_state.keys), rtol=2**-7
    )


def test_copies_and_voices_keep_a_bfloat16_cache_exactly(packs):
    backend = PocketTTS.load(backend="numpy", model_dir=packs["standard"], precision="bf16").backend
    state = backend.new_flow_state()
    backend.prefill(state, backend.embed_text(np.arange(9) % 50))
    clone = state.copy()
    assert clone.bfloat16 and np.array_equal(clone.keys, state.keys)
    again = backend.flow_state_from_voice(backend.voice_from_flow_state(state))
    assert again.position == state.position
    filled = state.position
    np.testing.assert_array_equal(again.keys[:, :, :filled], state.keys[:, :, :filled])
    np.testing.assert_array_equal(again.values[:, :, :filled], state.values[:, :, :filled])


# -- the integer int8 kernel (AVX2 hosts) ---------------------------------------------------------
def int16_codes(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x [n, k] f32 rounded as the kernel does: (codes [n, k] int64, steps [n] float64)."""
    peak = np.abs(x).max(axis=1)
    step = np.where(peak > 0, peak / np.float32(32767), np.float32(1)).astype(np.float32)
    inverse = (np.float32(1) / step).astype(np.float32)
    codes = np.clip(np.rint(x * inverse[:, None]), -32767, 32767)
    return codes.astype(np.int64), step.astype(np.float64)


needs_avx2 = pytest.mark.skipif(
    not linears.load_kernels().AVX2, reason="the integer int8 kernel needs an AVX2 host"
)


@needs_avx2
@pytest.mark.parametrize("n", (1, 2, 3, 8, 12, KERNEL_MAX_ROWS))
@pytest.mark.parametrize("shape", ((96, 64), (41, 56), (23, 200), (6, 4100)))
def test_the_integer_kernel_sums_int16_codes_exactly(n, shape):
    kernels = linears.load_kernels()
    rng = np.random.default_rng(n * shape[1])
    codes = rng.integers(-127, 128, shape, dtype=np.int8)
    scales = rng.uniform(0.001, 0.01, shape[0]).astype(np.float32)
    x = (rng.standard_normal((n, shape[1])) * rng.uniform(0.01, 100, (n, 1))).astype(np.float32)
    out = np.empty((n, shape[0]), np.float32)
    kernels.int8_matmul_int16(x, codes, scales, out)
    x_codes, steps = int16_codes(x)
    exact = (x_codes @ codes.astype(np.int64).T) * steps[:, None] * scales[None, :]
    size = np.abs(x_codes) @ np.abs(codes.astype(np.int64)).T * steps[:, None] * scales[None, :]
    assert np.all(np.abs(out - exact) <= 1e-6 * (size + np.abs(exact)))


@needs_avx2
def test_the_integer_kernel_does_not_overflow_its_int32_blocks():
    kernels = linears.load_kernels()
    k = 3 * kernels.MADD_BLOCK + 21  # whole blocks, a part block and a tail under 16
    codes = np.full((5, k), -128, np.int8)
    codes[1] = 127
    x = np.full((2, k), -3.5, np.float32)  # every code at the int16 peak, 32767
    out = np.empty((2, 5), np.float32)
    kernels.int8_matmul_int16(x, codes, np.ones(5, np.float32), out)
    step = np.float32(3.5) / np.float32(32767)
    expected = np.array([128.0, -127.0, 128.0, 128.0, 128.0]) * k * 32767 * float(step)
    np.testing.assert_allclose(out, np.broadcast_to(expected, (2, 5)), rtol=1e-6)


@needs_avx2
@pytest.mark.parametrize("bad", (np.nan, np.inf, -np.inf))
def test_the_integer_kernel_passes_non_finite_input_as_the_float_kernel(bad):
    kernels = linears.load_kernels()
    rng = np.random.default_rng(3)
    codes = rng.integers(-127, 128, (12, 40), dtype=np.int8)
    scales = np.full(12, 0.01, np.float32)
    x = rng.standard_normal((3, 40)).astype(np.float32)
    x[1, 7] = bad
    out, reference = np.empty((3, 12), np.float32), np.empty((3, 12), np.float32)
    kernels.int8_matmul_int16(x, codes, scales, out)
    kernels.int8_matmul_float(x, codes, scales, reference)
    np.testing.assert_array_equal(out, reference)
    assert not np.isfinite(out[1]).any() and np.isfinite(out[[0, 2]]).all()


def test_the_int8_kernel_follows_the_cpu_numba_compiles_for(monkeypatch):
    import numba

    from pipecat_pocket_tts.engine.backends.numpy.kernels import matmul as matmul_kernels

    kernels = linears.load_kernels()
    assert (kernels.int8_matmul is kernels.int8_matmul_int16) == kernels.AVX2
    # The features as an x86 CPU's, on any host (the globals compiles_for reads).
    monkeypatch.setitem(matmul_kernels.compiles_for.__globals__, "X86_TARGET", True)
    monkeypatch.setattr(numba.config, "CPU_FEATURES", "+sse2,+fma,-avx2")
    assert not matmul_kernels._host_has_avx2()
    monkeypatch.setattr(numba.config, "CPU_FEATURES", "+sse2,+avx2")
    assert matmul_kernels._host_has_avx2()
    monkeypatch.setattr(numba.config, "CPU_FEATURES", None)
    monkeypatch.setattr(numba.config, "CPU_NAME", "generic")
    assert not matmul_kernels._host_has_avx2()


@pytest.mark.parametrize("precision", ("fp32", *NARROW))
def test_the_load_log_says_how_the_linears_run(packs, caplog, precision):
    expected = {
        "fp32": "float32 (compiled kernels for steps)",
        "bf16": "bfloat16 weights widened",
        "int8": {
            "vnni": "integer dot products (AVX512_VNNI)",
            "avx2": "integer multiply-adds (AVX2)",
            "float": "widened to float32",
        }[arithmetic.choose_int8_kernel()],
    }[precision]
    with caplog.at_level("INFO", logger="pipecat_pocket_tts.engine.backends.numpy.backend"):
        PocketTTS.load(backend="numpy", model_dir=packs["standard"], precision=precision)
    line = next(
        r.getMessage() for r in caplog.records if "FlowLM transformer linears" in r.getMessage()
    )
    assert f"in {precision}: " in line and expected in line and "Mimi decoder: " in line


def test_the_samplers_packed_linear_sums_each_row_alone():
    """The sampler's linears on the float32 window kernel: a row gives the same bits alone or
    in any batch (a stream sounds the same alone and beside others), the dense product within
    float32 rounding."""
    weight = np.random.default_rng(3).standard_normal((64, 96)).astype(np.float32)
    linear = linears.packed_linear(weight)
    assert isinstance(linear, linears.WindowLinear)
    x = np.random.default_rng(4).standard_normal((7, 96)).astype(np.float32)
    batch = linear(x)
    for row in range(7):
        np.testing.assert_array_equal(linear(x[row : row + 1])[0], batch[row])
    np.testing.assert_allclose(batch, x.astype(np.float64) @ weight.T, rtol=1e-5, atol=1e-5)
    assert isinstance(linears.packed_linear(weight[:40]), linears.DenseLinear)  # 40 columns
