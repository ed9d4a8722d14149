"""The event loop under long texts: its longest stall and its CPU per second of audio.

    python -m benchmarks.profiles.loop                       # every case, this checkout
    PYTHONPATH=/other/checkout:$PWD python -P -m benchmarks.profiles.loop  # the same on another
    python -m benchmarks.profiles.loop --against /other/checkout  # side by side: each case
        # on the other checkout, then on this one, each in a fresh process

A real pipeline — ``PocketTTSService`` → an output transport playing on a virtual clock (every
10 ms of audio written is 10 ms of pipeline time, ``tests/pipecat_playback.py``) → Pipecat's
``LLMAssistantAggregator`` — speaks each text whole, word timestamps on, with Pipecat's own
sentence aggregation, sequencer and word tracker included. Texts: 20 KB with sentence ends,
20 KB without one, a 4 KB run-on; sent as an LLM reply streamed in 4-character tokens with
SENTENCE or TOKEN aggregation, or as one ``TTSSpeakFrame``.

Measured on the loop's thread, in CPU time (``time.thread_time``, not wall time: the machine
is shared): the longest single callback (a stall: nothing else on that loop runs meanwhile),
the loop thread's total CPU over the run, divided by the seconds of audio made, and the
longest pause of Python's cyclic garbage collector (in any thread: it holds the GIL). A tiny
random-weight pack (``devpack``) makes the audio, or with ``--pack full`` the full-size random
``english`` (``benchmarks.common.build_files``); the seconds of audio are printed beside.
Goals (issue 34): stall < 50 ms and loop CPU < 2% of the audio's duration in every case.

    --reference   Pipecat's floor: ``profiles.reference_tts.ReferenceTTS`` (no synthesis, the same
                  frames and words at the same speaking rate), alone and paced as the
                  engine made the service's frames, the engine synthesizing beside it
    --profile     a second, profiled run of each case: the loop's CPU split by owner
                  (``profiles.loop_profile``: service, engine, Pipecat TTS, transport, frames...)
    --census      the objects a full garbage collection walks, after the model load
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import subprocess
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pipecat.frames.frames import (
    EndFrame,
    Frame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TTSSpeakFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMAssistantAggregator
from pipecat.services.tts_service import TextAggregationMode
from pipecat.transports.base_output import BaseOutputTransport
from pipecat.transports.base_transport import TransportParams
from pipecat.workers.runner import WorkerRunner

from benchmarks.common import REPO, build_files, module_command, tree_env, wait_until_ready
from benchmarks.profiles.loop_meter import AudioCount, LoopMeter, print_census
from benchmarks.profiles.loop_profile import LoopProfile
from benchmarks.profiles.reference_tts import FRAME_SAMPLES, ReferenceTTS
from pipecat_pocket_tts import PocketTTSService
from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict
from tests.pipecat_playback import PlaybackClock, PlaybackOutput, timed_frames_on

RATE = 24000
WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "seven",
    "wizards",
    "quietly",
    "judge",
    "every",
    "move",
    "and",
    "the",
    "river",
    "keeps",
    "running",
    "past",
    "old",
    "mills",
    "toward",
    "the",
    "sea",
]


VOICE_RATE_EOS = (-4.8, 1.0)
"""The EOS head's bias and weight scale that make the tiny pack speak at about a real voice's
rate (measured: 17 characters a second on the run-on text, 13 on the sentences)."""


def voice_rate_pack(folder: Path) -> Path:
    """The tiny pack with a noisy EOS head: the logit is the bias plus a random projection
    of the step's output, so EOS fires after a random number of frames, not at the first."""
    from safetensors.numpy import load_file, save_file

    bias, scale = VOICE_RATE_EOS
    pack = build_pack(folder, tiny_config_dict("standard"), eos_logit=bias)
    weights = pack / "model.safetensors"
    tensors = load_file(weights)
    shape = tensors["flow_lm.out_eos.weight"].shape
    projection = np.random.default_rng(7).standard_normal(shape) * scale / np.sqrt(shape[-1])
    tensors["flow_lm.out_eos.weight"] = projection.astype(np.float32)
    save_file(tensors, weights)
    return pack


def sentences_text(size: int) -> str:
    out, n = [], 0
    while sum(map(len, out)) < size:
        out.append(" ".join(WORDS[(n + i) % len(WORDS)] for i in range(12)).capitalize() + ". ")
        n += 5
    return "".join(out)[:size].rsplit(" ", 1)[0] + "."


def run_on_text(size: int) -> str:
    words = [WORDS[i % len(WORDS)] for i in range(size // 4)]
    return " ".join(words)[:size].rsplit(" ", 1)[0]


TEXTS = {
    "20KB sentences": sentences_text(20_000),
    "20KB no end": run_on_text(20_000),
    "4KB run-on": run_on_text(4_000),
    "1KB run-on": run_on_text(1_000),  # for --real-time --rate voice: a minute of audio
}
INPUTS = ("SENTENCE", "TOKEN", "TTSSpeakFrame")
HEADER = (
    "text             input          stall ms  w/o GC  loop CPU s  audio s  CPU/audio"
    "  GC ms  context chars  longest callback (w/o GC)"
)


class RealTimeOutput(BaseOutputTransport):
    """An output transport that plays in real time on the wall clock: each chunk is written
    once the chunk before it has played (Pipecat's network outputs pace their writes so)."""

    def __init__(self, sample_rate: int, chunks_10ms: int = 4) -> None:
        params = TransportParams(
            audio_out_enabled=True,
            audio_out_sample_rate=sample_rate,
            audio_out_10ms_chunks=chunks_10ms,
        )
        super().__init__(params)
        self._played_until = 0.0

    async def start(self, frame: Frame) -> None:
        await super().start(frame)
        await self.set_transport_ready(frame)

    async def write_audio_frame(self, frame: Any) -> bool:
        now = time.monotonic()
        wait, self._played_until = self._played_until - now, max(self._played_until, now)
        self._played_until += len(frame.audio) / 2 / frame.sample_rate
        if wait > 0:
            await asyncio.sleep(wait)
        return True


def frames_of(text: str, how: str) -> list[Frame]:
    if how == "TTSSpeakFrame":
        return [TTSSpeakFrame(text)]
    tokens = [text[i : i + 4] for i in range(0, len(text), 4)]
    return [LLMFullResponseStartFrame(), *map(LLMTextFrame, tokens), LLMFullResponseEndFrame()]


@dataclass
class Result:
    stall_ms: float
    code_stall_ms: float
    where: str
    cpu_s: float
    audio_s: float
    gc_ms: float
    context_chars: int
    profile: Counter[str] = field(default_factory=Counter)  # CPU seconds by owner (--profile)
    wall_s: float = 0.0  # the run's wall-clock seconds

    @property
    def share(self) -> float:
        return self.cpu_s / self.audio_s if self.audio_s else float("nan")


def pocket_service(pack: Path, mode: TextAggregationMode, chars_per_second: float) -> Any:
    return PocketTTSService(
        model_dir=pack,
        backend="numpy",
        settings=PocketTTSService.Settings(seed=1),
        text_aggregation_mode=mode,
    )


class EngineBeside:
    """The engine synthesizing ``text`` in a thread, over and over until the block ends: the
    cores as busy as beside the service, for the reference's run."""

    def __init__(self, pack: Path, text: str) -> None:
        from pipecat_pocket_tts import PocketTTS

        self._tts = PocketTTS.load(model_dir=pack, backend="numpy")
        self._text = text
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="engine-beside")

    def _run(self) -> None:
        while not self._stop.is_set():
            for _frame in self._tts.stream(self._text):
                if self._stop.is_set():
                    break

    def __enter__(self) -> EngineBeside:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._tts.close()


def reference_service(
    pack: Path, mode: TextAggregationMode, chars_per_second: float, pace_s: float = 0.0
) -> Any:
    return ReferenceTTS(
        chars_per_second=chars_per_second,
        sample_rate=RATE,
        pace_s=pace_s,
        text_aggregation_mode=mode,
    )


async def run_case(
    pack: Path,
    text: str,
    how: str,
    freeze: bool = False,
    profile: bool = False,
    make_service: Any = pocket_service,
    chars_per_second: float = 75.0,
    census: bool = False,
    real_time: bool = False,
    chunks_10ms: int = 4,
) -> Result:
    mode = TextAggregationMode.TOKEN if how == "TOKEN" else TextAggregationMode.SENTENCE
    clock = PlaybackClock()
    tts = make_service(pack, mode, chars_per_second)
    counter = AudioCount()
    context = LLMContext()
    output = RealTimeOutput(RATE, chunks_10ms) if real_time else PlaybackOutput(clock, RATE)
    worker = PipelineWorker(
        Pipeline([tts, counter, output, LLMAssistantAggregator(context)]),
        **({} if real_time else {"clock": clock}),
        params=PipelineParams(audio_out_sample_rate=RATE),
        cancel_on_idle_timeout=False,
    )
    started = wait_until_ready(worker, tts)

    meter = LoopMeter()
    profiler = LoopProfile() if profile else None

    async def drive() -> None:
        await asyncio.wait_for(started.wait(), 120)
        if census:
            print_census()
        if freeze:  # what is alive now (modules, the model, the pipeline) is never scanned
            gc.freeze()
        with meter:
            if profiler is not None:
                profiler.enable()
            for frame in frames_of(text, how):  # as an LLM's tokens arrive: one callback each
                await worker.queue_frame(frame)
                await asyncio.sleep(0)
            await worker.queue_frame(EndFrame())
            await runner_done.wait()
            if profiler is not None:
                profiler.disable()

    runner_done = asyncio.Event()

    async def run() -> None:
        runner = WorkerRunner(handle_sigint=False)
        await runner.add_workers(worker)
        await runner.run()
        runner_done.set()

    if real_time:
        await asyncio.gather(run(), drive())
    else:
        with timed_frames_on(clock):
            await asyncio.gather(run(), drive())
    said = "".join(m["content"] for m in context.get_messages() if m.get("role") == "assistant")
    return Result(
        meter.longest * 1000,
        meter.longest_without_gc * 1000,
        meter.longest_callback,
        meter.cpu,
        counter.seconds,
        meter.longest_gc * 1000,
        len(said),
        profiler.seconds() if profiler is not None else Counter(),
        meter.wall,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--texts", nargs="*", choices=list(TEXTS), default=list(TEXTS))
    parser.add_argument("--inputs", nargs="*", choices=INPUTS, default=list(INPUTS))
    parser.add_argument(
        "--freeze", action="store_true", help="gc.freeze() once the pipeline has started"
    )
    parser.add_argument(
        "--pack",
        choices=("tiny", "full"),
        default="tiny",
        help="tiny: a small random devpack; full: the full-size random english pack",
    )
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench_capacity"))
    parser.add_argument(
        "--profile", action="store_true", help="the loop's CPU by owner (cProfile, slower)"
    )
    parser.add_argument(
        "--reference",
        action="store_true",
        help="also Pipecat's floor: ReferenceTTS, the same frames and words, no synthesis"
        " (alone, then its frames spread over the run as the engine made the service's, the"
        " engine synthesizing the text in a thread beside it)",
    )
    parser.add_argument(
        "--census", action="store_true", help="the objects a full collection walks, at start"
    )
    parser.add_argument(
        "--real-time", action="store_true", help="the output plays on the wall clock"
    )
    parser.add_argument(
        "--chunks",
        type=int,
        default=4,
        help="with --real-time: the output's chunk in 10 ms (Pipecat's audio_out_10ms_chunks)",
    )
    parser.add_argument(
        "--rate",
        choices=("pack", "voice"),
        default="pack",
        help="voice: the tiny pack speaks at about a real voice's rate (a noisy EOS head)",
    )
    parser.add_argument("--against", type=Path, help="another checkout, run case by case")
    args = parser.parse_args(argv)
    if args.rate == "voice" and args.pack == "full":
        parser.error("--rate voice is the tiny pack's (the full-size pack has its own EOS head)")
    if args.against is not None:
        return side_by_side(args)
    import pipecat_pocket_tts

    output = "real-time (wall clock)" if args.real_time else "virtual clock"
    print(f"code: {Path(pipecat_pocket_tts.__file__).parent}  pack: {args.pack}  output: {output}")
    with tempfile.TemporaryDirectory() as root:
        if args.pack == "full":
            pack, _ = build_files(args.work)
        elif args.rate == "voice":
            pack = voice_rate_pack(Path(root) / "english")
        else:
            pack = build_pack(Path(root) / "english", tiny_config_dict("standard"))
        if args.census:
            print(f"tracked objects before loading: {len(gc.get_objects())}")
        print(HEADER)
        for name in args.texts:
            for how in args.inputs:
                text = TEXTS[name]
                case = functools.partial(
                    run_case, real_time=args.real_time, chunks_10ms=args.chunks
                )
                r = asyncio.run(case(pack, text, how, args.freeze, census=args.census))
                print_row(name, how, text, r)
                if args.profile:  # a second run, profiled: the shares of the loop's time
                    profiled = case(pack, text, how, args.freeze, profile=True)
                    print_profile(r, asyncio.run(profiled))
                if args.reference and r.audio_s:
                    rate = len(text) / r.audio_s
                    ref = asyncio.run(
                        case(pack, text, how, args.freeze, False, reference_service, rate)
                    )
                    print_row(name, how, text, ref, "reference")
                    if args.profile:
                        profiled = case(pack, text, how, args.freeze, True, reference_service, rate)
                        print_profile(ref, asyncio.run(profiled))
                    if args.real_time:  # the output paces every service's frames already
                        continue
                    # Frames spread over the run as the engine made ours, the engine computing.
                    frame_s = FRAME_SAMPLES / RATE
                    pace = functools.partial(
                        reference_service, pace_s=frame_s * r.wall_s / r.audio_s
                    )
                    with EngineBeside(pack, text):
                        ref = asyncio.run(case(pack, text, how, args.freeze, False, pace, rate))
                    print_row(name, how, text, ref, "reference, paced, engine beside")
    return 0


def print_row(name: str, how: str, text: str, r: Result, label: str = "") -> None:
    print(
        f"{name:16} {how:13} {r.stall_ms:9.1f} {r.code_stall_ms:7.1f} {r.cpu_s:11.2f}"
        f" {r.audio_s:8.1f} {r.share:9.2%} {r.gc_ms:6.1f}  "
        f"{r.context_chars:>5}/{len(text):<5}   {label or r.where}",
        flush=True,
    )


def print_profile(run: Result, profiled: Result) -> None:
    """The loop's CPU per second of audio (``run``, unprofiled) split by owner in the shares
    of a profiled run of the same case."""
    total = sum(profiled.profile.values())
    parts = "  ".join(
        f"{group} {run.share * seconds / total:.2%}"
        for group, seconds in sorted(profiled.profile.items(), key=lambda item: -item[1])
    )
    print(f"  profile: {run.share:.2%} of the audio = {parts}", flush=True)


def side_by_side(args: argparse.Namespace) -> int:
    """Each case on ``--against``, then on this checkout, each in a fresh process."""
    here = REPO
    flags = ["--pack", args.pack, "--work", str(args.work)]
    flags += ["--freeze"] if args.freeze else []
    flags += ["--profile"] if args.profile else []
    flags += ["--real-time"] if args.real_time else []
    flags += ["--rate", args.rate, "--chunks", str(args.chunks)]
    print(f"other: {args.against.resolve()}  this: {here}  pack: {args.pack}")
    print(f"      {HEADER}")
    for name in args.texts:
        for how in args.inputs:
            for label, root in (("other", args.against.resolve()), ("this", here)):
                reference = ["--reference"] if args.reference and label == "this" else []
                command = module_command(
                    __spec__.name, "--texts", name, "--inputs", how, *flags, *reference
                )
                run = subprocess.run(command, env=tree_env(root), capture_output=True, text=True)
                rows = [
                    line for line in run.stdout.splitlines() if line.startswith((name, "  profile"))
                ]
                if not rows:
                    print(f"{label:5} {run.stderr[-300:]}", flush=True)
                for row in rows:
                    tag = "ref" if "   reference" in row else label
                    print(f"{tag:5} {row}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
