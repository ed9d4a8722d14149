"""The ASGI app of the TTS server (Starlette): every dialect's routes on one core.

``create_app(ServerConfig(...))`` loads the pack in the background at startup (off the event
loop), so ``/health`` answers at once and ``/ready`` says 503 until the model is warm. Every
websocket context and HTTP request opens a session on the same ``PocketTTS``, so all of them
are batched by its one scheduler. Each route is a dialect (``dialects/``) entered through the
core (``core/entry.py``: the key, the limits, errors in one shape); the middleware counts
requests, drains and bounds a body's silence (``core/gate.py``), and admits CORS when asked.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Route, WebSocketRoute

from ..wire.handshake import PATH, hide_secret_headers
from .core.cors import ApiCors
from .core.drain import quiet_drain_cuts
from .core.entry import HttpHandler, http_endpoint, websocket_endpoint
from .core.errors import EXCEPTION_HANDLERS
from .core.gate import Gate
from .core.state import ServerConfig, ServerState
from .dialects import gradium, livekit, openai, probes, upstream
from .dialects.native import NativeDialect
from .dialects.page import page

if TYPE_CHECKING:
    from .wyoming_listener import WyomingServer

logger = logging.getLogger(__name__)


def create_app(
    config: ServerConfig, *, on_load_error: Callable[[Exception], None] | None = None
) -> Starlette:
    """The server's ASGI app.

    Args:
        config: What the server serves and to whom.
        on_load_error: Called (on the event loop) when the pack or a configured voice cannot
            load: the server can never serve (``serve`` stops, exit status 2). None: the app
            stays up, ``/ready`` saying why.

    Returns:
        The app; its ``state.server`` is the ``ServerState``.
    """
    state = ServerState(config)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # After the server configured its logging, so the filters stay installed.
        hide_secret_headers()
        quiet_drain_cuts()
        task = asyncio.create_task(_load(state, on_load_error))
        wyoming = await _start_wyoming(state)
        try:
            yield
        finally:
            task.cancel()
            if wyoming is not None:
                await wyoming.close()

    def get(path: str, handler: HttpHandler, *, open_: bool = False) -> Route:
        return Route(path, http_endpoint(state, handler, open_=open_), methods=["GET"])

    routes = [
        WebSocketRoute(PATH, websocket_endpoint(state, NativeDialect)),
        WebSocketRoute(gradium.PATH, websocket_endpoint(state, gradium.GradiumDialect)),
        WebSocketRoute(livekit.PATH, websocket_endpoint(state, livekit.LiveKitDialect)),
        Route("/v1/audio/speech", http_endpoint(state, openai.openai_speech), methods=["POST"]),
        Route("/tts", http_endpoint(state, upstream.upstream_tts), methods=["POST"]),
        get("/v1/voices", probes.voices),
        get("/v1/audio/voices", probes.kokoro_voices),
        get("/v1/models", openai.models),
        get("/v1/models/{model}", openai.model),
        Route("/", page, methods=["GET"]),
        get("/health", probes.health, open_=True),
        get("/ready", probes.ready, open_=True),
        get("/metrics", probes.metrics),
    ]
    middleware = []
    if config.cors_origins:
        middleware.append(Middleware(ApiCors, origins=list(config.cors_origins)))
    middleware.append(
        Middleware(
            Gate,
            drain=state.drain,
            metrics=state.metrics,
            routes=routes,
            idle_timeout=config.limits.idle_timeout,
        )
    )
    app = Starlette(
        routes=routes,
        middleware=middleware,
        lifespan=lifespan,
        exception_handlers=EXCEPTION_HANDLERS,
    )
    app.state.server = state
    return app


async def _load(state: ServerState, on_error: Callable[[Exception], None] | None) -> None:
    try:
        await asyncio.to_thread(state.load)
        logger.info("model loaded: %r", state.tts)
    except Exception as e:
        state.load_error = e
        logger.error("could not load the model: %s", e)
        if on_error is not None:
            on_error(e)
    finally:
        state.loaded.set()


async def _start_wyoming(state: ServerState) -> WyomingServer | None:
    if state.config.wyoming is None:
        return None
    from .wyoming_listener import WyomingServer  # the wyoming package only when asked for

    server = WyomingServer(state, *state.config.wyoming, announce=state.config.zeroconf)
    await server.start()
    return server


__all__ = ["create_app"]
