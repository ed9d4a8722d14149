"""A service's model is freed once the pipelines that used it ended (issue 34, item 4).

A reply's turn markers refer back to the service's session, and the session to the model:
nothing of the last reply may keep a model alive after its pipeline ended and the shared
cache let it go.
"""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

from pipecat.frames.frames import ErrorFrame, TTSAudioRawFrame, TTSSpeakFrame
from pipecat.tests.utils import run_test

from pipecat_pocket_tts import PocketTTSService
from pipecat_pocket_tts.engine import PocketTTS
from pipecat_pocket_tts.service import engine_load as loading_module

START = 30.0  # run_test start timeout: setup loads the model


async def test_three_pipelines_in_a_row_each_free_their_model(
    engine_pack_dir: Path, monkeypatch
) -> None:
    PocketTTS.clear_shared()
    gc.collect()
    loaded: list[weakref.ref[PocketTTS]] = []
    load_shared = loading_module.load_shared_engine

    def recording(*args, **kwargs):
        engine = load_shared(*args, **kwargs)
        loaded.append(weakref.ref(engine))
        return engine

    monkeypatch.setattr(loading_module, "load_shared_engine", recording)
    for _ in range(3):
        tts = PocketTTSService(model_dir=engine_pack_dir, backend="numpy")
        down, up = await run_test(
            tts,
            frames_to_send=[TTSSpeakFrame("Good morning, how can I help?")],
            start_timeout=START,
        )
        assert not [f for f in up if isinstance(f, ErrorFrame)]
        assert any(isinstance(f, TTSAudioRawFrame) for f in down)
        del tts, down, up
        PocketTTS.clear_shared()
        gc.collect()
        assert loaded[-1]() is None, "the model outlived its pipeline"
    assert len(loaded) == 3  # each pipeline loaded its own, after the last was freed
