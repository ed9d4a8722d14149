"""A voice bot that speaks with PocketTTS, on the Pipecat development runner.

Deepgram hears, OpenAI thinks, PocketTTS speaks on this machine (no TTS service, no GPU).

    pip install "pipecat-pocket-tts" "pipecat-ai[runner,silero,webrtc,daily,deepgram,openai]"
    export DEEPGRAM_API_KEY=... OPENAI_API_KEY=...
    python examples/bot.py                 # WebRTC: open http://localhost:7860/client
    python examples/bot.py -t daily        # a Daily room (DAILY_API_KEY)
    python examples/bot.py -t twilio -x YOUR.ngrok.io   # phone calls, 8 kHz output

Options through the environment: POCKET_TTS_LANGUAGE (default english), POCKET_TTS_VOICE,
POCKET_TTS_MODEL_DIR (a local pack folder; otherwise the pack comes from Hugging Face once).
"""

from __future__ import annotations

import os

# OpenBLAS keeps idle threads spinning ~0.1 s after each call; with a short timeout the CPU is
# idle within milliseconds of an interruption. It must be set before numpy is first imported.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "1")

from loguru import logger
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
from pipecat.services.deepgram.stt import DeepgramSTTService
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.services.tts_service import TextAggregationMode
from pipecat.transports.base_transport import BaseTransport, TransportParams
from pipecat.workers.runner import WorkerRunner

from pipecat_pocket_tts import PocketTTSService

SYSTEM_PROMPT = (
    "You are a friendly voice assistant. Answer in short spoken sentences, without lists, "
    "markdown or emoji."
)

TELEPHONY = ("twilio", "telnyx", "plivo", "exotel")


def make_tts(**kwargs) -> PocketTTSService:
    """PocketTTS as configured by the environment; TOKEN aggregation for the fastest start."""
    return PocketTTSService(
        language=os.getenv("POCKET_TTS_LANGUAGE", "english"),
        model_dir=os.getenv("POCKET_TTS_MODEL_DIR") or None,
        text_aggregation_mode=TextAggregationMode.TOKEN,
        settings=PocketTTSService.Settings(voice=os.getenv("POCKET_TTS_VOICE") or None),
        **kwargs,
    )


async def run_bot(transport: BaseTransport, runner_args: RunnerArguments, *, out_rate: int) -> None:
    """Build the STT → LLM → PocketTTS pipeline and run it until the client leaves."""
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

    @transport.event_handler("on_client_connected")
    async def on_client_connected(transport, client):
        logger.info("client connected")
        context.add_message({"role": "user", "content": "Say hello and introduce yourself."})
        await worker.queue_frames([LLMRunFrame()])

    @transport.event_handler("on_client_disconnected")
    async def on_client_disconnected(transport, client):
        logger.info("client disconnected")
        await worker.cancel()

    runner = WorkerRunner(handle_sigint=runner_args.handle_sigint)
    await runner.add_workers(worker)
    await runner.run()


def transport_params() -> dict:
    """Transport settings per runner transport (chosen with ``-t``)."""
    from pipecat.transports.daily.transport import DailyParams
    from pipecat.transports.websocket.fastapi import FastAPIWebsocketParams

    def phone() -> FastAPIWebsocketParams:
        return FastAPIWebsocketParams(audio_in_enabled=True, audio_out_enabled=True)

    params: dict = {
        "webrtc": lambda: TransportParams(audio_in_enabled=True, audio_out_enabled=True),
        "daily": lambda: DailyParams(audio_in_enabled=True, audio_out_enabled=True),
    }
    params.update({name: phone for name in TELEPHONY})
    return params


async def bot(runner_args: RunnerArguments) -> None:
    """Entry point of the Pipecat runner: one call per connected client."""
    transport = await create_transport(runner_args, transport_params())
    is_phone = getattr(runner_args, "call_data", None) is not None
    await run_bot(transport, runner_args, out_rate=8000 if is_phone else 24000)


if __name__ == "__main__":
    from pipecat.runner.run import main

    main()
