"""PocketTTS: loading, the backend factory, shared models, voices, files, and every bad input
raising a clear error of a named type."""

from __future__ import annotations

import logging
import sys
import wave
from pathlib import Path

import numpy as np
import pytest

from pipecat_pocket_tts.engine import (
    BackendUnavailableError,
    EmptyTextError,
    PackFilesMissingError,
    PocketTTS,
    UnknownBackendError,
    UnknownLanguageError,
    UnknownVoiceError,
    Voice,
    VoiceFileError,
)
from pipecat_pocket_tts.engine import backends as backends_module
from pipecat_pocket_tts.engine.backends import resolve_backend_name

TEXT = "Hello there, how are you today?"


def test_facts(engine_tts: PocketTTS):
    assert engine_tts.sample_rate == 24_000
    assert engine_tts.pack_name == "english"
    assert engine_tts.voices == ["alba", "marius"]
    assert engine_tts.default_voice == "alba"
    assert engine_tts.backend.name == "numpy"
    assert engine_tts.config.flow_lm.transformer.d_model == 64  # the pack's config.json


def test_synthesize_returns_24k_float32_frames(engine_tts: PocketTTS):
    audio = engine_tts.synthesize(TEXT, seed=1)
    assert audio.dtype == np.float32 and audio.ndim == 1
    assert audio.size > 0 and audio.size % 1920 == 0 and np.isfinite(audio).all()
    assert np.abs(audio).max() > 1e-3


def test_default_voice_is_the_languages(engine_tts: PocketTTS):
    np.testing.assert_array_equal(
        engine_tts.synthesize(TEXT, seed=2), engine_tts.synthesize(TEXT, seed=2, voice="alba")
    )


def test_voice_by_name_path_or_object_sound_the_same(engine_tts: PocketTTS, engine_pack_dir):
    path = engine_pack_dir / "embeddings" / "marius.safetensors"
    by_name = engine_tts.synthesize(TEXT, seed=3, voice="marius")
    np.testing.assert_array_equal(by_name, engine_tts.synthesize(TEXT, seed=3, voice=path))
    np.testing.assert_array_equal(by_name, engine_tts.synthesize(TEXT, seed=3, voice=str(path)))
    voice = Voice.load(path)
    np.testing.assert_array_equal(by_name, engine_tts.synthesize(TEXT, seed=3, voice=voice))
    assert not np.array_equal(by_name, engine_tts.synthesize(TEXT, seed=3, voice="alba"))


def test_voice_states_are_cached_per_voice(engine_tts: PocketTTS):
    assert engine_tts.voice_state("marius") is engine_tts.voice_state("marius")
    assert engine_tts.voice_state() is engine_tts.voice_state("alba")


def test_synthesize_to_file_writes_16_bit_mono_wav(engine_tts: PocketTTS, tmp_path: Path):
    path = engine_tts.synthesize_to_file(TEXT, tmp_path / "out.wav", seed=4)
    audio = engine_tts.synthesize(TEXT, seed=4)
    with wave.open(str(path)) as wav:
        assert (wav.getnchannels(), wav.getsampwidth(), wav.getframerate()) == (1, 2, 24_000)
        assert wav.getnframes() == audio.size


def test_max_frames_bounds_each_chunk(engine_endless_tts: PocketTTS):
    frames = list(engine_endless_tts.stream(TEXT, max_frames=7))
    assert len(frames) == 7 and frames[-1].is_last_in_utterance
    with pytest.raises(ValueError, match="max_frames"):
        engine_endless_tts.synthesize(TEXT, max_frames=0)


def test_stream_stops_computing_when_left_early(engine_endless_tts: PocketTTS):
    import threading

    frames = engine_endless_tts.stream(TEXT)
    next(frames)
    frames.close()  # what leaving a for loop does to a generator
    assert not [t for t in threading.enumerate() if t.name.startswith("pocket-tts-session")]


def test_load_shared_returns_one_model_per_key(engine_pack_dir: Path):
    a = PocketTTS.load_shared("english", backend="numpy", model_dir=engine_pack_dir)
    b = PocketTTS.load_shared("english", backend="auto", model_dir=str(engine_pack_dir))
    c = PocketTTS.load_shared(
        "english", backend="numpy", model_dir=engine_pack_dir, sampler_steps=2
    )
    assert a is b  # "auto" is NumPy here, the same folder spelled differently
    assert c is not a and c.backend.sampler_steps == 2
    assert PocketTTS.load("english", backend="numpy", model_dir=engine_pack_dir) is not a


# -- errors ------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "   ", "\n\t ", "\u200b"])
def test_nothing_to_say_is_a_value_error(engine_tts: PocketTTS, text: str):
    with pytest.raises(EmptyTextError, match="nothing to say") as info:
        engine_tts.synthesize(text)
    assert isinstance(info.value, ValueError)
    with pytest.raises(EmptyTextError):
        engine_tts.stream(text)  # raised at the call, not at the first frame


def test_text_must_be_a_string(engine_tts: PocketTTS):
    with pytest.raises(TypeError, match="str"):
        engine_tts.synthesize(b"bytes")  # type: ignore[arg-type]


def test_unknown_voice_lists_the_valid_ones(engine_tts: PocketTTS):
    with pytest.raises(UnknownVoiceError, match=r"nobody.*alba, marius"):
        engine_tts.synthesize(TEXT, voice="nobody")
    session = engine_tts.session()
    with pytest.raises(UnknownVoiceError, match="alba"):
        session.enqueue(TEXT, voice="nobody")
    session.cancel()
    with pytest.raises(TypeError, match="voice"):
        engine_tts.session(voice=42)  # type: ignore[arg-type]


def test_unknown_language_lists_the_valid_ones(engine_pack_dir: Path):
    with pytest.raises(UnknownLanguageError, match=r"klingon.*english.*french_24l"):
        PocketTTS.load("klingon", backend="numpy")


def test_unknown_backend_lists_the_valid_ones(engine_pack_dir: Path):
    with pytest.raises(UnknownBackendError, match=r"tpu.*auto, numpy, coreml"):
        PocketTTS.load("english", backend="tpu", model_dir=engine_pack_dir)


def test_coreml_off_apple_is_unavailable_and_auto_picks_numpy(
    engine_pack_dir: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(backends_module.platform, "system", lambda: "Linux")
    with pytest.raises(BackendUnavailableError, match=r"Apple.*backend='numpy'"):
        PocketTTS.load("english", backend="coreml", model_dir=engine_pack_dir)
    assert resolve_backend_name("auto") == "numpy"
    tts = PocketTTS.load("english", backend="auto", model_dir=engine_pack_dir)
    assert tts.backend.name == "numpy"


def test_coreml_on_a_mac_without_coremltools_is_unavailable(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(backends_module.platform, "system", lambda: "Darwin")
    real_find_spec = backends_module.importlib.util.find_spec
    monkeypatch.setattr(
        backends_module.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "coremltools" else real_find_spec(name, *a),
    )
    with pytest.raises(BackendUnavailableError, match="coremltools"):
        resolve_backend_name("coreml")
    assert resolve_backend_name("auto") == "numpy"


def test_missing_pack_folder(tmp_path: Path):
    with pytest.raises(PackFilesMissingError):
        PocketTTS.load("english", backend="numpy", model_dir=tmp_path / "nothing")


def test_corrupt_voice_file(engine_tts: PocketTTS, tmp_path: Path):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00not a safetensors file")
    with pytest.raises(VoiceFileError):
        engine_tts.synthesize(TEXT, voice=bad)
    with pytest.raises(VoiceFileError, match="not found"):
        engine_tts.session(voice=tmp_path / "missing.safetensors")


def test_voice_of_another_model_is_rejected(engine_tts: PocketTTS, engine_small_pack_dir: Path):
    foreign = engine_small_pack_dir / "embeddings" / "alba.safetensors"
    with pytest.raises(VoiceFileError, match="another model"):
        engine_tts.synthesize(TEXT, voice=foreign)
    with pytest.raises(VoiceFileError):
        engine_tts.synthesize(TEXT, voice=Voice.load(foreign))


def test_voice_of_another_language_is_rejected(engine_tts: PocketTTS, tmp_path: Path):
    voice = Voice.load(engine_tts.pack.voice_path("alba"))
    voice.config_name = "french"
    path = voice.save(tmp_path / "french_alba.safetensors")
    with pytest.raises(VoiceFileError, match="french"):
        engine_tts.synthesize(TEXT, voice=path)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"temperature": -0.1}, "temperature"),
        ({"temperature": float("nan")}, "temperature"),
        ({"eos_threshold": float("inf")}, "eos_threshold"),
        ({"max_frames": 2.5}, "max_frames"),
    ],
)
def test_bad_generation_settings(engine_tts: PocketTTS, options: dict, match: str):
    with pytest.raises(ValueError, match=match):
        engine_tts.synthesize(TEXT, **options)


def test_bad_seed_and_sampler_steps(engine_tts: PocketTTS, engine_pack_dir: Path):
    with pytest.raises(TypeError, match="seed"):
        engine_tts.session(seed="7")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="sampler_steps"):
        PocketTTS.load("english", backend="numpy", model_dir=engine_pack_dir, sampler_steps=0)
    with pytest.raises(ValueError, match="not one the numpy backend runs"):
        PocketTTS.load("english", backend="numpy", model_dir=engine_pack_dir, precision="fp16")


@pytest.mark.skipif(sys.platform == "darwin", reason="auto picks CoreML where it can run")
def test_coreml_options_are_ignored_where_auto_picks_numpy(engine_pack_dir: Path, caplog):
    with caplog.at_level(logging.INFO, logger="pipecat_pocket_tts.engine.model.assembly"):
        tts = PocketTTS.load(
            "english", backend="auto", model_dir=engine_pack_dir, precision="int8",
            compute_units="no-ane",
        )  # fmt: skip
    assert tts.backend.name == "numpy"
    assert tts.backend.precision == "int8"  # NumPy runs int8 too: kept, never silently fp32
    assert "ignoring the CoreML options compute_units" in caplog.text
    assert "compute_units, precision" not in caplog.text


def test_a_bare_recording_file_name_is_cloned(
    engine_tts: PocketTTS, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from pipecat_pocket_tts.engine.audio.wav import write_wav

    audio = engine_tts.synthesize(TEXT, seed=1, eos_threshold=100.0, max_frames=30)
    write_wav(tmp_path / "speaker.wav", audio, engine_tts.sample_rate)
    monkeypatch.chdir(tmp_path)
    by_name = engine_tts.synthesize(TEXT, seed=2, voice="speaker.wav")
    by_path = engine_tts.synthesize(TEXT, seed=2, voice=tmp_path / "speaker.wav")
    np.testing.assert_array_equal(by_name, by_path)


def test_text_is_normalized_unless_asked_not_to(engine_tts: PocketTTS):
    spoken = engine_tts.synthesize("I have three cats.", seed=5, normalize=False)
    np.testing.assert_array_equal(engine_tts.synthesize("I have 3 cats.", seed=5), spoken)
    assert not np.array_equal(
        engine_tts.synthesize("I have 3 cats.", seed=5, normalize=False), spoken
    )


def test_lexicon_feeds_the_normalizer(engine_tts: PocketTTS):
    plain = engine_tts.synthesize("Pipe cat rocks.", seed=6)
    lexicon = {"Pipecat": "pipe cat"}
    np.testing.assert_array_equal(
        engine_tts.synthesize("Pipecat rocks.", seed=6, lexicon=lexicon), plain
    )
    session = engine_tts.session(seed=6)
    session.enqueue("Pipecat rocks.", lexicon=lexicon)
    session.finish()
    np.testing.assert_array_equal(np.concatenate([f.samples for f in session]), plain)


def test_clone_voice_gives_a_voice_to_speak_with(engine_tts: PocketTTS, tmp_path: Path):
    rng = np.random.default_rng(0)
    recording = (0.1 * rng.standard_normal(2 * 24_000)).astype(np.float32)
    voice = engine_tts.clone_voice(recording, sample_rate=24_000)
    assert isinstance(voice, Voice) and voice.config_name == "english"
    audio = engine_tts.synthesize(TEXT, seed=1, voice=voice)
    path = voice.save(tmp_path / "clone.safetensors")
    np.testing.assert_array_equal(engine_tts.synthesize(TEXT, seed=1, voice=path), audio)
    assert not np.array_equal(audio, engine_tts.synthesize(TEXT, seed=1))


@pytest.mark.parametrize(
    ("text", "speech"),
    [("👍", False), ("***", False), ("🙂 🎉", False), ("Hello.", True), ("42", True)],
)
def test_has_speech_says_whether_the_pack_has_anything_to_say(
    engine_tts: PocketTTS, text: str, speech: bool
):
    assert engine_tts.has_speech(text) is speech
    assert engine_tts.has_speech(text, normalize=False) is speech


def test_has_speech_refuses_a_language_the_pack_does_not_speak(engine_tts: PocketTTS):
    with pytest.raises(UnknownLanguageError, match="not a variant"):
        engine_tts.has_speech("👍", "pt-BR")


def test_a_voice_cloned_by_another_pack_of_the_same_shapes_is_refused(
    engine_tts: PocketTTS, tmp_path: Path
):
    """Same config name and shapes, other weights (issue 34): as the README promises,
    ``VoiceFileError`` — from the file and from the ``Voice`` object."""
    from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict
    from pipecat_pocket_tts.engine.errors import VoiceFileError

    other_dir = build_pack(tmp_path / "english", tiny_config_dict("standard"), seed=9)
    other = PocketTTS.load("english", backend="numpy", model_dir=other_dir)
    assert other.config.name == engine_tts.config.name
    assert other.pack.weights_id != engine_tts.pack.weights_id
    rng = np.random.default_rng(0)
    recording = (0.1 * rng.standard_normal(2 * 24_000)).astype(np.float32)
    voice = other.clone_voice(recording, sample_rate=24_000)
    path = voice.save(tmp_path / "other.safetensors")
    for given in (path, voice):
        with pytest.raises(VoiceFileError, match="other weights"):
            engine_tts.synthesize(TEXT, seed=1, voice=given)
    assert other.synthesize(TEXT, seed=1, voice=path).size > 0  # its own pack takes it
    other.close()
