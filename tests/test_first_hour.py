"""The first hour of a new user: each friction found by trying the CLI and the README as written.

CLI cases run the installed ``pipecat-pocket-tts`` command in a subprocess (this checkout first on
``PYTHONPATH``); no network is used (an unreachable endpoint is a closed local port).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from cli_process import run_cli

from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict
from pipecat_pocket_tts.engine.audio.wav import write_wav

REPO_ROOT = Path(__file__).resolve().parent.parent
README = REPO_ROOT / "README.md"


def closed_port() -> int:
    """A local port nobody listens on (connections are refused at once)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_pack(tmp_path_factory.mktemp("pack"), tiny_config_dict("standard"))


# -- offline ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "endpoint", ["http://127.0.0.1:{port}", "http://no-such-host.invalid"], ids=["refused", "dns"]
)
def test_say_without_a_connection_fails_in_one_line_without_retries(
    tmp_path: Path, endpoint: str
) -> None:
    env = {
        "HF_ENDPOINT": endpoint.format(port=closed_port()),
        "HF_HUB_CACHE": str(tmp_path / "empty-cache"),
        "HF_HUB_OFFLINE": "",
    }
    for proxy in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY"):
        env[proxy] = ""
    result = run_cli("say", "Hello.", "-o", str(tmp_path / "x.wav"), env=env)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr  # no retry lines, no traceback
    assert lines[0].startswith("error: ") and "not in the Hugging Face cache" in lines[0]
    assert "the hub is unreachable" in lines[0] and "--model-dir" in lines[0]
    assert not (tmp_path / "x.wav").exists()


def test_hf_hub_offline_is_respected_without_a_probe(tmp_path: Path) -> None:
    env = {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "empty-cache")}
    result = run_cli("say", "Hello.", "-o", str(tmp_path / "x.wav"), env=env)
    assert result.returncode == 2
    assert "not in the Hugging Face cache" in result.stderr
    assert "unreachable" not in result.stderr  # offline by choice: nothing was probed


def test_reachability_probe_succeeds_on_a_listening_endpoint(monkeypatch) -> None:
    import http.server

    from huggingface_hub import constants

    from pipecat_pocket_tts.engine.model.hub_reachability import unreachable_reason

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, name="answering-endpoint")
    thread.start()
    try:  # any answer will do (this one is 501: the handler serves no method)
        monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{server.server_port}")
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        for proxy in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY"):
            monkeypatch.delenv(proxy, raising=False)
        assert unreachable_reason() is None
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    assert "refused" in (unreachable_reason() or "").lower()


# -- output file -----------------------------------------------------------------------------


def test_output_in_a_missing_folder_is_refused_before_synthesis(pack: Path, tmp_path: Path) -> None:
    out = tmp_path / "no" / "such" / "dir" / "out.wav"
    result = run_cli("say", "Hi.", "-o", str(out), "--model-dir", str(pack))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"error: cannot write {out}: folder {out.parent} does not exist (create it first)"
    ]
    assert not (tmp_path / "no").exists()  # no folder created silently


def test_unwritable_output_is_found_before_the_model_loads(tmp_path: Path) -> None:
    """-o is checked first: with a missing pack too, the output error comes, not the pack's."""
    folder = tmp_path / "a-folder.wav"
    folder.mkdir()
    result = run_cli("say", "Hi.", "-o", str(folder), "--model-dir", str(tmp_path / "no-pack"))
    assert result.returncode == 1
    assert result.stderr.strip() == f"error: cannot write {folder}: it is a folder"


def test_engine_write_wav_creates_no_folder(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        write_wav(tmp_path / "missing" / "x.wav", np.zeros(10, np.float32))
    assert not (tmp_path / "missing").exists()


# -- messages and exit codes -----------------------------------------------------------------


def test_languages_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first write, as `| head -1` ends
    try:
        result = run_cli(
            "languages", stdout=write_end, stderr=subprocess.PIPE, capture_output=False
        )
    finally:
        os.close(write_end)
    assert result.returncode == 0
    assert result.stderr == ""


def test_help_names_the_installed_command() -> None:
    result = run_cli("--help")
    assert result.returncode == 0
    assert result.stdout.startswith("usage: pipecat-pocket-tts ")
    module = subprocess.run(
        [sys.executable, "-m", "pipecat_pocket_tts", "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        timeout=60,
    )
    assert module.stdout.startswith("usage: python -m pipecat_pocket_tts ")


@pytest.mark.parametrize("seed", ["-1", "one"])
def test_a_bad_seed_names_the_flag(seed: str, tmp_path: Path) -> None:
    result = run_cli("say", "Hi.", "-o", str(tmp_path / "x.wav"), "--seed", seed)
    assert result.returncode == 2
    assert "error: argument --seed: expected an integer ≥ 0" in result.stderr


def test_long_clone_recording_warns_in_one_clean_line(pack: Path, tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    t = np.arange(24_000 * 32) / 24_000
    tone = 0.3 * np.sin(2 * np.pi * 180 * t) * (1 + 0.2 * rng.standard_normal(t.size))
    recording = write_wav(tmp_path / "long.wav", tone.astype(np.float32))
    out = tmp_path / "x.wav"
    args = ["say", "Hi.", "-o", str(out), "--model-dir", str(pack), "--clone-voice"]
    result = run_cli(*args, str(recording))
    assert result.returncode == 0, result.stderr
    warning_lines = [line for line in result.stderr.splitlines() if "clone recording" in line]
    assert len(warning_lines) == 1, result.stderr
    assert re.fullmatch(r"warning: the clone recording lasts 32\.0 s; .*", warning_lines[0])
    assert "warnings.warn" not in result.stderr and ".py:" not in result.stderr


def test_truncated_weights_say_to_download_again_or_rebuild(pack: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(pack, broken)
    weights = broken / "model.safetensors"
    with open(weights, "r+b") as f:
        f.truncate(weights.stat().st_size // 2)
    result = run_cli("say", "Hi.", "-o", str(tmp_path / "x.wav"), "--model-dir", str(broken))
    assert result.returncode == 2
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1 and line.startswith(f"error: {weights} is truncated")
    assert "download it anew" in line and "rebuild the pack" in line


@pytest.mark.parametrize(
    ("option", "name"),
    [
        ("--voice", "missing.safetensors"),
        ("--voice", "a-folder.safetensors"),
        ("--clone-voice", "missing.wav"),
        ("--clone-voice", "not-a.wav"),
    ],
)
def test_input_files_that_cannot_be_read_exit_2_as_documented(
    pack: Path, tmp_path: Path, option: str, name: str
) -> None:
    (tmp_path / "a-folder.safetensors").mkdir()
    (tmp_path / "not-a.wav").write_text("not audio")
    args = ["say", "Hi.", "-o", str(tmp_path / "x.wav"), "--model-dir", str(pack)]
    result = run_cli(*args, option, str(tmp_path / name))
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: ") and len(result.stderr.strip().splitlines()) == 1
    documented = README.read_text()
    assert (
        "exit with status 2 (bad input: an\nunknown language, voice or backend, a missing or"
        in (documented)
    )
    assert "1 (an output file that cannot be written" in documented


# -- README snippets -------------------------------------------------------------------------


def python_blocks(section: str) -> list[str]:
    """The ```python blocks of a README section (from its heading to the next ``## ``)."""
    text = README.read_text()
    start = text.index(f"\n## {section}\n")
    end = text.find("\n## ", start + 1)
    body = text[start : end if end != -1 else None]
    return re.findall(r"```python\n(.*?)```", body, flags=re.S)


def test_readme_engine_and_cloning_snippets_run_on_a_devpack(pack: Path, tmp_path: Path) -> None:
    """As written, but for the pack: ``PocketTTS.load("english")`` gets ``model_dir=`` the pack."""
    code = "\n".join(python_blocks("The engine") + python_blocks("Voice cloning"))
    load = 'PocketTTS.load("english")'
    assert code.count(load) == 1
    code = code.replace(load, f'PocketTTS.load("english", model_dir={str(pack)!r})')
    rng = np.random.default_rng(1)
    t = np.arange(24_000 * 3) / 24_000
    speech = 0.3 * np.sin(2 * np.pi * 150 * t) * (1 + 0.3 * rng.standard_normal(t.size))
    write_wav(tmp_path / "speaker.wav", speech.astype(np.float32))
    result = subprocess.run(
        [sys.executable, "-c", code + "\nprint('snippets ran', len(chunks))"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        timeout=180,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "snippets ran" in result.stdout
    assert (tmp_path / "hello.wav").exists() and (tmp_path / "speaker.safetensors").exists()
