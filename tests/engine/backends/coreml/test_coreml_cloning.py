"""Voice cloning on the CoreML backend, with stand-in encoders that compute through NumPy.

The stand-in encoders take the real 10 s window ``audio`` [1, 1, 240000] and give
``conditioning`` [1, 125, d]. The pack-local one (``mimi_encoderv3``) bakes in the pack's own
speaker projection; the shared one (``mimi_encoderv2``) bakes in a different, "English"
projection E, ships ``encoder_recover_pinv.bin`` = pinv(Eᵀ), and the pack ships its own
``speaker_proj_weight.bin``: only a correct reprojection gives the NumPy backend's clone. The
Mimi encoder is causal, so encoding the zero-padded 10 s window and keeping the first P frames
equals encoding the prompt alone (measured: ≤ 4e-6 on conditioning of magnitude ≈ 10).
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
from coreml_standins import (
    ENCODER_SAMPLES,
    encoder_standin,
    standin_loader,
    standin_models,
    write_coreml_pack,
    write_model_folder,
)

from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict
from pipecat_pocket_tts.engine.audio.wav import write_wav
from pipecat_pocket_tts.engine.backends import find_pack_files
from pipecat_pocket_tts.engine.backends.coreml.backend import CoreMLBackend
from pipecat_pocket_tts.engine.backends.coreml.constants import write_floats
from pipecat_pocket_tts.engine.backends.coreml.encoder import (
    Reprojection,
    VoiceEncoder,
    fit_window,
    read_conditioning,
    usable_frames,
)
from pipecat_pocket_tts.engine.backends.coreml.files import EncoderFiles, find_encoder
from pipecat_pocket_tts.engine.backends.coreml.io_specs import EncoderSpecs, TensorSpec
from pipecat_pocket_tts.engine.backends.numpy.backend import NumpyBackend
from pipecat_pocket_tts.engine.backends.numpy.weights.checkpoint import load_checkpoint
from pipecat_pocket_tts.engine.errors import CloningUnavailableError, WeightsMismatchError
from pipecat_pocket_tts.engine.text.tokenizer import Tokenizer
from pipecat_pocket_tts.engine.tts import PocketTTS
from pipecat_pocket_tts.engine.voices.cloning import (
    CloneAudioTruncatedWarning,
    clone_voice,
    prepare_prompt,
)

RATE = 24_000
FRAME = 1920
#: fp32 stand-ins: the CoreML clone's K/V equal NumPy's up to float rounding (measured ≈1e-6).
ATOL = 1e-4


def tiny_config() -> dict:
    config = tiny_config_dict("standard")
    config["mimi"]["transformer"]["num_layers"] = 2
    return config


def speech_like(seconds: float, seed: int = 0) -> np.ndarray:
    """A voiced, syllable-modulated test signal [n] at 24 kHz (loud enough to clone)."""
    rng = np.random.default_rng(seed)
    t = np.arange(round(seconds * RATE)) / RATE
    envelope = 0.55 + 0.45 * np.sin(2 * np.pi * 3.0 * t)
    voiced = 0.3 * np.sin(2 * np.pi * 170 * t) + 0.1 * np.sin(2 * np.pi * 510 * t)
    return ((voiced + 0.05 * rng.standard_normal(t.size)) * envelope).astype(np.float32)


class ClonePack:
    """A tiny NumPy pack and its CoreML twin in ``<root>/repo/v2.1/<language>/``, with the
    encoder files ``encoder`` asks for: "pack" (mimi_encoderv3), "shared" (root mimi_encoderv2
    + encoder_recover_pinv.bin + speaker_proj_weight.bin; English: the encoder alone) or None."""

    def __init__(
        self,
        root: Path,
        language: str,
        encoder: str | None,
        *,
        dtype: str = "float32",
        strided: bool = False,
    ) -> None:
        self.numpy_dir = build_pack(
            root / "numpy", tiny_config(), voices=("alba",), language=language
        )
        self.numpy_pack = find_pack_files(language, model_dir=self.numpy_dir)
        self.config = self.numpy_pack.config
        self.reference = NumpyBackend.from_files(
            self.config, self.numpy_pack.weights, sampler_steps=8
        )
        assert self.reference.has_voice_cloning
        self.models = standin_models(self.reference)
        self.repo = root / "repo"
        self.folder = write_coreml_pack(
            self.repo / "v2.1" / language, self.numpy_dir, self.reference, self.models
        )
        encoders = {}
        self.encoder_model = None
        if encoder == "pack":
            self.encoder_model = encoder_standin(
                self.reference, dtype=dtype, strided=strided, name="mimi_encoderv3"
            )
            write_model_folder(self.folder / "mimi_encoderv3.mlmodelc", self.encoder_model)
        elif encoder == "shared":
            english = language == "english"
            weights = load_checkpoint(self.numpy_pack.weights, self.config)
            own = np.asarray(weights["flow_lm.speaker_proj_weight"], np.float32)  # [d, latent]
            rng = np.random.default_rng(7)
            shared = own if english else rng.standard_normal(own.shape).astype(np.float32) * 0.2
            self.encoder_model = encoder_standin(
                self.reference, projection=shared, dtype=dtype, strided=strided,
                name="mimi_encoderv2",
            )  # fmt: skip
            write_model_folder(self.repo / "mimi_encoderv2.mlmodelc", self.encoder_model)
            if not english:
                write_floats(self.repo / "encoder_recover_pinv.bin", np.linalg.pinv(shared.T))
                write_floats(self.folder / "constants_bin" / "speaker_proj_weight.bin", own)
        if self.encoder_model is not None:
            encoders[f"{self.encoder_model.name}.mlmodelc"] = self.encoder_model
        self.pack = find_pack_files(language, model_dir=self.repo, backend_kind="coreml")
        self.loader = standin_loader(self.models, encoders)
        self.backend = CoreMLBackend.from_pack(self.pack, model_loader=self.loader)
        self.loaded_at_start = list(self.loader.loaded)


@pytest.fixture(scope="module")
def english(tmp_path_factory: pytest.TempPathFactory) -> ClonePack:
    return ClonePack(tmp_path_factory.mktemp("en"), "english", "shared")


@pytest.fixture(scope="module")
def german_shared(tmp_path_factory: pytest.TempPathFactory) -> ClonePack:
    return ClonePack(tmp_path_factory.mktemp("de_shared"), "german", "shared")


def _assert_same_voice(actual, expected, atol: float = ATOL) -> None:
    assert actual.length == expected.length
    for a, b in zip(actual.keys + actual.values, expected.keys + expected.values, strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=atol)


# -- the whole clone equals the NumPy backend's ------------------------------------------------


@pytest.mark.parametrize("which", ["english", "german_shared"])
def test_clone_equals_the_numpy_clone(which: str, request: pytest.FixtureRequest) -> None:
    setup: ClonePack = request.getfixturevalue(which)
    assert setup.pack.has_voice_cloning and setup.backend.has_voice_cloning
    assert setup.backend.max_voice_frames == 125
    assert all("encoder" not in name for name, _ in setup.loaded_at_start)  # loaded lazily
    audio = speech_like(6.0)
    expected = clone_voice(setup.reference, (audio, RATE))
    setup.encoder_model.record = True
    actual = clone_voice(setup.backend, (audio, RATE))
    setup.encoder_model.record = False
    _assert_same_voice(actual.kv, expected.kv)
    prompt = prepare_prompt(audio, RATE, max_frames=125)
    assert actual.length == 1 + prompt.size // FRAME  # bos_before_voice + every prompt frame
    fed = setup.encoder_model.calls[-1]["audio"]
    assert fed.shape == (1, 1, ENCODER_SAMPLES)
    np.testing.assert_array_equal(fed[0, 0, : prompt.size], prompt)
    assert not fed[0, 0, prompt.size :].any()
    encoder_name = setup.encoder_model.name + ".mlmodelc"
    assert setup.loader.loaded[-1] == (encoder_name, "cpu-gpu")
    assert setup.loader.paths[-1].parent == setup.repo  # the shared encoder at the root
    reprojection = setup.backend.voice_encoder().reprojection
    assert (reprojection is None) == (which == "english")


def test_engine_speaks_with_a_cloned_recording_as_numpy_does(
    german_shared: ClonePack, tmp_path: Path
) -> None:
    """A WAV path as ``voice=``: cloned once on each backend, then the same audio."""
    setup = german_shared
    wav = write_wav(tmp_path / "speaker.wav", speech_like(3.0, seed=9), RATE)
    tokenizer = Tokenizer.from_file(setup.pack.tokenizer)
    engines = [
        PocketTTS(config=setup.config, backend=backend, tokenizer=tokenizer, pack=pack)
        for backend, pack in (
            (setup.reference, setup.numpy_pack),
            (setup.backend, setup.pack),
        )
    ]
    kwargs = {"voice": wav, "seed": 4, "eos_threshold": 50.0, "max_frames": 10}
    expected, actual = (e.synthesize("Guten Tag, wie geht es dir?", **kwargs) for e in engines)
    assert actual.shape == expected.shape and actual.size >= 10 * FRAME
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-4)


@pytest.mark.parametrize(("dtype", "strided"), [("float32", False), ("float16", True)])
def test_pack_local_encoder(tmp_path: Path, dtype: str, strided: bool) -> None:
    setup = ClonePack(tmp_path, "german", "pack", dtype=dtype, strided=strided)
    encoder = setup.backend.voice_encoder()
    assert encoder.reprojection is None and setup.loader.paths[-1].parent == setup.folder
    audio = speech_like(4.0, seed=3)
    prompt = prepare_prompt(audio, RATE, max_frames=125)
    expected = setup.reference.encode(prompt)
    actual = setup.backend.encode(prompt)
    assert actual.dtype == np.float32 and actual.flags.c_contiguous
    assert actual.shape == expected.shape == (prompt.size // FRAME, 64)
    if dtype == "float32":
        np.testing.assert_allclose(actual, expected, rtol=0, atol=ATOL)
        _assert_same_voice(
            clone_voice(setup.backend, (audio, RATE)).kv,
            clone_voice(setup.reference, (audio, RATE)).kv,
        )
    else:  # fp16 output: within half-precision rounding, and no padding values (NaN) leak in
        scale = np.abs(expected).max()
        np.testing.assert_allclose(actual, expected, rtol=2e-3, atol=2e-3 * scale)


# -- the 10 s window ----------------------------------------------------------------------------


def test_usable_frame_count() -> None:
    assert usable_frames(180_000, 125, FRAME) == 94  # 93.75 frames of real audio
    assert usable_frames(240_000, 125, FRAME) == 125
    assert usable_frames(FRAME, 125, FRAME) == 1
    assert usable_frames(FRAME + 1, 125, FRAME) == 2
    assert usable_frames(240_000, 100, FRAME) == 100  # an encoder with fewer frames
    assert usable_frames(10**7, 400, FRAME) == 125  # never beyond the 10 s window


def test_window_padding_and_truncation(english: ClonePack) -> None:
    model = english.encoder_model
    audio = speech_like(12.5, seed=5)
    model.record = True
    short = english.backend.encode(audio[:180_000])
    long = english.backend.encode(audio[:300_000])
    exact = english.backend.encode(audio[:ENCODER_SAMPLES])
    model.record = False
    assert short.shape == (94, 64) and long.shape == exact.shape == (125, 64)
    padded, truncated, _ = (call["audio"][0, 0] for call in model.calls[-3:])
    np.testing.assert_array_equal(padded[:180_000], audio[:180_000])
    assert not padded[180_000:].any()
    np.testing.assert_array_equal(truncated, audio[:ENCODER_SAMPLES])
    np.testing.assert_array_equal(long, exact)
    window, real = fit_window(audio[:1000], 4000)
    assert window.shape == (1, 1, 4000) and real == 1000 and not window[0, 0, 1000:].any()
    window, real = fit_window(audio[:5000], 4000)
    assert real == 4000
    np.testing.assert_array_equal(window[0, 0], audio[:4000])


def test_long_recordings_are_trimmed_to_the_window(english: ClonePack) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        voice = clone_voice(english.backend, (speech_like(14.0, seed=2), RATE))
    assert any(issubclass(w.category, CloneAudioTruncatedWarning) for w in caught)
    assert 120 <= voice.length <= 126  # bos_before_voice + at most 125 frames, pause included


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_strided_outputs_are_read_correctly(dtype: str) -> None:
    rng = np.random.default_rng(0)
    values = rng.standard_normal((125, 16)).astype(dtype)
    padded = np.full((1, 125, 21), np.nan, dtype=dtype)
    padded[0, :, :16] = values
    transposed = np.ascontiguousarray(values.T)[None].transpose(0, 2, 1)  # column-major rows
    for view in (padded[:, :, :16], transposed, values[None]):
        got = read_conditioning(view, 94, 16)
        assert got.dtype == np.float32 and got.flags.c_contiguous and got.shape == (94, 16)
        np.testing.assert_array_equal(got, values[:94].astype(np.float32))
    with pytest.raises(WeightsMismatchError, match="shape"):
        read_conditioning(values[None], 126, 16)


# -- reprojection -------------------------------------------------------------------------------


def test_reprojection_matches_a_naive_reference() -> None:
    rng = np.random.default_rng(1)
    d, k, frames = 6, 3, 4
    pinv = rng.standard_normal((d, k)).astype(np.float32)
    proj = rng.standard_normal((d, k)).astype(np.float32)
    cond = rng.standard_normal((frames, d)).astype(np.float32)
    naive = np.zeros((frames, d))
    for t in range(frames):
        for j in range(d):
            naive[t, j] = sum(
                sum(float(cond[t, i]) * float(pinv[i, m]) for i in range(d)) * float(proj[j, m])
                for m in range(k)
            )
    got = Reprojection(pinv, proj)(cond)
    assert got.shape == (frames, d) and got.dtype == np.float32
    np.testing.assert_allclose(got, naive, rtol=1e-5, atol=1e-5)
    # With the encoder's own projection (English) it is the identity on its outputs.
    english = rng.standard_normal((64, 32)).astype(np.float32)
    outputs = rng.standard_normal((10, 32)).astype(np.float32) @ english.T
    identity = Reprojection(np.linalg.pinv(english.T).astype(np.float32), english)
    np.testing.assert_allclose(identity(outputs), outputs, rtol=0, atol=1e-4)


def test_reprojection_files_are_checked(tmp_path: Path) -> None:
    write_floats(tmp_path / "pinv.bin", np.zeros((64, 32)))
    write_floats(tmp_path / "proj.bin", np.zeros((64, 31)))
    with pytest.raises(WeightsMismatchError, match=r"proj\.bin"):
        Reprojection.load(tmp_path / "pinv.bin", tmp_path / "proj.bin", d_model=64, latent_dim=32)


# -- missing files and wrong models ---------------------------------------------------------------


def _copy(setup: ClonePack, tmp_path: Path, *remove: str) -> Path:
    repo = shutil.copytree(setup.repo, tmp_path / "repo", symlinks=True)
    for relative in remove:
        path = repo / relative
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    return repo


@pytest.mark.parametrize(
    ("which", "remove", "message"),
    [
        ("english", ["mimi_encoderv2.mlmodelc"], r"mimi_encoderv2\.mlmodelc"),
        ("german_shared", ["encoder_recover_pinv.bin"], r"mimi_encoderv3.*speaker_proj_weight"),
        (
            "german_shared",
            ["v2.1/german/constants_bin/speaker_proj_weight.bin"],
            r"encoder_recover_pinv\.bin",
        ),
        ("english", ["v2.1/english/constants_bin/bos_before_voice.bin"], "bos_before_voice"),
    ],
)
def test_missing_encoder_files_say_what_is_missing(
    which: str, remove: list[str], message: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    setup: ClonePack = request.getfixturevalue(which)
    repo = _copy(setup, tmp_path, *remove)
    language = setup.config.name
    pack = find_pack_files(language, model_dir=repo, backend_kind="coreml")
    assert not pack.has_voice_cloning
    backend = CoreMLBackend.from_pack(pack, model_loader=setup.loader)
    assert not backend.has_voice_cloning
    with pytest.raises(CloningUnavailableError, match=message) as caught:
        clone_voice(backend, (speech_like(2.0), RATE))
    assert "backend='numpy'" in str(caught.value)
    with pytest.raises(CloningUnavailableError, match=message):
        backend.encode(speech_like(2.0))


def test_encoder_selection_rules(tmp_path: Path) -> None:
    def touch(*paths: str) -> Path:
        root = tmp_path / str(len(list(tmp_path.iterdir())))
        for path in paths:
            target = root / path
            if path.endswith(".mlmodelc"):
                target.mkdir(parents=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(b"x")
        (root / "v2.1/x/constants_bin").mkdir(parents=True, exist_ok=True)
        return root / "v2.1/x"

    v3, v2 = "v2.1/x/mimi_encoderv3.mlmodelc", "mimi_encoderv2.mlmodelc"
    pinv, proj = "encoder_recover_pinv.bin", "v2.1/x/constants_bin/speaker_proj_weight.bin"
    both = touch(v3, v2, pinv, proj)
    found = find_encoder(both, english=False)
    assert (
        isinstance(found, EncoderFiles)
        and found.pack_local
        and found.model.name == "mimi_encoderv3.mlmodelc"
    )
    found = find_encoder(both, english=True)  # English never uses a pack-local encoder
    assert isinstance(found, EncoderFiles) and not found.pack_local and found.reprojected
    shared = find_encoder(touch(v2, pinv, proj), english=False)
    assert isinstance(shared, EncoderFiles) and shared.reprojected
    assert isinstance(find_encoder(touch(v2, pinv), english=False), str)
    english_only = find_encoder(touch(v2), english=True)
    assert isinstance(english_only, EncoderFiles) and not english_only.reprojected
    flat = touch("v2.1/x/" + v2, "v2.1/x/" + pinv, proj)  # all beside the models
    assert isinstance(find_encoder(flat, english=False), EncoderFiles)
    assert "backend='numpy'" in find_encoder(touch(), english=True)  # type: ignore[operator]


def test_encoder_io_specs_mismatches(english: ClonePack) -> None:
    good_in = [TensorSpec("audio", (1, 1, ENCODER_SAMPLES))]
    good_out = [TensorSpec("conditioning", (1, 125, 64), "float16")]
    specs = EncoderSpecs.from_io(good_in, good_out)
    assert (specs.window_samples, specs.frames, specs.d_model) == (240_000, 125, 64)
    anonymous = EncoderSpecs.from_io(good_in, [TensorSpec("var_91", (1, 125, 64))])
    assert anonymous.output == "var_91"
    for inputs, outputs, message in [
        ([TensorSpec("samples", (1, 1, 240_000))], good_out, "no input 'audio'"),
        ([TensorSpec("audio", (1, 240_000))], good_out, r"audio \[1,1,samples\]"),
        (good_in, [TensorSpec("a", (1, 125, 64)), TensorSpec("b", (1, 125, 64))], "one output"),
    ]:
        with pytest.raises(WeightsMismatchError, match=message):
            EncoderSpecs.from_io(inputs, outputs)
    wide = encoder_standin(english.reference)
    wide._outputs = (TensorSpec("conditioning", (1, 125, 128)),)
    with pytest.raises(WeightsMismatchError, match="128-wide"):
        VoiceEncoder(wide, english.config)
