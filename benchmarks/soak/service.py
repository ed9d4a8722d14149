"""Soak PocketTTSService: replies with random barge-ins through real Pipecat pipelines.

    python -m benchmarks.soak.service --replies 1000                  # one service
    python -m benchmarks.soak.service --services 8 --minutes 3        # eight on one model
    python -m benchmarks.soak.service --model-dir /tmp/x --replies 50 # a full-size devpack
    python -m benchmarks.soak.service --services 4 --server-url ws://127.0.0.1:8000  # a server

One session speaking reply after reply for 40 minutes of audio: ``benchmarks.soak.long_session``.

Each pipeline is ``probe → PocketTTSService → RealtimeOutput``: the output transport is a
Pipecat ``BaseOutputTransport`` that writes audio at its real duration (as a sound card or a
WebRTC track would), so audio queues up, plays, and is dropped by the transport on an
interruption exactly as in a live bot. A driver per pipeline sends replies — an LLM reply
streamed token by token, a ``TTSSpeakFrame``, or now and then text with nothing to say — and
barges in at a random moment of about half of them. Services share one model (one pack
folder, ``load_shared``), or a TTS server's (``--server-url``: each service a client of it).
Without ``--model-dir`` tiny random-weight packs are built.

Printed per run: stale audio frames (audio of a context that started before the latest
interruption reaching the output), unpaired TTSStarted/TTSStopped, replies that should have
spoken but did not, error frames, thread and RSS trend, event-loop lag p99/max, and the CPU
the process used in the 300 ms after each interruption (meaningful with one service).
``tests/service/test_soak.py`` runs a CI-sized soak and asserts the correctness figures.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pipecat.frames.frames import (
    EndFrame,
    InterruptionFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.services.tts_service import TextAggregationMode
from pipecat.workers.runner import WorkerRunner

from benchmarks.common import proc_status
from benchmarks.soak.pipeline import Ledger, Probe, RealtimeOutput
from benchmarks.soak.replies import (
    REPLY_TIMEOUT_S,
    Reply,
    build_tiny_pack,
    make_replies,
    quiet_pipecat,
    send_reply,
    sleep_until,
    wait_stopped,
)

READY_TIMEOUT_S = 120.0  # a full-size pack loads and warms up first
INTERRUPT_CPU_WINDOW_S = 0.3


@dataclass
class Samples:
    """Process-wide figures sampled during the run."""

    threads: list[int] = field(default_factory=list)
    rss_mb: list[float] = field(default_factory=list)
    loop_lag_s: list[float] = field(default_factory=list)
    cpu_after_interrupt: list[float] = field(default_factory=list)  # cores busy, 0..n

    def sample(self) -> None:
        self.threads.append(threading.active_count())
        self.rss_mb.append(proc_status()["VmRSS"])


async def watch_loop(
    samples: Samples, ready: list[asyncio.Event], stop: asyncio.Event, interval_s: float = 0.01
) -> None:
    """Event-loop lag once every pipeline runs: how late a 10 ms sleep wakes up."""
    for event in ready:
        await event.wait()
    while not stop.is_set():
        start = time.perf_counter()
        await asyncio.sleep(interval_s)
        samples.loop_lag_s.append(max(0.0, time.perf_counter() - start - interval_s))


@dataclass
class Outcome:
    """One pipeline's figures."""

    replies: int = 0
    interrupted: set[int] = field(default_factory=set)
    mute: list[int] = field(default_factory=list)  # should have spoken, did not
    silent_that_opened_audio: int = 0
    ledger: Ledger = field(default_factory=Ledger)
    session_threads_after_end: int = 0


async def drive(
    worker: PipelineWorker,
    ready: asyncio.Event,
    output: RealtimeOutput,
    outcome: Outcome,
    replies: Iterable[Reply],
    samples: Samples,
    minutes: float | None,
) -> None:
    """Send the replies one after the other, barging in where planned; then end."""
    ledger = outcome.ledger
    await asyncio.wait_for(ready.wait(), READY_TIMEOUT_S)
    deadline = None if minutes is None else time.monotonic() + 60 * minutes
    for reply in replies:
        if deadline is not None and time.monotonic() > deadline:
            break
        ledger.reply = reply.index
        ledger.stopped_event.clear()
        outcome.replies += 1
        started = time.monotonic()
        interrupt_at = (
            None if reply.interrupt_after_s is None else started + reply.interrupt_after_s
        )
        sent_all = await send_reply(worker, reply, interrupt_at)
        if interrupt_at is not None:
            await sleep_until(interrupt_at)
            if not sent_all or not ledger.stopped_for(reply.index) or output.playing_for() > 0:
                await interrupt(worker, outcome, reply, samples)
                continue
        await wait_stopped(ledger, reply.index, started + REPLY_TIMEOUT_S)
        await asyncio.sleep(output.playing_for() + 0.02)  # let it play out
        spoke = ledger.audio_bytes[reply.index] > 0 and ledger.stopped_for(reply.index)
        if reply.kind == "silent":
            outcome.silent_that_opened_audio += any(
                r == reply.index for r in ledger.context_reply.values()
            )
        elif not spoke:
            outcome.mute.append(reply.index)
        samples.sample()
        await asyncio.sleep(0.05)
    await worker.queue_frame(EndFrame())


async def interrupt(worker: PipelineWorker, outcome: Outcome, reply: Reply, samples: Samples):
    outcome.interrupted.add(reply.index)
    cpu, wall = time.process_time(), time.perf_counter()
    await worker.queue_frame(InterruptionFrame())
    await asyncio.sleep(INTERRUPT_CPU_WINDOW_S)
    samples.cpu_after_interrupt.append(
        (time.process_time() - cpu) / max(time.perf_counter() - wall, 1e-6)
    )
    samples.sample()
    await asyncio.sleep(random.uniform(0.0, 0.3))  # the user is still talking


def session_thread_count() -> int:
    return sum(1 for t in threading.enumerate() if t.name.startswith("pocket-tts-session"))


async def soak(
    model_dir: Path,
    *,
    services: int = 1,
    replies: int = 100,
    minutes: float | None = None,
    modes: str = "mixed",
    barge_in: float = 0.5,
    silent: float = 0.05,
    seed: int = 0,
    sample_rate: int = 24000,
    server_url: str | None = None,
) -> tuple[list[Outcome], Samples]:
    """Run ``services`` pipelines side by side; each sends ``replies`` (or runs ``minutes``).

    ``server_url``: the services speak through that TTS server (``model_dir`` unused)."""
    from pipecat_pocket_tts import PocketTTSService

    rng = random.Random(seed)
    random.seed(seed)
    samples = Samples()
    samples.sample()
    outcomes, workers, drivers, readies = [], [], [], []
    for k in range(services):
        token = modes == "token" or (modes == "mixed" and k % 2 == 1)
        mode = TextAggregationMode.TOKEN if token else TextAggregationMode.SENTENCE
        engine = {"server_url": server_url} if server_url else {"model_dir": model_dir}
        if not server_url:
            engine["backend"] = "numpy"
        tts = PocketTTSService(
            **engine,
            text_aggregation_mode=mode,
            settings=PocketTTSService.Settings(seed=seed + k),
        )
        outcome = Outcome()
        output = RealtimeOutput(outcome.ledger, sample_rate)
        worker = PipelineWorker(
            Pipeline([Probe(outcome.ledger), tts, output]),
            params=PipelineParams(audio_out_sample_rate=sample_rate),
            cancel_on_idle_timeout=False,
        )
        ready = asyncio.Event()
        readies.append(ready)
        tts.event_handler("on_model_loaded")(_setter(ready))  # started, model loaded
        count = replies if minutes is None else None
        plan = make_replies(random.Random(rng.random()), count, barge_in, silent)
        outcomes.append(outcome)
        workers.append(worker)
        drivers.append(drive(worker, ready, output, outcome, plan, samples, minutes))
    stop = asyncio.Event()
    monitor = asyncio.create_task(watch_loop(samples, readies, stop))
    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(*workers)
    await asyncio.gather(runner.run(), *drivers)
    stop.set()
    await monitor
    threads = session_thread_count()
    for outcome in outcomes:
        outcome.session_threads_after_end = threads
    samples.sample()
    return outcomes, samples


def _setter(event: asyncio.Event):
    async def handler(*_args) -> None:
        event.set()

    return handler


@dataclass(frozen=True)
class Figures:
    replies: int
    interrupted: int
    stale_frames: int
    orphan_audio_frames: int
    unpaired: int
    unpaired_kinds: tuple[tuple[str, int], ...]
    mute: int
    silent_that_opened_audio: int
    errors: tuple[str, ...]
    session_threads_after_end: int


def figures(outcomes: list[Outcome]) -> Figures:
    """The correctness figures summed over pipelines."""
    return Figures(
        replies=sum(o.replies for o in outcomes),
        interrupted=sum(len(o.interrupted) for o in outcomes),
        stale_frames=sum(o.ledger.stale_frames for o in outcomes),
        orphan_audio_frames=sum(o.ledger.orphan_audio_frames for o in outcomes),
        unpaired=sum(sum(o.ledger.unpaired(o.interrupted).values()) for o in outcomes),
        unpaired_kinds=tuple(
            sum((o.ledger.unpaired(o.interrupted) for o in outcomes), Counter()).items()
        ),
        mute=sum(len(o.mute) for o in outcomes),
        silent_that_opened_audio=sum(o.silent_that_opened_audio for o in outcomes),
        errors=tuple(e for o in outcomes for e in o.ledger.errors),
        session_threads_after_end=max((o.session_threads_after_end for o in outcomes), default=0),
    )


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _trend(values: list[float]) -> str:
    if len(values) < 4:
        return f"{values}"
    quarter = max(1, len(values) // 4)
    first, last = statistics.mean(values[:quarter]), statistics.mean(values[-quarter:])
    return f"first quarter {first:.1f}, last quarter {last:.1f}, max {max(values):.1f}"


def report(outcomes: list[Outcome], samples: Samples, elapsed_s: float) -> str:
    f = figures(outcomes)
    lag_ms = [v * 1000 for v in samples.loop_lag_s]
    cpu = samples.cpu_after_interrupt
    lines = [
        f"{len(outcomes)} service(s), {f.replies} replies ({f.interrupted} interrupted) "
        f"in {elapsed_s:.0f} s",
        f"stale audio frames after interruptions: {f.stale_frames}",
        f"audio frames of a context never started: {f.orphan_audio_frames}",
        f"unpaired TTSStarted/TTSStopped: {f.unpaired}"
        + (f" ({', '.join(f'{k}: {n}' for k, n in f.unpaired_kinds)})" if f.unpaired else ""),
        f"replies that should have spoken but did not: {f.mute}",
        f"nothing-to-say replies that opened an audio context: {f.silent_that_opened_audio}",
        f"error frames: {len(f.errors)}" + (f" (first: {f.errors[0][:120]!r})" if f.errors else ""),
        f"engine session threads after the end: {f.session_threads_after_end}",
        f"threads: {_trend([float(t) for t in samples.threads])}",
        f"RSS MB: {_trend(samples.rss_mb)}",
        f"event-loop lag ms: p99 {_percentile(lag_ms, 0.99):.1f}, max {max(lag_ms, default=0):.1f}",
        f"CPU in the {INTERRUPT_CPU_WINDOW_S * 1000:.0f} ms after an interruption (cores): "
        f"mean {statistics.mean(cpu) if cpu else float('nan'):.2f}, "
        f"p99 {_percentile(cpu, 0.99):.2f}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replies", type=int, default=100, help="per service")
    parser.add_argument("--minutes", type=float, help="run this long instead of --replies")
    parser.add_argument("--services", type=int, default=1)
    parser.add_argument("--mode", choices=["sentence", "token", "mixed"], default="mixed")
    parser.add_argument("--barge-in", type=float, default=0.5, help="share of replies cut")
    parser.add_argument("--silent", type=float, default=0.05, help="share with nothing to say")
    parser.add_argument("--model-dir", type=Path, help="a pack folder (default: a tiny one)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--server-url", help="speak through this TTS server (ws://...)")
    parser.add_argument("--quiet", action="store_true", help="Pipecat logs at WARNING only")
    args = parser.parse_args(argv)
    if args.quiet:
        quiet_pipecat()
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = args.model_dir or build_tiny_pack(Path(tmp))
        start = time.monotonic()
        outcomes, samples = asyncio.run(
            soak(
                model_dir,
                services=args.services,
                replies=args.replies,
                minutes=args.minutes,
                modes=args.mode,
                barge_in=args.barge_in,
                silent=args.silent,
                seed=args.seed,
                server_url=args.server_url,
            )
        )
        print(report(outcomes, samples, time.monotonic() - start))
    return 0


if __name__ == "__main__":
    sys.exit(main())
