"""Pipecat's ``run_test`` with its default arguments (a 1 s start timeout) on any pack.

The model loads in the background from ``setup`` on; the first turn waits for it (its audio
context kept alive), so a full-size pack, seconds to load and warm up, speaks as the tiny one
does, and the pipeline ends. A pack that cannot load is one ErrorFrame, however many turns
and tokens were waiting for it.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from pipecat.frames.frames import (
    ErrorFrame,
    Frame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    TTSStoppedFrame,
)
from pipecat.services.tts_service import TextAggregationMode
from pipecat.tests.utils import run_test

from pipecat_pocket_tts import PocketTTSService
from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict


@pytest.fixture(scope="module")
def full_size_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A full-size random ``english`` pack (the registry config: ~420 MB of weights), as
    ``benchmarks.common.build_files`` builds it."""
    return build_pack(tmp_path_factory.mktemp("full") / "english", "english", voices=("alba",))


@pytest.fixture(scope="module")
def tiny_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_pack(tmp_path_factory.mktemp("tiny") / "english", tiny_config_dict("standard"))


def engine_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("pocket-tts-session")]


@pytest.mark.parametrize("size", ["tiny", "full"])
async def test_run_test_with_its_defaults_speaks_and_ends(
    size: str, request: pytest.FixtureRequest
) -> None:
    pack = request.getfixturevalue(f"{size}_size_pack" if size == "full" else "tiny_pack")
    tts = PocketTTSService(
        model_dir=pack, backend="numpy", settings=PocketTTSService.Settings(seed=1)
    )
    down, up = await run_test(tts, frames_to_send=[TTSSpeakFrame("Hello there.")])
    assert [f for f in up if isinstance(f, ErrorFrame)] == []
    assert any(isinstance(f, TTSAudioRawFrame) and f.audio for f in down)
    assert sum(isinstance(f, TTSStoppedFrame) for f in down) == 1
    assert tts.engine is None  # cleaned up: the shared cache keeps the model, not the service
    assert engine_threads() == []


def llm_reply(text: str) -> list[Frame]:
    return [
        LLMFullResponseStartFrame(),
        *map(LLMTextFrame, text.split(" ")),
        LLMFullResponseEndFrame(),
    ]


@pytest.mark.parametrize("mode", [TextAggregationMode.SENTENCE, TextAggregationMode.TOKEN])
async def test_a_pack_that_cannot_load_is_one_error_frame(
    tmp_path: Path, mode: TextAggregationMode
) -> None:
    tts = PocketTTSService(model_dir=tmp_path, backend="numpy", text_aggregation_mode=mode)
    frames = [TTSSpeakFrame("First."), *llm_reply("Then a reply. In two sentences.")]
    down, up = await run_test(tts, frames_to_send=frames)
    errors = [f.error for f in up if isinstance(f, ErrorFrame)]
    assert len(errors) == 1, errors
    assert "could not load pack 'english'" in errors[0]
    assert not any(isinstance(f, TTSAudioRawFrame) for f in down)


async def test_a_load_still_running_at_the_end_is_waited_for_and_reported(tmp_path: Path) -> None:
    """No turn at all: the graceful end waits for the load, whose failure is still reported."""
    tts = PocketTTSService(model_dir=tmp_path, backend="numpy")
    _, up = await run_test(tts, frames_to_send=[])
    errors = [f.error for f in up if isinstance(f, ErrorFrame)]
    assert len(errors) == 1 and "could not load pack 'english'" in errors[0]
