"""OpenAI's response formats: what each encoder costs, how soon its first bytes go out, and the
server's capacity with mp3 against pcm.

1. ``encoders`` (in this process): each format's encoder (``server/audio_formats.py``) fed
   a 10 s speech-like signal in 80 ms engine frames, the formats alternated round by round.
   CPU ms per audio second (process time, median of the rounds); first bytes: the first
   frame whose ``encode`` gives bytes (1 = the first frame: a header counts, it goes out at
   once) and the wall ms from opening the encoder to then.
2. ``server`` (one ``serve --precision int8 --max-streams none`` process on 127.0.0.1, a
   full-size random English pack whose EOS never fires, so every reply runs to its chunks'
   limits): lone requests alternating the six formats (first body byte, ms from the request,
   median); then rounds of ``--streams`` concurrent requests, mp3 and pcm alternated (order
   flipped each round): the server's CPU seconds per audio second for each, and their ratio
   (the capacity of a core with mp3 output against pcm).

    python -m benchmarks.capacity.formats [--rounds 5] [--streams 2] [--work /tmp/bench_formats]
        [--parts encoders,latency,capacity]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np

from benchmarks.common import REPO, cpu_seconds, endless_pack, free_port, tree_env
from pipecat_pocket_tts.server.core.audio_formats import FORMATS, open_encoder

SAMPLE_RATE = 24_000
FRAME = 1920
SECONDS = 10
TEXT = (
    "Hello there, how are you doing today? I can help you with your booking, "
    "and the next train leaves at nine fifteen."
)


def speech_like(seconds: int = SECONDS) -> np.ndarray:
    """A voiced tone with a syllable-rate envelope and breath noise: [frames, 1920] float32."""
    t = np.arange(SAMPLE_RATE * seconds) / SAMPLE_RATE
    rng = np.random.default_rng(0)
    voiced = 0.3 * np.sin(2 * np.pi * 180 * t) * (0.5 + 0.5 * np.sin(2 * np.pi * 3 * t))
    return (voiced + 0.05 * rng.standard_normal(t.size)).astype(np.float32).reshape(-1, FRAME)


def encode_once(name: str, frames: np.ndarray) -> tuple[float, float, int | None]:
    """(CPU seconds, wall seconds to the first bytes, the frame that gave them)."""
    cpu = time.process_time()
    wall = time.perf_counter()
    encoder = open_encoder(name)
    first_seconds = 0.0
    first_frame = None
    for i, frame in enumerate(frames):
        data = encoder.encode(frame)
        if data and first_frame is None:
            first_seconds, first_frame = time.perf_counter() - wall, i + 1
    encoder.finish()
    return time.process_time() - cpu, first_seconds, first_frame


def bench_encoders(rounds: int) -> None:
    frames = speech_like()
    cpu: dict[str, list[float]] = {name: [] for name in FORMATS}
    first: dict[str, list[float]] = {name: [] for name in FORMATS}
    packet: dict[str, int | None] = {}
    names = list(FORMATS)
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            seconds, first_bytes, packet[name] = encode_once(name, frames)
            cpu[name].append(seconds)
            first[name].append(first_bytes)
    print(f"\n## Encoders ({SECONDS} s of audio, 80 ms frames, median of {rounds} rounds)\n")
    print("| format | CPU ms per audio s | first bytes ms | first bytes with frame |")
    print("|---|---:|---:|---:|")
    for name in names:
        ms = statistics.median(cpu[name]) / SECONDS * 1000
        print(
            f"| {name} | {ms:.2f} | {statistics.median(first[name]) * 1000:.2f} | {packet[name]} |"
        )


# -- the server -------------------------------------------------------------------------------


def start_server(pack: Path, port: int) -> subprocess.Popen[str]:
    command = [
        sys.executable, "-m", "pipecat_pocket_tts", "serve", "--port", str(port),
        "--model-dir", str(pack), "--backend", "numpy", "--precision", "int8",
        "--max-streams", "none",
    ]  # fmt: skip
    env = tree_env()
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO
    )
    assert process.stdout is not None
    waiting = {"model loaded", "Uvicorn running on"}
    for line in process.stdout:
        waiting = {w for w in waiting if w not in line}
        if not waiting:
            return process
    raise RuntimeError("the server stopped before it was ready")


async def one_request(client: httpx.AsyncClient, response_format: str) -> tuple[float, int]:
    """(seconds to the first body byte, body bytes)."""
    body = {"model": "tts-1", "voice": "alloy", "input": TEXT, "response_format": response_format}
    start = time.perf_counter()
    first = None
    size = 0
    async with client.stream("POST", "/v1/audio/speech", json=body) as response:
        response.raise_for_status()
        async for chunk in response.aiter_bytes():
            if first is None and chunk:
                first = time.perf_counter() - start
            size += len(chunk)
    return first or 0.0, size


def frames_sent(client: httpx.Client, url: str) -> float:
    """Frames the server has sent (its metric)."""
    for line in client.get(url + "/metrics").text.splitlines():
        if line.startswith("pocket_tts_frames_total "):
            return float(line.split()[1])
    return 0.0


async def bench_server(work: Path, rounds: int, streams: int, parts: list[str]) -> None:
    pack = endless_pack(work)
    port = free_port()
    server = start_server(pack, port)
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=url, timeout=600) as client:
            await one_request(client, "pcm")  # warm up
            if "latency" in parts:
                await first_bytes(client, rounds)
            if "capacity" in parts:
                await capacity(client, server.pid, url, rounds, streams)
    finally:
        server.terminate()
        server.wait(timeout=60)


async def first_bytes(client: httpx.AsyncClient, rounds: int) -> None:
    """Lone requests, the six formats alternated."""
    first: dict[str, list[float]] = {name: [] for name in FORMATS}
    names = list(FORMATS)
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            first[name].append((await one_request(client, name))[0])
    print(f"\n## Server: first body byte of a lone request (median of {rounds})\n")
    print("| format | first byte ms | against pcm |")
    print("|---|---:|---:|")
    pcm = statistics.median(first["pcm"])
    for name in names:
        ms = statistics.median(first[name])
        print(f"| {name} | {ms * 1000:.0f} | {ms / pcm:.2f} |")


async def capacity(
    client: httpx.AsyncClient, pid: int, url: str, rounds: int, streams: int
) -> None:
    """Rounds of concurrent requests, mp3 and pcm alternated: server CPU per audio second."""
    cost: dict[str, list[float]] = {"mp3": [], "pcm": []}
    with httpx.Client() as sync:
        for r in range(rounds):
            for name in ("mp3", "pcm") if r % 2 == 0 else ("pcm", "mp3"):
                cpu = cpu_seconds(pid)
                frames = frames_sent(sync, url)
                await asyncio.gather(*(one_request(client, name) for _ in range(streams)))
                audio = (frames_sent(sync, url) - frames) * FRAME / SAMPLE_RATE
                cost[name].append((cpu_seconds(pid) - cpu) / audio)
    mp3 = statistics.median(cost["mp3"])
    pcm_cost = statistics.median(cost["pcm"])
    print(f"\n## Server: {streams} concurrent streams, median of {rounds} rounds\n")
    print("| format | server CPU s per audio s |")
    print("|---|---:|")
    print(f"| pcm | {pcm_cost:.3f} |\n| mp3 | {mp3:.3f} |")
    print(f"\ncapacity with mp3 / with pcm (streams per core): {pcm_cost / mp3:.3f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--streams", type=int, default=2)
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench_formats"))
    parser.add_argument("--parts", default="encoders,latency,capacity")
    args = parser.parse_args(argv)
    parts = args.parts.split(",")
    flags = Path("/proc/cpuinfo").read_text().split("flags", 1)[1].split("\n", 1)[0]
    simd = [f for f in ("avx2", "avx512f", "fma") if f" {f}" in flags]
    print(f"CPU: {os.cpu_count()} cores, flags {' '.join(simd)}; PyAV {_av_version()}")
    if "encoders" in parts:
        bench_encoders(args.rounds)
    if "latency" in parts or "capacity" in parts:
        asyncio.run(bench_server(args.work, args.rounds, args.streams, parts))


def _av_version() -> str:
    import av

    return av.__version__


if __name__ == "__main__":
    main()
