"""One TTS server for N call processes, against one model per call process and N sessions in
one process: streams in real time, first audio, a call process's memory, CPU.

Full-size ``english`` with random weights whose EOS head never fires, so every reply runs to
its chunks' frame limits (``audio s``: about as long as the text spoken; random weights would
otherwise stop within a few frames and no two calls would overlap), int8 FlowLM linears. Every
call is a real Pipecat pipeline (``PocketTTSService → sink``) speaking ``TEXT`` from a
``TTSSpeakFrame``; the sink stamps each audio frame's arrival from the request. Columns:

- ``server``: one ``python -m pipecat_pocket_tts serve --precision int8`` process on
  127.0.0.1, and N call processes, each ``PocketTTSService(server_url=...)``;
- ``processes``: N call processes, each loading its own model (one process per call today);
- ``sessions``: N pipelines in one process on one shared model (in-process batching).

The three columns of a row run one after the other (the server stays up), so they share the
machine's hour. For each N and column: calls requested ``--staggers`` s apart (0.25) and all
at once (0): streams whose playback, started 200 ms after its first frame, ever waits for a frame
(stalls@200); time to first audio p50/p95 (ms, from the request); a call process's RSS
(MB; for ``sessions`` the one process's); CPU core-seconds per audio second, every process
of the column counted (the server's too). ``baseline`` is a call process's RSS with the same
pipeline and no TTS service, so ``server`` minus it is what the client service adds. First, with
``--first-audio-runs``, lone replies alternate between the server and a session in this
process, to time what the round trip adds to first audio apart from load.

The server and the sessions' model admit calls alike (``--max-streams``, by default both
defaults: ``auto``, a call beyond what the model keeps in real time waits for a slot, which
shows in first audio rather than as stalls).

    python -m benchmarks.capacity.server [--sizes 1,4,8,12] [--staggers 0.25,0]
        [--modes server,processes,sessions] [--max-streams auto] [--work /tmp/bench_server]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import (
    FRAME_SECONDS,
    cpu_seconds,
    endless_pack,
    free_port,
    module_command,
    percentile,
    proc_status,
    stalls,
    tree_env,
)

TEXT = (
    "Hello there, how are you doing today? I can help you with your booking, "
    "and the next train leaves at nine fifteen."
)
WARM_UP = "Warm up, please."
BUFFER_S = 0.2
MODES = ("server", "processes", "sessions")
MAX_STREAMS_ENV = "BENCH_SERVER_MAX_STREAMS"  # the admission limit, handed to call processes


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,4,8,12")
    parser.add_argument("--staggers", default="0.25,0")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench_server"))
    parser.add_argument(
        "--first-audio-runs",
        type=int,
        default=10,
        help="lone replies timed through the server and in process, alternating (0: skip)",
    )
    parser.add_argument(
        "--max-streams",
        default="auto",
        help="the admission limit of the server and of the sessions' model alike: auto "
        "(both defaults: beyond what the model keeps in real time a call waits for a slot), "
        "an integer, or none (every call admitted at once)",
    )
    parser.add_argument("--call", nargs=3, metavar=("MODE", "N", "TARGET"), help=argparse.SUPPRESS)
    return parser.parse_args(argv)


# -- a call process: N pipelines, told when to speak --------------------------------------


async def run_calls(mode: str, n: int, target: str) -> None:
    """Build ``n`` pipelines, say "ready", then on each "go" line speak in the next one;
    print one JSON line of arrivals, RSS and CPU when every reply ended."""
    from loguru import logger

    logger.remove()  # Pipecat's per-pipeline debug lines would bury the table
    logger.add(sys.stderr, level="WARNING")
    from pipecat.frames.frames import (
        EndFrame,
        Frame,
        TTSAudioRawFrame,
        TTSSpeakFrame,
        TTSStoppedFrame,
    )
    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.pipeline.worker import PipelineParams, PipelineWorker
    from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
    from pipecat.workers.runner import WorkerRunner

    class Sink(FrameProcessor):
        def __init__(self) -> None:
            super().__init__()
            self.requested = 0.0
            self.arrivals: list[float] = []
            self.done = asyncio.Event()

        async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
            await super().process_frame(frame, direction)
            if isinstance(frame, TTSAudioRawFrame):
                frames = max(1, round(len(frame.audio) / 2 / 1920))
                self.arrivals += [time.perf_counter() - self.requested] * frames
            elif isinstance(frame, TTSStoppedFrame):
                self.done.set()
            await self.push_frame(frame, direction)

    def service():
        from pipecat_pocket_tts import PocketTTSService

        if mode == "server":
            return PocketTTSService(server_url=target)
        from pipecat_pocket_tts.server.serve_command import parse_max_streams

        max_streams = parse_max_streams(os.environ.get(MAX_STREAMS_ENV, "auto"))
        return PocketTTSService(
            model_dir=Path(target), backend="numpy", precision="int8", max_streams=max_streams
        )

    sinks, workers, started = [], [], []
    for _ in range(n):
        sink = Sink()
        tts = None if mode == "baseline" else service()
        stages = [sink] if tts is None else [tts, sink]
        worker = PipelineWorker(
            Pipeline(stages),
            params=PipelineParams(audio_out_sample_rate=24000),
            cancel_on_idle_timeout=False,
        )
        ready = asyncio.Event()

        async def on_started(*_args, ready=ready) -> None:
            ready.set()

        if tts is None:
            worker.event_handler("on_pipeline_started")(on_started)
        else:  # the pipeline runs and the model is loaded (or the server connected)
            tts.event_handler("on_model_loaded")(on_started)
        sinks.append(sink)
        workers.append(worker)
        started.append(ready)
    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(*workers)
    running = asyncio.create_task(runner.run())
    for ready in started:
        await ready.wait()
    if mode != "baseline":  # warm up each pipeline once (the server, or this process's model)
        for sink, worker in zip(sinks, workers, strict=True):
            await worker.queue_frame(TTSSpeakFrame(WARM_UP))
            await sink.done.wait()
            sink.done.clear()
            sink.arrivals.clear()
    idle_rss = proc_status()["VmRSS"]
    print("ready", flush=True)
    cpu0 = cpu_seconds()
    loop = asyncio.get_running_loop()
    for sink, worker in zip(sinks, workers, strict=True):
        await loop.run_in_executor(None, sys.stdin.readline)  # "go"
        sink.requested = time.perf_counter()
        if mode != "baseline":
            await worker.queue_frame(TTSSpeakFrame(TEXT))
    if mode != "baseline":
        for sink in sinks:
            await sink.done.wait()
    result = {
        "arrivals": [sink.arrivals for sink in sinks],
        "rss": max(proc_status()["VmRSS"], idle_rss),
        "cpu": cpu_seconds() - cpu0,
    }
    for worker in workers:
        await worker.queue_frame(EndFrame())
    await running
    print(json.dumps(result), flush=True)


# -- the coordinator ----------------------------------------------------------------------


class Server:
    """The TTS server process of the ``server`` column."""

    def __init__(self, pack: Path, max_streams: str = "auto") -> None:
        self.port = free_port()
        command = [
            sys.executable, "-m", "pipecat_pocket_tts", "serve", "--port", str(self.port),
            "--model-dir", str(pack), "--backend", "numpy", "--precision", "int8",
            "--max-streams", max_streams, "--max-contexts", "64",
        ]  # fmt: skip
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        assert self.process.stdout is not None
        seen: set[str] = set()
        for line in self.process.stdout:
            seen |= {key for key in ("model loaded", "Uvicorn running") if key in line}
            if len(seen) == 2:
                break
        else:
            raise RuntimeError("the server did not start")

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait()


def start_calls(
    mode: str, count: int, per_process: int, target: str, max_streams: str = "auto"
) -> list[subprocess.Popen]:
    command = module_command(__spec__.name, "--call", mode, str(per_process), target)
    env = tree_env(**{MAX_STREAMS_ENV: max_streams})
    calls = [
        subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        for _ in range(count)
    ]
    for call in calls:
        assert call.stdout is not None
        while call.stdout.readline().strip() != "ready":
            if call.poll() is not None:
                raise RuntimeError(f"a {mode} call process failed")
    return calls


def run_column(
    mode: str, n: int, stagger: float, pack: Path, server: Server | None, max_streams: str = "auto"
) -> dict:
    """One (column, N, stagger): every stream's arrivals, a call process's RSS, the CPU."""
    if mode == "sessions":
        calls = start_calls(mode, 1, n, str(pack), max_streams)
        goes = [calls[0]] * n
    else:
        target = server.url if server is not None else str(pack)
        calls = start_calls(mode, n, 1, target, max_streams)
        goes = calls
    server_cpu0 = cpu_seconds(server.process.pid) if server is not None else 0.0
    wall0 = time.perf_counter()
    for i, call in enumerate(goes):
        time.sleep(max(0.0, wall0 + i * stagger - time.perf_counter()))
        assert call.stdin is not None
        call.stdin.write("go\n")
        call.stdin.flush()
    results = []
    for call in calls:
        assert call.stdout is not None
        results.append(json.loads(call.stdout.readline()))
        call.wait()
    arrivals = [a for r in results for a in r["arrivals"]]  # [] for a stream with no audio
    cpu = sum(r["cpu"] for r in results)
    if server is not None:
        cpu += cpu_seconds(server.process.pid) - server_cpu0
    return {"arrivals": arrivals, "rss": max(r["rss"] for r in results), "cpu": cpu}


def summarize(result: dict) -> str:
    arrivals = result["arrivals"]
    spoke = [a for a in arrivals if a]
    first = [a[0] for a in spoke] or [float("nan")]
    audio = sum(len(a) for a in arrivals) * FRAME_SECONDS
    return (
        f"{audio / max(1, len(spoke)):>6.1f}"
        f"{sum(not stalls(a, BUFFER_S) for a in arrivals):>4}/{len(arrivals):<3}"
        f"{1e3 * statistics.median(first):>8.0f}{1e3 * percentile(first, 0.95):>8.0f}"
        f"{result['rss']:>8.0f}{result['cpu'] / audio:>8.2f}"
    )


def first_audio_pairs(pack: Path, runs: int) -> tuple[list[float], list[float]]:
    """Time to the first frame of a lone reply, through the server (its client's session) and
    in this process (a session on the same pack), alternating, each stream run to its end."""
    from pipecat_pocket_tts.client import RemoteTTS
    from pipecat_pocket_tts.engine import PocketTTS

    server = Server(pack)
    remote = RemoteTTS(server.url).connect()
    local = PocketTTS.load("english", backend="numpy", model_dir=pack, precision="int8")
    sessions = {"server": remote.session(timestamps=True), "local": local.session(timestamps=True)}
    times: dict[str, list[float]] = {"server": [], "local": []}
    try:
        for run in range(runs + 1):  # the first pair warms up
            for name, session in sessions.items():
                start = time.perf_counter()
                session.enqueue(TEXT if run else WARM_UP)
                frames = iter(session)
                frame = next(frames)
                if run:
                    times[name].append(time.perf_counter() - start)
                while not frame.is_last_in_utterance:
                    frame = next(frames)
    finally:
        remote.close()
        server.stop()
    return times["server"], times["local"]


def main() -> None:
    args = parse_args()
    if args.call:
        mode, n, target = args.call
        asyncio.run(run_calls(mode, int(n), target))
        return
    pack = endless_pack(args.work)
    sizes = [int(s) for s in args.sizes.split(",")]
    staggers = [float(s) for s in args.staggers.split(",")]
    modes = args.modes.split(",")
    print(f"load average: {os.getloadavg()[0]:.2f}; pack {pack}; int8; text {len(TEXT)} chars")
    if args.first_audio_runs:
        remote, local = first_audio_pairs(pack, args.first_audio_runs)
        p50 = [1e3 * statistics.median(times) for times in (remote, local)]
        print(
            f"first audio of a lone reply, {len(remote)} runs each, alternating: through the "
            f"server p50 {p50[0]:.0f} ms, in process p50 {p50[1]:.0f} ms "
            f"(difference {p50[0] - p50[1]:+.0f} ms)",
            flush=True,
        )
    baseline = run_column("baseline", 1, 0.0, pack, None)
    print(f"baseline call process (pipeline, no TTS): RSS {baseline['rss']:.0f} MB")
    head = f"{'column':10} {'N':>3} {'stagger':>7}  {'audio s':>6}{'ok@200':>8}"
    print(head + f"{'p50 ms':>8}{'p95 ms':>8}{'RSS MB':>8}{'cpu/aud':>8}")
    server = Server(pack, args.max_streams) if "server" in modes else None
    try:  # the columns of a row one after the other, so they share the machine's hour
        for n in sizes:
            for stagger in staggers:
                for mode in modes:
                    own = server if mode == "server" else None
                    result = run_column(mode, n, stagger, pack, own, args.max_streams)
                    print(f"{mode:10} {n:>3} {stagger:>7.2f}  {summarize(result)}", flush=True)
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
