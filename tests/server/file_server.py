"""A tiny HTTP file server on 127.0.0.1 for tests: fixed answers per path, every request kept.

``with FileServer({"/voice.wav": data, "/hop": Redirect(url)}) as files:`` serves on a free
port (the OS picks it) until the block ends; ``files.requests`` lists the paths asked for, in
order, so a test can tell that nothing was fetched.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Redirect:
    location: str
    status: int = 302


class FileServer:
    """Serves ``routes`` (path → bytes or ``Redirect``); anything else is a 404."""

    def __init__(self, routes: dict[str, bytes | Redirect]) -> None:
        self.routes = routes
        self.requests: list[str] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def seen(self) -> list[str]:
        with self._lock:
            return list(self.requests)

    def __enter__(self) -> FileServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        files = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with files._lock:
                    files.requests.append(self.path)
                answer = files.routes.get(self.path)
                if isinstance(answer, Redirect):
                    self.send_response(answer.status)
                    self.send_header("Location", answer.location)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                elif answer is None:
                    self.send_error(404)
                else:
                    self.send_response(200)
                    self.send_header("Content-Type", "audio/wav")
                    self.send_header("Content-Length", str(len(answer)))
                    self.end_headers()
                    self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the test reads ``requests``

        return Handler


__all__ = ["FileServer", "Redirect"]
