"""One long session: a single PocketTTSService speaks reply after reply until MINUTES of audio.

    python -m benchmarks.soak.long_session --minutes 40                  # 40 minutes of audio
    python -m benchmarks.soak.long_session --minutes 40 --model-dir /tmp/x --mode token

The pipeline is ``probe → PocketTTSService → PlaybackOutput`` (tests/pipecat_playback.py, used
by import): an output transport that plays as fast as the audio comes, on a virtual clock that
counts the audio played, so the word frames are released as the playback reaches them and
40 minutes of audio take far less than 40 minutes. The replies are the soak's
(``benchmarks.soak.replies``: LLM replies streamed token by token and ``TTSSpeakFrame``s), each
sent once the one before has ended, no barge-ins, word timestamps on, one pipeline and one
service for the whole run.

Printed: the process's RSS and thread count at the start (after the first reply), the middle
and the end of the audio; the audio's level (RMS, dBFS) for each minute of it; stale audio
frames, unpaired TTSStarted/TTSStopped, replies that should have spoken but did not, and
error frames.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pipecat.frames.frames import EndFrame, Frame, OutputAudioRawFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.tts_service import TextAggregationMode
from pipecat.workers.runner import WorkerRunner

from benchmarks.common import proc_status
from benchmarks.soak.pipeline import Ledger, Probe
from benchmarks.soak.replies import (
    REPLY_TIMEOUT_S,
    build_tiny_pack,
    make_replies,
    quiet_pipecat,
    send_reply,
    wait_stopped,
)
from tests.pipecat_playback import PlaybackClock, PlaybackOutput, timed_frames_on

SAMPLE_RATE = 24000
MINUTE_SAMPLES = 60 * SAMPLE_RATE


class MeteredPlayback(PlaybackOutput):
    """``PlaybackOutput`` that notes what it sees in a ``Ledger`` and the level of each minute
    of the audio it plays (sum of squares per minute, int16 samples)."""

    def __init__(self, ledger: Ledger, clock: PlaybackClock) -> None:
        super().__init__(clock, SAMPLE_RATE)
        self._ledger = ledger
        self.minute_squares: list[float] = []  # per minute of audio played
        self.minute_samples: list[int] = []

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        if direction == FrameDirection.DOWNSTREAM:
            self._ledger.observe(frame)
        await super().process_frame(frame, direction)

    async def write_audio_frame(self, frame: OutputAudioRawFrame) -> bool:
        samples = np.frombuffer(frame.audio, dtype=np.int16).astype(np.float64)  # [n]
        minute = self.played_samples // MINUTE_SAMPLES
        while len(self.minute_squares) <= minute:
            self.minute_squares.append(0.0)
            self.minute_samples.append(0)
        self.minute_squares[minute] += float(np.dot(samples, samples))
        self.minute_samples[minute] += samples.shape[0]
        return await super().write_audio_frame(frame)

    def minute_levels_dbfs(self) -> list[float]:
        """The RMS of each whole minute of played audio, in dB below full scale."""
        levels = []
        for squares, count in zip(self.minute_squares, self.minute_samples, strict=True):
            if count < MINUTE_SAMPLES:
                break  # the part-minute at the end
            rms = math.sqrt(squares / count) / 32768
            levels.append(20 * math.log10(rms) if rms > 0 else float("-inf"))
        return levels


@dataclass
class Checkpoint:
    audio_minutes: float
    rss_mb: float
    threads: int
    wall_s: float


@dataclass
class LongSession:
    """What the run saw."""

    replies: int = 0
    mute: list[int] = field(default_factory=list)
    checkpoints: list[Checkpoint] = field(default_factory=list)  # start, middle, end
    levels_dbfs: list[float] = field(default_factory=list)
    ledger: Ledger = field(default_factory=Ledger)
    wall_s: float = 0.0


async def long_session(
    model_dir: Path, minutes: float, *, token: bool = False, seed: int = 0
) -> LongSession:
    """Speak replies through one pipeline until ``minutes`` of audio were played (``token``:
    TOKEN aggregation, else SENTENCE)."""
    from pipecat_pocket_tts import PocketTTSService

    result = LongSession()
    ledger = result.ledger
    clock = PlaybackClock()
    output = MeteredPlayback(ledger, clock)
    tts = PocketTTSService(
        model_dir=model_dir,
        backend="numpy",
        text_aggregation_mode=TextAggregationMode.TOKEN if token else TextAggregationMode.SENTENCE,
        settings=PocketTTSService.Settings(seed=seed),
    )
    worker = PipelineWorker(
        Pipeline([Probe(ledger), tts, output]),
        clock=clock,
        params=PipelineParams(audio_out_sample_rate=SAMPLE_RATE),
        cancel_on_idle_timeout=False,
    )
    ready = asyncio.Event()

    @tts.event_handler("on_model_loaded")  # the pipeline runs and the model is loaded
    async def _started(_tts) -> None:
        ready.set()

    target_samples = round(minutes * MINUTE_SAMPLES)
    start = time.monotonic()

    def checkpoint() -> None:
        result.checkpoints.append(
            Checkpoint(
                output.played_samples / MINUTE_SAMPLES,
                proc_status()["VmRSS"],
                threading.active_count(),
                time.monotonic() - start,
            )
        )

    async def drive() -> None:
        await asyncio.wait_for(ready.wait(), 120)
        rng = random.Random(seed)
        for reply in make_replies(rng, None, barge_in=0.0, silent=0.0):
            if output.played_samples >= target_samples:
                break
            ledger.reply = reply.index
            ledger.stopped_event.clear()
            result.replies += 1
            before = ledger.audio_bytes[reply.index]
            await send_reply(worker, reply, None)
            await wait_stopped(ledger, reply.index, time.monotonic() + REPLY_TIMEOUT_S)
            if ledger.audio_bytes[reply.index] == before:
                result.mute.append(reply.index)
            if not result.checkpoints and output.played_samples > 0:
                checkpoint()  # the start: one reply spoken, the model loaded and warm
            elif len(result.checkpoints) == 1 and output.played_samples >= target_samples // 2:
                checkpoint()
        checkpoint()
        await worker.queue_frame(EndFrame())

    with timed_frames_on(clock):
        runner = WorkerRunner(handle_sigint=False)
        await runner.add_workers(worker)
        await asyncio.gather(runner.run(), drive())
    result.levels_dbfs = output.minute_levels_dbfs()
    result.wall_s = time.monotonic() - start
    return result


def report(result: LongSession) -> str:
    ledger = result.ledger
    unpaired = sum(ledger.unpaired(set()).values())
    lines = [
        f"one session: {result.replies} replies, "
        f"{result.checkpoints[-1].audio_minutes:.1f} min of audio in {result.wall_s:.0f} s",
        "checkpoint   audio min   RSS MB   threads   wall s",
    ]
    for name, point in zip(("start", "middle", "end"), result.checkpoints, strict=False):
        lines.append(
            f"{name:10} {point.audio_minutes:11.2f} {point.rss_mb:8.1f} {point.threads:9d} "
            f"{point.wall_s:8.0f}"
        )
    levels = result.levels_dbfs  # whole minutes (the part-minute at the end is left out)
    finite = [v for v in levels if math.isfinite(v)]
    lines.append("level per minute of audio (dBFS): " + ", ".join(f"{v:.1f}" for v in levels))
    if finite:
        lines.append(f"level spread: min {min(finite):.1f}, max {max(finite):.1f} dBFS")
    lines += [
        f"stale audio frames: {ledger.stale_frames}",
        f"audio frames of a context never started: {ledger.orphan_audio_frames}",
        f"unpaired TTSStarted/TTSStopped: {unpaired}",
        f"replies that should have spoken but did not: {len(result.mute)}",
        f"error frames: {len(ledger.errors)}"
        + (f" (first: {ledger.errors[0][:120]!r})" if ledger.errors else ""),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=40.0, help="minutes of audio")
    parser.add_argument("--mode", choices=["sentence", "token"], default="sentence")
    parser.add_argument("--model-dir", type=Path, help="a pack folder (default: a tiny one)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quiet", action="store_true", help="Pipecat logs at WARNING only")
    args = parser.parse_args(argv)
    if args.quiet:
        quiet_pipecat()
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = args.model_dir or build_tiny_pack(Path(tmp))
        run = long_session(model_dir, args.minutes, token=args.mode == "token", seed=args.seed)
        print(report(asyncio.run(run)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
