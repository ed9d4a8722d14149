"""Fixtures of the server tests: real server processes on 127.0.0.1 (see server_process.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from server_process import ServerProcess


@pytest.fixture(scope="module")
def server(engine_pack_dir: Path) -> Iterator[ServerProcess]:
    """A server on the tiny pack (voices alba and marius), for the module."""
    process = ServerProcess(engine_pack_dir).start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def endless_server(engine_endless_pack_dir: Path) -> Iterator[ServerProcess]:
    """A server on the never-EOS pack (every chunk runs to its limit: long audio), with a
    small bound on the frames a context may have waiting for its client."""
    process = ServerProcess(engine_endless_pack_dir, "--max-buffered-frames", "40").start()
    yield process
    process.stop()
