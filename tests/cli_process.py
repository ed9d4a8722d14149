"""The installed ``pipecat-pocket-tts`` command run in a subprocess, this checkout first."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from paths import REPO_ROOT


def installed_command() -> str:
    """The console script ``pip install -e .`` put beside this interpreter (or on PATH)."""
    beside = Path(sys.executable).with_name("pipecat-pocket-tts")
    found = str(beside) if beside.exists() else shutil.which("pipecat-pocket-tts")
    assert found, "the pipecat-pocket-tts command is not installed (pip install -e .)"
    return found


def run_cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None, **kwargs):
    """``pipecat-pocket-tts ARGS`` to completion (text output unless ``text=False``)."""
    full_env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), **(env or {})}
    kwargs.setdefault("capture_output", True)
    kwargs.setdefault("text", True)
    kwargs.setdefault("timeout", 180)  # a guard against a hang, never a measure
    return subprocess.run([installed_command(), *args], env=full_env, cwd=cwd, **kwargs)
