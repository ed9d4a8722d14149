"""What the server tells without speaking: the probes, the metrics and the voice lists.

``GET /health`` (the process answers), ``GET /ready`` (503 while the model loads or a session
waits for a scheduler slot), ``GET /metrics`` (Prometheus), ``GET /v1/voices`` (ours: the
pack, the default voice, the names and aliases) and ``GET /v1/audio/voices`` (Kokoro's list).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..core.state import ServerState


async def kokoro_voices(state: ServerState, request: Request) -> Response:
    """``GET /v1/audio/voices``: the voice names, as Kokoro's OpenAI-style servers list them."""
    state.require_model()
    return JSONResponse({"voices": state.voices.names})


async def voices(state: ServerState, request: Request) -> Response:
    """``GET /v1/voices``: the pack, its default voice, the voice names and the aliases."""
    tts = state.require_model()
    return JSONResponse(
        {
            "language": tts.pack_name,
            "default": state.voices.default,
            "voices": state.voices.names,
            "aliases": state.voices.aliases,
        }
    )


def health(state: ServerState, request: Request) -> Response:
    """``GET /health``: the process answers (no key needed)."""
    return JSONResponse({"status": "ok"})


def ready(state: ServerState, request: Request) -> Response:
    """``GET /ready``: 200 when a new call would start at once; 503 while the model loads or
    sessions wait for a slot (no key needed)."""
    if state.tts is None:
        error = state.load_error
        reason = "loading" if error is None else state.public(f"load failed: {error}")
        return JSONResponse({"ready": False, "reason": reason}, status_code=503)
    stats = state.tts.scheduler.stats()
    if stats.waiting:
        return JSONResponse(
            {"ready": False, "reason": f"{stats.waiting} sessions wait for a slot"},
            status_code=503,
        )
    return JSONResponse({"ready": True, "streams": stats.active})


def metrics(state: ServerState, request: Request) -> Response:
    """``GET /metrics``: the server's Prometheus metrics."""
    return Response(state.metrics.render(), media_type=state.metrics.content_type)


__all__ = ["health", "kokoro_voices", "metrics", "ready", "voices"]
