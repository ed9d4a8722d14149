"""The client of the TTS server: ``RemoteTTS``, used as a local ``PocketTTS`` is, and its
sessions (``RemoteSession``, in ``session``), used as its ``Session`` is.

``PocketTTSService(server_url=...)`` speaks through these with the very code it runs on an
in-process engine: ``session()``, ``enqueue`` / ``feed`` / ``flush`` / ``mark`` / ``acancel``,
and async iteration of ``AudioFrame`` (with its words) and ``Marker``. No Pipecat here.

The websocket is a ``ServerLink`` (``link``): a thread of its own that reconnects with
backoff whenever the connection is lost. ``RemoteTTS`` routes what it receives to its sessions.
Losing the connection ends every open session with ``ServerUnavailableError``; opening a session
while the server is unreachable raises it.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import logging
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .. import wire
from ..engine import (
    SAMPLE_RATE,
    AdmissionWait,
    ServerUnavailableError,
    UtteranceOptions,
)
from ..engine.contract import EngineCapabilities, SpeechProbe
from ..wire import handshake
from .link import BACKOFF_S, CONNECT_TIMEOUT_S, ServerLink
from .session import REPLY_TIMEOUT_S, RemoteSession, error_of, voice_name

logger = logging.getLogger(__name__)

_REMOTE = EngineCapabilities(answers_locally=False)


class RemoteTTS:
    """A TTS server, with the parts of ``PocketTTS``'s interface a service uses."""

    sample_rate: int = SAMPLE_RATE

    def __init__(
        self, url: str, *, api_key: str | None = None, connect_timeout: float = CONNECT_TIMEOUT_S
    ) -> None:
        """Start connecting to ``url`` (``ws://host:port``; the protocol's path is added when
        missing) in the background; ``connect()`` waits for it."""
        if not url.startswith(("ws://", "wss://")):
            raise ValueError(f"server_url must start with ws:// or wss://, got {url!r}")
        self.url = (
            url if url.rstrip("/").endswith(handshake.PATH) else url.rstrip("/") + handshake.PATH
        )
        self._sessions: dict[str, RemoteSession] = {}
        self._answers: dict[int, concurrent.futures.Future[Any]] = {}
        """Checks by id."""
        self._ids = itertools.count()
        self._link = ServerLink(
            self.url,
            api_key=api_key,
            connect_timeout=connect_timeout,
            on_message=self._dispatch,
            on_lost=self._lost,
            # The sessions waiting between turns keep the connection (a ping now and then).
            keep_alive=lambda: bool(self._sessions),
        )

    # -- facts (known once connected) -------------------------------------------------
    @property
    def connected(self) -> bool:
        return self._link.connected

    @property
    def pack_name(self) -> str:
        """The server's pack name, as its ``ready`` message said ("unknown" before it)."""
        info = self._link.info
        return info.language if info is not None else "unknown"

    @property
    def voices(self) -> list[str]:
        info = self._link.info
        return list(info.voices) if info is not None else []

    @property
    def default_voice(self) -> str | None:
        info = self._link.info
        return info.default_voice if info is not None else None

    def __repr__(self) -> str:
        return f"RemoteTTS({self.url!r}, pack={self.pack_name!r})"

    # -- blocking calls (any thread but the connection's) -----------------------------
    def connect(self, timeout: float | None = None) -> RemoteTTS:
        """Wait until connected; ``ServerUnavailableError`` after ``timeout`` seconds."""
        self._link.connect(timeout)
        return self

    def session(
        self,
        options: UtteranceOptions | None = None,
        *,
        max_frames: int | None = None,
        text_language: str | None = None,
        timestamps: bool = False,
        on_admission_wait: Callable[[AdmissionWait], None] | None = None,
        **keywords: Any,
    ) -> RemoteSession:
        """A session on the server (waits until it is open there; raises what it refused).

        As ``PocketTTS.session``: ``options`` (or its fields as keywords) are the session's
        defaults; ``max_frames`` is the server's to bound (refused here)."""
        if max_frames is not None:
            raise TypeError("max_frames is not offered by the TTS server")
        defaults = UtteranceOptions.build(options, **keywords)
        start = wire.Start(
            context=f"s{next(self._ids)}",
            voice=voice_name(defaults.voice),
            temperature=defaults.temperature,
            seed=defaults.seed,
            eos_threshold=defaults.eos_threshold,
            normalize=True if defaults.normalize is None else defaults.normalize,
            lexicon=None if defaults.lexicon is None else dict(defaults.lexicon),
            text_language=text_language,
            timestamps=timestamps,
            encoding="float32",
            speed=defaults.speed,
        )
        self.connect()
        session = RemoteSession(self, start.context, on_admission_wait)
        self._sessions[start.context] = session
        self.send(start)
        try:
            session.wait_started(REPLY_TIMEOUT_S)
        except BaseException:
            self._sessions.pop(start.context, None)
            raise
        return session

    @property
    def capabilities(self) -> EngineCapabilities:
        """On a server: its own load options; voices by name; every check asks it."""
        return _REMOTE

    def has_speech(
        self,
        text: str,
        text_language: str | None = None,
        *,
        normalize: bool = True,
        lexicon: Mapping[str, str] | None = None,
    ) -> bool:
        """Whether ``text`` says anything on the server's pack: the server plans it as its
        sessions will (and keeps the plan for the ``text`` that follows). Blocks for the
        answer: call it off an event loop."""
        return self.check_text(text, True, text_language, normalize, lexicon)

    def speech_probe(
        self,
        text_language: str | None = None,
        *,
        normalize: bool = True,
        lexicon: Mapping[str, str] | None = None,
    ) -> SpeechProbe:
        """A ``SpeechProbe`` answered by the server's text stream (each push asks it)."""
        return _ServerProbe(self, text_language, normalize, lexicon)

    def warm_up(self, voice: Any = None) -> None:
        """Nothing to warm here: the server warmed its model at its start."""

    def voice_state(self, voice: Any = None) -> None:
        """Check that the server speaks with ``voice`` (None: its default); raises why not."""
        self.check_voice(voice)

    def check_voice(self, voice: Any = None) -> None:
        result = self._ask(lambda ask_id: wire.CheckVoice(ask_id, voice_name(voice)))
        if result.error_code is not None:
            raise error_of(wire.Error(None, result.error_code, result.message or ""))

    def check_text(
        self,
        text: str,
        complete: bool,
        language: str | None,
        normalize: bool,
        lexicon: Mapping[str, str] | None,
        probe: int | None = None,
    ) -> bool:
        """The server's answer to ``check_text``: its ``has_speech`` of ``text``, or with a
        ``probe`` number the next fragment of that probe's streamed text (``complete``: its
        end). Blocks: call it off an event loop."""
        words = None if lexicon is None else dict(lexicon)
        result = self._ask(
            lambda ask_id: wire.CheckText(
                ask_id, text, complete, normalize, words, language, probe=probe
            )
        )
        if result.error_code is not None:
            raise error_of(wire.Error(None, result.error_code, result.message or ""))
        return result.speech

    def new_probe_id(self) -> int:
        return next(self._ids)

    def _ask(self, question: Callable[[int], wire.ClientMessage]) -> Any:
        """Send the question made for a new id; the server's answer to it."""
        self.connect()
        ask_id = next(self._ids)
        answer: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._answers[ask_id] = answer
        self.send(question(ask_id))
        try:
            return answer.result(REPLY_TIMEOUT_S)
        except concurrent.futures.TimeoutError:
            raise ServerUnavailableError(f"the TTS server at {self.url} did not answer") from None
        finally:
            self._answers.pop(ask_id, None)

    def close(self) -> None:
        """Close the connection and stop its thread."""
        self._link.close(join_timeout=REPLY_TIMEOUT_S)

    # -- sending (any thread) ---------------------------------------------------------
    def send(self, message: wire.ClientMessage) -> None:
        """Queue a message for the server (dropped while disconnected: sessions fail then)."""
        self._link.send(wire.encode(message))

    def forget(self, session: RemoteSession) -> None:
        self._sessions.pop(session.context_id, None)

    # -- from the connection thread ---------------------------------------------------
    def _dispatch(self, data: str | bytes) -> None:
        if isinstance(data, bytes):
            header, samples = wire.unpack_audio(data)
            session = self._sessions.get(header.context)
            if session is not None:
                session.audio(header, np.frombuffer(samples, dtype="<f4"))
            return
        message = wire.decode_server(data)
        if isinstance(message, (wire.VoiceChecked, wire.TextChecked)):
            answer = self._answers.get(message.id)
            if answer is not None and not answer.done():
                answer.set_result(message)
            return
        context = getattr(message, "context", None)
        session = self._sessions.get(context) if context is not None else None
        if session is not None:
            session.control(message)
        elif isinstance(message, wire.Error):
            logger.warning("TTS server: %s: %s", message.code, message.message)

    def _lost(self, reason: BaseException | None) -> None:
        """The connection ended: every session still owed audio fails, an idle one just ends
        (a server draining for a restart closes its idle connections: the next session
        reconnects, through a balancer to another replica); every question is unanswered."""
        error = ServerUnavailableError(
            f"lost the connection to the TTS server at {self.url}: "
            f"{reason or 'closed'}; retrying in the background"
        )
        for session in list(self._sessions.values()):
            if session.is_idle:
                session.end_idle(error)
            else:
                session.fail(error)
        self._sessions.clear()
        for answer in self._answers.values():
            if not answer.done():
                answer.set_exception(error)


class _ServerProbe:
    """``SpeechProbe`` kept on the server: each fragment is sent once, until it says speech."""

    def __init__(
        self,
        remote: RemoteTTS,
        language: str | None,
        normalize: bool,
        lexicon: Mapping[str, str] | None,
    ) -> None:
        self._remote = remote
        self._language, self._normalize, self._lexicon = language, normalize, lexicon
        self._id = remote.new_probe_id()
        self._speaks = False

    def push(self, text: str) -> bool:
        return self._ask(text, complete=False)

    def flush(self) -> bool:
        return self._ask("", complete=True)

    def _ask(self, text: str, *, complete: bool) -> bool:
        if not self._speaks:
            self._speaks = self._remote.check_text(
                text, complete, self._language, self._normalize, self._lexicon, probe=self._id
            )
        return self._speaks


__all__ = ["BACKOFF_S", "CONNECT_TIMEOUT_S", "RemoteSession", "RemoteTTS"]
