"""The CoreML backend on real Apple hardware with a real v2.1 pack (skipped elsewhere).

Run on a Mac (Apple silicon, macOS 13+, ``pip install -e '.[dev,coreml]'``) with either

    cd tests/engine/backends/coreml
    POCKET_TTS_COREML_DIR=<a copy of v2.1/<language>/>  python -m pytest test_coreml_mac.py
    POCKET_TTS_COREML_DOWNLOAD=1  python -m pytest test_coreml_mac.py  # into the HF cache

``POCKET_TTS_COREML_LANGUAGE`` picks the pack (default english).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from pipecat_pocket_tts.engine import PocketTTS
from pipecat_pocket_tts.engine.backends import coreml_unavailable_reason

pytestmark = pytest.mark.mac

SENTENCE = "The quick brown fox jumps over the lazy dog near the river bank."
LANGUAGE = os.environ.get("POCKET_TTS_COREML_LANGUAGE", "english")
MODEL_DIR = os.environ.get("POCKET_TTS_COREML_DIR") or None


def _skip_reason() -> str | None:
    reason = coreml_unavailable_reason()
    if reason:
        return f"needs a Mac with CoreML: {reason}"
    if MODEL_DIR is None and os.environ.get("POCKET_TTS_COREML_DOWNLOAD") != "1":
        return (
            "set POCKET_TTS_COREML_DIR=<a v2.1 language folder> or POCKET_TTS_COREML_DOWNLOAD=1 "
            "(downloads the pack, a few hundred MB) to run the real-pack tests"
        )
    return None


if (_reason := _skip_reason()) is not None:
    pytest.skip(_reason, allow_module_level=True)


@pytest.fixture(scope="module")
def tts() -> PocketTTS:
    return PocketTTS.load(LANGUAGE, backend="coreml", model_dir=MODEL_DIR)


def test_the_real_pack_follows_the_io_specs(tts: PocketTTS) -> None:
    specs = tts.backend.io_specs
    assert tts.backend.name == "coreml"
    assert specs.step.kv.num_layers == tts.config.num_layers
    assert specs.step.kv.capacity == 512 and specs.prefill.window == 256
    assert len(specs.mimi.state_inputs) == 24
    assert specs.mimi.frame_size == 1920


def test_synthesizes_a_sentence(tts: PocketTTS) -> None:
    audio = tts.synthesize(SENTENCE, seed=1)
    seconds = audio.size / tts.sample_rate
    assert audio.dtype == np.float32 and audio.size % 1920 == 0
    assert 2.0 <= seconds <= 9.0, f"{seconds:.2f} s for a 13-word sentence"
    assert np.isfinite(audio).all()
    rms = float(np.sqrt(np.mean(audio.astype(np.float64) ** 2)))
    assert 0.005 < rms < 0.5 and np.abs(audio).max() < 1.5


def test_seed_makes_it_deterministic(tts: PocketTTS) -> None:
    first = tts.synthesize(SENTENCE, seed=7)
    second = tts.synthesize(SENTENCE, seed=7)
    assert first.shape == second.shape
    np.testing.assert_allclose(first, second, rtol=0, atol=1e-4)
    other = tts.synthesize(SENTENCE, seed=8)
    assert other.shape != first.shape or not np.allclose(other, first, atol=1e-3)
    streamed = np.concatenate([f.samples for f in tts.stream(SENTENCE, seed=7)])
    np.testing.assert_allclose(streamed, first, rtol=0, atol=1e-4)


def test_cpu_only_units_also_speak(tts: PocketTTS) -> None:
    cpu = PocketTTS.load(LANGUAGE, backend="coreml", model_dir=MODEL_DIR, compute_units="cpu-only")
    audio = cpu.synthesize("Hello there.", seed=3, temperature=0.0)
    assert np.isfinite(audio).all() and audio.size >= 1920 * 5


def test_clones_a_voice_from_its_own_speech(tts: PocketTTS) -> None:
    """The real encoder (downloaded on first use): clone a synthesized recording, speak with it."""
    if not tts.backend.has_voice_cloning:
        pytest.skip(f"no cloning encoder: {tts.backend.cloning_unavailable_reason}")
    recording = tts.synthesize(SENTENCE, seed=2)
    conditioning = tts.backend.encode(recording)
    d_model = tts.config.flow_lm.transformer.d_model
    assert conditioning.shape == (min(125, -(-recording.size // 1920)), d_model)
    assert np.isfinite(conditioning).all() and np.abs(conditioning).max() > 0
    voice = tts.clone_voice(recording, sample_rate=tts.sample_rate)
    assert 2 <= voice.length <= 126
    audio = tts.synthesize("Hello there, nice to meet you.", voice=voice, seed=4)
    assert np.isfinite(audio).all() and 1.0 <= audio.size / tts.sample_rate <= 8.0
