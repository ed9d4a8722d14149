"""A headless Chromium at the try bot's own page, listening and talking as a user would.

Used by the end-to-end browser test and ``benchmarks.peers.browser``. The browser opens the
page ``examples/try_bot.py`` serves (``/try``) and presses its Connect button, with every host
but localhost unresolvable (as on a machine without internet). A script installed before the
page loads plays the user: the page's microphone is a WebAudio stream that stays silent until
``speak`` plays a speech WAV (espeak-ng) into it, and it meters that microphone and the bot's
remote audio track in one WebAudio clock: RMS per 1024-sample block, stamped with the block's
context time. ``Timeline`` turns the two traces into the moments a listener notices (greeting,
user speech onset and end, bot silent, answer).

Needs Debian's ``chromium``, ``chromium-driver``, ``espeak-ng`` and ``sox`` and Python
``selenium`` (``.ci/run`` installs them).
"""

from __future__ import annotations

import base64
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
#: Block RMS above which a trace counts as sounding (noise at RMS 0.1, speech ~0.05-0.2).
SOUND_RMS = 0.01
#: A bot pause at least this long counts as the bot having stopped.
SILENCE_RUN_S = 0.25
#: A pause in the user's speech at least this long ends the utterance.
UTTERANCE_GAP_S = 0.6
#: No answer can start sooner after the user's last sound: Silero's 0.2 s stop_secs plus the
#: user turn's 0.6 s speech timeout (the try bot's settings), less a margin.
NO_ANSWER_BEFORE_S = 0.5

PROBE_JS = r"""
(() => {
  const ctx = new AudioContext({sampleRate: 48000});
  const probe = {bot: [], mic: [], marks: {}, tracks: 0};
  window.__probe = probe;
  probe.now = () => ctx.currentTime;
  probe.mark = (name) => { probe.marks[name] = ctx.currentTime; };
  probe.take = (name, from) => probe[name].slice(from);
  probe.state = () => ctx.state;
  const meter = (stream, out) => {
    if (ctx.state !== 'running') ctx.resume();
    const source = ctx.createMediaStreamSource(stream);
    const node = ctx.createScriptProcessor(1024, 1, 1);
    node.onaudioprocess = (event) => {
      const data = event.inputBuffer.getChannelData(0);
      let sum = 0;
      for (let i = 0; i < data.length; i++) sum += data[i] * data[i];
      out.push([event.playbackTime, Math.sqrt(sum / data.length), performance.now() / 1000]);
    };
    const mute = ctx.createGain();
    mute.gain.value = 0;
    source.connect(node);
    node.connect(mute);
    mute.connect(ctx.destination);
    (window.__keep = window.__keep || []).push(source, node, mute, stream);
  };
  const Native = window.RTCPeerConnection;
  window.RTCPeerConnection = class extends Native {
    constructor(...args) {
      super(...args);
      probe.mark('connect');
      this.addEventListener('track', (event) => {
        if (event.track.kind !== 'audio') return;
        probe.tracks += 1;
        // Chromium feeds a remote track to WebAudio only while a media element plays it.
        const element = new Audio();
        element.muted = true;
        element.srcObject = new MediaStream([event.track]);
        element.play().catch(() => {});
        (window.__keep = window.__keep || []).push(element);
        meter(new MediaStream([event.track]), probe.bot);
      });
      this.addEventListener('connectionstatechange',
        () => probe.mark('pc_' + this.connectionState));
    }
  };
  // The user's microphone: silent until speak() plays the user's words into it.
  const micOut = ctx.createMediaStreamDestination();
  navigator.mediaDevices.getUserMedia = async (constraints) => {
    probe.mark('mic_opened');
    meter(micOut.stream, probe.mic);
    return micOut.stream;
  };
  probe.speak = async (wavBase64) => {
    const bytes = Uint8Array.from(atob(wavBase64), (c) => c.charCodeAt(0));
    const source = ctx.createBufferSource();
    source.buffer = await ctx.decodeAudioData(bytes.buffer);
    source.connect(micOut);
    source.start();
    probe.mark('mic');
  };
  probe.remoteResources = () => performance.getEntriesByType('resource')
    .map((entry) => entry.name).filter((url) => !url.startsWith(location.origin));
})();
"""


def missing_tools() -> list[str]:
    """The browser-test tools that are not installed."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    missing += [tool for tool in ("espeak-ng", "sox") if shutil.which(tool) is None]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium (pip)")
    return missing


def speech_wav(path: Path, text: str, *, lead_s: float, tail_s: float) -> Path:
    """espeak-ng speaking ``text`` after ``lead_s`` of silence, then ``tail_s`` of silence.

    48 kHz mono 16-bit, the rate of the probe's audio clock (played without resampling).
    """
    raw = path.with_suffix(".raw.wav")
    subprocess.run(["espeak-ng", "-v", "en-us", "-s", "150", "-w", str(raw), text], check=True)
    convert = ["sox", str(raw), "-r", "48000", "-c", "1", "-b", "16", str(path), "norm", "-3"]
    subprocess.run([*convert, "pad", f"{lead_s}", f"{tail_s}"], check=True)
    raw.unlink()
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class BotServer:
    """A bot script on the Pipecat runner (``-t webrtc``) in a subprocess, logging to a file;
    ``url`` is its ``page`` (the try bot's own, by default)."""

    def __init__(
        self,
        argv: Sequence[str],
        log: Path,
        env: dict[str, str] | None = None,
        page: str = "/try",
    ) -> None:
        self.port = free_port()
        self.base_url = f"http://localhost:{self.port}"
        self.url = f"{self.base_url}{page}"
        self.log = log
        command = [sys.executable, *argv, "-t", "webrtc", "--host", "localhost"]
        command += ["--port", str(self.port)]
        self._log_file = log.open("wb")
        self._process = subprocess.Popen(
            command,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
        )

    @property
    def pid(self) -> int:
        return self._process.pid

    def wait_ready(self, timeout: float) -> None:
        """Until the page is served (or the bot process died)."""
        import urllib.request

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"the bot exited ({self._process.returncode}):\n{self.tail()}")
            try:
                with urllib.request.urlopen(self.url, timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        raise TimeoutError(f"the bot served no page within {timeout} s:\n{self.tail()}")

    def tail(self, lines: int = 40) -> str:
        self._log_file.flush()
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._log_file.close()

    def __enter__(self) -> BotServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Browser:
    """Headless Chromium with the probe installed and no host but localhost resolvable."""

    def __init__(self) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in (
            "--headless=new",
            "--no-sandbox",
            "--disable-dev-shm-usage",
            "--disable-gpu",
            "--use-fake-ui-for-media-stream",
            "--autoplay-policy=no-user-gesture-required",
            "--window-size=1200,900",
            # As on a machine without internet: any other host fails to resolve.
            "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE localhost",
        ):
            options.add_argument(flag)
        self.driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        self.driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": PROBE_JS})
        self._taken = {"bot": 0, "mic": 0}
        self.bot: list[tuple[float, float]] = []
        self.mic: list[tuple[float, float]] = []

    def open_page(self, url: str, timeout: float) -> None:
        """Load the page until its Connect button can be pressed."""
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions
        from selenium.webdriver.support.ui import WebDriverWait

        self.driver.get(url)
        WebDriverWait(self.driver, timeout).until(
            expected_conditions.element_to_be_clickable((By.ID, "connect"))
        )

    def press_connect(self, timeout: float) -> float:
        """Press Connect, as a user does, until the page says it is connected; returns the
        context time the page began connecting. The page's error text if it fails."""
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import WebDriverWait

        button = self.driver.find_element(By.ID, "connect")
        assert button.text == "Connect", button.text
        button.click()
        state = WebDriverWait(self.driver, timeout).until(
            lambda driver: driver.execute_script(
                "const s = document.body.dataset.state; return s === 'connecting' ? null : s;"
            )
        )
        if state != "connected":
            status = self.driver.find_element(By.ID, "status").text
            raise RuntimeError(f"the page did not connect: {status}")
        return self.marks()["connect"]

    def remote_resources(self) -> list[str]:
        """Every resource the page loaded from another origin than its own."""
        return self.driver.execute_script("return __probe.remoteResources()")

    def speak(self, wav: Path, timeout: float) -> float:
        """Play ``wav`` into the page's microphone; returns the context time it started."""
        self.driver.set_script_timeout(timeout)
        error = self.driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "__probe.speak(arguments[0]).then(() => done(null), (e) => done(String(e)));",
            base64.b64encode(wav.read_bytes()).decode("ascii"),
        )
        if error is not None:
            raise RuntimeError(f"the microphone did not play: {error}")
        return self.marks()["mic"]

    def marks(self) -> dict[str, float]:
        return self.driver.execute_script("return __probe.marks")

    def poll(self) -> None:
        """Fetch the trace blocks recorded since the last poll."""
        for name, trace in (("bot", self.bot), ("mic", self.mic)):
            blocks = self.driver.execute_script(
                f"return __probe.take('{name}', arguments[0])", self._taken[name]
            )
            self._taken[name] += len(blocks)
            trace.extend((float(b[0]), float(b[1])) for b in blocks)

    def wait_until(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        """Poll the traces until ``condition()`` holds; TimeoutError naming ``what`` if never."""
        deadline = time.monotonic() + timeout
        while True:
            self.poll()
            if condition():
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: not within {timeout:.0f} s")
            time.sleep(0.1)

    def screenshot(self, path: Path) -> None:
        self.driver.save_screenshot(str(path))

    def quit(self) -> None:
        self.driver.quit()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.quit()


@dataclass(frozen=True)
class Span:
    start: float
    end: float


def sounding_spans(trace: Sequence[tuple[float, float]], gap_s: float) -> list[Span]:
    """Runs of blocks above ``SOUND_RMS``, merging runs separated by less than ``gap_s``."""
    spans: list[Span] = []
    block = 1024 / 48000
    for t, rms in trace:
        if rms <= SOUND_RMS:
            continue
        if spans and t - spans[-1].end < gap_s:
            spans[-1] = Span(spans[-1].start, t + block)
        else:
            spans.append(Span(t, t + block))
    return spans


@dataclass
class Timeline:
    """What the listener noticed, in seconds of the page's audio clock."""

    connect: float
    bot: Sequence[tuple[float, float]]
    mic: Sequence[tuple[float, float]]

    def bot_spans(self) -> list[Span]:
        return sounding_spans(self.bot, SILENCE_RUN_S)

    def user_utterance(self) -> Span | None:
        spans = sounding_spans(self.mic, UTTERANCE_GAP_S)
        return spans[0] if spans else None

    def recorded_until(self, trace: Sequence[tuple[float, float]]) -> float:
        return trace[-1][0] if trace else self.connect

    def first_bot_audio(self) -> float | None:
        spans = self.bot_spans()
        return spans[0].start if spans else None

    def bot_stop(self, user: Span) -> float | None:
        """When the bot's audio stopped for good after the user started speaking.

        The end of the last bot audio between the user's onset and the earliest moment an
        answer can come (``NO_ANSWER_BEFORE_S`` after the user's last sound); None if the bot
        was silent all that time, or still sounding then.
        """
        horizon = user.end + NO_ANSWER_BEFORE_S
        spans = self.bot_audio_between(user.start, horizon)
        if not spans or spans[-1].end >= horizon:
            return None
        return spans[-1].end

    def bot_audio_between(self, start: float, end: float) -> list[Span]:
        return [s for s in self.bot_spans() if s.end > start and s.start < end]

    def first_bot_audio_after(self, t: float) -> float | None:
        starts = [s.start for s in self.bot_spans() if s.start >= t]
        return starts[0] if starts else None

    def bot_played_for(self, seconds: float) -> bool:
        """Whether ``seconds`` have been recorded since the bot's first audio."""
        first = self.first_bot_audio()
        return first is not None and self.recorded_until(self.bot) > first + seconds

    def answer_played_for(self, seconds: float) -> bool:
        """Whether the user has finished speaking and ``seconds`` of answer time are recorded."""
        user = self.user_utterance()
        if user is None or self.recorded_until(self.mic) < user.end + UTTERANCE_GAP_S + 0.4:
            return False  # the user has not finished speaking yet
        answer = self.first_bot_audio_after(user.end + NO_ANSWER_BEFORE_S)
        return answer is not None and self.recorded_until(self.bot) > answer + seconds

    def figures(self) -> dict[str, Any]:
        """The measured moments relative to each other, in ms (None when not observed)."""
        user = self.user_utterance()
        first = self.first_bot_audio()
        out: dict[str, Any] = {
            "connect_to_first_audio_ms": _ms(first, self.connect),
        }
        if user is not None:
            silent = self.bot_stop(user)
            answer = self.first_bot_audio_after(user.end + NO_ANSWER_BEFORE_S)
            out |= {
                "user_speech_ms": _ms(user.end, user.start),
                "onset_to_silent_ms": _ms(silent, user.start),
                "end_to_answer_ms": _ms(answer, user.end),
            }
        return out


def _ms(later: float | None, earlier: float | None) -> float | None:
    if later is None or earlier is None:
        return None
    return round((later - earlier) * 1000, 1)
