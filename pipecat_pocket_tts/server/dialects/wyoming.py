"""Home Assistant's Wyoming protocol (TCP, ``serve --wyoming-port PORT``): the dialect.

Home Assistant and its voice satellites speak Wyoming: events of one JSON line each (``type``,
and the lengths of the JSON ``data`` and the binary ``payload`` that follow it). A Wyoming
connection is served by the core's ``Connection`` like every websocket route, so it runs on
the one model, scheduler, limits, metrics and drain; ``WyomingDialect`` only translates, and
``server/wyoming_listener.py`` carries the events where the core expects a websocket.

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

"""

from __future__ import annotations

import io
import json
from importlib import metadata
from typing import Any

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error as ErrorEvent
from wyoming.event import Event, write_event
from wyoming.info import Attribution, Info, TtsProgram, TtsVoice
from wyoming.ping import Pong
from wyoming.tts import SynthesizeStopped

from ... import wire
from ...engine import FrameEncoder, find_language, text_variant
from ..core.dialect import Dialect, Outgoing, Reply, text_problem

PROGRAM = "pocket-tts"
_WIDTH = 2  # bytes a sample: 16-bit PCM
_ATTRIBUTION = Attribution(name="Kyutai", url="https://kyutai.org")
_LAST = 1  # the utterance number of a request's last text: its end is the request's


def wire_event(event: Event) -> bytes:
    """One Wyoming event as the bytes that carry it."""
    buffer = io.BytesIO()
    write_event(event, buffer)
    return buffer.getvalue()


def _text_event(event: Event) -> str:
    return wire_event(event).decode()


def error_event(code: str, message: str) -> Reply:
    return Reply(_text_event(ErrorEvent(text=message, code=code).event()))


class WyomingDialect(Dialect):
    """Wyoming's events in and out; one context per synthesis request, one at a time."""

    name = "wyoming"

    def __init__(self) -> None:
        self._numbers = 0
        self._ready = wire.Ready("", [], None, 24000, 1920)
        self._request: str | None = None  # the context of the request being answered
        self._streaming = False  # it came as synthesize-start (ends with synthesize-stopped)
        self._failed = False  # it was refused: its remaining events are dropped
        self._voice: str | None = None  # its voice, named on each text too (a text's own
        # voice, None the default, is the voice that text is spoken in)
        self._samples = 0  # samples of it sent, for the chunks' timestamps

    def hello(self, ready: wire.Ready) -> list[Outgoing]:
        self._ready = ready
        return []  # Wyoming clients speak first

    def decode(self, text: str) -> list[wire.ClientMessage | Reply]:
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
                return [
                    error_event(
                        wire.ErrorCode.BAD_REQUEST, "synthesize-stop without synthesize-start"
                    )
                ]
            if self._failed:  # refused: the client was told, and this ends it
                self._end(self._request)
                return []
            return [wire.Flush(self._request, _LAST, voice=self._voice), wire.End(self._request)]
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

    def _synthesize(self, data: dict[str, Any]) -> list[wire.ClientMessage | Reply]:
        if self._streaming:
            return []  # the whole text, sent again for servers that do not stream
        value = data.get("text")
        if not isinstance(value, str):
            return [error_event(wire.ErrorCode.BAD_REQUEST, "synthesize needs a string 'text'")]
        if problem := text_problem(value):
            return [error_event(wire.ErrorCode.BAD_REQUEST, problem)]
        opened = self._open(data, streaming=False)
        if not isinstance(opened[-1], wire.Start):
            return opened  # refused
        text = wire.Text(self._request, _LAST, value, complete=True, voice=self._voice)
        return [*opened, text, wire.End(self._request)]

    def _open(self, data: dict[str, Any], *, streaming: bool) -> list[wire.ClientMessage | Reply]:
        if self._request is not None:
            return [
                error_event(wire.ErrorCode.BAD_REQUEST, "one synthesis at a time: wait for its end")
            ]
        try:
            voice, text_language = self._choose_voice(data.get("voice"))
        except ValueError as e:
            code = getattr(e, "code", wire.ErrorCode.BAD_REQUEST)
            return [error_event(code, str(e))]
        self._numbers += 1
        self._request = f"wyoming-{self._numbers}"
        self._streaming, self._failed, self._samples = streaming, False, 0
        self._voice = voice
        return [wire.Start(self._request, voice=voice, text_language=text_language)]

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
                    wire.ErrorCode.UNKNOWN_VOICE,
                    f"no voice {name!r} on this server; its voices: {', '.join(voices)}",
                )
            return name, None
        if language is None:
            return None, None
        spoken = self._languages()
        asked = find_language(language) if isinstance(language, str) else None
        if language not in spoken and (asked is None or asked.code not in spoken):
            raise _Refusal(
                wire.ErrorCode.UNKNOWN_VOICE,
                f"no voice for language {language!r}: this server speaks {', '.join(spoken)}",
            )
        return None, text_variant(language) if asked is not None else None

    def _chunk(self, data: dict[str, Any]) -> list[wire.ClientMessage | Reply]:
        if self._request is None or not self._streaming:
            return [
                error_event(wire.ErrorCode.BAD_REQUEST, "synthesize-chunk without synthesize-start")
            ]
        value = data.get("text")
        if not isinstance(value, str):
            return [
                error_event(wire.ErrorCode.BAD_REQUEST, "synthesize-chunk needs a string 'text'")
            ]
        if problem := text_problem(value):
            return [error_event(wire.ErrorCode.BAD_REQUEST, problem)]
        if self._failed:
            return []
        return [wire.Text(self._request, 0, value, complete=False, voice=self._voice)]

    def encoder(self, start: wire.Start) -> FrameEncoder:
        return FrameEncoder(self._ready.sample_rate, "pcm_s16le")

    def encode(self, message: wire.ServerMessage) -> list[Outgoing]:
        rate = self._ready.sample_rate
        if isinstance(message, wire.Started):
            return [_text_event(AudioStart(rate, _WIDTH, 1, timestamp=0).event())]
        if isinstance(message, wire.UtteranceEnd) and message.utterance == _LAST:
            events = [AudioStop(timestamp=self._milliseconds()).event()]
            if self._streaming:
                events.append(SynthesizeStopped().event())
            self._end(message.context)
            return [_text_event(event) for event in events]
        if isinstance(message, wire.Error):
            if message.context is not None and message.context == self._request:
                self._failed = True
                if not self._streaming:
                    self._end(message.context)
            return [error_event(message.code, message.message).data]
        if isinstance(message, wire.Cancelled | wire.Done):
            self._end(message.context)  # a request ends at its last utterance's end
        return []  # other utterance ends, markers, admissions: Wyoming has no such events

    def audio(self, header: wire.AudioHeader, samples: bytes) -> list[Outgoing]:
        timestamp = self._milliseconds()
        self._samples += len(samples) // _WIDTH
        rate = self._ready.sample_rate
        return [wire_event(AudioChunk(rate, _WIDTH, 1, samples, timestamp=timestamp).event())]

    def farewell(self, code: int, reason: str) -> list[Outgoing]:
        return [error_event(wire.ErrorCode.BAD_REQUEST, reason).data]

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


def _version() -> str | None:
    try:
        return metadata.version("pipecat-pocket-tts")
    except metadata.PackageNotFoundError:
        return None


__all__ = ["PROGRAM", "WyomingDialect", "error_event", "wire_event"]
