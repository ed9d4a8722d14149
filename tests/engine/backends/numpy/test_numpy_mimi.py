"""NumPy Mimi codec against upstream's golden outputs, and its streaming-state contract."""

from __future__ import annotations

import threading
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
from safetensors.numpy import load_file

from pipecat_pocket_tts.engine.backends.numpy.kernels import compiled, dispatch
from pipecat_pocket_tts.engine.backends.numpy.layers import mimi as mimi_module
from pipecat_pocket_tts.engine.backends.numpy.layers import streaming_conv
from pipecat_pocket_tts.engine.backends.numpy.layers.linears import KERNEL_MAX_ROWS
from pipecat_pocket_tts.engine.backends.numpy.layers.mimi import (
    ENCODER_PREFIXES,
    Mimi,
    MimiEncoder,
    mimi_weight_shapes,
)
from pipecat_pocket_tts.engine.errors import (
    CloneAudioError,
    CloningUnavailableError,
    WeightsMismatchError,
)


@cache
def _family(name: str):
    """(config, Mimi weights without the prefix, all weights, stage arrays, Mimi)."""
    config, weights_path, _tokenizer, arrays = load_family(name)
    weights = load_file(str(weights_path))
    mimi_weights = {k.removeprefix("mimi."): v for k, v in weights.items() if k.startswith("mimi.")}
    return config, mimi_weights, weights, arrays, Mimi(config.mimi, mimi_weights)


def _denormalize(weights: dict[str, np.ndarray], latents: np.ndarray) -> np.ndarray:
    """Sampled latents [F, 32] → Mimi input, as the backend does before ``decode``."""
    return latents * weights["flow_lm.emb_std"] + weights["flow_lm.emb_mean"]


def _stream(mimi: Mimi, latents: np.ndarray, state=None) -> np.ndarray:
    """Decode latents [F, 32] one frame per call in one state → audio [F, frame_size]."""
    state = mimi.new_state() if state is None else state
    return np.stack([mimi.decode(state, latent) for latent in latents])


def _decode_whole_sequence(mimi: Mimi, latents: np.ndarray) -> np.ndarray:
    """All frames in one pass through the same layers (no per-frame chunking) → [F·frame]."""
    x = latents @ mimi.latent_projection.T  # [F, outer_dim]
    x, _ = mimi.upsample(x, mimi.upsample.initial_partial())  # [16F, D]
    x = mimi.decoder_transformer(x, mimi.decoder_transformer.new_cache(x.shape[0]))
    return mimi.decoder(x, mimi.decoder.initial_state()).reshape(-1)


# -- parity with upstream ----------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_streamed_decode_matches_upstream(family: str) -> None:
    config, _, weights, arrays, mimi = _family(family)
    latents = arrays["mimi_latents"]
    assert latents.shape[0] >= 20
    audio = _stream(mimi, _denormalize(weights, latents))
    assert audio.shape == (latents.shape[0], config.mimi.frame_size) == arrays["mimi_audio"].shape
    assert audio.dtype == np.float32
    assert snr_db(arrays["mimi_audio"], audio) >= MIN_AUDIO_SNR_DB


@pytest.mark.parametrize("family", FAMILIES)
def test_generated_latents_decode_like_upstream(family: str) -> None:
    _, _, weights, arrays, mimi = _family(family)
    audio = _stream(mimi, _denormalize(weights, arrays["gen_latents"])).reshape(-1)
    assert snr_db(arrays["gen_audio"], audio) >= MIN_AUDIO_SNR_DB


@pytest.mark.parametrize("family", FAMILIES)
def test_encode_matches_upstream(family: str) -> None:
    _, _, _, arrays, mimi = _family(family)
    assert mimi.has_encoder
    reference = arrays["voice_latents"]
    latents = mimi.encode(arrays["voice_audio"])
    assert latents.shape == reference.shape
    # Tolerance relative to the latents' magnitude once it exceeds 1 (fixtures reach ~4).
    scale = max(1.0, float(np.abs(reference).max()))
    assert max_abs_error(reference, latents) <= MAX_ABS_TOLERANCE * scale


@pytest.mark.parametrize("family", FAMILIES)
def test_weight_names_and_shapes_match_the_checkpoint(family: str) -> None:
    config, mimi_weights, _, _, _ = _family(family)
    expected = mimi_weight_shapes(config.mimi)
    assert expected == {name: tuple(array.shape) for name, array in mimi_weights.items()}


# -- streaming state ---------------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_frame_by_frame_equals_whole_sequence(family: str) -> None:
    _, _, weights, arrays, mimi = _family(family)
    latents = _denormalize(weights, arrays["mimi_latents"])
    streamed = _stream(mimi, latents).reshape(-1)
    whole = _decode_whole_sequence(mimi, latents)
    assert snr_db(whole, streamed) >= 100.0


def test_state_copy_is_deep_and_independent() -> None:
    _, _, weights, arrays, mimi = _family("tiny_lsd")
    latents = _denormalize(weights, arrays["mimi_latents"])
    state = mimi.new_state()
    _stream(mimi, latents[:5], state)
    clone = state.copy()
    original_arrays = [state.upsample_partial, state.attention.keys, state.attention.values]
    clone_arrays = [clone.upsample_partial, clone.attention.keys, clone.attention.values]
    for a, b in zip(original_arrays + state.seanet, clone_arrays + clone.seanet, strict=True):
        assert not np.shares_memory(a, b)
    assert not np.shares_memory(state.attention.slot_positions, clone.attention.slot_positions)

    expected = mimi.decode(state, latents[5])
    _stream(mimi, latents[10:14], state)  # the original moves on with other frames
    np.testing.assert_allclose(mimi.decode(clone, latents[5]), expected, rtol=0, atol=1e-7)
    assert clone.attention.position == 6 * mimi.resample_stride


def test_state_carries_context_between_calls() -> None:
    _, _, weights, arrays, mimi = _family("tiny_lsd")
    latents = _denormalize(weights, arrays["mimi_latents"])
    state = mimi.new_state()
    mimi.decode(state, latents[0])
    after_a = mimi.decode(state, latents[1])
    fresh = mimi.decode(mimi.new_state(), latents[1])
    assert snr_db(after_a, fresh) < 20.0  # the previous frame shapes this one
    # Two fresh states share nothing: the same frames give the same audio.
    np.testing.assert_array_equal(_stream(mimi, latents[:3]), _stream(mimi, latents[:3]))


def test_encode_does_not_depend_on_chunking(monkeypatch: pytest.MonkeyPatch) -> None:
    _, _, _, arrays, mimi = _family("tiny_small")
    default = mimi.encode(arrays["voice_audio"])
    monkeypatch.setattr(mimi_module, "ENCODE_CHUNK_FRAMES", 1)  # attention ring wraps
    np.testing.assert_allclose(mimi.encode(arrays["voice_audio"]), default, rtol=0, atol=1e-5)


def test_encode_pads_a_partial_last_frame() -> None:
    _, _, _, arrays, mimi = _family("tiny_lsd")
    audio = arrays["voice_audio"]
    short = audio[: audio.size - 700]
    padded = np.concatenate([short, np.zeros(700, dtype=np.float32)])
    np.testing.assert_array_equal(mimi.encode(short), mimi.encode(padded))


# -- cloning availability and bad input --------------------------------------------------------


def test_missing_encoder_weights_disable_cloning() -> None:
    config, mimi_weights, weights, arrays, reference_mimi = _family("tiny_lsd")
    decoder_only = {k: v for k, v in mimi_weights.items() if not k.startswith(ENCODER_PREFIXES)}
    mimi = Mimi(config.mimi, decoder_only)
    assert not mimi.has_encoder
    with pytest.raises(CloningUnavailableError, match="predefined voice"):
        mimi.encode(arrays["voice_audio"])
    latents = _denormalize(weights, arrays["mimi_latents"][:3])
    np.testing.assert_array_equal(_stream(mimi, latents), _stream(reference_mimi, latents))


def test_the_encoder_is_built_on_the_first_encode_and_once(monkeypatch) -> None:
    config, mimi_weights, _, arrays, reference_mimi = _family("tiny_lsd")
    mimi = Mimi(config.mimi, mimi_weights)
    assert mimi.has_encoder and mimi._encoder is None  # checked at load, not kept
    built = []
    original_init = MimiEncoder.__init__

    def counting_init(self, *args, **kwargs):
        built.append(threading.get_ident())
        original_init(self, *args, **kwargs)

    monkeypatch.setattr(MimiEncoder, "__init__", counting_init)
    start = threading.Barrier(3)
    results = [None, None]

    def clone(slot: int) -> None:
        start.wait()
        results[slot] = mimi.encode(arrays["voice_audio"])

    threads = [threading.Thread(target=clone, args=(slot,)) for slot in range(2)]
    for thread in threads:
        thread.start()
    start.wait()
    for thread in threads:
        thread.join()
    assert len(built) == 1  # two threads asked at once; one built it
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[0], reference_mimi.encode(arrays["voice_audio"]))
    mimi.encode(arrays["voice_audio"][:4000])
    assert len(built) == 1


def test_a_mis_shaped_encoder_weight_fails_at_load_not_at_the_first_clone() -> None:
    config, mimi_weights, _, _, _ = _family("tiny_lsd")
    key = next(k for k in mimi_weights if k.startswith("encoder_transformer."))
    broken = {**mimi_weights, key: np.zeros((3, 3), np.float32)}
    with pytest.raises(WeightsMismatchError):
        Mimi(config.mimi, broken)


def test_zeroed_encoder_weights_disable_cloning() -> None:
    config, mimi_weights, _, arrays, _ = _family("tiny_lsd")
    zeroed = {
        k: np.zeros_like(v) if k.startswith(ENCODER_PREFIXES) else v
        for k, v in mimi_weights.items()
    }
    mimi = Mimi(config.mimi, zeroed)
    assert not mimi.has_encoder
    with pytest.raises(CloningUnavailableError):
        mimi.encode(arrays["voice_audio"])


def test_an_encoder_transformer_zeroed_alone_disables_cloning() -> None:
    """The zero check reads the transformer's weights, not just the convs around it."""
    config, mimi_weights, _, _, _ = _family("tiny_lsd")
    zeroed = {
        k: np.zeros_like(v) if k.startswith("encoder_transformer.") and "in_proj" in k else v
        for k, v in mimi_weights.items()
    }
    assert zeroed.keys() == mimi_weights.keys() and any(
        "encoder_transformer." in k and "in_proj" in k for k in zeroed
    )
    assert not Mimi(config.mimi, zeroed).has_encoder
    assert Mimi(config.mimi, mimi_weights).has_encoder


def test_bad_weights_raise_weights_mismatch() -> None:
    config, mimi_weights, _, _, _ = _family("tiny_lsd")
    missing = dict(mimi_weights)
    del missing["decoder.model.0.conv.weight"]
    with pytest.raises(WeightsMismatchError, match=r"decoder\.model\.0\.conv\.weight"):
        Mimi(config.mimi, missing)
    reshaped = dict(mimi_weights)
    reshaped["upsample.convtr.convtr.weight"] = np.zeros((3, 1, 32), dtype=np.float32)
    with pytest.raises(WeightsMismatchError, match="shape"):
        Mimi(config.mimi, reshaped)
    partial_encoder = dict(mimi_weights)
    del partial_encoder["encoder.model.0.conv.weight"]
    with pytest.raises(WeightsMismatchError, match=r"encoder\.model\.0"):
        Mimi(config.mimi, partial_encoder)


def test_bad_audio_and_latents_are_rejected() -> None:
    _, _, _, _, mimi = _family("tiny_lsd")
    with pytest.raises(CloneAudioError):
        mimi.encode(np.zeros(0, dtype=np.float32))
    with pytest.raises(CloneAudioError):
        mimi.encode(np.zeros((2, 1920), dtype=np.float32))
    with pytest.raises(CloneAudioError, match="NaN"):
        mimi.encode(np.full(1920, np.nan, dtype=np.float32))
    with pytest.raises(ValueError, match="one latent"):
        mimi.decode(mimi.new_state(), np.zeros((2, 32), dtype=np.float32))


# -- the compiled ELU ----------------------------------------------------------------------------


def test_compiled_elu_equals_numpy_elu_on_every_kind_of_input() -> None:
    assert dispatch._kernels is not None, "numba (the dev extra) is installed here"
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((3, 50, 64)) * 4).astype(np.float32)
    x[0, 0, :8] = [np.nan, -np.inf, np.inf, -1e4, -87.5, 0.0, -0.0, 1e-30]
    expected = dispatch.elu_numpy(x)
    got = dispatch.elu(x)
    assert np.array_equal(np.isnan(got), np.isnan(expected))
    finite = ~np.isnan(expected)
    np.testing.assert_allclose(got[finite], expected[finite], rtol=0, atol=2e-7)
    assert got[0, 0, 1] == -1.0 and got[0, 0, 2] == np.inf
    # Into a padded buffer (not contiguous as a whole) and in place: the same values.
    padded = np.full((3, 53, 64), 7.0, np.float32)
    dispatch.elu(x, out=padded[:, 3:])
    np.testing.assert_array_equal(padded[:, 3:], got)
    assert np.all(padded[:, :3] == 7.0)
    in_place = x.copy()
    dispatch.elu(in_place, out=in_place)
    np.testing.assert_array_equal(in_place, got)
    strided = dispatch.elu(x[0, :, ::2].T[0])  # a strided vector
    np.testing.assert_allclose(strided, expected[0, :, 0], rtol=0, atol=2e-7)


def test_decode_with_the_compiled_kernels_equals_decode_with_numpys(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The compiled ELU and packed window products (``window_kernels``) against NumPy's ELU
    and BLAS: the same audio, to float32 rounding."""
    _, _, weights, arrays, mimi = _family(FAMILIES[0])
    packed = [
        layer for _, layer in mimi.decoder.steps if getattr(layer, "_packed", None) is not None
    ]
    assert packed, "the tiny decoder's 16- and 32-channel convs run the packed kernel"
    latents = _denormalize(weights, arrays["mimi_latents"])
    compiled = _stream(mimi, latents)
    monkeypatch.setattr(dispatch, "_kernels", None)
    numpy_only = _stream(mimi, latents)
    assert snr_db(numpy_only, compiled) >= 100


def test_full_size_decoder_convs_run_packed_with_the_audio_of_blas(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Full-size ``english`` Mimi (random weights): every decoder conv but the last (one
    output channel) is packed, and a batch of streams decodes as it does on BLAS."""
    from pipecat_pocket_tts.engine.model.config import get_config

    config = get_config("english").mimi
    rng = np.random.default_rng(0)
    weights = {
        name: (rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]) or 1)).astype(np.float32)
        for name, shape in mimi_weight_shapes(config).items()
    }
    mimi = Mimi(config, weights)
    convs = mimi.decoder.convs()
    plain = [conv for conv in convs if isinstance(conv, streaming_conv.StreamingConv1d)]
    assert [conv._packed is not None for conv in plain] == [True] * (len(plain) - 1) + [False]
    latents = rng.standard_normal((3, 2, config.quantizer_dimension)).astype(np.float32)

    def decode() -> np.ndarray:
        states = [mimi.new_state(), mimi.new_state()]
        return np.stack([mimi.decode_batch(states, frame) for frame in latents])

    kernels = decode()
    monkeypatch.setattr(dispatch, "_kernels", None)
    assert snr_db(decode(), kernels) >= 100


def test_one_streams_frame_runs_the_transformer_linears_through_the_compiled_kernel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A frame of one stream (a few positions) goes through the compiled fp32 kernel, which
    reads each weight once; a batch of streams (more rows than the kernel takes) goes to BLAS."""
    _, _, weights, arrays, mimi = _family(FAMILIES[0])
    kernels = compiled.optional()
    rows: list[int] = []
    kernel = kernels.f32_matmul
    monkeypatch.setattr(
        kernels, "f32_matmul", lambda x, w, out: rows.append(x.shape[0]) or kernel(x, w, out)
    )
    latents = _denormalize(weights, arrays["mimi_latents"])
    solo = mimi.decode(mimi.new_state(), latents[0])
    linears_per_frame = 4 * len(mimi.decoder_transformer.layers)
    assert len(rows) == linears_per_frame and set(rows) == {rows[0]}
    assert rows[0] <= KERNEL_MAX_ROWS < 2 * rows[0]
    rows.clear()
    batch = mimi.decode_batch([mimi.new_state(), mimi.new_state()], latents[:2])
    assert rows == []
    assert snr_db(batch[0], solo) >= 100
