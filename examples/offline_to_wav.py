"""Speak an LLM-like token stream through a Pipecat pipeline into a WAV file, fully offline.

No network service: a small processor plays the part of the LLM (``LLMFullResponseStartFrame``,
one ``LLMTextFrame`` per token at a steady rate, ``LLMFullResponseEndFrame``),
``PocketTTSService`` speaks it, and a sink writes every ``TTSAudioRawFrame`` to a WAV file and
prints when the first audio arrived. The reply starts once the service has loaded its model
(``on_model_loaded``): first audio is timed from the first token, not from the model load.

    # a random-weight pack is enough to try the plumbing (the audio is noise):
    python -m pipecat_pocket_tts devpack /tmp/pack --config tiny
    python examples/offline_to_wav.py --model-dir /tmp/pack --out /tmp/reply.wav

    # a real pack (downloaded once from Hugging Face):
    python examples/offline_to_wav.py --language english --voice alba --rate 16000
"""

from __future__ import annotations

import os

# OpenBLAS keeps idle threads spinning ~0.1 s after each call; with a short timeout the CPU is
# idle within milliseconds of an interruption. It must be set before numpy is first imported.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "1")

import argparse
import asyncio
import re
import time
import wave
from collections.abc import Iterator
from pathlib import Path

from pipecat.frames.frames import (
    EndWorkerFrame,
    Frame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    StartFrame,
    TTSAudioRawFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.tts_service import TextAggregationMode
from pipecat.workers.runner import WorkerRunner

from pipecat_pocket_tts import PocketTTSService

REPLY = (
    "Sure! The train leaves at 7:45 from platform 3. "
    "It takes about two hours, so you should arrive a little before ten. "
    "Would you like me to book a seat?"
)


def llm_tokens(text: str) -> Iterator[str]:
    """Cut text the way an LLM streams it: short pieces, spaces leading."""
    for word in re.findall(r"\s*\S+", text):
        while len(word) > 5:
            yield word[:4]
            word = word[4:]
        yield word


class FakeLLM(FrameProcessor):
    """Streams one reply token by token after the pipeline starts, then ends the pipeline."""

    def __init__(self, text: str, tokens_per_second: float) -> None:
        super().__init__()
        self._text = text
        self._delay = 1.0 / tokens_per_second
        self.first_token_at: float | None = None
        self.tts_ready = asyncio.Event()  # set when the TTS can speak (or has failed)

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        await self.push_frame(frame, direction)
        if isinstance(frame, StartFrame):
            self.create_task(self._stream_reply(), name="fake_llm")

    async def _stream_reply(self) -> None:
        await self.tts_ready.wait()  # as a user's first turn comes after the bot is up
        await self.push_frame(LLMFullResponseStartFrame())
        self.first_token_at = time.perf_counter()
        for token in llm_tokens(self._text):
            await self.push_frame(LLMTextFrame(token))
            await asyncio.sleep(self._delay)
        await self.push_frame(LLMFullResponseEndFrame())
        # Ends the pipeline once everything before it is flushed (the TTS drains its audio).
        await self.push_frame(EndWorkerFrame())


class WavSink(FrameProcessor):
    """Collects the TTS audio and notes when the first chunk arrived."""

    def __init__(self) -> None:
        super().__init__()
        self.pcm = bytearray()
        self.sample_rate = 0
        self.first_audio_at: float | None = None

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, TTSAudioRawFrame):
            if self.first_audio_at is None:
                self.first_audio_at = time.perf_counter()
            self.pcm.extend(frame.audio)
            self.sample_rate = frame.sample_rate
        await self.push_frame(frame, direction)

    def write(self, path: Path) -> None:
        with wave.open(str(path), "wb") as wav:
            wav.setnchannels(1)
            wav.setsampwidth(2)
            wav.setframerate(self.sample_rate)
            wav.writeframes(bytes(self.pcm))


async def run(args: argparse.Namespace) -> None:
    tts = PocketTTSService(
        language=args.language,
        model_dir=args.model_dir,
        backend=args.backend,
        text_aggregation_mode=TextAggregationMode.TOKEN if args.tokens else None,
        settings=PocketTTSService.Settings(voice=args.voice, seed=args.seed),
    )
    llm = FakeLLM(args.text, args.tokens_per_second)

    @tts.event_handler("on_model_loaded")
    async def ready(_tts: PocketTTSService) -> None:
        llm.tts_ready.set()

    @tts.event_handler("on_error")
    async def failed(_tts: PocketTTSService, _error: Frame) -> None:
        llm.tts_ready.set()  # the reply goes on: no audio, and the error is in the log

    sink = WavSink()
    worker = PipelineWorker(
        Pipeline([llm, tts, sink]),
        params=PipelineParams(audio_out_sample_rate=args.rate),
        cancel_on_idle_timeout=False,
    )
    runner = WorkerRunner(handle_sigint=True)
    await runner.add_workers(worker)
    await runner.run()

    if not sink.pcm:
        raise SystemExit("no audio was produced (see the log above)")
    sink.write(args.out)
    seconds = len(sink.pcm) / 2 / sink.sample_rate
    print(f"wrote {args.out}: {seconds:.2f} s at {sink.sample_rate} Hz")
    if llm.first_token_at and sink.first_audio_at:
        latency = (sink.first_audio_at - llm.first_token_at) * 1000
        print(f"first audio {latency:.0f} ms after the first LLM token")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-dir", type=Path, default=None, help="a local pack folder")
    parser.add_argument("--language", default="english", help="pack name or language code")
    parser.add_argument("--backend", default="auto", choices=("auto", "numpy", "coreml"))
    parser.add_argument("--voice", default=None, help="voice name or .safetensors path")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--rate", type=int, default=24000, help="pipeline output sample rate")
    parser.add_argument("--text", default=REPLY)
    parser.add_argument("--tokens-per-second", type=float, default=40.0)
    parser.add_argument(
        "--tokens",
        action="store_true",
        help="TOKEN aggregation (engine chunker) instead of sentences",
    )
    parser.add_argument("--out", type=Path, default=Path("reply.wav"))
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
