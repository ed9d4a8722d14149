"""The heap frozen once per process after the first model load (issue 34: garbage-collector
pauses), in child processes: the freeze is process-wide, and this test process leaves its
collector alone (``tests/conftest.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict

ROOT = Path(__file__).resolve().parents[2]

#: Two services, one after the other, each speaking in a real ``run_test`` pipeline; prints how
#: often ``gc.freeze`` ran and what the collector's permanent generation held after each.
CHILD = """
import asyncio, gc, json, sys
from pathlib import Path
from pipecat.frames.frames import TTSAudioRawFrame, TTSSpeakFrame
from pipecat.tests.utils import run_test
from pipecat_pocket_tts import PocketTTSService
from pipecat_pocket_tts.service.engine_load import frozen_objects

freezes = []
real_freeze = gc.freeze
def counted_freeze():
    freezes.append(gc.get_count())
    real_freeze()
gc.freeze = counted_freeze

async def main():
    report = []
    for _ in range(2):
        tts = PocketTTSService(model_dir=Path(sys.argv[1]), backend="numpy",
                               freeze_gc=sys.argv[2] == "on")
        down, _up = await run_test(tts, frames_to_send=[TTSSpeakFrame("Hello there.")],
                                   start_timeout=60.0)
        audio = sum(len(f.audio) for f in down if isinstance(f, TTSAudioRawFrame))
        report.append({"freezes": len(freezes), "frozen": frozen_objects(),
                       "permanent": gc.get_freeze_count(), "audio": audio})
    print(json.dumps(report))

asyncio.run(main())
"""


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_pack(tmp_path_factory.mktemp("collector") / "english", tiny_config_dict())


def run_child(pack: Path, freeze: str) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(pack), freeze],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_first_model_load_freezes_the_heap_once_and_speech_goes_on(pack: Path) -> None:
    first, second = run_child(pack, "on")
    assert first["audio"] > 0 and second["audio"] > 0
    assert first["freezes"] == second["freezes"] == 1  # the second service froze nothing more
    # The libraries and the model: far more objects than one pipeline makes.
    assert first["frozen"] > 50_000
    assert second["frozen"] == first["frozen"]
    assert first["permanent"] > 50_000


def test_freeze_gc_false_leaves_the_collector_alone(pack: Path) -> None:
    first, second = run_child(pack, "off")
    assert first["audio"] > 0 and second["audio"] > 0
    assert first["freezes"] == second["freezes"] == 0
    assert first["frozen"] == second["frozen"] == 0
    assert first["permanent"] == second["permanent"] == 0
