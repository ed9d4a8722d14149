"""How a client reaches the server's websocket: its path, its subprotocol and the API key.

The API key (a server that has one) goes on the handshake: ``Authorization: Bearer KEY``, or,
from a browser (which cannot set that header on a websocket), as a subprotocol: the client
offers ``["pocket-tts", "bearer.KEY"]`` (``SUBPROTOCOL``, ``KEY_SUBPROTOCOL_PREFIX`` + KEY; a
key of letters, digits and ``-._~+`` only, the characters a subprotocol may hold) and the
server answers ``pocket-tts``, never the key. A missing or wrong key: close code 4001. A key in
the URL's query string is never read (URLs land in logs).
"""

from __future__ import annotations

import logging

PATH = "/v1/stream"
"""The websocket endpoint."""
SUBPROTOCOL = "pocket-tts"
"""The websocket subprotocol the server answers when a client offers it."""
KEY_SUBPROTOCOL_PREFIX = "bearer."
"""An offered subprotocol ``bearer.KEY`` carries the API key (for browsers)."""
KEEPALIVE_SUBPROTOCOL = "pocket-tts.keepalive"
"""Offered beside ``SUBPROTOCOL`` by a client that sends ``ping``: the server's ``ready`` then
says its ``idle_timeout``. A client that does not offer it (an older one, which refuses
unknown fields) gets ``ready`` without the field, as before."""

SECRET_HEADERS = frozenset({"authorization", "sec-websocket-protocol", "cookie", "x-api-key"})
"""Handshake headers that may carry the key: their values never reach a log."""
# The loggers the websockets library writes handshake headers to at DEBUG: uvicorn's (the
# server's handshakes) and the library's own client logger (RemoteTTS's).
_HANDSHAKE_LOGGERS = ("uvicorn.error", "websockets.server", "websockets.client")


class HiddenHeaders(logging.Filter):
    """Masks the values of ``SECRET_HEADERS`` in the websocket library's handshake debug lines
    (``< authorization: Bearer KEY``), on the server's and on the client's side."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if (
            isinstance(args, tuple)
            and len(args) == 2
            and record.msg in ("< %s: %s", "> %s: %s")
            and str(args[0]).lower() in SECRET_HEADERS
        ):
            record.args = (args[0], "<hidden>")
        return True


def hide_secret_headers() -> None:
    """Install ``HiddenHeaders`` on the loggers that see handshake headers (once)."""
    for name in _HANDSHAKE_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, HiddenHeaders) for f in logger.filters):
            logger.addFilter(HiddenHeaders())


__all__ = [
    "KEEPALIVE_SUBPROTOCOL",
    "KEY_SUBPROTOCOL_PREFIX",
    "PATH",
    "SECRET_HEADERS",
    "SUBPROTOCOL",
    "HiddenHeaders",
    "hide_secret_headers",
]
