"""The ASGI app of the TTS server (Starlette): one loaded model for every connection.

``create_app(ServerConfig(...))`` loads the pack in the background at startup (off the event
loop), so ``/health`` answers at once and ``/ready`` says 503 until the model is warm. Every
websocket context and HTTP request opens a session on the same ``PocketTTS``, so all of
them are batched by its one scheduler.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from .. import wire as p
from ..engine import PocketTTSError
from ..wire import hide_secret_headers
from . import http, openai_api
from .cors import ApiCors
from .dialect import Dialect
from .gate import Gate
from .gradium import PATH as GRADIUM_PATH
from .gradium import GradiumDialect
from .http import error_response, status_of
from .livekit import PATH as LIVEKIT_PATH
from .livekit import LiveKitDialect
from .page import page
from .state import RequestError, ServerConfig, ServerState

if TYPE_CHECKING:
    from .wyoming import WyomingServer

logger = logging.getLogger(__name__)


def create_app(config: ServerConfig) -> Starlette:
    """The server's ASGI app."""
    state = ServerState(config)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        hide_secret_headers()  # after the server configured its logging
        task = asyncio.create_task(_load(state))
        wyoming = await _start_wyoming(state)
        try:
            yield
        finally:
            task.cancel()
            if wyoming is not None:
                await wyoming.close()

    def guarded(
        handler: Callable[[ServerState, Request], Awaitable[Response] | Response],
        *,
        open_: bool = False,
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            if not open_ and not state.keys.accepts(request.headers.get("authorization")):
                return error_response(401, "missing or wrong API key (Authorization: Bearer KEY)")
            try:
                result = handler(state, request)
                return await result if isinstance(result, Awaitable) else result
            except (RequestError, PocketTTSError, ValueError) as e:
                message = state.public(str(e))
                return error_response(status_of(e), message, param=getattr(e, "param", None))

        return endpoint

    def stream(dialect: Callable[[], Dialect]) -> Callable[[WebSocket], Awaitable[None]]:
        async def endpoint(websocket: WebSocket) -> None:
            await _serve_websocket(state, websocket, dialect())

        return endpoint

    routes = [
        WebSocketRoute(p.PATH, stream(Dialect)),
        WebSocketRoute(GRADIUM_PATH, stream(GradiumDialect)),
        WebSocketRoute(LIVEKIT_PATH, stream(LiveKitDialect)),
        Route("/v1/audio/speech", guarded(http.openai_speech), methods=["POST"]),
        Route("/tts", guarded(http.upstream_tts), methods=["POST"]),
        Route("/v1/voices", guarded(http.voices), methods=["GET"]),
        Route("/v1/audio/voices", guarded(http.kokoro_voices), methods=["GET"]),
        Route("/v1/models", guarded(lambda s, r: openai_api.models(r)), methods=["GET"]),
        Route("/", page, methods=["GET"]),
        Route("/health", guarded(lambda s, r: http.health(s), open_=True), methods=["GET"]),
        Route("/ready", guarded(lambda s, r: http.ready(s), open_=True), methods=["GET"]),
        Route("/metrics", guarded(lambda s, r: http.metrics(s)), methods=["GET"]),
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
        exception_handlers=openai_api.EXCEPTION_HANDLERS,
    )
    app.state.server = state
    return app


async def _load(state: ServerState) -> None:
    try:
        await asyncio.to_thread(state.load)
        logger.info("model loaded: %r", state.tts)
    except Exception as e:
        state.load_error = e
        logger.error("could not load the model: %s", e)
    finally:
        state.loaded.set()


async def _start_wyoming(state: ServerState) -> WyomingServer | None:
    if state.config.wyoming is None:
        return None
    from .wyoming import WyomingServer  # the wyoming package only when its port is asked for

    server = WyomingServer(state, *state.config.wyoming, announce=state.config.zeroconf)
    await server.start()
    return server


async def _serve_websocket(state: ServerState, websocket: WebSocket, dialect: Dialect) -> None:
    offers: list[str] = list(websocket.scope.get("subprotocols", []))
    await websocket.accept(subprotocol=p.SUBPROTOCOL if p.SUBPROTOCOL in offers else None)
    keys = state.keys
    headers = websocket.headers
    if not (
        keys.accepts(headers.get("authorization"))
        or keys.accepts_subprotocols(offers)
        or keys.accepts_token(headers.get("x-api-key"))  # Gradium's clients
    ):
        await _refuse(state, websocket, p.CloseCode.UNAUTHORIZED, "missing or wrong API key")
        return
    if state.tts is None:
        await state.loaded.wait()
    if state.tts is None:
        await _refuse(state, websocket, p.CloseCode.GOING_AWAY, "the model failed to load")
        return
    if state.connections >= state.limits.max_connections:
        await _refuse(
            state,
            websocket,
            p.CloseCode.SERVER_FULL,
            f"the server holds {state.limits.max_connections} connections; try another replica",
        )
        return
    await state.serve(websocket, dialect)


async def _refuse(state: ServerState, websocket: WebSocket, code: int, reason: str) -> None:
    state.metrics.closes.labels(str(code)).inc()
    await websocket.close(code, reason)


__all__ = ["ServerConfig", "create_app"]
