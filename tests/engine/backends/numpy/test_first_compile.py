"""The numba kernels: nothing compiles for commands that need no model, the first compile of an
install says so on stderr in one line, and ``warmup`` does it ahead (each in a fresh process
with its own kernel cache, ``NUMBA_CACHE_DIR``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_process import run_cli

from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict

COMPILE_LINE = "compiling the numba kernels for this install"


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_pack(tmp_path_factory.mktemp("pack"), tiny_config_dict("standard"))


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["say", "--help"], ["languages"], ["voices"], ["voices", "--model-dir", "PACK"]],
    ids=["help", "say-help", "languages", "voices", "voices-model-dir"],
)
def test_commands_without_a_model_compile_nothing(
    argv: list[str], pack: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "numba-cache"
    argv = [str(pack) if arg == "PACK" else arg for arg in argv]
    result = run_cli(*argv, env={"NUMBA_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1"})
    assert result.returncode == 0, result.stderr
    assert COMPILE_LINE not in result.stderr
    assert not cache.exists() or not any(cache.rglob("*"))  # no kernel compiled, none cached


def test_the_first_compile_says_so_once_and_warmup_does_it_ahead(
    pack: Path, tmp_path: Path
) -> None:
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "numba-cache")}
    first = run_cli("warmup", env=env)
    assert first.returncode == 0, first.stderr
    lines = first.stderr.strip().splitlines()
    assert lines[0].startswith(COMPILE_LINE) and str(tmp_path / "numba-cache") in lines[0]
    assert lines[-1].startswith("numba kernels compiled and cached in")
    assert sum(COMPILE_LINE in line for line in lines) == 1

    again = run_cli("warmup", env=env)
    said = run_cli("say", "Hi.", "-o", str(tmp_path / "a.wav"), "--model-dir", str(pack), env=env)
    assert again.returncode == said.returncode == 0, said.stderr
    assert COMPILE_LINE not in again.stderr + said.stderr  # once per install (cache)
