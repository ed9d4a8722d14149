"""Our PocketTTSService beside Pipecat's built-in one, in the same process and pipeline shape.

Both services run a full-size ``english`` model with the same random weights (a devpack pack;
upstream pocket-tts loads its ``model.safetensors``), the same voice file and the same text, in
``[service, probe]`` Pipecat pipelines at 24 kHz. The built-in service is the real
``pipecat.services.pocket_tts.PocketTTSService`` (its ``TTSModel.load_model`` pointed at the
local files, since nothing may be downloaded); it drives upstream exactly as shipped: one
``generate_audio_stream`` per sentence, chunks pulled with ``asyncio.to_thread``, and on an
interruption only the asyncio side stops while upstream's threads compute to the end of the
chunk.

Measured (medians over ``--trials``; the first, cold turn of each service reported apart):
- first audio: from a sentence's first ``LLMTextFrame`` (the reply's tokens arrive in a burst)
  to its first ``TTSAudioRawFrame`` at the probe;
- interruption → idle CPU: from queueing an ``InterruptionFrame`` (``--interrupt-after`` s
  into the audio) to the start of the first 50 ms in which the process used < 10 % of a core.

Random weights never emit EOS (the pack is built with a very low EOS logit), so every chunk is
capped at ``--chunk-frames`` frames on both sides (5 s of speech by default, about what the
sentence would take), instead of upstream's length estimate.

Needs torch + pocket-tts 4.0.1 and pipecat-ai 1.14 in one environment (``/tmp/refvenv``, after
``pip install pipecat-ai==1.14.0``); this package comes from the repository:

    /tmp/refvenv/bin/python -m benchmarks.peers.service_vs_builtin [--pack-dir DIR]
        [--config english] [--trials 5] [--json OUT]

The pack (~440 MB for english) is built into ``--pack-dir`` on the first run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.common import never_eos_pack, upstream_config, wait_until_ready

os.environ.setdefault("HF_HUB_OFFLINE", "1")

FIRST_AUDIO_TEXT = "Sure, I can help you with that right away."
INTERRUPTED_TEXT = (
    "Let me check the schedule for the trains that leave from the central station this evening."
)
IDLE_WINDOW_S = 0.05
IDLE_BUSY_FRACTION = 0.10


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="english", help="registry config, or 'tiny' (smoke)")
    parser.add_argument("--pack-dir", type=Path, default=Path("/tmp/pocket_bench_service"))
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--chunk-frames", type=int, default=62, help="frames per chunk, both")
    parser.add_argument("--interrupt-after", type=float, default=0.5, help="s after first audio")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    parser.add_argument("--skip-builtin", action="store_true", help="measure ours only")
    return parser.parse_args(argv)


# -- files ---------------------------------------------------------------------------------


# -- services ------------------------------------------------------------------------------


def make_ours(pack: Path, config: str, chunk_frames: int, **kwargs: Any):
    from pipecat_pocket_tts import PocketTTSService

    class CappedService(PocketTTSService):
        """Ours, with the same per-chunk frame cap as the upstream side."""

        def _session_options(self, engine):
            return {**super()._session_options(engine), "max_frames": chunk_frames}

    return CappedService(
        language=config if config != "tiny" else "english",
        model_dir=pack,
        backend="numpy",
        settings=PocketTTSService.Settings(voice="alba", seed=0),
        **kwargs,
    )


def make_builtin(pack: Path, config: str, chunk_frames: int):
    """Pipecat's built-in service, its model loading pointed at the local random weights."""
    from pocket_tts import TTSModel

    yaml_path = upstream_config(pack, config)
    load = TTSModel.load_model.__func__

    def load_local(cls, language=None, **kwargs):
        model = load(cls, config=yaml_path, **kwargs)
        model._estimate_max_gen_len = lambda token_count: chunk_frames
        return model

    TTSModel.load_model = classmethod(load_local)
    from pipecat.services.pocket_tts.tts import PocketTTSService as BuiltinService

    voice = str(pack / "embeddings" / "alba.safetensors")
    return BuiltinService(settings=BuiltinService.Settings(voice=voice))


# -- measurement ---------------------------------------------------------------------------


def llm_tokens(text: str) -> Iterator[str]:
    """Short pieces with leading spaces, as an LLM streams them."""
    for word in re.findall(r"\s*\S+", text):
        while len(word) > 5:
            yield word[:4]
            word = word[4:]
        yield word


class CpuSampler:
    """(wall, process CPU) pairs every few ms, from a thread of its own."""

    def __init__(self, period: float = 0.004) -> None:
        self._period = period
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> CpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.perf_counter(), time.process_time()))
            time.sleep(self._period)

    def idle_since(self, start: float) -> float | None:
        """Seconds from ``start`` to the first window of idle CPU, or None if none yet."""
        samples = [s for s in self.samples if s[0] >= start]
        j = 0
        for i, (wall, cpu) in enumerate(samples):
            j = max(j, i)
            while j < len(samples) and samples[j][0] - wall < IDLE_WINDOW_S:
                j += 1
            if j == len(samples):
                return None
            span = samples[j][0] - wall
            if samples[j][1] - cpu < IDLE_BUSY_FRACTION * span:
                return wall - start
        return None


async def measure(name: str, service: Any, args: argparse.Namespace) -> dict[str, Any]:
    """First-audio and interruption timings of one service in a [service, probe] pipeline."""
    from pipecat.frames.frames import (
        InterruptionFrame,
        LLMFullResponseEndFrame,
        LLMFullResponseStartFrame,
        LLMTextFrame,
        TTSAudioRawFrame,
        TTSStoppedFrame,
    )
    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.pipeline.worker import PipelineParams, PipelineWorker
    from pipecat.processors.frame_processor import FrameProcessor
    from pipecat.workers.runner import WorkerRunner

    class Probe(FrameProcessor):
        def __init__(self) -> None:
            super().__init__()
            self.reset()

        def reset(self) -> None:
            self.first_audio_at: float | None = None
            self.first_audio = asyncio.Event()
            self.stopped = asyncio.Event()
            self.interrupted = False
            self.audio_after_interruption = 0

        async def process_frame(self, frame, direction) -> None:
            await super().process_frame(frame, direction)
            if isinstance(frame, TTSAudioRawFrame):
                if self.interrupted:
                    self.audio_after_interruption += 1
                if self.first_audio_at is None:
                    self.first_audio_at = time.perf_counter()
                    self.first_audio.set()
            elif isinstance(frame, TTSStoppedFrame):
                self.stopped.set()
            elif isinstance(frame, InterruptionFrame):
                self.interrupted = True
            await self.push_frame(frame, direction)

    probe = Probe()
    worker = PipelineWorker(
        Pipeline([service, probe]),
        params=PipelineParams(audio_out_sample_rate=24000),
        cancel_on_idle_timeout=False,
    )
    started = wait_until_ready(worker, service)

    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    run_task = asyncio.create_task(runner.run())
    await asyncio.wait_for(started.wait(), timeout=600)

    def turn(text: str) -> list:
        return [
            LLMFullResponseStartFrame(),
            *(LLMTextFrame(token) for token in llm_tokens(text)),
            LLMFullResponseEndFrame(),
        ]

    async def settle() -> None:
        """Wait until the process has been idle for a while (no leftover compute)."""
        with CpuSampler() as sampler:
            start = time.perf_counter()
            while time.perf_counter() - start < 30:
                await asyncio.sleep(0.25)
                idle = sampler.idle_since(time.perf_counter() - 0.3)
                if idle is not None and idle < 0.05:
                    return

    first_audio: list[float] = []
    for _ in range(args.trials + 1):
        probe.reset()
        await settle()
        t0 = time.perf_counter()
        await worker.queue_frames(turn(FIRST_AUDIO_TEXT))
        await asyncio.wait_for(probe.first_audio.wait(), timeout=120)
        first_audio.append(probe.first_audio_at - t0)
        await asyncio.wait_for(probe.stopped.wait(), timeout=120)

    to_idle: list[float] = []
    leaked = 0
    for _ in range(args.trials):
        probe.reset()
        await settle()
        await worker.queue_frames(turn(INTERRUPTED_TEXT))
        await asyncio.wait_for(probe.first_audio.wait(), timeout=120)
        await asyncio.sleep(args.interrupt_after)
        with CpuSampler() as sampler:
            t_int = time.perf_counter()
            await worker.queue_frame(InterruptionFrame())
            idle = None
            while idle is None and time.perf_counter() - t_int < 30:
                await asyncio.sleep(0.05)
                idle = sampler.idle_since(t_int)
        to_idle.append(idle if idle is not None else float("nan"))
        await asyncio.sleep(0.2)
        leaked += probe.audio_after_interruption

    await worker.cancel()
    await run_task
    result = {
        "service": name,
        "first_audio_cold_ms": first_audio[0] * 1000,
        "first_audio_ms": statistics.median(first_audio[1:]) * 1000,
        "first_audio_all_ms": [round(t * 1000, 1) for t in first_audio],
        "interruption_to_idle_ms": statistics.median(to_idle) * 1000,
        "interruption_to_idle_all_ms": [round(t * 1000, 1) for t in to_idle],
        "audio_frames_after_interruption": leaked,
    }
    print(json.dumps(result), flush=True)
    return result


async def main_async(args: argparse.Namespace) -> None:
    from pipecat.services.tts_service import TextAggregationMode

    pack = never_eos_pack(args.pack_dir, args.config)
    results = [
        await measure("ours", make_ours(pack, args.config, args.chunk_frames), args),
        await measure(
            "ours (TOKEN aggregation)",
            make_ours(
                pack,
                args.config,
                args.chunk_frames,
                text_aggregation_mode=TextAggregationMode.TOKEN,
            ),
            args,
        ),
    ]
    if not args.skip_builtin:
        results.append(
            await measure(
                "pipecat built-in", make_builtin(pack, args.config, args.chunk_frames), args
            )
        )
        ours, builtin = results[0], results[-1]
        ratios = {
            "first_audio_ratio": builtin["first_audio_ms"] / ours["first_audio_ms"],
            "interruption_to_idle_ratio": builtin["interruption_to_idle_ms"]
            / ours["interruption_to_idle_ms"],
        }
        results.append(ratios)
        print(
            f"\nfirst audio: ours {ours['first_audio_ms']:.0f} ms, built-in "
            f"{builtin['first_audio_ms']:.0f} ms ({ratios['first_audio_ratio']:.2f}x)\n"
            f"interruption → idle CPU: ours {ours['interruption_to_idle_ms']:.0f} ms, built-in "
            f"{builtin['interruption_to_idle_ms']:.0f} ms "
            f"({ratios['interruption_to_idle_ratio']:.1f}x)"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


def main(argv: list[str] | None = None) -> None:
    asyncio.run(main_async(parse_args(argv)))


if __name__ == "__main__":
    main()
