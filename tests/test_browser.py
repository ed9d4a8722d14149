"""End to end at the ear: the README's no-key browser steps, followed by a headless Chromium
on a machine without internet (every host but localhost unresolvable), whose user talks over
the bot.

The README says: run ``python examples/try_bot.py -t webrtc`` (with ``--model-dir`` for a
random-weight pack), open ``http://localhost:7860/try`` and press Connect. The test runs that
command (on a free port), opens that page and presses its Connect button. The bot runs a tiny
random-weight pack whose EOS never fires, so every sentence is long noise (energy is what is
measured). The page's microphone stays silent until the bot has talked for a while, then
plays espeak-ng speech. Checked in the page's audio clock: the greeting arrives, the bot's
audio stops after the user starts speaking, none of the interrupted reading follows, and the
answer arrives after the user stops; the page loaded nothing from another origin.

In CI (``CI`` set) the test never skips: a missing tool fails it. Elsewhere it skips, naming
what is missing (``.ci/run`` installs chromium, chromium-driver, espeak-ng and sox).
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest
from browser_client import (
    NO_ANSWER_BEFORE_S,
    BotServer,
    Browser,
    Timeline,
    missing_tools,
    speech_wav,
)

REPO_ROOT = Path(__file__).resolve().parent.parent
TRY_BOT = REPO_ROOT / "examples" / "try_bot.py"
#: The README's no-key steps: the command, then the page to open and the button to press.
README_STEPS = re.compile(
    r"`python (examples/try_bot\.py -t webrtc)`.*?open (http://localhost:7860\S*) and press "
    r"Connect",
    re.DOTALL,
)
USER_TEXT = "Excuse me, could you please stop reading for a moment?"
EOS_NEVER = -30.0
# Generous bounds: they catch a bot that never stops or never answers, not a slow machine.
STOP_WITHIN_S = 4.0
ANSWER_WITHIN_S = 8.0
# The user speaks this long into the bot's audio (the WAV then waits LEAD_S): in the middle of
# the second sentence, not at a sentence boundary.
SPEAK_AFTER_S = 3.0
LEAD_S = 1.0


@pytest.fixture(scope="module")
def long_sentence_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict

    folder = tmp_path_factory.mktemp("browser_pack") / "english"
    return build_pack(folder, tiny_config_dict("standard"), voices=("alba",), eos_logit=EOS_NEVER)


@pytest.fixture(scope="module")
def tools() -> None:
    missing = missing_tools()
    if missing and os.environ.get("CI"):
        pytest.fail(f"CI must have the browser-test tools; missing: {', '.join(missing)}")
    if missing:
        pytest.skip(f"not in CI and missing {', '.join(missing)} (.ci/run installs them)")


def readme_steps() -> tuple[list[str], str]:
    """The command line (after ``python``) and the page path the README's no-key steps name."""
    found = README_STEPS.search((REPO_ROOT / "README.md").read_text())
    assert found, "the README's no-key browser steps moved: update README_STEPS"
    return found.group(1).split(), urlparse(found.group(2)).path


def test_the_readme_steps_name_the_bot_and_its_own_page() -> None:
    command, page = readme_steps()
    assert command == ["examples/try_bot.py", "-t", "webrtc"]
    assert page == "/try" and (REPO_ROOT / "examples" / "try_page.html").exists()


def test_try_bot_greets_stops_when_talked_over_and_answers(
    tools: None, long_sentence_pack: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    started = time.monotonic()
    command, page = readme_steps()
    mic = speech_wav(tmp_path / "mic.wav", USER_TEXT, lead_s=LEAD_S, tail_s=0.5)
    script, *options = command  # BotServer adds -t webrtc and a free --port
    assert options == ["-t", "webrtc"]
    argv = [str(REPO_ROOT / script), "--model-dir", str(long_sentence_pack)]
    env = {"PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1"}
    with BotServer(argv, tmp_path / "bot.log", env=env, page=page) as server, Browser() as browser:
        try:
            server.wait_ready(timeout=90)
            browser.open_page(server.url, timeout=30)
            connect = browser.press_connect(timeout=30)
            timeline = Timeline(connect, browser.bot, browser.mic)  # filled as the page polls

            browser.wait_until(
                lambda: timeline.bot_played_for(SPEAK_AFTER_S), timeout=60, what="the greeting"
            )
            browser.speak(mic, timeout=10)
            browser.wait_until(
                lambda: timeline.answer_played_for(0.5), timeout=60, what="the answer"
            )
            remote = browser.remote_resources()
        except Exception as exc:
            raise AssertionError(f"{exc}\n--- bot log ---\n{server.tail()}") from exc

    assert remote == [], f"the page loaded code from elsewhere: {remote}"
    figures = timeline.figures()
    with capsys.disabled():  # shown in CI's quiet run too
        print(f"\nbrowser figures: {figures}; test ran {time.monotonic() - started:.1f} s")
    spans = [(round(s.start - connect, 2), round(s.end - connect, 2)) for s in timeline.bot_spans()]
    figures["bot_audio_s_after_connect"] = spans
    user = timeline.user_utterance()
    assert user is not None
    greeting = timeline.first_bot_audio()
    assert greeting is not None and greeting < user.start, "the greeting came before the user"
    # The bot was talking when the user started (a short gap in its stream may fall there).
    assert timeline.bot_audio_between(user.start - 0.5, user.start + 0.1), figures
    stop = timeline.bot_stop(user)
    assert stop is not None, f"the bot talked on until the user stopped: {figures}"
    assert stop - user.start < STOP_WITHIN_S, figures
    assert stop < user.end, "the bot talked through the whole utterance"
    # Silence from the stop until the answer: nothing of the interrupted reading came back.
    answer = timeline.first_bot_audio_after(user.end + NO_ANSWER_BEFORE_S)
    assert answer is not None and answer - user.end < ANSWER_WITHIN_S, figures
    assert timeline.bot_audio_between(stop, answer) == []
