"""The server's Prometheus metrics (``GET /metrics``), in a registry of its own per app.

Sessions speaking, connections, admission waits, first audio, late frames, each context's
(or HTTP response's) real-time factor, and the compute each cancel let through. A frame is
*late* when it comes out after the audio before it would have finished playing, had playback
started with the run's first frame. The exported names keep their ``streams`` wording
(``pocket_tts_streams``): dashboards read them.
"""

from __future__ import annotations

import time

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from ...engine import FRAME_SECONDS

_LATENCY_BUCKETS = (0.025, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 2.0, 5.0)


class ServerMetrics:
    """Every metric of one server app."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.connections = Gauge("pocket_tts_connections", "Open websocket connections", registry=r)
        self.sessions = Gauge(
            "pocket_tts_streams", "Contexts and HTTP requests with a session open", registry=r
        )
        self.sessions_waiting = Gauge(
            "pocket_tts_streams_waiting", "Sessions waiting for a scheduler slot", registry=r
        )
        self.admission_waits = Histogram(
            "pocket_tts_admission_wait_seconds",
            "Seconds a session waited for a scheduler slot (max_streams)",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.first_audio = Histogram(
            "pocket_tts_first_audio_seconds",
            "Seconds from a context's first text to its first audio frame",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.frames = Counter("pocket_tts_frames", "Audio frames sent (80 ms each)", registry=r)
        self.late_frames = Counter(
            "pocket_tts_late_frames",
            "Frames that came out after the audio before them would have finished playing",
            registry=r,
        )
        self.real_time_factor = Histogram(
            "pocket_tts_real_time_factor",
            "Audio seconds per wall second of each finished context or response",
            buckets=(0.5, 0.8, 1.0, 1.2, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0),
            registry=r,
        )
        self.cancel_ticks = Histogram(
            "pocket_tts_cancel_ticks",
            "Scheduler ticks that computed for a context after the server received its cancel "
            "(at most the one in flight then)",
            buckets=(0, 1, 2, 3, 5, 10),
            registry=r,
        )
        self.errors = Counter(
            "pocket_tts_errors", "Errors sent to clients, by code", ["code"], registry=r
        )
        self.http_requests = Counter(
            "pocket_tts_http_requests",
            "HTTP requests answered, by route (unmatched: none), method and status",
            ["route", "method", "status"],
            registry=r,
        )
        self.closes = Counter(
            "pocket_tts_closed_connections",
            "Connections the server closed, by close code",
            ["code"],
            registry=r,
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def pacer(self) -> ContextPacer:
        return ContextPacer(self)


class ContextPacer:
    """One context's (or HTTP response's) timing: first audio, late frames, its real-time factor."""

    def __init__(self, metrics: ServerMetrics) -> None:
        self._metrics = metrics
        self._text_at: float | None = None
        """The first text of the current run."""
        self._first_frame_at: float | None = None
        self._audio = 0.0
        """Seconds of audio sent since the first frame."""

    def text(self) -> None:
        """Text arrived: a run of audio begins unless one is going on."""
        if self._text_at is None:
            self._text_at = time.monotonic()

    def frame(self, seconds: float = FRAME_SECONDS) -> None:
        now = time.monotonic()
        metrics = self._metrics
        metrics.frames.inc()
        if self._first_frame_at is None:
            self._first_frame_at = now
            if self._text_at is not None:
                metrics.first_audio.observe(now - self._text_at)
        elif now > self._first_frame_at + self._audio:
            metrics.late_frames.inc()
        self._audio += seconds

    def pause(self) -> None:
        """Everything queued was spoken: the next text starts a new run (no late frames)."""
        self.finish()
        self._text_at = self._first_frame_at = None
        self._audio = 0.0

    def finish(self) -> None:
        """The context or response ended: record its real-time factor."""
        if self._first_frame_at is not None and self._text_at is not None:
            wall = time.monotonic() - self._text_at
            if wall > 0 and self._audio > 0:
                self._metrics.real_time_factor.observe(self._audio / wall)


__all__ = ["ContextPacer", "ServerMetrics"]
