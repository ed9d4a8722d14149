"""The examples: the offline one runs end to end on a tiny pack; the bots at least compile
(they need the runner, STT and LLM extras, which the test environment does not install)."""

from __future__ import annotations

import os
import py_compile
import subprocess
import sys
import wave
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = REPO_ROOT / "examples"


def test_offline_example_writes_the_reply_at_the_pipeline_rate(
    engine_pack_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "reply.wav"
    argv = [
        sys.executable,
        str(EXAMPLES / "offline_to_wav.py"),
        "--model-dir",
        str(engine_pack_dir),
    ]
    result = subprocess.run(
        [*argv, "--out", str(out), "--rate", "8000", "--seed", "1", "--tokens-per-second", "400"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"wrote {out}" in result.stdout and "first audio" in result.stdout
    with wave.open(str(out)) as wav:
        assert (wav.getnchannels(), wav.getsampwidth(), wav.getframerate()) == (1, 2, 8000)
        assert wav.getnframes() > 8000 * 0.5  # three sentences of speech, not a stub


@pytest.mark.parametrize("name", ["bot.py", "telephony_bot.py"])
def test_bot_examples_compile(name: str, tmp_path: Path) -> None:
    py_compile.compile(str(EXAMPLES / name), cfile=str(tmp_path / "x.pyc"), doraise=True)
