"""First audio of a streamed synthesis: Home Assistant's Wyoming port against our websocket.

One ``python -m pipecat_pocket_tts serve --wyoming-port`` process on 127.0.0.1; lone replies
alternate between the two protocols on the same model, each client's connection opened once:

- ``wyoming``: the ``wyoming`` library's ``AsyncTcpClient``: ``synthesize-start`` (answered by
  ``audio-start``), then the text's fragments as ``synthesize-chunk``s and ``synthesize-stop``;
  first audio is the first ``audio-chunk``;
- ``native``: our websocket (``/v1/stream``): ``start`` (answered by ``started``), the same
  fragments as streamed ``text`` messages, ``flush`` and ``end``; first audio is the first
  binary message.

The clock starts as the first fragment is sent, and each reply is read to its end before the
next one starts. The pack is the full-size ``english`` with random weights (built once with
``pipecat_pocket_tts.devpack`` in ``--work``) unless ``--model-dir`` names a real one.

    python -m benchmarks.capacity.wyoming [--runs 10] [--precision int8] [--model-dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import free_port

TEXT = (
    "Hello there, how are you doing today? I can help you with your booking, "
    "and the next train leaves at nine fifteen."
)
WARM_UP = "Warm up, please."


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="replies per protocol (10)")
    parser.add_argument("--precision", default="int8", help="the server's --precision (int8)")
    parser.add_argument("--model-dir", type=Path, help="a pack folder (default: random full-size)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench_wyoming"))
    return parser.parse_args(argv)


def fragments(text: str) -> list[str]:
    """The text as an LLM streams it: a word and its space at a time."""
    return re.findall(r"\S+\s*", text)


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def random_pack(work: Path) -> Path:
    """The full-size English layout with random weights and one voice (built once)."""
    from pipecat_pocket_tts.devpack import build_pack

    pack = work / "english"
    if not (pack / "model.safetensors").exists():
        print(f"writing a full-size random English pack to {pack} ...", flush=True)
        build_pack(pack, "english", voices=("alba",), voice_frames=125)
    return pack


class Server:
    """The server process, with its HTTP/websocket and Wyoming ports."""

    def __init__(self, pack: Path, precision: str) -> None:
        self.port, self.wyoming_port = free_port(), free_port()
        command = [
            sys.executable, "-m", "pipecat_pocket_tts", "serve", "--port", str(self.port),
            "--wyoming-port", str(self.wyoming_port), "--model-dir", str(pack),
            "--backend", "numpy", "--precision", precision,
        ]  # fmt: skip
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        assert self.process.stdout is not None
        waiting = {"model loaded", "Uvicorn running", "Wyoming listening"}
        for line in self.process.stdout:
            waiting = {key for key in waiting if key not in line}
            if not waiting:
                return
        raise RuntimeError("the server did not start")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait()


class WyomingClient:
    def __init__(self, port: int) -> None:
        from wyoming.client import AsyncTcpClient

        self._client = AsyncTcpClient("127.0.0.1", port)

    async def open(self) -> None:
        await self._client.connect()

    async def close(self) -> None:
        await self._client.disconnect()

    async def first_audio(self, text: str) -> float:
        from wyoming.tts import SynthesizeChunk, SynthesizeStart, SynthesizeStop

        client = self._client
        await client.write_event(SynthesizeStart().event())
        await self._until("audio-start")
        start = time.perf_counter()
        for piece in fragments(text):
            await client.write_event(SynthesizeChunk(text=piece).event())
        await client.write_event(SynthesizeStop().event())
        await self._until("audio-chunk")
        first = time.perf_counter() - start
        await self._until("synthesize-stopped")
        return first

    async def _until(self, kind: str) -> None:
        while True:
            event = await self._client.read_event()
            if event is None or event.type == "error":
                raise RuntimeError(f"the Wyoming reply failed: {event}")
            if event.type == kind:
                return


class NativeClient:
    def __init__(self, port: int) -> None:
        self._url = f"ws://127.0.0.1:{port}"
        self._socket = None
        self._contexts = 0

    async def open(self) -> None:
        from websockets.asyncio.client import connect

        from pipecat_pocket_tts import wire
        from pipecat_pocket_tts.wire import handshake

        self._socket = await connect(
            self._url + handshake.PATH, subprotocols=[handshake.SUBPROTOCOL]
        )
        await self._until(wire.Ready)

    async def close(self) -> None:
        await self._socket.close()

    async def first_audio(self, text: str) -> float:
        from pipecat_pocket_tts import wire

        self._contexts += 1
        context = f"bench-{self._contexts}"
        socket_ = self._socket
        await socket_.send(wire.encode(wire.Start(context)))
        await self._until(wire.Started)
        start = time.perf_counter()
        for piece in fragments(text):
            await socket_.send(wire.encode(wire.Text(context, 0, piece, complete=False)))
        await socket_.send(wire.encode(wire.Flush(context, 0)))
        await socket_.send(wire.encode(wire.End(context)))
        await self._until(bytes)
        first = time.perf_counter() - start
        await self._until(wire.Done)
        return first

    async def _until(self, kind: type) -> None:
        from pipecat_pocket_tts import wire

        while True:
            data = await self._socket.recv()
            if isinstance(data, bytes):
                if kind is bytes:
                    return
                continue
            message = wire.decode_server(data)
            if isinstance(message, wire.Error):
                raise RuntimeError(f"the native reply failed: {message}")
            if isinstance(message, kind):
                return


async def alternate(server: Server, runs: int) -> dict[str, list[float]]:
    clients = {"wyoming": WyomingClient(server.wyoming_port), "native": NativeClient(server.port)}
    times: dict[str, list[float]] = {name: [] for name in clients}
    for client in clients.values():
        await client.open()
    try:
        for run in range(runs + 1):  # the first pair warms up
            order = list(clients.items()) if run % 2 else list(reversed(clients.items()))
            for name, client in order:
                first = await client.first_audio(TEXT if run else WARM_UP)
                if run:
                    times[name].append(first)
    finally:
        for client in clients.values():
            await client.close()
    return times


def main() -> None:
    args = parse_args()
    pack = args.model_dir or random_pack(args.work)
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")
    print(f"pack {pack}, {args.precision}; {len(fragments(TEXT))} fragments, {len(TEXT)} chars")
    server = Server(pack, args.precision)
    try:
        times = asyncio.run(alternate(server, args.runs))
    finally:
        server.stop()
    p50 = {name: 1e3 * statistics.median(values) for name, values in times.items()}
    for name, values in times.items():
        spread = ", ".join(f"{1e3 * v:.0f}" for v in values)
        print(f"{name:8} first audio p50 {p50[name]:6.1f} ms  ({spread})")
    ratio = p50["wyoming"] / p50["native"]
    print(f"wyoming / native p50: {ratio:.2f}x ({args.runs} runs each, alternating)")


if __name__ == "__main__":
    main()
