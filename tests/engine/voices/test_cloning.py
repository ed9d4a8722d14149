"""Voice cloning (engine/voices/cloning.py) against upstream pocket-tts, and its errors.

Parity: ``stages.npz`` holds upstream's clone of a 24 kHz float prompt (``voice_raw``) and a
temperature-0 generation from it; ``tiny_lsd/cloning.npz`` (tools/reference/
make_cloning_fixtures.py) holds upstream's clone of 16-bit WAV files: 24 kHz mono, 8 kHz mono,
44.1 kHz stereo and a 31 s recording it truncates to 30 s.

Tolerances for resampled input, relative L2 error of the whole voice state (K and V):

* ``OWN_RESAMPLING_RTOL`` = 1e-4, our 8 kHz / 44.1 kHz-stereo clone vs our 24 kHz clone of the
  same band-limited sound (sampled in closed form at each rate). soxr (HQ) reproduces in-band
  content at ≈130 dB SNR here and the measured state error is ≈2e-6; 1e-4 (80 dB) leaves a 50×
  margin and is still 10⁴ times below the distance between two different voices (≈1).
* ``UPSTREAM_RESAMPLING_RTOL`` = 3e-3, ours vs upstream on resampled WAV files. Upstream
  resamples with scipy's ``resample_poly`` whose own error on this sound is ≈63 dB SNR (8 kHz)
  and ≈67 dB (44.1 kHz): that alone moves the state by ≈9e-4 / 4e-4 (measured). 3e-3 is 3× that
  and 300× below the distance between two voices.
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
import warnings
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from paths import REPO_ROOT
from reference_fixtures import (
    FAMILIES,
    FIXTURES_DIR,
    MAX_ABS_TOLERANCE,
    MIN_AUDIO_SNR_DB,
    load_family,
    max_abs_error,
    snr_db,
)

from pipecat_pocket_tts.engine.backends.base import BackendCapabilities
from pipecat_pocket_tts.engine.backends.numpy.backend import NumpyBackend
from pipecat_pocket_tts.engine.backends.numpy.weights.checkpoint import (
    is_cloning_key,
    load_checkpoint,
)
from pipecat_pocket_tts.engine.errors import (
    CloneAudioError,
    CloningUnavailableError,
    VoiceFileError,
)
from pipecat_pocket_tts.engine.tts import PocketTTS
from pipecat_pocket_tts.engine.voices import cloning
from pipecat_pocket_tts.engine.voices.cloning import (
    CloneAudioTruncatedWarning,
    clone_voice,
    end_on_pause,
    pad_to_frames,
    prepare_prompt,
)
from pipecat_pocket_tts.engine.voices.voice import Voice

sys.path.insert(0, str(REPO_ROOT / "tools" / "reference"))
import cloning_signals as signals

OWN_RESAMPLING_RTOL = 1e-4
UPSTREAM_RESAMPLING_RTOL = 3e-3
SR = 24_000
FRAME = 1920


@cache
def _backend(name: str) -> tuple[NumpyBackend, dict[str, np.ndarray]]:
    config, weights_path, _tokenizer, arrays = load_family(name)
    backend = NumpyBackend.from_files(
        config, weights_path, sampler_steps=int(arrays["sampler_steps"])
    )
    return backend, arrays


@cache
def _cloning_fixture() -> dict[str, np.ndarray]:
    with np.load(FIXTURES_DIR / "tiny_lsd" / "cloning.npz") as npz:
        return {key: npz[key] for key in npz.files}


def _state(voice: Voice) -> np.ndarray:
    """K and V of every layer as one flat vector."""
    return np.concatenate([np.stack(voice.kv.keys).ravel(), np.stack(voice.kv.values).ravel()])


def _relative(reference: np.ndarray, actual: np.ndarray) -> float:
    return float(np.linalg.norm(reference - actual) / np.linalg.norm(reference))


def _speech(seconds: float = 1.6, rate: float = SR, **options) -> np.ndarray:
    return signals.voice_like(seconds, rate, **options).astype(np.float32)


def _generate(backend: NumpyBackend, state, frames: int) -> tuple[np.ndarray, np.ndarray]:
    """Temperature 0 from BOS: step, sample with zero noise, decode, feed the latent back."""
    zeros = np.zeros(backend.config.flow_lm.latent_dim, np.float32)
    mimi_state = backend.new_mimi_state()
    latent, latents, audio = None, [], []
    for _ in range(frames):
        latent = backend.sample(backend.step(state, latent).hidden, zeros)
        latents.append(latent)
        audio.append(backend.decode(mimi_state, latent))
    return np.array(latents), np.concatenate(audio)


# -- parity with upstream ----------------------------------------------------------------------


@pytest.mark.parametrize("name", FAMILIES)
def test_prompt_preparation_matches_upstream(name):
    _, arrays = _backend(name)
    prepared = prepare_prompt(arrays["voice_raw"], SR)
    assert prepared.dtype == np.float32 and prepared.shape == arrays["voice_audio"].shape
    assert prepared.shape[0] % FRAME == 0
    assert max_abs_error(arrays["voice_audio"], prepared) <= MAX_ABS_TOLERANCE


@pytest.mark.parametrize("name", FAMILIES)
def test_cloned_voice_state_matches_upstream(name):
    backend, arrays = _backend(name)
    voice = clone_voice(backend, arrays["voice_raw"], sample_rate=SR)
    assert voice.length == arrays["voice_k"].shape[1]  # T frames, + 1 with bos_before_voice
    assert max_abs_error(arrays["voice_k"], np.stack(voice.kv.keys)) <= MAX_ABS_TOLERANCE
    assert max_abs_error(arrays["voice_v"], np.stack(voice.kv.values)) <= MAX_ABS_TOLERANCE
    assert voice.config_name == name
    assert voice.source == "cloned from samples"


@pytest.mark.parametrize("name", FAMILIES)
def test_generation_from_cloned_voice_matches_upstream(name):
    backend, arrays = _backend(name)
    voice = clone_voice(backend, arrays["voice_raw"], sample_rate=SR)
    state = backend.flow_state_from_voice(voice.kv)
    backend.prefill(state, backend.embed_text(arrays["text_ids"]))
    latents, audio = _generate(backend, state, len(arrays["gen_latents"]))
    assert max_abs_error(arrays["gen_latents"], latents) <= MAX_ABS_TOLERANCE
    assert snr_db(arrays["gen_audio"], audio) >= MIN_AUDIO_SNR_DB


def _fixture_wav(case: str, folder: Path) -> Path:
    """Regenerate the WAV upstream cloned for ``case`` (checked sample for sample)."""
    fixture = _cloning_fixture()
    rate = int(fixture[f"{case}_rate"])
    speech = float(fixture[f"{case}_speech_seconds"])
    mono = signals.voice_like(
        speech, rate, silence_seconds=float(fixture[f"{case}_silence_seconds"])
    )
    samples = (
        mono if int(fixture[f"{case}_channels"]) == 1 else signals.stereo_pair(mono, rate, speech)
    )
    pcm = signals.to_pcm16(samples)
    assert signals.digest(pcm) == str(fixture[f"{case}_sha256"]), (
        f"cloning_signals no longer reproduces the {case!r} recording upstream cloned: "
        "regenerate with tools/reference/make_cloning_fixtures.py"
    )
    return signals.write_pcm16_wav(folder / f"{case}.wav", pcm, rate)


@pytest.mark.parametrize(
    ("case", "rtol"),
    [("wav24", None), ("narrow", UPSTREAM_RESAMPLING_RTOL), ("stereo", UPSTREAM_RESAMPLING_RTOL)],
)
def test_wav_files_clone_like_upstream(case, rtol, tmp_path):
    backend, _arrays = _backend("tiny_lsd")
    fixture = _cloning_fixture()
    path = _fixture_wav(case, tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # short files: no truncation warning
        voice = clone_voice(backend, path)
    prepared = prepare_prompt(cloning.load_source(path)[0], int(fixture[f"{case}_rate"]))
    assert prepared.shape[0] == int(fixture[f"{case}_prepared_len"])  # same trim point
    assert voice.length == int(fixture[f"{case}_positions"])
    assert voice.source == f"cloned from {case}.wav"
    index = fixture[f"{case}_kv_index"]
    keys = np.stack(voice.kv.keys)[:, index]
    values = np.stack(voice.kv.values)[:, index]
    if rtol is None:  # no resampling: the same samples reach the same model
        assert max_abs_error(fixture[f"{case}_voice_k"], keys) <= MAX_ABS_TOLERANCE
        assert max_abs_error(fixture[f"{case}_voice_v"], values) <= MAX_ABS_TOLERANCE
    else:
        reference = np.concatenate(
            [fixture[f"{case}_voice_k"].ravel(), fixture[f"{case}_voice_v"].ravel()]
        )
        assert _relative(reference, np.concatenate([keys.ravel(), values.ravel()])) <= rtol


def test_long_recordings_are_truncated_to_30_s_like_upstream(tmp_path):
    backend, _arrays = _backend("tiny_lsd")
    fixture = _cloning_fixture()
    path = _fixture_wav("long", tmp_path)
    with pytest.warns(CloneAudioTruncatedWarning, match=r"31\.0 s.*first 30\.00 s"):
        voice = clone_voice(backend, path)
    # 30 s + the 80 ms pause = 376 frames, + bos_before_voice.
    assert voice.length == int(fixture["long_positions"]) == 377
    index = fixture["long_kv_index"]
    assert max_abs_error(fixture["long_voice_k"], np.stack(voice.kv.keys)[:, index]) <= 1e-4
    assert max_abs_error(fixture["long_voice_v"], np.stack(voice.kv.values)[:, index]) <= 1e-4
    # The state fits the NumPy backend's default capacity, with room for a full chunk after it.
    assert voice.length <= backend.new_flow_state().capacity
    assert backend.flow_state_from_voice(voice.kv).capacity >= voice.length + 284


def test_backend_prompt_window_caps_the_prompt():
    """A backend with a smaller encoder window (CoreML: 125 frames) gets a prompt that fits."""
    config, weights_path, _tokenizer, _arrays = load_family("tiny_lsd")

    class ShortWindow(NumpyBackend):
        """A backend declaring a 20-frame prompt window."""

        @property
        def capabilities(self) -> BackendCapabilities:
            return dataclasses.replace(super().capabilities, max_voice_frames=20)

    backend = ShortWindow.from_files(config, weights_path)
    audio = _speech(2.0, silence_seconds=0.0)
    with pytest.warns(CloneAudioTruncatedWarning, match=r"first 1\.52 s"):
        voice = clone_voice(backend, audio, sample_rate=SR)
    assert voice.length == 20 + 1  # 1.52 s + 0.08 s pause = 20 frames exactly, + bos
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fits = clone_voice(backend, audio[: round(1.52 * SR)], sample_rate=SR)
    np.testing.assert_array_equal(_state(voice), _state(fits))


# -- the prompt preparation itself ---------------------------------------------------------------


def test_end_on_pause_trims_fades_and_appends_the_pause():
    loud = np.full(SR, 0.5, np.float32)  # 1 s, 50 windows of 20 ms
    quiet = np.full(SR // 2, 0.5 * 10 ** (-36 / 20), np.float32)  # 36 dB down: trailing silence
    out = end_on_pause(np.concatenate([loud, quiet]), SR)
    assert out.shape == (SR + 1920,)
    np.testing.assert_array_equal(out[-1920:], 0.0)
    np.testing.assert_allclose(out[SR - 480 : SR], np.linspace(0.5, 0.0, 480), atol=1e-7)
    np.testing.assert_array_equal(out[: SR - 480], 0.5)
    # 34 dB down is still part of the speech: kept.
    kept = np.full(SR // 2, 0.5 * 10 ** (-34 / 20), np.float32)
    assert end_on_pause(np.concatenate([loud, kept]), SR).shape == (SR + SR // 2 + 1920,)
    # Shorter than one analysis window: unchanged, as upstream.
    tiny = np.ones(100, np.float32)
    np.testing.assert_array_equal(end_on_pause(tiny, SR), tiny)


def test_pad_to_frames():
    assert pad_to_frames(np.ones(1920, np.float32), FRAME).shape == (1920,)
    padded = pad_to_frames(np.ones(1921, np.float32), FRAME)
    assert padded.shape == (3840,) and padded[1920] == 1.0 and not padded[1921:].any()


# -- resampling, channels, formats ---------------------------------------------------------------


def test_8k_and_44k_stereo_give_the_same_voice_as_24k_mono():
    backend, _arrays = _backend("tiny_lsd")
    seconds = 1.6
    original = clone_voice(backend, _speech(seconds), sample_rate=SR)
    another_speaker = clone_voice(backend, _speech(seconds, variant=1), sample_rate=SR)
    between_voices = _relative(_state(original), _state(another_speaker))
    assert between_voices > 0.5
    narrow = clone_voice(backend, _speech(seconds, 8_000), sample_rate=8_000)
    stereo = signals.stereo_pair(signals.voice_like(seconds, 44_100), 44_100, seconds)
    wide = clone_voice(backend, stereo.astype(np.float32), sample_rate=44_100)
    for voice in (narrow, wide):
        assert voice.length == original.length
        assert _relative(_state(original), _state(voice)) <= OWN_RESAMPLING_RTOL
    # The prepared audio itself: the band-limited sound survives resampling.
    reference = prepare_prompt(_speech(seconds), SR)
    assert snr_db(reference, prepare_prompt(_speech(seconds, 8_000), 8_000)) >= 100.0


def test_sample_layouts_and_integer_pcm_give_identical_voices(tmp_path):
    backend, _arrays = _backend("tiny_lsd")
    seconds = 1.2
    stereo = signals.stereo_pair(signals.voice_like(seconds, 44_100), 44_100, seconds)
    pcm = signals.to_pcm16(stereo)  # [n, 2] int16
    path = signals.write_pcm16_wav(tmp_path / "speaker.wav", pcm, 44_100)
    from_file = _state(clone_voice(backend, path))
    variants = [
        clone_voice(backend, pcm, sample_rate=44_100),  # int16 [n, channels]
        clone_voice(backend, pcm.T.copy(), sample_rate=44_100),  # [channels, n]
        clone_voice(backend, (pcm.astype(np.float32) / 32768.0, 44_100)),  # tuple, float
        clone_voice(backend, str(path)),
        clone_voice(backend, (pcm.astype(np.int32) << 16, 44_100.0)),  # int32 PCM
    ]
    for voice in variants:
        np.testing.assert_array_equal(_state(voice), from_file)


@pytest.mark.parametrize(
    ("fmt", "subtype", "exact"),
    [("FLAC", "PCM_16", True), ("OGG", "VORBIS", False), ("MP3", "MPEG_LAYER_III", False)],
)
def test_compressed_formats_through_soundfile(tmp_path, fmt, subtype, exact):
    soundfile = pytest.importorskip("soundfile", reason="the optional 'audio' extra")
    if fmt not in soundfile.available_formats():
        pytest.skip(f"this libsndfile cannot write {fmt}")
    backend, _arrays = _backend("tiny_lsd")
    pcm = signals.to_pcm16(signals.voice_like(1.6, 24_000))
    wav = clone_voice(backend, signals.write_pcm16_wav(tmp_path / "a.wav", pcm, SR))
    path = tmp_path / f"a.{fmt.lower()}"
    soundfile.write(str(path), pcm, SR, format=fmt, subtype=subtype)
    voice = clone_voice(backend, path)
    assert voice.source == f"cloned from {path.name}"
    if exact:  # lossless: the very same samples
        np.testing.assert_array_equal(_state(voice), _state(wav))
    else:  # lossy codecs: the same speaker, roughly
        assert np.all(np.isfinite(_state(voice)))
        assert abs(voice.length - wav.length) <= 2


def test_compressed_formats_without_soundfile_say_how_to_install(tmp_path, monkeypatch):
    backend, _arrays = _backend("tiny_lsd")
    path = tmp_path / "speaker.flac"
    path.write_bytes(b"fLaC" + bytes(100))
    monkeypatch.setattr(cloning, "_soundfile", lambda: None)
    with pytest.raises(CloneAudioError, match=r"pip install 'pipecat-pocket-tts\[audio\]'"):
        clone_voice(backend, path)


# -- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: _speech(0.6, silence_seconds=0.3), r"too short.*0\.90 s.*at least 1 s"),
        (lambda: np.zeros(2 * SR, np.float32), "silent"),
        (
            lambda: (1e-4 * np.random.default_rng(0).standard_normal(2 * SR)).astype(np.float32),
            r"silent \(loudest 20 ms at -[78]\d dBFS, below -60 dBFS\)",
        ),
        (lambda: np.where(np.arange(2 * SR) == 5, np.nan, _speech(1.7)), "NaN"),
        (lambda: np.zeros((2, 3, SR), np.float32), "shape"),
        (lambda: np.ones(2 * SR, dtype=np.complex64), "dtype complex64"),
    ],
)
def test_unusable_samples_raise_clone_audio_error(make, match):
    backend, _arrays = _backend("tiny_lsd")
    with pytest.raises(CloneAudioError, match=match):
        clone_voice(backend, make(), sample_rate=SR)


def test_unreadable_files_raise_clone_audio_error(tmp_path):
    backend, _arrays = _backend("tiny_lsd")
    with pytest.raises(CloneAudioError, match="not found"):
        clone_voice(backend, tmp_path / "missing.wav")
    garbage = tmp_path / "garbage.wav"
    garbage.write_bytes(b"this is not audio at all" * 10)
    with pytest.raises(CloneAudioError, match=r"garbage\.wav"):
        clone_voice(backend, garbage)
    if cloning._soundfile() is not None:
        fake = tmp_path / "fake.mp3"
        fake.write_bytes(bytes(range(256)) * 4)
        with pytest.raises(CloneAudioError, match=r"cannot decode audio file fake\.mp3"):
            clone_voice(backend, fake)
    short = signals.write_pcm16_wav(tmp_path / "short.wav", np.ones(8_000, np.int16), 16_000)
    with pytest.raises(CloneAudioError, match="too short"):
        clone_voice(backend, short)
    _, arrays = _backend("tiny_lsd")
    saved = clone_voice(backend, arrays["voice_raw"], sample_rate=SR).save(
        tmp_path / "v.safetensors"
    )
    with pytest.raises(CloneAudioError, match="saved voice, not a recording"):
        clone_voice(backend, saved)


def test_is_audio_path():
    assert cloning.is_audio_path("me.WAV") and cloning.is_audio_path(Path("a/b.flac"))
    assert cloning.is_audio_path("x.mp3") and cloning.is_audio_path("x.ogg")
    assert not cloning.is_audio_path("me.safetensors") and not cloning.is_audio_path("alba")
    assert not cloning.is_audio_path(np.zeros(3))


def test_sample_rate_arguments_are_checked(tmp_path):
    backend, _arrays = _backend("tiny_lsd")
    audio = _speech()
    with pytest.raises(TypeError, match="sample rate"):
        clone_voice(backend, audio)
    path = signals.write_pcm16_wav(tmp_path / "a.wav", signals.to_pcm16(audio), SR)
    with pytest.raises(TypeError, match="carries its own sample rate"):
        clone_voice(backend, path, sample_rate=SR)
    with pytest.raises(CloneAudioError, match="not usable"):
        clone_voice(backend, audio, sample_rate=0)


def test_weights_without_cloning_raise_cloning_unavailable():
    config, weights_path, _tokenizer, arrays = load_family("tiny_lsd")
    full = load_checkpoint(weights_path, config)
    backend = NumpyBackend(config, {k: v for k, v in full.items() if not is_cloning_key(k)})
    with pytest.raises(CloningUnavailableError) as info:
        clone_voice(backend, arrays["voice_raw"], sample_rate=SR)
    message = str(info.value)
    assert "https://huggingface.co/kyutai/pocket-tts" in message
    assert "HF_TOKEN" in message and "without-voice-cloning" in message
    # Checked before the audio: bad audio still reports the missing weights first.
    with pytest.raises(CloningUnavailableError):
        clone_voice(backend, np.zeros(10, np.float32), sample_rate=SR)


# -- backend-agnostic contract ----------------------------------------------------------------


class _RecordingBackend:
    """Delegates to a real backend and records the stage calls cloning makes."""

    def __init__(self, inner: NumpyBackend) -> None:
        self._inner = inner
        self.config = inner.config
        self.capabilities = inner.capabilities  # the declared record, not a stage call
        self.calls: list[tuple[str, tuple]] = []

    def __getattr__(self, name: str):
        method = getattr(self._inner, name)

        def record(*args):
            self.calls.append((name, tuple(np.shape(a) for a in args if isinstance(a, np.ndarray))))
            return method(*args)

        return record


def test_cloning_uses_only_the_stage_interface():
    backend, arrays = _backend("tiny_lsd")
    recording = _RecordingBackend(backend)
    voice = clone_voice(recording, arrays["voice_raw"], sample_rate=SR)  # type: ignore[arg-type]
    frames, d_model = arrays["voice_conditioning"].shape
    assert recording.calls == [
        ("encode", ((frames * FRAME,),)),
        ("bos_before_voice", ()),
        ("new_flow_state", ()),
        ("prefill", ((frames + 1, d_model),)),  # [bos_before_voice, frames…] in one call
        ("voice_from_flow_state", ()),
    ]
    assert max_abs_error(arrays["voice_k"], np.stack(voice.kv.keys)) <= MAX_ABS_TOLERANCE


def test_models_without_bos_before_voice_prefill_frames_only():
    backend, arrays = _backend("tiny_inner512")
    recording = _RecordingBackend(backend)
    clone_voice(recording, arrays["voice_raw"], sample_rate=SR)  # type: ignore[arg-type]
    names = [name for name, _ in recording.calls]
    assert "bos_before_voice" not in names
    assert recording.calls[2] == ("prefill", (arrays["voice_conditioning"].shape,))


# -- through PocketTTS: save, load, sessions, packs ----------------------------------------------


def _pack(folder: Path, *, cloning_weights: bool = True) -> Path:
    """A local pack folder with the tiny_lsd fixture's config, tokenizer and weights."""
    from safetensors.numpy import save_file

    source = FIXTURES_DIR / "tiny_lsd"
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "tokenizer.model"):
        shutil.copy(source / name, folder / name)
    if cloning_weights:
        shutil.copy(source / "model.safetensors", folder / "model.safetensors")
    else:  # as the ungated 'pocket-tts-without-voice-cloning' checkpoints
        config, weights_path, _tokenizer, _ = load_family("tiny_lsd")
        weights = load_checkpoint(weights_path, config)
        save_file(
            {k: np.ascontiguousarray(v) for k, v in weights.items() if not is_cloning_key(k)},
            str(folder / "model.safetensors"),
        )
    return folder


SPEAK = {"seed": 3, "max_frames": 6, "eos_threshold": 100.0, "normalize": False}


def test_clone_save_load_round_trip_gives_identical_audio(tmp_path):
    tts = PocketTTS.load("english_tiny", backend="numpy", model_dir=_pack(tmp_path / "pack"))
    _, arrays = _backend("tiny_lsd")
    wav = signals.write_pcm16_wav(
        tmp_path / "speaker.wav", signals.to_pcm16(arrays["voice_raw"]), SR
    )
    voice = clone_voice(tts.backend, wav, config_name=tts.pack_name)
    assert voice.config_name == "english_tiny"
    path = voice.save(tmp_path / "my.safetensors")

    from safetensors import safe_open

    with safe_open(str(path), framework="np") as f:  # upstream's voice-state layout
        cache = f.get_tensor("transformer.layers.0.self_attn/cache")
        assert cache.shape == (2, 1, voice.length, voice.kv_heads, voice.head_dim)
        assert f.get_tensor("transformer.layers.0.self_attn/offset").tolist() == [voice.length]
        assert f.metadata()["pocket_tts_config"] == "english_tiny"

    loaded = Voice.load(path, tts.config)
    np.testing.assert_array_equal(_state(loaded), _state(voice))
    assert loaded.source == "cloned from speaker.wav"
    in_memory = tts.synthesize("Hello world.", voice=voice, **SPEAK)
    assert in_memory.shape == (6 * FRAME,) and np.all(np.isfinite(in_memory))
    np.testing.assert_array_equal(tts.synthesize("Hello world.", voice=path, **SPEAK), in_memory)
    np.testing.assert_array_equal(tts.synthesize("Hello world.", voice=loaded, **SPEAK), in_memory)
    session = tts.session(voice=str(path), seed=3, max_frames=6, eos_threshold=100.0)
    session.enqueue("Hello world.", normalize=False)
    session.finish()
    frames = [frame.samples for frame in session]
    np.testing.assert_array_equal(np.concatenate(frames), in_memory)


def test_a_recording_path_as_voice_is_cloned_once_and_cached(tmp_path):
    tts = PocketTTS.load("english_tiny", backend="numpy", model_dir=_pack(tmp_path / "pack"))
    _, arrays = _backend("tiny_lsd")
    wav = signals.write_pcm16_wav(
        tmp_path / "speaker.wav", signals.to_pcm16(arrays["voice_raw"]), SR
    )
    expected = tts.synthesize("Hello world.", voice=tts.clone_voice(wav), **SPEAK)
    np.testing.assert_array_equal(tts.synthesize("Hello world.", voice=str(wav), **SPEAK), expected)
    assert tts.voice_state(wav) is tts.voice_state(str(wav))  # cloned once, then reused


def test_cloned_voice_used_with_another_language_pack_is_rejected(tmp_path):
    folder = _pack(tmp_path / "pack")
    english = PocketTTS.load("english_tiny", backend="numpy", model_dir=folder)
    french = PocketTTS.load("french_tiny", backend="numpy", model_dir=folder)
    _, arrays = _backend("tiny_lsd")
    voice = clone_voice(english.backend, arrays["voice_raw"], sample_rate=SR)
    path = voice.save(tmp_path / "english_voice.safetensors")
    for given in (voice, path, Voice.load(path)):
        with pytest.raises(VoiceFileError, match=r"made for model config 'english_tiny'"):
            french.synthesize("Bonjour.", voice=given, **SPEAK)
    assert english.synthesize("Hello.", voice=path, **SPEAK).shape == (6 * FRAME,)


def test_pack_without_cloning_weights_refuses_to_clone(tmp_path):
    folder = _pack(tmp_path / "ungated", cloning_weights=False)
    tts = PocketTTS.load("english_tiny", backend="numpy", model_dir=folder)
    assert not tts.pack.has_voice_cloning
    _, arrays = _backend("tiny_lsd")
    with pytest.raises(CloningUnavailableError, match=r"accept the model terms at https://"):
        clone_voice(tts.backend, arrays["voice_raw"], sample_rate=SR)
    # Saved voices still work on such a pack (no silent fallback, no lost features).
    path = clone_voice(_backend("tiny_lsd")[0], arrays["voice_raw"], sample_rate=SR).save(
        tmp_path / "v.safetensors"
    )
    voice = Voice.load(path)
    voice.config_name = "english_tiny"
    assert tts.synthesize("Hello.", voice=voice, **SPEAK).shape == (6 * FRAME,)
