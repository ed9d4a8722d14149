"""``python -m pipecat_pocket_tts serve`` and ``pocket-tts-server``: run the TTS server.

pocket-tts-server --language english --precision int8           # 127.0.0.1:8000
POCKET_TTS_API_KEY=secret pocket-tts-server --host 0.0.0.0      # a public bind needs a key
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from ..engine.errors import PocketTTSError

DESCRIPTION = (
    "Serve one loaded model to every bot process: a websocket protocol (PocketTTSService("
    "server_url=...)), OpenAI's POST /v1/audio/speech, upstream's POST /tts, /ready, /metrics."
)


LOG_LEVELS = ("critical", "error", "warning", "info", "debug")


def parse_max_streams(text: str) -> int | str | None:
    """A ``--max-streams`` value: ``auto``, ``none`` (None) or an integer."""
    if text in ("auto", "none"):
        return None if text == "none" else text
    return int(text)


def _alias(text: str) -> tuple[str, str]:
    alias, sep, voice = text.partition("=")
    if not sep or not alias or not voice:
        raise argparse.ArgumentTypeError(f"expected ALIAS=VOICE, got {text!r}")
    return alias, voice


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The server's options, on ``parser``."""
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (8000)")
    parser.add_argument(
        "--api-key", help="bearer token clients must send (default: POCKET_TTS_API_KEY)"
    )
    parser.add_argument(
        "--language", "-l", default="english", help="pack, language or upstream config YAML"
    )
    parser.add_argument("--model-dir", type=Path, help="a local pack folder (no download)")
    parser.add_argument("--revision", help="a hub revision instead of the pinned ones")
    parser.add_argument("--backend", default="auto", help="numpy, coreml or auto")
    parser.add_argument("--precision", help="fp32, bf16 or int8 (NumPy); fp16 or int8 (CoreML)")
    parser.add_argument("--threads", type=int, help="the scheduler's compute threads")
    parser.add_argument(
        "--max-streams",
        type=parse_max_streams,
        default="auto",
        help="streams speaking at once: auto (default), an integer, or none",
    )
    parser.add_argument("--voices-dir", type=Path, help="extra voices: NAME.safetensors/.wav")
    parser.add_argument(
        "--voice-alias",
        type=_alias,
        action="append",
        default=None,
        metavar="ALIAS=VOICE",
        help="another name for a voice (OpenAI's 'alloy'...; default: every OpenAI voice name "
        "is the pack's default voice)",
    )
    parser.add_argument(
        "--default-voice",
        metavar="VOICE",
        help="the voice of requests that name none, and of OpenAI's voice names: a voice name, "
        "or a .safetensors voice file or a recording (served under its file's stem)",
    )
    parser.add_argument(
        "--cors-origin", action="append", default=[], help="allow browser calls from an origin"
    )
    parser.add_argument(
        "--voice-url-host",
        action="append",
        default=None,
        metavar="[http[s]://]HOST[:PORT]",
        help="an origin POST /tts may fetch a voice_url from (repeatable; https unless http:// "
        "is written; default: POCKET_TTS_VOICE_URL_HOSTS, comma-separated, else none)",
    )
    parser.add_argument("--max-connections", type=int, default=64)
    parser.add_argument("--max-contexts", type=int, default=8, help="per connection")
    parser.add_argument(
        "--max-buffered-frames",
        type=int,
        default=250,
        help="frames one context may have waiting for a slow client before it ends (250)",
    )
    parser.add_argument(
        "--drain-timeout",
        type=float,
        default=30.0,
        help="on SIGTERM, seconds the replies in flight may take to finish before they are closed "
        "(30); /ready says 503 meanwhile",
    )
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=60.0,
        help="seconds a websocket with nothing queued, or a request body, may stay silent "
        "(keepalives count as something said; 60)",
    )
    parser.add_argument(
        "--handshake-timeout",
        type=float,
        default=10.0,
        help="seconds a connection may take to send its request head or upgrade (10)",
    )
    parser.add_argument(
        "--wyoming-port",
        type=int,
        help="also serve Home Assistant's Wyoming protocol on this TCP port (10200 by "
        "convention; same host, model and limits; off unless given)",
    )
    parser.add_argument(
        "--wyoming-no-auth",
        action="store_true",
        help="allow --wyoming-port on a server with an API key (Wyoming sends none)",
    )
    parser.add_argument(
        "--zeroconf", action="store_true", help="announce the Wyoming port over mDNS (zeroconf)"
    )
    parser.add_argument("--no-warmup", action="store_true", help="skip the warm-up synthesis")
    parser.add_argument(
        "--log-level",
        default="info",
        choices=LOG_LEVELS,
        help="info (default); no trace: uvicorn's trace logs the websocket's subprotocols, "
        "where a browser's key travels",
    )


#: What the ``server`` extra installs that the server imports (module names).
SERVER_EXTRA_MODULES = (
    "uvicorn",
    "starlette",
    "websockets",
    "python_multipart",
    "prometheus_client",
    "wyoming",
)
SERVER_EXTRA = "pip install 'pipecat-pocket-tts[server]'"


def missing_server_module() -> str | None:
    """The first module of the ``server`` extra that is not installed (None: all are)."""
    import importlib.util

    return next((m for m in SERVER_EXTRA_MODULES if importlib.util.find_spec(m) is None), None)


def run(args: argparse.Namespace) -> int:
    """Start the server and serve until it stops.

    Args:
        args: The parsed arguments of ``add_arguments``.

    Returns:
        The exit status: 0 once stopped (drained); 2 at once without the ``server`` extra,
        or once the pack or a configured voice cannot load (said in one line).
    """
    missing = missing_server_module()
    if missing is not None:
        print(
            f"error: the server needs the 'server' extra ({missing} is not installed): "
            f"{SERVER_EXTRA}",
            file=sys.stderr,
        )
        return 2
    import uvicorn

    from ..engine import LoadOptions
    from .app import create_app
    from .core.auth import check_bind, resolve_api_key
    from .core.drain import DrainingServer
    from .core.limits import Limits
    from .core.state import ServerConfig
    from .core.timeouts import head_timeout_protocol
    from .core.voice_urls import resolve_voice_url_hosts
    from .core.voices import default_voice_arg

    api_key = resolve_api_key(args.api_key)
    check_bind(args.host, api_key)
    from .wyoming_listener import check_wyoming_options

    check_wyoming_options(args.wyoming_port, args.zeroconf, api_key, args.wyoming_no_auth)
    limits = Limits(
        max_connections=args.max_connections,
        max_contexts_per_connection=args.max_contexts,
        max_buffered_frames=args.max_buffered_frames,
        idle_timeout=args.idle_timeout,
        handshake_timeout=args.handshake_timeout,
    )
    options = LoadOptions(
        backend=args.backend,
        model_dir=args.model_dir,
        revision=args.revision,
        precision=args.precision,
        threads=args.threads,
        max_streams=args.max_streams,
    )
    config = ServerConfig(
        language=args.language,
        options=options,
        voices_dir=args.voices_dir,
        voice_aliases=dict(args.voice_alias) if args.voice_alias else None,
        default_voice=default_voice_arg(args.default_voice) if args.default_voice else None,
        api_key=api_key,
        limits=limits,
        cors_origins=tuple(args.cors_origin),
        voice_url_hosts=resolve_voice_url_hosts(args.voice_url_host),
        warmup=not args.no_warmup,
        wyoming=None if args.wyoming_port is None else (args.host, args.wyoming_port),
        zeroconf=args.zeroconf,
    )
    # A no-op when the main command line configured logging already.
    logging.basicConfig(format="%(levelname)s: %(message)s")
    logging.getLogger("pipecat_pocket_tts").setLevel(args.log_level.upper())
    failures: list[Exception] = []

    def stop(error: Exception) -> None:
        failures.append(error)
        server.should_exit = True

    app = create_app(config, on_load_error=stop)
    uvicorn_config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        http=head_timeout_protocol(limits.handshake_timeout),
        ws="websockets-sansio",
        ws_max_size=limits.max_message_bytes,
        log_level=args.log_level,
        lifespan="on",
    )
    server = DrainingServer(uvicorn_config, app.state.server.drain, args.drain_timeout)
    server.run()
    if failures:
        print(f"error: the server cannot serve its configuration: {failures[0]}", file=sys.stderr)
        return 2
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """The ``pocket-tts-server`` console script.

    Args:
        argv: The arguments (None: the process's).

    Returns:
        The exit status (2 for a refused configuration, said in one line).
    """
    parser = argparse.ArgumentParser(prog="pocket-tts-server", description=DESCRIPTION)
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except (PocketTTSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


__all__ = ["DESCRIPTION", "LOG_LEVELS", "add_arguments", "main", "run"]
