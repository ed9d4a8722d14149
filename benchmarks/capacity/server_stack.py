"""Which web stack carries the server's websocket: per-frame cost and loopback latency.

Each candidate server runs in its own process on 127.0.0.1 (a free port) and answers every
short text message with one 80 ms frame of 24 kHz PCM (3,840 bytes), as the TTS server does
per frame. One websocket client (the ``websockets`` package, as ``client/link.py`` uses)
sends ``--messages`` requests one after the other; the script prints the round trip p50/p95
and the server process's CPU per frame (from /proc), side by side in one run:

    python -m benchmarks.capacity.server_stack --messages 3000
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import time

from benchmarks.common import cpu_seconds, free_port, module_command, tree_env

FRAME = bytes(3840)

SERVERS = {
    "starlette+uvicorn(websockets-sansio)": "starlette-websockets-sansio",
    "starlette+uvicorn(wsproto)": "starlette-wsproto",
    "aiohttp.web": "aiohttp",
}


def serve(kind: str, port: int) -> None:
    """Run one candidate server until killed."""
    if kind.startswith("starlette"):
        import uvicorn
        from starlette.applications import Starlette
        from starlette.routing import WebSocketRoute
        from starlette.websockets import WebSocket

        async def endpoint(websocket: WebSocket) -> None:
            await websocket.accept()
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    return
                await websocket.send_bytes(FRAME)

        app = Starlette(routes=[WebSocketRoute("/ws", endpoint)])
        ws = "websockets-sansio" if kind.endswith("sansio") else "wsproto"
        uvicorn.run(app, host="127.0.0.1", port=port, ws=ws, log_level="warning")
    else:
        from aiohttp import web

        async def handler(request: web.Request) -> web.WebSocketResponse:
            websocket = web.WebSocketResponse()
            await websocket.prepare(request)
            async for _message in websocket:
                await websocket.send_bytes(FRAME)
            return websocket

        app = web.Application()
        app.router.add_get("/ws", handler)
        web.run_app(app, host="127.0.0.1", port=port, print=None)


async def measure(port: int, pid: int, messages: int) -> tuple[list[float], float]:
    import websockets

    url = f"ws://127.0.0.1:{port}/ws"
    for _ in range(200):  # the server is starting: connect once it listens
        try:
            connection = await websockets.connect(url, max_size=None)
            break
        except OSError:
            await asyncio.sleep(0.05)
    else:
        raise RuntimeError("server did not start")
    async with connection:
        for _ in range(200):  # warm-up
            await connection.send("x")
            await connection.recv()
        cpu0 = cpu_seconds(pid)
        trips = []
        for _ in range(messages):
            start = time.perf_counter()
            await connection.send("x")
            await connection.recv()
            trips.append(time.perf_counter() - start)
        cpu = cpu_seconds(pid) - cpu0
    return trips, cpu / messages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=3000)
    parser.add_argument("--serve", choices=sorted(SERVERS.values()), help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port)
        return
    print(f"{'stack':36} {'p50 ms':>8} {'p95 ms':>8} {'server CPU us/frame':>20}")
    for label, kind in SERVERS.items():
        port = free_port()
        command = module_command(__spec__.name, "--serve", kind, "--port", str(port))
        process = subprocess.Popen(command, env=tree_env())
        try:
            trips, cpu = asyncio.run(measure(port, process.pid, args.messages))
        finally:
            process.terminate()
            process.wait()
        trips.sort()
        p50 = statistics.median(trips) * 1e3
        p95 = trips[int(len(trips) * 0.95)] * 1e3
        print(f"{label:36} {p50:8.3f} {p95:8.3f} {cpu * 1e6:20.1f}")


if __name__ == "__main__":
    main()
