"""What the server app holds: its configuration, the model once loaded, voices, metrics."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from ...engine import LoadOptions, PocketTTS
from .auth import KeyCheck
from .drain import Drain
from .errors import RequestError
from .limits import Limits
from .metrics import ServerMetrics
from .voice_urls import VoiceUrls
from .voices import ServerVoices


@dataclass(frozen=True)
class ServerConfig:
    """What the server serves and to whom."""

    language: str = "english"
    options: LoadOptions = field(default_factory=LoadOptions)
    voices_dir: Path | None = None
    voice_aliases: dict[str, str] | None = None
    """Alias → voice name (None: OpenAI's voice names, each the default voice)."""
    default_voice: str | Path | None = None
    """A voice name or a voice file (None: the pack's default)."""
    api_key: str | None = None
    limits: Limits = field(default_factory=Limits)
    cors_origins: tuple[str, ...] = ()
    voice_url_hosts: tuple[str, ...] = ()
    """Where POST /tts may fetch a voice_url from."""
    warmup: bool = True
    wyoming: tuple[str, int] | None = None
    """Wyoming's (host, port); None: no Wyoming listener."""
    zeroconf: bool = False
    """Announce the Wyoming port over mDNS."""


class ServerState:
    """The app's model (once loaded), voices, limits, key check and metrics."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.limits = config.limits
        self.keys = KeyCheck(config.api_key)
        self.voice_urls = VoiceUrls(config.voice_url_hosts)
        self.metrics = ServerMetrics()
        self.tts: PocketTTS | None = None
        self.voices: ServerVoices
        self.load_error: Exception | None = None
        self.loaded = asyncio.Event()
        self.connections = 0
        """Websocket connections being served."""
        self.drain = Drain()
        """What is in flight, and whether the server is stopping."""

    def require_model(self) -> PocketTTS:
        if self.tts is None:
            raise RequestError(503, "the model is still loading; retry when /ready says so")
        return self.tts

    def public(self, message: str) -> str:
        """An error's ``message`` as a client may read it: no path of this machine's files."""
        if self.tts is not None:
            message = self.voices.hide_paths(message)
        config = self.config
        default = config.default_voice if isinstance(config.default_voice, Path) else None
        for path, label in (
            (config.voices_dir, "<voices-dir>"),
            (config.options.model_dir, "<model-dir>"),
            (default, "<default-voice>"),
        ):
            if path is not None:
                message = message.replace(str(Path(path).resolve()), label)
                message = message.replace(str(path), label)
        return message

    def load(self) -> None:
        """Load and warm up the pack (a worker thread)."""
        config = self.config
        tts = PocketTTS.load(config.language, options=config.options)
        voices = ServerVoices(
            tts,
            config.voices_dir,
            config.voice_aliases,
            config.default_voice,
            pack_dir=config.options.model_dir,
        )
        default = voices.resolve(None)
        if default is not None:
            # Checked (a recording cloned) before serving.
            tts.voice_state(default)
        if config.warmup:
            tts.warm_up(default)
        self.voices = voices
        self.tts = tts


__all__ = ["ServerConfig", "ServerState"]
