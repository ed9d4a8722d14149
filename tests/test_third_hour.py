"""The third hour of a new user: every hub wait bounded, the try bot's help anywhere, ``serve``
without its extra in one line, no noise in our logs or Pipecat's about what we pass, ``-v``
after the verb. CLI cases run in a subprocess; servers listen on 127.0.0.1 only."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_process import run_cli
from paths import REPO_ROOT

from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict

PROXIES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


@pytest.fixture
def silent_endpoint() -> Iterator[str]:
    """A loopback port that takes every connection and never answers (a captive network, a
    dead proxy port): the kernel completes the handshakes into the listen backlog; nobody
    ever reads or writes."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(64)
        yield f"http://127.0.0.1:{server.getsockname()[1]}"


def test_a_hub_that_accepts_and_never_answers_fails_say_in_one_line(
    silent_endpoint: str, tmp_path: Path
) -> None:
    """Bounded by the probe's timeout (PROBE_TIMEOUT_S, a few seconds): huggingface_hub alone
    waited 10 s, then 60 s five times. The subprocess's own timeout only guards the suite."""
    env = {
        "HF_ENDPOINT": silent_endpoint,
        "HF_HUB_CACHE": str(tmp_path / "empty-cache"),
        "HF_HUB_OFFLINE": "",
        **dict.fromkeys(PROXIES, ""),
    }
    result = run_cli("say", "Hello.", "-o", str(tmp_path / "x.wav"), env=env, timeout=30)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr  # no retry lines, no traceback
    assert lines[0].startswith("error: ") and "the hub is unreachable" in lines[0]
    assert "no answer within 3 s" in lines[0]
    assert "HF_HUB_OFFLINE" in lines[0] and "--model-dir" in lines[0]
    assert not (tmp_path / "x.wav").exists()


def test_serve_without_the_server_extra_is_one_line_and_exit_2() -> None:
    """The server's modules made unimportable, as in an install without ``[server]``."""
    code = (
        "import sys\n"
        "for name in ('uvicorn', 'starlette', 'websockets', 'python_multipart',"
        " 'prometheus_client'):\n"
        "    sys.modules[name] = None\n"
        "from pipecat_pocket_tts.__main__ import main\n"
        "sys.exit(main(['serve']))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: the server needs the 'server' extra (uvicorn is not installed): "
        "pip install 'pipecat-pocket-tts[server]'"
    ]


def test_try_bot_help_needs_no_pack(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("POCKET_TTS_")}
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "examples" / "try_bot.py"), "--help"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={
            **env,
            "PYTHONPATH": str(REPO_ROOT),
            "HF_HUB_OFFLINE": "1",  # no pack anywhere: the preflight would fail
            "HF_HUB_CACHE": str(tmp_path / "empty-cache"),
        },
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("usage: ") and "--model-dir" in result.stdout
    assert "error:" not in result.stderr


def test_verbose_after_the_verb(tmp_path: Path) -> None:
    pack = build_pack(tmp_path / "pack", tiny_config_dict("standard"))
    out = tmp_path / "x.wav"
    result = run_cli("say", "-v", "Hi.", "-o", str(out), "--model-dir", str(pack))
    assert result.returncode == 0, result.stderr
    assert "INFO" in result.stderr  # progress logged
    assert out.exists()


def test_no_pipecat_language_line_and_our_lines_at_debug(engine_pack_dir: Path) -> None:
    """Pipecat logs (DEBUG) every language string it cannot read as a Language code: the
    service hands it pack names ("english"), which it resolved itself."""
    import asyncio

    from loguru import logger
    from pipecat.frames.frames import TTSSpeakFrame, TTSUpdateSettingsFrame
    from pipecat.tests.utils import run_test
    from pipecat.transcriptions.language import Language

    from pipecat_pocket_tts import PocketTTSService

    lines: list[tuple[str, str]] = []
    sink = logger.add(lambda m: lines.append((m.record["level"].name, m.record["message"])))
    try:
        tts = PocketTTSService(model_dir=engine_pack_dir, backend="numpy")
        delta = PocketTTSService.Settings(language=Language.EN_GB)
        frames = [TTSUpdateSettingsFrame(delta=delta), TTSSpeakFrame("Hi.")]
        asyncio.run(run_test(tts, frames_to_send=frames))
    finally:
        logger.remove(sink)
    assert not [m for _, m in lines if "is not a recognized Language code" in m]
    ours = [(level, m) for level, m in lines if m.startswith("PocketTTS")]
    assert all(level not in ("INFO", "SUCCESS") for level, _ in ours), ours
