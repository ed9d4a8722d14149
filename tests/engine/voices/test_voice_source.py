"""The one voice parser: names, files, recordings, hf:// hub files and Voice objects."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hub_cache import HUB_REPO, publish_voice

from pipecat_pocket_tts.engine import PocketTTS
from pipecat_pocket_tts.engine.audio.wav import write_wav
from pipecat_pocket_tts.engine.errors import (
    CloneAudioError,
    PackFilesMissingError,
    UnknownVoiceError,
    VoiceFileError,
)
from pipecat_pocket_tts.engine.voices.voice import Voice


def _kv(tts: PocketTTS, voice: object) -> list[np.ndarray]:
    return tts.backend.voice_from_flow_state(tts.voice_state(voice)).keys  # type: ignore[arg-type]


def _speech(path: Path) -> Path:
    t = np.arange(int(1.5 * 24_000)) / 24_000
    samples = 0.3 * np.sin(2 * np.pi * 220 * t) * (1 + np.sin(2 * np.pi * 3 * t)) / 2
    return write_wav(path, samples.astype(np.float32))


def test_each_form_is_parsed_to_its_kind(engine_tts: PocketTTS, engine_pack_dir: Path, tmp_path):
    state_file = engine_pack_dir / "embeddings" / "marius.safetensors"
    recording = _speech(tmp_path / "me.wav")
    voice = Voice.load(state_file)
    assert engine_tts.check_voice("alba").kind == "pack"
    assert engine_tts.check_voice(None).name == "alba"  # the default voice
    assert engine_tts.check_voice(state_file).kind == "file"
    assert engine_tts.check_voice(str(state_file)).kind == "file"
    assert engine_tts.check_voice(recording).kind == "recording"
    assert engine_tts.check_voice(voice).kind == "object"
    assert engine_tts.check_voice(f"hf://{HUB_REPO}/alba-mackenna/casual.wav").kind == "hub"


def test_bad_voices_raise_named_errors_saying_what_to_do(engine_tts: PocketTTS, tmp_path):
    with pytest.raises(UnknownVoiceError, match="alba, marius"):
        engine_tts.check_voice("nobody")
    with pytest.raises(VoiceFileError, match="not found"):
        engine_tts.check_voice(tmp_path / "gone.safetensors")
    with pytest.raises(CloneAudioError, match="not found"):
        engine_tts.check_voice(str(tmp_path / "gone.wav"))
    with pytest.raises(VoiceFileError, match="hf://<owner>/<repo>"):
        engine_tts.check_voice("hf://kyutai")
    with pytest.raises(VoiceFileError, match="neither a recording"):
        engine_tts.check_voice(f"hf://{HUB_REPO}/alba-mackenna/readme.md")
    with pytest.raises(TypeError, match="voice must be"):
        engine_tts.check_voice(42)  # type: ignore[arg-type]


def test_a_hub_voice_state_is_fetched_through_the_hf_cache(
    engine_tts: PocketTTS, engine_pack_dir: Path, hf_cache: Path
) -> None:
    content = (engine_pack_dir / "embeddings" / "marius.safetensors").read_bytes()
    url = publish_voice(hf_cache, "marius/voice.safetensors", content)
    got = _kv(engine_tts, url)
    want = _kv(engine_tts, "marius")
    assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))
    assert engine_tts.voice_state(url) is engine_tts.voice_state(url)  # loaded once


def test_a_hub_recording_is_cloned_once(
    engine_tts: PocketTTS, hf_cache: Path, tmp_path: Path
) -> None:
    wav = _speech(tmp_path / "casual.wav")
    url = publish_voice(hf_cache, "alba-mackenna/casual.wav", wav.read_bytes())
    local = _kv(engine_tts, wav)
    hub = _kv(engine_tts, url)
    assert all(np.array_equal(a, b) for a, b in zip(hub, local, strict=True))
    assert engine_tts.voice_state(url) is engine_tts.voice_state(url)
    audio = engine_tts.synthesize("Hello there.", voice=url, seed=1)
    assert audio.size > 0


def test_a_hub_voice_missing_offline_says_how_to_get_it(
    engine_tts: PocketTTS, hf_cache: Path
) -> None:
    with pytest.raises(PackFilesMissingError, match="HF_HUB_OFFLINE"):
        engine_tts.voice_state(f"hf://{HUB_REPO}/nobody/voice.safetensors")
