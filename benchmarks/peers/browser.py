"""Barge-in at the ear: the try bot with our PocketTTSService and with Pipecat's built-in one.

The same bot (``examples/try_bot.py``: Silero VAD, user turns, a scripted talker streaming
50 tokens/s) on the Pipecat runner's WebRTC transport, once with ``PocketTTSService`` (NumPy,
TOKEN aggregation, as the try bot ships) and once with Pipecat's built-in
``pipecat.services.pocket_tts.PocketTTSService`` (upstream pocket-tts 4.0.1 on torch, its
``TTSModel.load_model`` pointed at the same local random weights, since nothing may be
downloaded). Both read the same random-weight pack whose EOS never fires, so each chunk runs
to upstream's length estimate (tokens / 3 + 2 s) on both sides: long sentences.

Headless Chromium (``tests/browser_client.py``) opens the try bot's page, presses Connect,
listens, and ``--interrupt-after`` seconds into the bot's speech (in the middle of a long
sentence) plays espeak-ng speech into the page's microphone. Measured in the page's audio
clock, per trial (a fresh browser connection each, one bot process per service):
- connect → first bot audio;
- user speech onset → bot silent (VAD, interruption, transport and jitter buffer included);
- user speech end → first audio of the answer (VAD stop, the turn's 0.6 s speech timeout,
  then the TTS: the built-in first finishes generating the interrupted sentence).

Needs torch + pocket-tts 4.0.1 and pipecat-ai[runner,webrtc,silero] 1.14 + selenium in one
environment (``/tmp/refvenv``), Debian's chromium, chromium-driver, espeak-ng and sox:

    /tmp/refvenv/bin/python -m benchmarks.peers.browser [--config english] [--trials 3]
        [--pack-dir DIR] [--json OUT]

The pack (~440 MB for english) is built into ``--pack-dir`` on the first run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common import REPO, module_command, never_eos_pack, upstream_config

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "1")

USER_TEXT = "Excuse me, could you please stop reading for a moment?"
SERVICES = ("ours", "builtin")
FIGURES = ("connect_to_first_audio_ms", "onset_to_silent_ms", "end_to_answer_ms")
EXTRA = ("answer_tts_ttfb_ms",)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="english", help="registry config, or 'tiny' (smoke)")
    parser.add_argument("--pack-dir", type=Path, default=Path("/tmp/pocket_bench_browser"))
    parser.add_argument("--trials", type=int, default=3, help="browser connections per service")
    parser.add_argument(
        "--interrupt-after", type=float, default=4.0, help="s of bot audio before the user speaks"
    )
    parser.add_argument("--services", default=",".join(SERVICES), help="ours,builtin")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    return parser.parse_args(argv)


# -- the bot, run by the Pipecat runner in a subprocess (--serve) ----------------------------


def make_service(name: str, pack: Path, config: str) -> Any:
    """Our service (as the try bot builds it) or the built-in one, on the pack's weights."""
    if name == "ours":
        from pipecat.services.tts_service import TextAggregationMode

        from pipecat_pocket_tts import PocketTTSService

        return PocketTTSService(
            language="english",
            model_dir=pack,
            backend="numpy",
            text_aggregation_mode=TextAggregationMode.TOKEN,
            settings=PocketTTSService.Settings(voice="alba", seed=0),
        )
    from pocket_tts import TTSModel

    yaml_path = upstream_config(pack, config)
    if not hasattr(TTSModel, "_load_model_from_hub"):  # patched once per process
        TTSModel._load_model_from_hub = TTSModel.load_model.__func__

        def load_local(cls, language=None, **kwargs):
            return cls._load_model_from_hub(cls, config=yaml_path, **kwargs)

        TTSModel.load_model = classmethod(load_local)
    from pipecat.services.pocket_tts.tts import PocketTTSService as BuiltinService

    voice = str(pack / "embeddings" / "alba.safetensors")
    return BuiltinService(settings=BuiltinService.Settings(voice=voice))


async def bot(runner_args: Any) -> None:
    """The Pipecat runner's entry point in the --serve subprocess."""
    from pipecat.runner.utils import create_transport
    from runner_transports import transport_params
    from try_bot import run_bot

    cli = runner_args.cli_args
    transport = await create_transport(runner_args, transport_params())
    await run_bot(
        transport,
        runner_args,
        make_tts=lambda _cli: make_service(cli.serve, Path(cli.pack), cli.config),
    )


def serve() -> None:
    from pipecat.runner.run import app, main
    from try_bot import add_page

    add_page(app)  # the page the listener opens
    parser = argparse.ArgumentParser(description="the browser benchmark's bot")
    parser.add_argument("--serve", choices=SERVICES, required=True)
    parser.add_argument("--pack", required=True)
    parser.add_argument("--config", default="english")
    main(parser)


# -- the listener ------------------------------------------------------------------------------


def one_trial(server: Any, mic: Path, interrupt_after: float) -> dict[str, Any]:
    """One browser connection: greeting, the user talks over it, the answer."""
    from tests.browser_client import Browser, Timeline

    with Browser() as browser:
        browser.open_page(server.url, timeout=60)
        timeline = Timeline(browser.press_connect(timeout=60), browser.bot, browser.mic)

        browser.wait_until(
            lambda: timeline.bot_played_for(interrupt_after), timeout=120, what="the bot's speech"
        )
        browser.speak(mic, timeout=10)
        browser.wait_until(lambda: timeline.answer_played_for(0.3), timeout=120, what="the answer")
        return timeline.figures()


def wait_idle(pid: int, timeout: float = 60.0) -> None:
    """Until the bot process used < 10 % of a core over half a second (no leftover compute)."""

    def cpu() -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        before = cpu()
        time.sleep(0.5)
        if cpu() - before < 0.05:
            return


def answer_ttfb_ms(log: Path) -> float | None:
    """Pipecat's TTFB metric of the answer turn (first text → first audio in the TTS), from the
    bot's log: the TTS's share of "user speech end → answer"."""
    text = log.read_text(errors="replace")
    after = text.rsplit("the bot answers", 1)
    found = re.search(r"TTFB: ([0-9.]+)s", after[1]) if len(after) == 2 else None
    return round(float(found.group(1)) * 1000, 1) if found else None


def measure(name: str, pack: Path, args: argparse.Namespace, mic: Path) -> dict[str, Any]:
    from tests.browser_client import BotServer

    log = args.pack_dir / f"bench_browser_{name}.log"
    argv = module_command(__spec__.name, "--serve", name, "--pack", str(pack))[1:]
    argv += ["--config", args.config]
    # The bot imports the try bot and its neighbours as the examples folder's scripts do.
    env = {"PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "examples")])}
    trials: list[dict[str, Any]] = []
    with BotServer(argv, log, env=env) as server:
        server.wait_ready(timeout=300)
        for index in range(args.trials):
            wait_idle(server.pid)
            try:
                figures = one_trial(server, mic, args.interrupt_after)
            except Exception as exc:
                raise RuntimeError(f"{name}, trial {index + 1}: {exc}\n{server.tail()}") from exc
            figures["answer_tts_ttfb_ms"] = answer_ttfb_ms(log)
            print(f"{name} trial {index + 1}: {figures}", flush=True)
            trials.append(figures)
    result: dict[str, Any] = {"service": name, "trials": trials}
    for key in FIGURES + EXTRA:
        values = [t[key] for t in trials if t.get(key) is not None]
        result[key] = statistics.median(values) if values else None
    return result


def main() -> None:
    if "--serve" in sys.argv:
        serve()
        return
    args = parse_args()
    from tests.browser_client import missing_tools, speech_wav

    missing = missing_tools()
    if missing:
        raise SystemExit(f"missing: {', '.join(missing)}")
    pack = never_eos_pack(args.pack_dir, args.config)
    mic = speech_wav(args.pack_dir / "user.wav", USER_TEXT, lead_s=0.5, tail_s=0.5)
    print(f"load average before: {os.getloadavg()}", flush=True)
    results = [measure(name, pack, args, mic) for name in args.services.split(",")]
    print(f"load average after: {os.getloadavg()}")
    print(f"\n{args.config}, {args.trials} trials, medians (ms, at the browser):")
    print(f"{'':<28}" + "".join(f"{r['service']:>12}" for r in results))
    for key in FIGURES + EXTRA:
        row = "".join(f"{r[key]:>12.0f}" if r[key] is not None else f"{'-':>12}" for r in results)
        print(f"{key:<28}{row}")
    if len(results) == 2 and all(r[k] for r in results for k in FIGURES):
        ours, builtin = results
        ratios = {k: round(builtin[k] / ours[k], 2) for k in FIGURES}
        print(f"built-in ÷ ours: {ratios}")
        results.append({"builtin_over_ours": ratios})
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
