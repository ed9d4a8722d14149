"""``PocketTTSService(language=<upstream config>)`` (issue 51): it speaks the community model,
and Pipecat's language-dependent parts see the model's language (``Language.CS``), told by the
config's name or stated by the caller."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from community_config import TEXT, VOICE, write_config
from pipecat.frames.frames import (
    ErrorFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    TTSStoppedFrame,
    TTSUpdateSettingsFrame,
)
from pipecat.tests.utils import run_test
from pipecat.transcriptions.language import Language

from pipecat_pocket_tts import PocketTTSService
from pipecat_pocket_tts.engine import PocketTTS
from pipecat_pocket_tts.service.settings import pack_iso_code

START = 30.0  # run_test start timeout: setup loads and warms the model up


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("community")
    (folder / "embeddings").mkdir()
    (folder / "embeddings" / "pavel.safetensors").write_bytes(VOICE.read_bytes())
    return write_config(folder)


def sentence_language(service: PocketTTSService) -> str:
    return service._text_aggregator._language  # Pipecat's sentence splitter


async def test_the_service_speaks_a_community_config(config: Path) -> None:
    tts = PocketTTSService(
        language=str(config),
        backend="numpy",
        settings=PocketTTSService.Settings(voice=str(VOICE), temperature=0.0),
    )
    assert tts.pack == str(config)
    frames = [
        TTSSpeakFrame(TEXT),
        TTSUpdateSettingsFrame(delta=PocketTTSService.Settings(language=Language.CS)),
        TTSSpeakFrame("mam 3 psy."),
    ]
    down, up = await run_test(tts, frames_to_send=frames, start_timeout=START)
    assert not [f for f in up if isinstance(f, ErrorFrame)]
    assert sum(isinstance(f, TTSStoppedFrame) for f in down) == 2
    pcm = b"".join(f.audio for f in down if isinstance(f, TTSAudioRawFrame))
    assert np.abs(np.frombuffer(pcm, "<i2")).max() > 0
    assert tts.pack == str(config)  # Language.CS is the config's own language: no switch
    assert sentence_language(tts) == "cs"
    engine = PocketTTS.load_shared(str(config), backend="numpy")
    assert engine.pack_name == "czech" and engine.voices == ["pavel"]


def test_the_caller_states_the_language_of_a_config_whose_name_tells_none(
    config: Path, tmp_path: Path
) -> None:
    neutral = write_config(tmp_path, name="model.yaml")
    assert pack_iso_code(str(neutral)) == "en"  # nothing tells: Pipecat's default
    tts = PocketTTSService(
        language=Language.CS,
        backend="numpy",
        settings=PocketTTSService.Settings(model=str(neutral)),
    )
    assert tts.pack == str(neutral)
    assert sentence_language(tts) == "cs"
    assert tts.language_to_service_language(Language.CS) == str(neutral)
    assert tts.language_to_service_language(Language.FR) == "french"
    by_name = PocketTTSService(language=str(config), backend="numpy")
    assert sentence_language(by_name) == "cs"
