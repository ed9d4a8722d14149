"""Bounds on what one client can make the server hold: connections, contexts, text, bodies."""

from __future__ import annotations

from dataclasses import dataclass

from ...engine.errors import ServerConfigError


@dataclass(frozen=True)
class Limits:
    """Bounds on what clients can ask of one server process."""

    max_connections: int = 64
    max_contexts_per_connection: int = 8
    max_text_per_context: int = 100_000
    """Characters in one context."""
    max_text_per_connection: int = 1_000_000
    """Characters over a connection's life."""
    max_message_bytes: int = 256 * 1024
    """Bytes of one websocket message."""
    max_body_bytes: int = 256 * 1024
    """Bytes of one HTTP request (uploads excepted)."""
    max_upload_bytes: int = 10 * 1024 * 1024
    """Bytes of a voice recording for cloning (POST /tts)."""
    max_upload_seconds: float = 30.0
    max_buffered_frames: int = 250
    """Frames a context may have waiting for a slow client (250: 20 s of audio)."""
    max_http_text: int = 10_000
    """Characters of one HTTP synthesis request."""
    idle_timeout: float = 60.0
    """Seconds a websocket whose contexts have nothing queued may send nothing."""
    handshake_timeout: float = 10.0
    """Seconds to send a request's head (HTTP or upgrade)."""

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if not value > 0:
                raise ServerConfigError(f"limit {name} must be positive, got {value!r}")


__all__ = ["Limits"]
