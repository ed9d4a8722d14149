"""Run a test's script in a fresh interpreter, for what one process can set only once (the CPU
numba compiles for, a kernel path chosen from the environment)."""

from __future__ import annotations

import os
import subprocess
import sys


def run_python(script: str, settings: dict[str, str], timeout: float = 900) -> None:
    """Run ``script`` with ``python -c`` in a new interpreter whose environment is this one's
    plus ``settings``; fail with the end of its stderr unless it exits 0."""
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
        env={**os.environ, **settings},
    )
    assert done.returncode == 0, done.stderr[-3000:]
