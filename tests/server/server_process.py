"""A real TTS server process for tests: ``python -m pipecat_pocket_tts serve`` on 127.0.0.1.

Started on a free port with a devpack pack; ``start`` returns once the log says the model is
loaded and uvicorn listens (read line by line, no sleeps); ``kill`` and ``stop`` end it.
"""

from __future__ import annotations

import json
import os
import queue
import re
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

STARTUP_TIMEOUT_S = 120


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServerProcess:
    """One server subprocess; its log lines are kept (``log``)."""

    #: What the interpreter runs: the package's command line (a subclass may wrap it).
    launcher: tuple[str, ...] = ("-m", "pipecat_pocket_tts")
    #: The log lines ``start`` waits for.
    ready_logs: tuple[str, ...] = (r"model loaded", r"Uvicorn running on")

    def __init__(self, pack_dir: Path, *args: str, port: int | None = None) -> None:
        self.pack_dir = pack_dir
        self.args = args
        self.port = port or free_port()
        self.process: subprocess.Popen[str] | None = None
        self.log: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self) -> ServerProcess:
        env = {k: v for k, v in os.environ.items() if k != "POCKET_TTS_API_KEY"}
        command = [
            sys.executable, *self.launcher, "serve", "--port", str(self.port),
            "--model-dir", str(self.pack_dir), "--backend", "numpy", "--no-warmup", *self.args,
        ]  # fmt: skip
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
        )
        self._lines = queue.Queue()
        threading.Thread(target=self._read, args=(self.process, self._lines), daemon=True).start()
        try:
            self.wait_for_logs(*self.ready_logs)
        except BaseException:
            self.kill()  # never leave a server behind
            raise
        return self

    def wait_for_logs(self, *patterns: str) -> None:
        """Wait until new log lines matched every pattern (fails if the process ends first)."""
        waiting = {re.compile(pattern) for pattern in patterns}
        while waiting:
            line = self._lines.get(timeout=STARTUP_TIMEOUT_S)
            if line is None:
                raise RuntimeError("the server stopped:\n" + "".join(self.log[-30:]))
            waiting = {regex for regex in waiting if not regex.search(line)}

    def _read(self, process: subprocess.Popen[str], lines: queue.Queue[str | None]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self.log.append(line)
            lines.put(line)
        lines.put(None)

    def kill(self) -> None:
        """SIGKILL: the server dies mid-whatever, as a crash."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def rss_mb(self) -> float:
        with open(f"/proc/{self.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        raise RuntimeError("no VmRSS")

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        request = urllib.request.Request(self.http_url + path, headers=headers or {})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def metric(self, sample: str, headers: dict[str, str] | None = None) -> float:
        """A sample's value in ``/metrics`` (0 when absent): ``pocket_tts_streams``,
        ``pocket_tts_errors_total{code="slow_reader"}``."""
        _, body = self.get("/metrics", headers)
        for line in body.decode().splitlines():
            if line.startswith(sample + " "):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    def json(self, path: str) -> tuple[int, dict]:
        status, body = self.get(path)
        return status, json.loads(body)
