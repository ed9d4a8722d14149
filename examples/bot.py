"""A voice bot that speaks with PocketTTS, on the Pipecat development runner.

Deepgram hears, OpenAI thinks, PocketTTS speaks on this machine (no TTS service, no GPU).

    pip install -e '.[examples]'          # in a clone of this repository
    export DEEPGRAM_API_KEY=... OPENAI_API_KEY=...   # (or put them in a .env file)
    python examples/bot.py                 # WebRTC: open http://localhost:7860/client
    python examples/bot.py -t daily        # a Daily room (DAILY_API_KEY)
    python examples/bot.py -t twilio -x YOUR.ngrok.io   # phone calls, 8 kHz output

Options through the environment: POCKET_TTS_LANGUAGE (default english), POCKET_TTS_VOICE,
POCKET_TTS_MODEL_DIR (a local pack folder; otherwise the pack comes from Hugging Face once),
POCKET_TTS_SERVER_URL (speak through a TTS server, ``python -m pipecat_pocket_tts serve``,
instead of loading the model in every call's process; POCKET_TTS_API_KEY its key).
No API keys? ``examples/try_bot.py`` needs none.
"""

from __future__ import annotations

import argparse
import os
import sys

# OpenBLAS keeps idle threads spinning ~0.1 s after each call; with a short timeout the CPU is
# idle within milliseconds of an interruption. It must be set before numpy is first imported.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "1")

from pipecat.audio.vad.silero import SileroVADAnalyzer
from pipecat.frames.frames import LLMRunFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMContextAggregatorPair,
    LLMUserAggregatorParams,
)
from pipecat.runner.types import RunnerArguments
from pipecat.runner.utils import create_transport
from pipecat.services.tts_service import TextAggregationMode
from pipecat.transports.base_transport import BaseTransport
from runner_transports import output_rate, run_until_client_leaves, transport_params

from pipecat_pocket_tts import PocketTTSService

SYSTEM_PROMPT = (
    "You are a friendly voice assistant. Answer in short spoken sentences, without lists, "
    "markdown or emoji."
)

#: The services this bot calls, by the environment variable of their key.
REQUIRED_KEYS = {"DEEPGRAM_API_KEY": "Deepgram speech-to-text", "OPENAI_API_KEY": "OpenAI LLM"}


def missing_keys(argv: list[str]) -> list[str]:
    """The API keys this run needs (``-t daily`` also needs DAILY_API_KEY) that are not set."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("-t", "--transport")
    transport = parser.parse_known_args(argv)[0].transport
    needed = [*REQUIRED_KEYS, *(["DAILY_API_KEY"] if transport == "daily" else [])]
    return [name for name in needed if not os.getenv(name)]


def exit_unless_keys(script: str, argv: list[str]) -> None:
    """At start: one clear line and exit status 2 when a key is missing (not a KeyError later)."""
    from dotenv import load_dotenv  # the runner reads .env too, but only once it starts

    load_dotenv(override=True)
    missing = missing_keys(argv)
    if missing:
        names = " and ".join([", ".join(missing[:-1]), missing[-1]] if missing[1:] else missing)
        print(
            f"error: {script} needs {names} in the environment (or a .env file); "
            "to try PocketTTS with no API key: python examples/try_bot.py -t webrtc",
            file=sys.stderr,
        )
        raise SystemExit(2)


def exit_unless_speakable_pack(script: str) -> None:
    """At start: the pack, language and voice of the environment checked (one line, exit 2)."""
    from preflight import ENVIRONMENT, exit_unless_speakable

    exit_unless_speakable(
        script,
        language=os.getenv("POCKET_TTS_LANGUAGE", "english"),
        model_dir=os.getenv("POCKET_TTS_MODEL_DIR") or None,
        voice=os.getenv("POCKET_TTS_VOICE") or None,
        names=ENVIRONMENT,
        joiner="=",
    )


def make_tts(**kwargs) -> PocketTTSService:
    """PocketTTS as configured by the environment; TOKEN aggregation for the fastest start."""
    server_url = os.getenv("POCKET_TTS_SERVER_URL")
    if server_url:  # one model on the server for every call
        kwargs.update(server_url=server_url, api_key=os.getenv("POCKET_TTS_API_KEY") or None)
    else:
        kwargs.setdefault("model_dir", os.getenv("POCKET_TTS_MODEL_DIR") or None)
    return PocketTTSService(
        language=os.getenv("POCKET_TTS_LANGUAGE", "english"),
        text_aggregation_mode=TextAggregationMode.TOKEN,
        settings=PocketTTSService.Settings(voice=os.getenv("POCKET_TTS_VOICE") or None),
        **kwargs,
    )


async def run_bot(transport: BaseTransport, runner_args: RunnerArguments, *, out_rate: int) -> None:
    """Build the STT → LLM → PocketTTS pipeline and run it until the client leaves."""
    from pipecat.services.deepgram.stt import DeepgramSTTService
    from pipecat.services.openai.llm import OpenAILLMService

    stt = DeepgramSTTService(api_key=os.environ["DEEPGRAM_API_KEY"])
    llm = OpenAILLMService(
        api_key=os.environ["OPENAI_API_KEY"],
        settings=OpenAILLMService.Settings(system_instruction=SYSTEM_PROMPT),
    )
    tts = make_tts()

    context = LLMContext()
    aggregators = LLMContextAggregatorPair(
        context, user_params=LLMUserAggregatorParams(vad_analyzer=SileroVADAnalyzer())
    )
    pipeline = Pipeline(
        [
            transport.input(),
            stt,
            aggregators.user(),
            llm,
            tts,
            transport.output(),
            aggregators.assistant(),
        ]
    )
    worker = PipelineWorker(
        pipeline,
        # Telephony: keep the input at 16 kHz for VAD and STT, send 8 kHz to the phone line.
        params=PipelineParams(
            audio_in_sample_rate=16000, audio_out_sample_rate=out_rate, enable_metrics=True
        ),
        idle_timeout_secs=runner_args.pipeline_idle_timeout_secs,
    )

    async def greet() -> None:
        context.add_message({"role": "user", "content": "Say hello and introduce yourself."})
        await worker.queue_frames([LLMRunFrame()])

    await run_until_client_leaves(transport, worker, runner_args, on_connected=greet)


async def bot(runner_args: RunnerArguments) -> None:
    """Entry point of the Pipecat runner: one call per connected client."""
    transport = await create_transport(runner_args, transport_params())
    await run_bot(transport, runner_args, out_rate=output_rate(runner_args))


if __name__ == "__main__":
    exit_unless_keys("examples/bot.py", sys.argv[1:])
    if not os.getenv("POCKET_TTS_SERVER_URL"):  # with a server, its pack is checked there
        exit_unless_speakable_pack("examples/bot.py")
    from pipecat.runner.run import main

    main()
