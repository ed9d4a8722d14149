"""The examples: the offline one runs end to end on a tiny pack; the key-needing bots compile
and refuse to start without their keys (the STT and LLM extras are not installed here); the
try bot's script logic is checked here and its behaviour at the ear in test_browser.py."""

from __future__ import annotations

import os
import py_compile
import re
import subprocess
import sys
import wave
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = REPO_ROOT / "examples"


@pytest.mark.parametrize("rate", [8000, 16000, 48000])
def test_offline_example_writes_the_reply_at_the_pipeline_rate_and_exits_quietly(
    engine_pack_dir: Path, tmp_path: Path, rate: int
) -> None:
    out = tmp_path / "reply.wav"
    argv = [
        sys.executable,
        str(EXAMPLES / "offline_to_wav.py"),
        "--model-dir",
        str(engine_pack_dir),
        *("--out", str(out), "--rate", str(rate), "--seed", "1", "--tokens-per-second", "400"),
    ]
    result = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"wrote {out}" in result.stdout and "first audio" in result.stdout
    assert "leaked" not in result.stderr  # no nanobind lines from soxr streams alive at exit
    with wave.open(str(out)) as wav:
        assert (wav.getnchannels(), wav.getsampwidth(), wav.getframerate()) == (1, 2, rate)
        assert wav.getnframes() > rate * 0.5  # three sentences of speech, not a stub


@pytest.mark.parametrize("name", ["bot.py", "telephony_bot.py", "try_bot.py"])
def test_bot_examples_compile(name: str, tmp_path: Path) -> None:
    py_compile.compile(str(EXAMPLES / name), cfile=str(tmp_path / "x.pyc"), doraise=True)


@pytest.mark.parametrize(
    ("script", "argv", "missing"),
    [
        ("bot.py", ["-t", "webrtc"], "DEEPGRAM_API_KEY and OPENAI_API_KEY"),
        ("bot.py", ["-t", "daily"], "DEEPGRAM_API_KEY, OPENAI_API_KEY and DAILY_API_KEY"),
        ("telephony_bot.py", ["-t", "twilio", "-x", "example.ngrok.io"], "OPENAI_API_KEY"),
    ],
)
def test_key_needing_bots_say_which_keys_are_missing_at_start(
    script: str, argv: list[str], missing: str, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    if script == "telephony_bot.py":
        env["DEEPGRAM_API_KEY"] = "set"
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / script), *argv],
        capture_output=True,
        text=True,
        cwd=tmp_path,  # no .env file here
        env={**env, "PYTHONPATH": str(REPO_ROOT)},
        timeout=120,
    )
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: examples/{script} needs {missing} in the environment (or a .env file); "
        "to try PocketTTS with no API key: python examples/try_bot.py -t webrtc"
    ]
    assert "Traceback" not in result.stderr and "KeyError" not in result.stderr


def _install_lines() -> list[tuple[str, str]]:
    """Every ``pip install ...`` line of the examples and the READMEs, with its file."""
    files = [*EXAMPLES.glob("*.py"), EXAMPLES / "README.md", REPO_ROOT / "README.md"]
    return [
        (path.name, line.strip())
        for path in files
        for line in path.read_text().splitlines()
        if "pip install" in line
    ]


def test_install_lines_work_from_a_clone() -> None:
    """This package is not on PyPI: it installs from the clone, with extras that exist."""
    import tomllib

    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    extras = set(project["optional-dependencies"])
    lines = _install_lines()
    assert len(lines) >= 5
    for name, line in lines:
        assert not re.search(r"pip install [^#]*[\"' ]pipecat-pocket-tts\b", line), (name, line)
        for requested in re.findall(r"pip install (?:-e )?['\"]?\.\[([\w,]+)\]", line):
            assert set(requested.split(",")) <= extras, (name, line)


def test_try_bot_story_reads_on_from_the_interrupted_sentence() -> None:
    sys.path.insert(0, str(EXAMPLES))
    try:
        import try_bot
    finally:
        sys.path.remove(str(EXAMPLES))
    story = try_bot.Story()
    sentences = try_bot.sentences(try_bot.PASSAGE)
    assert story.opening().startswith(try_bot.GREETING) and sentences[-1] in story.opening()
    story.heard(try_bot.GREETING)
    story.heard(sentences[0])
    story.heard(sentences[1][:20])  # interrupted in the middle of the second sentence
    reply = story.next_reply()
    assert reply.startswith(try_bot.ANSWERS[0])
    assert try_bot.RESUME + sentences[1] in reply and sentences[0] not in reply
    for sentence in sentences:
        story.heard(sentence)
    assert story.next_reply() == f"{try_bot.ANSWERS[1]} {try_bot.THE_END}"
    tokens = list(try_bot.llm_tokens("Hello there, listener."))
    assert "".join(tokens) == "Hello there, listener." and max(map(len, tokens)) <= 5


@pytest.mark.parametrize(
    ("script", "argv", "env", "expected"),
    [
        (
            "try_bot.py",
            ["-t", "webrtc", "--model-dir", "{missing}"],
            {},
            "error: examples/try_bot.py: --model-dir {missing} does not exist",
        ),
        (
            "try_bot.py",
            ["-t", "webrtc", "--model-dir", "{pack}", "--voice", "nobody"],
            {},
            "error: examples/try_bot.py: unknown voice 'nobody'",
        ),
        (
            "bot.py",
            ["-t", "webrtc"],
            {"POCKET_TTS_MODEL_DIR": "{missing}"},
            "error: examples/bot.py: POCKET_TTS_MODEL_DIR {missing} does not exist",
        ),
        (
            "telephony_bot.py",
            ["-t", "twilio", "-x", "example.ngrok.io"],
            {"POCKET_TTS_MODEL_DIR": "{pack}", "POCKET_TTS_VOICE": "nobody"},
            "error: examples/telephony_bot.py: unknown voice 'nobody'",
        ),
    ],
)
def test_bots_check_their_pack_and_voice_before_they_serve(
    script: str,
    argv: list[str],
    env: dict[str, str],
    expected: str,
    engine_pack_dir: Path,
    tmp_path: Path,
) -> None:
    names = {"missing": str(tmp_path / "no-pack"), "pack": str(engine_pack_dir)}
    keys = {"DEEPGRAM_API_KEY": "set", "OPENAI_API_KEY": "set"}  # never used: no call is made
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / script), *(arg.format(**names) for arg in argv)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={
            **os.environ,
            **keys,
            **{k: v.format(**names) for k, v in env.items()},
            "PYTHONPATH": str(REPO_ROOT),
        },
        timeout=120,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(expected.format(**names))
    assert "Uvicorn running" not in result.stderr  # it never served


def test_the_readme_says_the_runner_page_loads_a_remote_bundle_while_it_does() -> None:
    """The runner's prebuilt page (``pipecat-ai-prebuilt``) handles the microphone through
    Daily's media manager, which loads Daily's call bundle from c.daily.co at Connect: the
    README must say that page needs internet, for as long as it does, and name the try bot's
    own page for the no-key steps."""
    import pipecat_ai_prebuilt

    assets = Path(pipecat_ai_prebuilt.__file__).parent / "client" / "dist" / "assets"
    remote = any("c.daily.co" in path.read_text(errors="ignore") for path in assets.glob("*.js"))
    readme = (REPO_ROOT / "README.md").read_text()
    assert remote == ("`c.daily.co`" in readme and "needs internet" in readme)
    assert "open http://localhost:7860/try and press Connect" in readme


def test_the_try_page_loads_nothing_from_elsewhere() -> None:
    """No script, style, font or image from another host: it works without internet."""
    page = (EXAMPLES / "try_page.html").read_text()
    assert re.findall(r"(?:src|href)=\"(?!data:)[^\"]*//", page) == []
    assert "http" not in re.sub(r"<!--.*?-->", "", page, flags=re.DOTALL)


def test_try_bot_serves_its_own_page_where_the_readme_says(tmp_path: Path) -> None:
    import urllib.request

    from browser_client import BotServer

    from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict

    pack = build_pack(tmp_path / "pack", tiny_config_dict("standard"), voices=("alba",))
    argv = [str(EXAMPLES / "try_bot.py"), "--model-dir", str(pack)]
    env = {"PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1"}
    with BotServer(argv, tmp_path / "bot.log", env=env, page="/try") as server:
        server.wait_ready(timeout=90)
        with urllib.request.urlopen(server.url, timeout=10) as response:
            served = response.read().decode()
        said = server.tail()
    assert served == (EXAMPLES / "try_page.html").read_text()
    assert f"try_bot: open http://localhost:{server.port}/try and press Connect" in said
