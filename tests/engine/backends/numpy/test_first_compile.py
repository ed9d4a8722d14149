"""The numba kernels: nothing compiles for commands that need no model, the first compile of an
install says so on stderr in one line, and ``warmup`` does it ahead (each in a fresh process
with its own kernel cache, ``NUMBA_CACHE_DIR``)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from cli_process import installed_command, run_cli
from paths import REPO_ROOT

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
    assert "warmup" not in first.stderr  # warmup's own wording: no advice to run warmup

    again = run_cli("warmup", env=env)
    said = run_cli("say", "Hi.", "-o", str(tmp_path / "a.wav"), "--model-dir", str(pack), env=env)
    assert again.returncode == said.returncode == 0, said.stderr
    assert COMPILE_LINE not in again.stderr + said.stderr  # once per install (cache)


def test_say_announces_the_compile_once_its_pack_is_found(pack: Path, tmp_path: Path) -> None:
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "numba-cache")}
    said = run_cli("say", "Hi.", "-o", str(tmp_path / "a.wav"), "--model-dir", str(pack), env=env)
    assert said.returncode == 0, said.stderr
    assert said.stderr.count(COMPILE_LINE) == 1
    assert "`pipecat-pocket-tts warmup` does it ahead" in said.stderr


def test_no_compile_line_when_the_hub_fails_first(tmp_path: Path) -> None:
    """Nothing will compile (the pack is not found): no promise of a compile."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    env = {
        "NUMBA_CACHE_DIR": str(tmp_path / "numba-cache"),  # nothing compiled in it yet
        "HF_ENDPOINT": f"http://127.0.0.1:{port}",  # refused at once
        "HF_HUB_CACHE": str(tmp_path / "empty-cache"),
        "HF_HUB_OFFLINE": "",
        **dict.fromkeys(
            ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY"), ""
        ),
    }
    result = run_cli("say", "Hello.", "-o", str(tmp_path / "x.wav"), env=env)
    assert result.returncode == 2, result.stderr
    assert "the hub is unreachable" in result.stderr
    assert COMPILE_LINE not in result.stderr


# -- the cache folder, predicted without numba, is the one numba uses -------------------------

PREDICT_THEN_ASK_NUMBA = """
import json, sys
from pipecat_pocket_tts.engine.backends.numpy.kernels import cache as kernel_cache
predicted = kernel_cache.cache_folder()
assert "numba" not in sys.modules, "the prediction imported numba"
from pipecat_pocket_tts.engine.backends.numpy.kernels import catalog as kernels
used = {getattr(getattr(f, "_cache", None), "_cache_path", None) for f in vars(kernels).values()}
print(json.dumps({"source": kernel_cache.SOURCE_FOLDER, "predicted": str(predicted),
                  "used": sorted(path for path in used if path)}))
"""


def _predicted_and_used(env: dict[str, str], cwd: Path, pythonpath: Path = REPO_ROOT) -> dict:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "XDG_CACHE"))}
    result = subprocess.run(
        [sys.executable, "-c", PREDICT_THEN_ASK_NUMBA],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**clean, "PYTHONPATH": str(pythonpath), "PYTHONDONTWRITEBYTECODE": "1", **env},
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["used"] == [found["predicted"]], found  # every kernel, one folder: ours
    return found


def _subfolder(source: str) -> str:
    return f"{Path(source).name}_{hashlib.sha1(source.encode()).hexdigest()}"


def test_without_numba_cache_dir_the_cache_is_the_pycache_beside_the_kernels(
    tmp_path: Path,
) -> None:
    found = _predicted_and_used({}, cwd=tmp_path)
    assert found["predicted"] == str(Path(found["source"]) / "__pycache__")


def test_numba_cache_dir_holds_the_cache_in_a_subfolder_named_for_the_sources(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "numba-cache"
    found = _predicted_and_used({"NUMBA_CACHE_DIR": str(cache)}, cwd=tmp_path)
    assert found["predicted"] == str(cache / _subfolder(found["source"]))


def test_an_unwritable_numba_cache_dir_falls_back_to_the_pycache(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    found = _predicted_and_used({"NUMBA_CACHE_DIR": str(tmp_path / "a-file" / "c")}, tmp_path)
    assert found["predicted"] == str(Path(found["source"]) / "__pycache__")


def test_numbas_config_file_in_the_working_folder_names_the_cache(tmp_path: Path) -> None:
    pytest.importorskip("yaml")  # numba reads the file only with PyYAML
    cache = tmp_path / "from-config"
    (tmp_path / ".numba_config.yaml").write_text(f"cache_dir: {cache}\n")
    found = _predicted_and_used({}, cwd=tmp_path)
    assert found["predicted"] == str(cache / _subfolder(found["source"]))


def test_a_read_only_install_caches_in_numbas_per_user_folder(tmp_path: Path) -> None:
    """A copy of the package whose kernels' ``__pycache__`` cannot be a folder (a file holds
    the name), as in an install numba cannot write: numba's per-user cache folder."""
    copy = tmp_path / "site"
    shutil.copytree(
        REPO_ROOT / "pipecat_pocket_tts",
        copy / "pipecat_pocket_tts",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    kernels_folder = copy / "pipecat_pocket_tts" / "engine" / "backends" / "numpy" / "kernels"
    (kernels_folder / "__pycache__").write_text("not a folder")
    user_cache = tmp_path / "xdg"
    found = _predicted_and_used({"XDG_CACHE_HOME": str(user_cache)}, tmp_path, pythonpath=copy)
    assert found["source"] == str(kernels_folder)
    assert found["predicted"] == str(user_cache / "numba" / _subfolder(found["source"]))


# -- the line comes before numba is imported ---------------------------------------------------

#: A ``numba`` package that says it is being imported, then blocks on stdin: the command's
#: stderr up to that line is everything it said before numba's import.
BLOCKING_NUMBA = "import sys\nprint('numba import begins', file=sys.stderr, flush=True)\n"
BLOCKING_NUMBA += "sys.stdin.readline()\nraise ImportError('the test numba')\n"
NUMBA_IMPORT_LINE = "numba import begins"


def _start_before_a_blocking_numba(argv: list[str], tmp_path: Path) -> subprocess.Popen:
    (tmp_path / "fake" / "numba").mkdir(parents=True)
    (tmp_path / "fake" / "numba" / "__init__.py").write_text(BLOCKING_NUMBA)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path / "fake"), str(REPO_ROOT)]),
        "NUMBA_CACHE_DIR": str(tmp_path / "numba-cache"),
        "HF_HUB_OFFLINE": "1",
    }
    return subprocess.Popen(
        [installed_command(), *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _stderr_until(process: subprocess.Popen, wanted: str) -> list[str]:
    """The lines the process writes on stderr up to the one beginning with ``wanted``."""
    lines: list[str] = []
    while not (lines and lines[-1].startswith(wanted)):
        line = process.stderr.readline()
        assert line, f"the command ended without {wanted!r}: {lines}"
        lines.append(line)
    return lines


@pytest.mark.parametrize("command", ["warmup", "say", "devpack"])
def test_the_compile_line_comes_before_numba_is_imported(
    command: str, pack: Path, tmp_path: Path
) -> None:
    argv = {
        "warmup": ["warmup"],
        "say": ["say", "Hi.", "-o", str(tmp_path / "a.wav"), "--model-dir", str(pack)],
        "devpack": ["devpack", str(tmp_path / "new-pack")],  # its voices are prefilled
    }[command]
    process = _start_before_a_blocking_numba(argv, tmp_path)
    try:
        said = _stderr_until(process, NUMBA_IMPORT_LINE)
    finally:
        process.kill()
        process.communicate()
    assert said[0].startswith(COMPILE_LINE), said
    assert str(tmp_path / "numba-cache") in said[0]
    assert sum(COMPILE_LINE in line for line in said) == 1


def test_ctrl_c_during_the_first_compile_is_one_line_and_exit_130(tmp_path: Path) -> None:
    """SIGINT while the process is inside numba's import, after the compile line."""
    process = _start_before_a_blocking_numba(["warmup"], tmp_path)
    try:
        said = _stderr_until(process, NUMBA_IMPORT_LINE)
        process.send_signal(signal.SIGINT)
        rest = process.communicate(timeout=60)[1]
    finally:
        process.kill()
    assert process.returncode == 130
    assert said[0].startswith(COMPILE_LINE) and rest == "interrupted\n", (said, rest)


# -- the marker follows the same rule ----------------------------------------------------------


def test_mark_compiled_writes_where_is_compiled_looks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipecat_pocket_tts.engine.backends.numpy.kernels import cache as kernel_cache

    if kernel_cache.numba_version() is None:
        pytest.skip("numba is not installed: no kernels, nothing to mark")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "cache"))
    assert kernel_cache.is_compiled() is False
    marker = kernel_cache.mark_compiled()
    assert marker is not None and marker.parent == kernel_cache.cache_folder()
    assert kernel_cache.is_compiled() is True
    assert kernel_cache.announce_first_compile() is False  # nothing left to compile

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "another"))  # another install's cache
    assert kernel_cache.is_compiled() is False


def test_locators_of_the_users_own_leave_the_folder_unknown_and_say_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from pipecat_pocket_tts.engine.backends.numpy.kernels import cache as kernel_cache

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("NUMBA_CACHE_LOCATOR_CLASSES", "mypackage.MyLocator")
    assert kernel_cache.cache_folder() is None and kernel_cache.is_compiled() is None
    assert kernel_cache.announce_first_compile() is False
    assert kernel_cache.mark_compiled() is None
    assert capsys.readouterr().err == ""
