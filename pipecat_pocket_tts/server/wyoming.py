"""Home Assistant's Wyoming protocol (TCP, ``serve --wyoming-port PORT``), on the server's core.

Home Assistant and its voice satellites speak Wyoming: events of one JSON line each (``type``,
and the lengths of the JSON ``data`` and the binary ``payload`` that follow it). A Wyoming
connection is served by the same ``Connection`` as every websocket route (connection.py), so
it runs on the one model, scheduler, limits, metrics and drain; ``WyomingDialect`` only
translates, and ``EventSocket`` carries events where the connection expects a websocket.

client → server::

    describe                        → info: one TTS program listing every voice of the server
    ping                            → pong
    synthesize  text, voice         → audio-start, an audio-chunk per frame, audio-stop
    synthesize-start  voice         → audio-start
    synthesize-chunk  text          → audio-chunks as sentences complete
    synthesize-stop                 → the last audio-chunks, audio-stop, synthesize-stopped

A voice is named (``{"name": "alba"}``) or asked for by language (``{"language": "en"}``:
the server's default voice, when the pack speaks it); none is the default voice. Audio is
16-bit mono PCM at the engine's 24 kHz. A ``synthesize`` sent during a streamed request (a
client's copy for servers that cannot stream) is ignored. A request at a time: a client that
disconnects mid-reply stops its session's compute at once. A refused request (an unknown
voice, a second request while one runs) is an ``error`` event, and the connection goes on.
Other event types are ignored, as Wyoming peers do. A request's last text is utterance
``_LAST`` of its context, so ``audio-stop`` goes out as that text's last frame has (before a
drain's close), not at the context's ``done``.

Wyoming carries no API key: on a server that has one (``--api-key``), ``--wyoming-no-auth``
must say that Wyoming clients are trusted without it. ``--zeroconf`` announces the port as
``_wyoming._tcp`` so Home Assistant discovers it (the ``zeroconf`` package).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import io
import json
import logging
import socket
from importlib import metadata
from typing import Any

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error as ErrorEvent
from wyoming.event import Event, write_event
from wyoming.info import Attribution, Info, TtsProgram, TtsVoice
from wyoming.ping import Pong
from wyoming.tts import SynthesizeStopped

from .. import wire as p
from ..engine import FrameEncoder, ServerConfigError, find_language, text_variant
from .dialect import Dialect, Outgoing, Reply, text_problem
from .security import is_loopback
from .state import ServerState

logger = logging.getLogger(__name__)

SERVICE_TYPE = "_wyoming._tcp.local."
PROGRAM = "pocket-tts"
_WIDTH = 2  # bytes a sample: 16-bit PCM
_ATTRIBUTION = Attribution(name="Kyutai", url="https://kyutai.org")
_WILDCARDS = ("", "0.0.0.0", "::")
_LAST = 1  # the utterance number of a request's last text: its end is the request's


def check_wyoming_options(
    port: int | None, zeroconf: bool, api_key: str | None, no_auth: bool
) -> None:
    """Refuse, at start, Wyoming options the server could not honour.

    Args:
        port: ``--wyoming-port`` (None: no Wyoming).
        zeroconf: ``--zeroconf``: announce the port (needs it, and the zeroconf package).
        api_key: The server's API key, if any.
        no_auth: ``--wyoming-no-auth``: Wyoming clients are trusted without the key
            (Wyoming has no way to send one).

    Raises:
        ServerConfigError: What to change.
    """
    if zeroconf and port is None:
        raise ServerConfigError("--zeroconf announces the Wyoming port: give --wyoming-port")
    if zeroconf and importlib.util.find_spec("zeroconf") is None:
        raise ServerConfigError("--zeroconf needs the zeroconf package: pip install zeroconf")
    if port is not None and api_key is not None and not no_auth:
        raise ServerConfigError(
            "Wyoming carries no API key, so --wyoming-port would serve anyone who reaches it "
            "without the key this server asks for: pass --wyoming-no-auth to allow it "
            "(trusted networks only)"
        )


def wire_event(event: Event) -> bytes:
    """One Wyoming event as the bytes that carry it."""
    buffer = io.BytesIO()
    write_event(event, buffer)
    return buffer.getvalue()


def _text_event(event: Event) -> str:
    return wire_event(event).decode()


def _error(code: str, message: str) -> Reply:
    return Reply(_text_event(ErrorEvent(text=message, code=code).event()))


class WyomingDialect(Dialect):
    """Wyoming's events in and out; one context per synthesis request, one at a time."""

    route = "wyoming"

    def __init__(self) -> None:
        self._numbers = 0
        self._ready = p.Ready("", [], None, 24000, 1920)
        self._request: str | None = None  # the context of the request being answered
        self._streaming = False  # it came as synthesize-start (ends with synthesize-stopped)
        self._failed = False  # it was refused: its remaining events are dropped
        self._voice: str | None = None  # its voice, named on each text too (a text's own
        # voice, None the default, is the voice that text is spoken in)
        self._samples = 0  # samples of it sent, for the chunks' timestamps

    def hello(self, ready: p.Ready) -> list[Outgoing]:
        self._ready = ready
        return []  # Wyoming clients speak first

    def decode(self, text: str) -> list[p.ClientMessage | Reply]:
        raw = json.loads(text)  # EventSocket hands over well-formed events only
        kind, data = raw["type"], raw["data"]
        if kind == "describe":
            return [Reply(_text_event(self.info().event()))]
        if kind == "ping":
            return [Reply(_text_event(Pong(text=data.get("text")).event()))]
        if kind == "synthesize":
            return self._synthesize(data)
        if kind == "synthesize-start":
            return self._open(data, streaming=True)
        if kind == "synthesize-chunk":
            return self._chunk(data)
        if kind == "synthesize-stop":
            if self._request is None or not self._streaming:
                return [_error(p.ErrorCode.BAD_REQUEST, "synthesize-stop without synthesize-start")]
            if self._failed:  # refused: the client was told, and this ends it
                self._end(self._request)
                return []
            return [p.Flush(self._request, _LAST, voice=self._voice), p.End(self._request)]
        return []  # events of other domains (audio, asr, wake...) are not for a TTS server

    def info(self) -> Info:
        """The server's one TTS program, listing every voice with the pack's language."""
        ready = self._ready
        voices = [
            TtsVoice(
                name=name,
                attribution=_ATTRIBUTION,
                installed=True,
                description="the default voice" if name == ready.default_voice else None,
                version=None,
                languages=self._languages(),
            )
            for name in ready.voices
        ]
        program = TtsProgram(
            name=PROGRAM,
            attribution=_ATTRIBUTION,
            installed=True,
            description=f"Kyutai PocketTTS ({ready.language}), streaming",
            version=_version(),
            voices=voices,
            supports_synthesize_streaming=True,
        )
        return Info(tts=[program])

    def _languages(self) -> list[str]:
        info = find_language(self._ready.language)
        return [self._ready.language] if info is None else [info.code, *info.variants]

    def _synthesize(self, data: dict[str, Any]) -> list[p.ClientMessage | Reply]:
        if self._streaming:
            return []  # the whole text, sent again for servers that do not stream
        value = data.get("text")
        if not isinstance(value, str):
            return [_error(p.ErrorCode.BAD_REQUEST, "synthesize needs a string 'text'")]
        if problem := text_problem(value):
            return [_error(p.ErrorCode.BAD_REQUEST, problem)]
        opened = self._open(data, streaming=False)
        if not isinstance(opened[-1], p.Start):
            return opened  # refused
        text = p.Text(self._request, _LAST, value, complete=True, voice=self._voice)
        return [*opened, text, p.End(self._request)]

    def _open(self, data: dict[str, Any], *, streaming: bool) -> list[p.ClientMessage | Reply]:
        if self._request is not None:
            return [_error(p.ErrorCode.BAD_REQUEST, "one synthesis at a time: wait for its end")]
        try:
            voice, text_language = self._choose_voice(data.get("voice"))
        except ValueError as e:
            code = getattr(e, "code", p.ErrorCode.BAD_REQUEST)
            return [_error(code, str(e))]
        self._numbers += 1
        self._request = f"wyoming-{self._numbers}"
        self._streaming, self._failed, self._samples = streaming, False, 0
        self._voice = voice
        return [p.Start(self._request, voice=voice, text_language=text_language)]

    def _choose_voice(self, given: Any) -> tuple[str | None, str | None]:
        """The voice a request names, and the text variant its language asks for."""
        if given is None or given == {}:
            return None, None
        if not isinstance(given, dict):
            raise ValueError("voice must be an object with a 'name' or a 'language'")
        name, language = given.get("name"), given.get("language")
        voices = self._ready.voices
        if name is not None:
            if name not in voices:
                raise _Refusal(
                    p.ErrorCode.UNKNOWN_VOICE,
                    f"no voice {name!r} on this server; its voices: {', '.join(voices)}",
                )
            return name, None
        if language is None:
            return None, None
        spoken = self._languages()
        asked = find_language(language) if isinstance(language, str) else None
        if language not in spoken and (asked is None or asked.code not in spoken):
            raise _Refusal(
                p.ErrorCode.UNKNOWN_VOICE,
                f"no voice for language {language!r}: this server speaks {', '.join(spoken)}",
            )
        return None, text_variant(language) if asked is not None else None

    def _chunk(self, data: dict[str, Any]) -> list[p.ClientMessage | Reply]:
        if self._request is None or not self._streaming:
            return [_error(p.ErrorCode.BAD_REQUEST, "synthesize-chunk without synthesize-start")]
        value = data.get("text")
        if not isinstance(value, str):
            return [_error(p.ErrorCode.BAD_REQUEST, "synthesize-chunk needs a string 'text'")]
        if problem := text_problem(value):
            return [_error(p.ErrorCode.BAD_REQUEST, problem)]
        if self._failed:
            return []
        return [p.Text(self._request, 0, value, complete=False, voice=self._voice)]

    def encoder(self, start: p.Start) -> FrameEncoder:
        return FrameEncoder(self._ready.sample_rate, "pcm_s16le")

    def encode(self, message: p.ServerMessage) -> list[Outgoing]:
        rate = self._ready.sample_rate
        if isinstance(message, p.Started):
            return [_text_event(AudioStart(rate, _WIDTH, 1, timestamp=0).event())]
        if isinstance(message, p.UtteranceEnd) and message.utterance == _LAST:
            events = [AudioStop(timestamp=self._milliseconds()).event()]
            if self._streaming:
                events.append(SynthesizeStopped().event())
            self._end(message.context)
            return [_text_event(event) for event in events]
        if isinstance(message, p.Error):
            if message.context is not None and message.context == self._request:
                self._failed = True
                if not self._streaming:
                    self._end(message.context)
            return [_error(message.code, message.message).data]
        if isinstance(message, p.Cancelled | p.Done):
            self._end(message.context)  # a request ends at its last utterance's end
        return []  # other utterance ends, markers, admissions: Wyoming has no such events

    def audio(self, header: p.AudioHeader, samples: bytes) -> list[Outgoing]:
        timestamp = self._milliseconds()
        self._samples += len(samples) // _WIDTH
        rate = self._ready.sample_rate
        return [wire_event(AudioChunk(rate, _WIDTH, 1, samples, timestamp=timestamp).event())]

    def farewell(self, code: int, reason: str) -> list[Outgoing]:
        return [_error(p.ErrorCode.BAD_REQUEST, reason).data]

    def _milliseconds(self) -> int:
        return 1000 * self._samples // self._ready.sample_rate

    def _end(self, context: str) -> None:
        if context == self._request:
            self._request, self._streaming, self._failed = None, False, False


class _Refusal(ValueError):
    """A request refused with a Wyoming error code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class EventSocket:
    """A Wyoming TCP stream where a ``Connection`` expects a websocket: each event in as one
    text message (its JSON with the ``data`` merged), each outgoing message's bytes out."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, max_bytes: int
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._max_bytes = max_bytes

    async def receive(self) -> dict[str, Any]:
        """The next event as a websocket message; a disconnect at the end of the stream or
        after a malformed event (the client is told why first)."""
        try:
            event = await self._read()
        except (ConnectionError, asyncio.IncompleteReadError):
            event = None
        except ValueError as e:  # a broken event: the stream cannot be read further
            self.refuse(f"not a Wyoming event: {e}")
            event = None
        if event is None:
            return {"type": "websocket.disconnect"}
        return {"type": "websocket.receive", "text": json.dumps(event)}

    async def _read(self) -> dict[str, Any] | None:
        line = await self._reader.readline()  # ValueError past the reader's limit
        if not line:
            return None
        header = json.loads(line)
        if not isinstance(header, dict) or not isinstance(header.get("type"), str):
            raise ValueError('an event is a JSON object with a string "type"')
        data = header.get("data") or {}
        lengths = [header.get("data_length") or 0, header.get("payload_length") or 0]
        if not isinstance(data, dict) or not all(isinstance(n, int) and n >= 0 for n in lengths):
            raise ValueError("data must be an object, its lengths whole numbers")
        if sum(lengths) > self._max_bytes:
            raise ValueError(f"an event of over {self._max_bytes} bytes")
        if lengths[0]:
            more = json.loads(await self._reader.readexactly(lengths[0]))
            if not isinstance(more, dict):
                raise ValueError("data must be an object")
            data = {**data, **more}
        if lengths[1]:
            await self._reader.readexactly(lengths[1])  # audio in: not for a TTS server
        return {"type": header["type"], "data": data}

    async def send_text(self, data: str) -> None:
        await self.send_bytes(data.encode())

    async def send_bytes(self, data: bytes) -> None:
        self._writer.write(data)
        await self._writer.drain()

    async def close(self, code: int = 1000, reason: str = "") -> None:
        """Close the stream (Wyoming has no close codes: the reason went out as an error)."""
        self._writer.close()
        with contextlib.suppress(Exception):
            await self._writer.wait_closed()

    def refuse(self, message: str) -> None:
        """Say why in an error event, and close."""
        with contextlib.suppress(Exception):
            self._writer.write(wire_event(ErrorEvent(text=message, code="refused").event()))
        self._writer.close()


class WyomingServer:
    """The Wyoming TCP listener of one server app, beside its HTTP routes."""

    def __init__(self, state: ServerState, host: str, port: int, *, announce: bool = False):
        """``announce``: register the port with zeroconf (mDNS) for Home Assistant."""
        self._state = state
        self._host = host
        self._port = port
        self._announce = announce
        self._server: asyncio.Server | None = None
        self._zeroconf: Any = None

    async def start(self) -> None:
        limit = self._state.limits.max_message_bytes
        self._server = await asyncio.start_server(self._accept, self._host, self._port, limit=limit)
        logger.info("Wyoming listening on %s:%d", self._host, self._port)
        if self._announce:
            self._zeroconf = await _announce(self._host, self._port)

    async def close(self) -> None:
        if self._zeroconf is not None:
            with contextlib.suppress(Exception):
                await self._zeroconf.async_close()
        if self._server is not None:
            self._server.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        state = self._state
        stream = EventSocket(reader, writer, state.limits.max_message_bytes)
        refusal = await self._refusal()
        if refusal is not None:
            code, message = refusal
            state.metrics.closes.labels(str(code)).inc()
            stream.refuse(message)
            return
        try:
            await state.serve(stream, WyomingDialect())  # type: ignore[arg-type]  # as a websocket
        finally:
            await stream.close()

    async def _refusal(self) -> tuple[int, str] | None:
        """Why a new connection is refused (the websocket close code it stands for), if so."""
        state = self._state
        if state.drain.draining:
            return p.CloseCode.GOING_AWAY, "the server is shutting down: try another replica"
        if state.tts is None:
            await state.loaded.wait()
        if state.tts is None:
            return p.CloseCode.GOING_AWAY, "the model failed to load"
        limit = state.limits.max_connections
        if state.connections >= limit:
            return p.CloseCode.SERVER_FULL, f"the server holds {limit} connections"
        return None


async def _announce(host: str, port: int) -> Any:
    """Register ``_wyoming._tcp`` for ``host:port`` with mDNS: on loopback only when bound
    there, else on every interface with this machine's outward address."""
    from zeroconf import InterfaceChoice  # present: checked at start
    from zeroconf.asyncio import AsyncServiceInfo, AsyncZeroconf

    wildcard = host in _WILDCARDS
    address = _outward_address() if wildcard else socket.gethostbyname(host)
    interfaces = InterfaceChoice.All if wildcard else [address]
    zeroconf = AsyncZeroconf(interfaces=interfaces)
    name = f"{PROGRAM}-{socket.gethostname()}-{port}"
    info = AsyncServiceInfo(
        SERVICE_TYPE,
        f"{name}.{SERVICE_TYPE}",
        addresses=[socket.inet_aton(address)],
        port=port,
        properties={"program": PROGRAM},
    )
    await zeroconf.async_register_service(info)
    where = "loopback only" if is_loopback(address) else address
    logger.info("zeroconf: announced %s on port %d (%s)", name, port, where)
    return zeroconf


def _outward_address() -> str:
    """The address this machine reaches the mDNS group from (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("224.0.0.251", 5353))
        return probe.getsockname()[0]


def _version() -> str | None:
    try:
        return metadata.version("pipecat-pocket-tts")
    except metadata.PackageNotFoundError:
        return None


__all__ = [
    "SERVICE_TYPE",
    "EventSocket",
    "WyomingDialect",
    "WyomingServer",
    "check_wyoming_options",
    "wire_event",
]
