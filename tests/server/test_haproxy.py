"""Two real replicas behind Debian's HAProxy, run with ``examples/server/haproxy.cfg`` (its
ports replaced by free ones), all on 127.0.0.1 (issue 40 item 5).

Both replicas serve; a replica that is SIGTERMed mid-reply drains (the reply ends whole, the
balancer stops sending it work, it exits 0); a replica SIGKILLed mid-reply is routed around
and ``PocketTTSService(server_url=<balancer>)`` speaks its next reply through the other.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import shutil
import signal
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from paths import REPO_ROOT
from pipecat.frames.frames import (
    EndFrame,
    ErrorFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.workers.runner import WorkerRunner
from polling import poll_until
from server_process import ServerProcess, free_port
from test_remote_service import Recorder

from pipecat_pocket_tts import PocketTTSService

CONFIG = REPO_ROOT / "examples" / "server" / "haproxy.cfg"
EXIT_TIMEOUT_S = 120.0  # failure bounds only
HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"


class Balancer:
    """HAProxy on the example's configuration, with free ports for everything."""

    def __init__(self, folder: Path, replicas: list[ServerProcess]) -> None:
        self.port, self.stats_port = free_port(), free_port()
        text = CONFIG.read_text()
        text = text.replace("127.0.0.1:8000", f"127.0.0.1:{self.port}")
        text = text.replace("127.0.0.1:8404", f"127.0.0.1:{self.stats_port}")
        for number, replica in enumerate(replicas, 1):
            text = text.replace(f"127.0.0.1:800{number}", f"127.0.0.1:{replica.port}")
        text = text.replace("inter 1s", "inter 200ms")  # quicker checks, same rules
        self.config = folder / "haproxy.cfg"
        self.config.write_text(text)
        self.process = subprocess.Popen(
            [HAPROXY, "-db", "-f", str(self.config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def states(self) -> dict[str, str]:
        """Each replica's state as HAProxy sees it (UP, DOWN, ...)."""
        url = f"http://127.0.0.1:{self.stats_port}/stats;csv"
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                rows = csv.DictReader(io.StringIO(response.read().decode().lstrip("# ")))
                found = {r["svname"]: r["status"] for r in rows if r["pxname"] == "replicas"}
                return {k: v for k, v in found.items() if k.startswith("replica")}
        except OSError:
            return {}

    def speak(self, text: str) -> int:
        """``POST /v1/audio/speech`` through the balancer: the status."""
        body = json.dumps({"input": text, "response_format": "pcm"}).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/v1/audio/speech", body, method="POST"
        )
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=60) as response:
            response.read()
            return response.status

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


@pytest.fixture
def replicas(engine_endless_pack_dir: Path) -> Iterator[list[ServerProcess]]:
    servers = [
        ServerProcess(engine_endless_pack_dir, "--drain-timeout", "600").start() for _ in "ab"
    ]
    yield servers
    for server in servers:
        server.kill()


def serving(replicas: list[ServerProcess]) -> ServerProcess:
    """The replica holding the service's websocket."""
    holding = [r for r in replicas if r.process and r.process.poll() is None]
    holding = [r for r in holding if r.metric("pocket_tts_connections") == 1]
    assert len(holding) == 1, "exactly one replica holds the service's connection"
    return holding[0]


async def test_two_replicas_drain_and_failover(
    replicas: list[ServerProcess], tmp_path: Path
) -> None:
    balancer = Balancer(tmp_path, replicas)
    try:
        await poll_until(
            lambda: balancer.states() == {"replica1": "UP", "replica2": "UP"}, what="both UP"
        )
        # Both serve (leastconn spreads idle requests in turn).
        for _ in range(4):
            assert await asyncio.to_thread(balancer.speak, "Hi.") == 200
        route = (
            'pocket_tts_http_requests_total{method="POST",route="/v1/audio/speech",status="200"}'
        )
        assert all(r.metric(route) >= 1 for r in replicas)

        tts = PocketTTSService(server_url=balancer.ws_url)
        upstream, downstream = Recorder(), Recorder()
        worker = PipelineWorker(
            Pipeline([upstream, tts, downstream]),
            params=PipelineParams(audio_out_sample_rate=24000),
            cancel_on_idle_timeout=False,
        )
        running = asyncio.create_task(WorkerRunner(handle_sigint=False).run(worker))

        # SIGTERM mid-reply: the reply ends whole, the replica leaves the pool and exits 0.
        await worker.queue_frame(TTSSpeakFrame("Two words."))
        first = await downstream.wait_for(lambda f: isinstance(f, TTSAudioRawFrame))
        draining = serving(replicas)
        draining.process.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
        await downstream.wait_for(lambda f: isinstance(f, TTSStoppedFrame))
        assert await asyncio.to_thread(draining.process.wait, EXIT_TIMEOUT_S) == 0  # type: ignore[union-attr]
        errors_after_drain = [f.error for f in upstream.frames if isinstance(f, ErrorFrame)]
        await poll_until(lambda: "DOWN" in balancer.states().values(), what="drained DOWN")
        await asyncio.to_thread(draining.start)  # back on its port: the pool is whole again
        await poll_until(
            lambda: balancer.states() == {"replica1": "UP", "replica2": "UP"}, what="both UP"
        )

        # SIGKILL mid-reply: one ErrorFrame, then the next reply speaks through the other.
        mark = len(downstream.frames)
        await worker.queue_frame(TTSSpeakFrame("A long reply that keeps on going. " * 20))
        second = await downstream.wait_for(lambda f: isinstance(f, TTSStartedFrame), mark)
        await downstream.wait_for(
            lambda f: isinstance(f, TTSAudioRawFrame) and f.context_id == second.context_id, mark
        )
        killed = serving(replicas)
        other = next(r for r in replicas if r is not killed)
        frames_before = other.metric("pocket_tts_frames_total")
        killed.kill()
        await upstream.wait_for(lambda f: isinstance(f, ErrorFrame) and f not in errors_after_drain)
        await downstream.wait_for(lambda f: isinstance(f, TTSStoppedFrame), mark)
        mark = len(downstream.frames)
        await worker.queue_frame(TTSSpeakFrame("Through the other one."))
        third = await downstream.wait_for(lambda f: isinstance(f, TTSStartedFrame), mark)
        await downstream.wait_for(
            lambda f: isinstance(f, TTSAudioRawFrame) and f.context_id == third.context_id, mark
        )
        await downstream.wait_for(lambda f: isinstance(f, TTSStoppedFrame), mark)
        assert other.metric("pocket_tts_frames_total") > frames_before
        await worker.queue_frame(EndFrame())
        await asyncio.wait_for(running, EXIT_TIMEOUT_S)
    finally:
        balancer.stop()
    assert first.context_id != third.context_id
    assert errors_after_drain == []  # the drained connection ended an idle session: no error
