"""Try PocketTTS in a browser with no API key: it reads to you, and stops when you talk over it.

The bot greets you, reads a long passage, stops the moment you start speaking (Silero VAD hears
you; there is no speech recognition and no LLM), answers with a short scripted reply when you
stop, and reads on from the sentence you interrupted. Everything runs on this machine.

    pip install -e '.[examples]'               # in a clone of this repository
    python examples/try_bot.py -t webrtc        # open http://localhost:7860/try, Connect
    python examples/try_bot.py -t daily         # a Daily room (DAILY_API_KEY)
    python examples/try_bot.py -t twilio -x YOUR.ngrok.io   # a phone call, 8 kHz out

With ``-t webrtc`` it serves its own page at ``/try`` (``try_page.html``: no remote code, so it
connects on a machine without internet). The runner's prebuilt page at ``/client`` works too,
but loads Daily's call bundle from c.daily.co at Connect.

It checks its pack and voice before it serves: a missing pack is one line at start, naming
the option to fix. No network? A random-weight pack has the same plumbing (the voice is noise):

    python -m pipecat_pocket_tts devpack /tmp/pack --config tiny
    python examples/try_bot.py -t webrtc --model-dir /tmp/pack

Options: --model-dir, --language, --voice (or POCKET_TTS_MODEL_DIR, POCKET_TTS_LANGUAGE,
POCKET_TTS_VOICE), and every option of the Pipecat runner (--host, --port...).
"""

from __future__ import annotations

import os

# OpenBLAS keeps idle threads spinning ~0.1 s after each call; with a short timeout the CPU is
# idle within milliseconds of an interruption. It must be set before numpy is first imported.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "1")

import argparse
import asyncio
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loguru import logger
from offline_to_wav import llm_tokens
from pipecat.audio.vad.silero import SileroVADAnalyzer
from pipecat.frames.frames import (
    Frame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TTSTextFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.audio.vad_processor import VADProcessor
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.runner.types import RunnerArguments
from pipecat.runner.utils import create_transport
from pipecat.services.tts_service import TTSService
from pipecat.transports.base_transport import BaseTransport
from pipecat.turns.user_start import VADUserTurnStartStrategy
from pipecat.turns.user_stop import SpeechTimeoutUserTurnStopStrategy
from pipecat.turns.user_turn_processor import UserTurnProcessor
from pipecat.turns.user_turn_strategies import UserTurnStrategies
from runner_transports import output_rate, run_until_client_leaves, transport_params

GREETING = "Hello! I will read you a short story; talk over me whenever you like."
PASSAGE = (
    "The lighthouse keeper climbed the narrow stairs every evening, counting the steps out "
    "loud because the wind outside made it hard to hear his own boots on the stone. "
    "At the top he wiped the salt from the great lens, lit the lamp, and watched the beam "
    "sweep across the water toward the fishing boats that were still far from the harbour. "
    "Most nights nothing happened at all, and he wrote the same short line in his logbook "
    "before making a pot of tea and listening to the radio until the sky turned grey. "
    "But one winter night the beam caught a small red sail drifting much too close to the "
    "rocks, and he ran down the stairs faster than he had run in twenty years. "
    "He rowed out into the dark with a lantern tied to the bow of his little boat, shouting "
    "into the wind until a tired voice finally answered him from somewhere ahead. "
    "By the time the sun came up, two cold and grateful sailors were drinking his tea, and "
    "the keeper wrote a much longer line in his logbook than he ever had before."
)
ANSWERS = (
    "Oh, you said something! I am only a scripted bot, so I could not understand it.",
    "I heard you. I cannot understand words yet, but I stopped as soon as you spoke.",
    "Thank you for that. Let me get back to the story.",
)
RESUME = "Where was I? "
#: How fast the scripted "LLM" streams its tokens (a fast hosted LLM's pace).
TOKENS_PER_SECOND = 50.0
THE_END = "That was the whole story. Talk to me again and I will answer."
#: Where the bot serves its own page (``try_page.html``), beside the runner's routes.
PAGE_ROUTE = "/try"
PAGE_FILE = Path(__file__).with_name("try_page.html")


def sentences(text: str) -> list[str]:
    """The text's sentences, each with its final punctuation."""
    return [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]


def _words(text: str) -> str:
    return " ".join(re.findall(r"[a-z']+", text.lower()))


class Story:
    """The passage and how much of it the listener has heard."""

    def __init__(self, passage: str = PASSAGE, answers: tuple[str, ...] = ANSWERS) -> None:
        self._sentences = sentences(passage)
        self._answers = answers
        self._answered = 0
        self._heard = ""

    def opening(self) -> str:
        """What the bot says when someone connects: the greeting, then the whole passage."""
        return " ".join([GREETING, *self._sentences])

    def heard(self, text: str) -> None:
        """Note text the listener has heard played to the end."""
        self._heard += " " + _words(text)

    def next_reply(self) -> str:
        """A short scripted answer, then the passage from the first sentence not yet heard."""
        answer = self._answers[self._answered % len(self._answers)]
        self._answered += 1
        rest = [s for s in self._sentences if _words(s) not in self._heard]
        return " ".join([answer, RESUME + " ".join(rest) if rest else THE_END])


class ScriptedTalker(FrameProcessor):
    """Plays the part of the LLM: streams the story's lines token by token, as an LLM does.

    An interruption stops the stream (as it cancels an LLM's response); when the user stops
    speaking, the next scripted reply starts.
    """

    def __init__(self, story: Story, tokens_per_second: float = TOKENS_PER_SECOND) -> None:
        super().__init__()
        self._story = story
        self._delay = 1.0 / tokens_per_second
        self._response: asyncio.Task | None = None

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, InterruptionFrame):
            await self._stop_response()
        await self.push_frame(frame, direction)
        if isinstance(frame, UserStartedSpeakingFrame):
            logger.info("user started speaking: the bot stops")
        elif isinstance(frame, UserStoppedSpeakingFrame):
            logger.info("user stopped speaking: the bot answers")
            await self.say(self._story.next_reply())

    async def greet(self) -> None:
        """Greet and read the passage."""
        await self.say(self._story.opening())

    async def say(self, text: str) -> None:
        """Start streaming ``text`` downstream as one LLM response (replacing any other)."""
        await self._stop_response()
        self._response = self.create_task(self._stream(text), name="scripted_response")

    async def cleanup(self) -> None:
        await super().cleanup()
        await self._stop_response()

    async def _stream(self, text: str) -> None:
        await self.push_frame(LLMFullResponseStartFrame())
        for token in llm_tokens(text):
            await self.push_frame(LLMTextFrame(token))
            await asyncio.sleep(self._delay)
        await self.push_frame(LLMFullResponseEndFrame())

    async def _stop_response(self) -> None:
        if self._response is not None:
            task, self._response = self._response, None
            await self.cancel_task(task)


class HeardTracker(FrameProcessor):
    """After the output transport: tells the story which sentences were played to the end."""

    def __init__(self, story: Story) -> None:
        super().__init__()
        self._story = story

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, TTSTextFrame):
            self._story.heard(frame.text)
        await self.push_frame(frame, direction)


def pack_options(cli: argparse.Namespace | None) -> tuple[str, str | None, str | None]:
    """(language, model_dir, voice) as the command line (or the environment) gives them."""
    model_dir = getattr(cli, "model_dir", None) or os.getenv("POCKET_TTS_MODEL_DIR") or None
    language = getattr(cli, "language", None) or os.getenv("POCKET_TTS_LANGUAGE", "english")
    voice = getattr(cli, "voice", None) or os.getenv("POCKET_TTS_VOICE") or None
    return language, model_dir, voice


def pocket_tts(cli: argparse.Namespace | None, **kwargs: Any) -> TTSService:
    """PocketTTS as the command line (or the environment) configures it."""
    from pipecat.services.tts_service import TextAggregationMode

    from pipecat_pocket_tts import PocketTTSService

    language, model_dir, voice = pack_options(cli)
    return PocketTTSService(
        language=language,
        model_dir=model_dir,
        text_aggregation_mode=TextAggregationMode.TOKEN,  # the fastest first audio
        settings=PocketTTSService.Settings(voice=voice),
        **kwargs,
    )


async def run_bot(
    transport: BaseTransport,
    runner_args: RunnerArguments,
    *,
    make_tts: Callable[[argparse.Namespace | None], TTSService] = pocket_tts,
) -> None:
    """VAD → user turns → scripted talker → TTS → output, until the client leaves."""
    story = Story()
    talker = ScriptedTalker(story)
    user_turns = UserTurnProcessor(
        user_turn_strategies=UserTurnStrategies(
            start=[VADUserTurnStartStrategy()],  # interrupts the bot when the user speaks
            stop=[SpeechTimeoutUserTurnStopStrategy(wait_for_transcript=False)],
        )
    )
    pipeline = Pipeline(
        [
            transport.input(),
            VADProcessor(vad_analyzer=SileroVADAnalyzer()),
            user_turns,
            talker,
            make_tts(runner_args.cli_args),
            transport.output(),
            HeardTracker(story),
        ]
    )
    worker = PipelineWorker(
        pipeline,
        params=PipelineParams(
            audio_in_sample_rate=16000,
            audio_out_sample_rate=output_rate(runner_args),
            enable_metrics=True,
        ),
        idle_timeout_secs=runner_args.pipeline_idle_timeout_secs,
    )

    await run_until_client_leaves(transport, worker, runner_args, on_connected=talker.greet)


async def bot(runner_args: RunnerArguments) -> None:
    """Entry point of the Pipecat runner: one call per connected client."""
    transport = await create_transport(runner_args, transport_params())
    await run_bot(transport, runner_args)


def add_page(app: Any, url: str | None) -> None:
    """Serve ``try_page.html`` at ``PAGE_ROUTE`` on the runner's FastAPI ``app``; with a page
    ``url`` (WebRTC), the runner's root (its "Open:" address) leads there too, and one line
    naming it is printed once the server is up, after the runner's banner."""
    from fastapi.responses import HTMLResponse, RedirectResponse

    page = PAGE_FILE.read_text(encoding="utf-8")

    @app.get(PAGE_ROUTE, include_in_schema=False)
    async def try_page() -> HTMLResponse:
        return HTMLResponse(page)

    if url is None:
        return

    @app.get("/", include_in_schema=False)  # before the runner's own "/" (to /client)
    async def root() -> RedirectResponse:
        return RedirectResponse(PAGE_ROUTE)

    def announce() -> None:
        print(f"try_bot: open {url} and press Connect", flush=True)

    app.router.on_startup.append(announce)


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """This bot's options, beside the runner's own."""
    parser.add_argument("--model-dir", help="a local pack folder (nothing is downloaded)")
    parser.add_argument("--language", help="pack name or language (default: english)")
    parser.add_argument("--voice", help="a voice of the pack or a .safetensors voice file")
    return parser


def page_url(argv: list[str]) -> str | None:
    """The URL of the bot's own page for the runner options in ``argv`` (--host, --port);
    None when ``-t`` names a transport other than WebRTC."""
    runner = argparse.ArgumentParser(add_help=False)
    runner.add_argument("-t", "--transport", default="webrtc")
    runner.add_argument("--host", default="localhost")
    runner.add_argument("--port", type=int, default=7860)
    known, _ = runner.parse_known_args(argv)
    return f"http://{known.host}:{known.port}{PAGE_ROUTE}" if known.transport == "webrtc" else None


if __name__ == "__main__":
    from pipecat.runner.run import app, main
    from preflight import TRY_BOT_FLAGS, exit_unless_speakable

    parser = add_arguments(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    known, _ = add_arguments(argparse.ArgumentParser(add_help=False)).parse_known_args()
    if not {"-h", "--help"} & set(sys.argv[1:]):  # help needs no pack
        language, model_dir, voice = pack_options(known)
        exit_unless_speakable(
            "examples/try_bot.py",
            language=language,
            model_dir=model_dir,
            voice=voice,
            names=TRY_BOT_FLAGS,
        )
    add_page(app, page_url(sys.argv[1:]))
    main(parser)
