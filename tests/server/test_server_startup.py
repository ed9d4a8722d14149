"""A server that can never serve its configuration says why and exits (issue 50, item 3).

A default voice the pack does not have, or a pack folder that cannot load, ends ``serve``
with exit status 2 and the reason on stderr, instead of a live process answering 503.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from server_process import free_port

EXIT_TIMEOUT_S = 120  # a failure bound only: the process ends as soon as the load fails


def serve(model_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable, "-m", "pipecat_pocket_tts", "serve", "--port", str(free_port()),
        "--model-dir", str(model_dir), "--backend", "numpy", "--no-warmup", *args,
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=EXIT_TIMEOUT_S)


@pytest.mark.parametrize("problem", ["unknown default voice", "no pack in the folder"])
def test_a_configuration_that_cannot_serve_exits_saying_why(
    engine_pack_dir: Path, tmp_path: Path, problem: str
) -> None:
    if problem == "unknown default voice":
        done = serve(engine_pack_dir, "--default-voice", "nobody")
        expected = "nobody"
    else:
        done = serve(tmp_path)
        expected = str(tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: the server cannot serve its configuration:"), last
    assert expected in last
