"""The websocket protocol of the TTS server: every message, typed, for both sides.

One connection carries any number of *contexts* (each one engine ``Session``), named by the
client. Control messages are JSON text frames, ``{"type": ..., "context": ..., ...}``; audio
goes server → client as binary frames: a 4-byte big-endian header length, the JSON header
(``AudioHeader``: context, utterance, chunk, frame, last, words) and the samples.

client → server::

    start   context, voice, temperature, seed, eos_threshold, normalize, lexicon, speed
            (0.25-4.0, pitch kept), text_language, timestamps,
            encoding (pcm_s16le | float32 | mulaw), sample_rate (24000; mulaw: 8000)
    text    context, utterance, text, complete (True: one whole utterance, as Session.enqueue;
            False: streamed, as Session.feed), per-utterance overrides
    flush   context, utterance: the streamed text is complete (Session.flush)
    mark    context, id: a marker after the audio of the text sent before it (Session.mark:
            while fed text is held unfinished, after the chunk it becomes, or dropped if it
            becomes none)
    end     context: no more text; ``done`` follows the last audio
    cancel  context: stop now; ``cancelled`` acknowledges, nothing of it follows
    voice   id, voice: can the server's pack speak with this voice? (``voice_checked``)
    check_text  id, text, complete, normalize, lexicon, text_language, probe: does the text
            say anything on the server's pack? (``text_checked``: the engine's has_speech; with
            a ``probe`` number, the next fragment of a streamed text, pushed to that probe
            (its first message opens it, ``complete`` flushes and closes it): has the text so
            far released a chunk?)
    ping    a keepalive: a connection whose contexts have nothing queued and that sends
            nothing for the server's ``idle_timeout`` is closed (``pong`` answers)

server → client::

    ready          language, voices, default_voice, sample_rate, frame_size, idle_timeout
                   (seconds of silence before an idle connection is closed; sent only to a
                   client that offered ``handshake.KEEPALIVE_SUBPROTOCOL``) (on connect)
    started        context (its session is open)
    admitted       context, waited, active (it waited for a scheduler slot, then got one)
    utterance_end  context, utterance (after the last audio of that client utterance)
    marker         context, id
    done           context (after ``end``: everything spoken)
    cancelled      context
    error          context (or None: the connection), code, message
    voice_checked  id, error_code, message (None: usable)
    text_checked   id, speech, error_code, message
    pong           (the answer to ``ping``)

``utterance`` numbers are the client's: every ``text`` and ``flush`` names the utterance its
audio belongs to, and every engine utterance it queues is reported under it.

How a client connects and hands over the API key: ``wire.handshake``.
"""

from __future__ import annotations

import json
import struct
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any, ClassVar

ENCODINGS = ("pcm_s16le", "float32", "mulaw")
MULAW_RATE = 8000


class ProtocolError(ValueError):
    """A message that is not valid JSON, of an unknown type, or with wrong fields."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class CloseCode:
    """Websocket close codes the server uses (4000-4999: the application's)."""

    NORMAL = 1000
    GOING_AWAY = 1001
    TOO_BIG = 1009
    UNAUTHORIZED = 4001
    MALFORMED = 4002
    UNKNOWN_TYPE = 4003
    LIMIT = 4005
    SERVER_FULL = 4008


class ErrorCode:
    """Codes of ``error`` messages (a context's failure, or the connection's)."""

    BAD_REQUEST = "bad_request"
    """A setting out of range, a duplicate context."""
    UNKNOWN_VOICE = "unknown_voice"
    TEXT_LIMIT = "text_limit"
    SLOW_READER = "slow_reader"
    """The client read too slowly: its context was ended."""
    SYNTHESIS = "synthesis_failed"
    SERVER = "server_error"


# -- client → server ----------------------------------------------------------------------


@dataclass(frozen=True)
class Start:
    type: ClassVar[str] = "start"
    context: str
    voice: str | None = None
    temperature: float | None = None
    seed: int | None = None
    eos_threshold: float | None = None
    normalize: bool = True
    lexicon: dict[str, str] | None = None
    text_language: str | None = None
    timestamps: bool = False
    encoding: str = "pcm_s16le"
    speed: float | None = None
    sample_rate: int = 24000


@dataclass(frozen=True)
class Text:
    type: ClassVar[str] = "text"
    context: str
    utterance: int
    text: str
    complete: bool = False
    voice: str | None = None
    temperature: float | None = None
    eos_threshold: float | None = None
    seed: int | None = None
    normalize: bool | None = None
    lexicon: dict[str, str] | None = None
    speed: float | None = None


@dataclass(frozen=True)
class Flush:
    type: ClassVar[str] = "flush"
    context: str
    utterance: int
    voice: str | None = None
    temperature: float | None = None
    eos_threshold: float | None = None
    seed: int | None = None
    speed: float | None = None


@dataclass(frozen=True)
class Mark:
    type: ClassVar[str] = "mark"
    context: str
    id: int
    after_fed_text: bool = True
    """False: after what is queued now (Session.mark)."""


@dataclass(frozen=True)
class End:
    type: ClassVar[str] = "end"
    context: str


@dataclass(frozen=True)
class Cancel:
    type: ClassVar[str] = "cancel"
    context: str


@dataclass(frozen=True)
class CheckVoice:
    type: ClassVar[str] = "voice"
    id: int
    voice: str | None


@dataclass(frozen=True)
class CheckText:
    """Does ``text`` say anything on the server's pack (``SpeechEngine.has_speech``; with
    ``complete`` False, ``speech_probe``: has the text so far released a chunk)?"""

    type: ClassVar[str] = "check_text"
    id: int
    text: str
    complete: bool = True
    normalize: bool = True
    lexicon: dict[str, str] | None = None
    text_language: str | None = None
    probe: int | None = None
    """A streamed text's probe (its fragments, one message each)."""


@dataclass(frozen=True)
class Ping:
    """A keepalive (``pong`` answers)."""

    type: ClassVar[str] = "ping"


# -- server → client ----------------------------------------------------------------------


@dataclass(frozen=True)
class Ready:
    type: ClassVar[str] = "ready"
    language: str
    voices: list[str]
    default_voice: str | None
    sample_rate: int
    frame_size: int
    idle_timeout: float | None = None
    """Seconds a connection with nothing queued may send nothing before it is closed."""


@dataclass(frozen=True)
class Started:
    type: ClassVar[str] = "started"
    context: str


@dataclass(frozen=True)
class Admitted:
    type: ClassVar[str] = "admitted"
    context: str
    waited: float
    """Seconds the context waited for a scheduler slot (max_streams)."""
    active: int
    """Streams speaking when it got one."""


@dataclass(frozen=True)
class UtteranceEnd:
    type: ClassVar[str] = "utterance_end"
    context: str
    utterance: int


@dataclass(frozen=True)
class MarkerReached:
    type: ClassVar[str] = "marker"
    context: str
    id: int


@dataclass(frozen=True)
class Done:
    type: ClassVar[str] = "done"
    context: str


@dataclass(frozen=True)
class Cancelled:
    type: ClassVar[str] = "cancelled"
    context: str


@dataclass(frozen=True)
class Error:
    type: ClassVar[str] = "error"
    context: str | None
    code: str
    message: str


@dataclass(frozen=True)
class VoiceChecked:
    type: ClassVar[str] = "voice_checked"
    id: int
    error_code: str | None = None
    message: str | None = None


@dataclass(frozen=True)
class TextChecked:
    type: ClassVar[str] = "text_checked"
    id: int
    speech: bool = False
    error_code: str | None = None
    message: str | None = None


@dataclass(frozen=True)
class Pong:
    type: ClassVar[str] = "pong"


ClientMessage = Start | Text | Flush | Mark | End | Cancel | CheckVoice | CheckText | Ping
ServerMessage = (
    Ready
    | Started
    | Admitted
    | UtteranceEnd
    | MarkerReached
    | Done
    | Cancelled
    | Error
    | VoiceChecked
    | TextChecked
    | Pong
)

CLIENT_MESSAGES: dict[str, type] = {
    cls.type: cls for cls in (Start, Text, Flush, Mark, End, Cancel, CheckVoice, CheckText, Ping)
}
SERVER_MESSAGES: dict[str, type] = {
    cls.type: cls
    for cls in (
        Ready,
        Started,
        Admitted,
        UtteranceEnd,
        MarkerReached,
        Done,
        Cancelled,
        Error,
        VoiceChecked,
        TextChecked,
        Pong,
    )
}

_TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
    "dict[str, str]": (dict,),
    "list[str]": (list,),
}


def encode(message: ClientMessage | ServerMessage) -> str:
    """A message as the JSON text frame that carries it.

    A ``ready`` with no ``idle_timeout`` leaves the field out: clients older than the field
    refuse unknown fields (``handshake.KEEPALIVE_SUBPROTOCOL``).
    """
    fields = asdict(message)
    if isinstance(message, Ready) and message.idle_timeout is None:
        del fields["idle_timeout"]
    return json.dumps({"type": message.type, **fields}, ensure_ascii=False)


def decode_client(text: str | bytes) -> ClientMessage:
    """A client's text frame as its message; ``ProtocolError`` when it is not one."""
    return _decode(text, CLIENT_MESSAGES)


def decode_server(text: str | bytes) -> ServerMessage:
    """A server's text frame as its message; ``ProtocolError`` when it is not one."""
    return _decode(text, SERVER_MESSAGES)


def _decode(text: str | bytes, kinds: dict[str, type]) -> Any:
    try:
        raw = json.loads(text)
    except (ValueError, UnicodeDecodeError) as e:
        raise ProtocolError(CloseCode.MALFORMED, f"not a JSON message: {e}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
        raise ProtocolError(CloseCode.MALFORMED, 'a message is a JSON object with a "type"')
    kind = kinds.get(raw.pop("type"))
    if kind is None:
        raise ProtocolError(
            CloseCode.UNKNOWN_TYPE, f"unknown message type; known: {', '.join(sorted(kinds))}"
        )
    values = {}
    for spec in fields(kind):
        if spec.name not in raw:
            if _required(spec):
                raise ProtocolError(
                    CloseCode.MALFORMED, f"{kind.type!r} needs the field {spec.name!r}"
                )
            continue
        value = raw.pop(spec.name)
        if not _fits(value, str(spec.type)):
            raise ProtocolError(
                CloseCode.MALFORMED, f"{kind.type!r} field {spec.name!r}: wrong type"
            )
        values[spec.name] = value
    if raw:
        raise ProtocolError(
            CloseCode.MALFORMED, f"{kind.type!r} has unknown fields: {', '.join(sorted(raw))}"
        )
    return kind(**values)


def _required(spec: Any) -> bool:
    return spec.default is MISSING and spec.default_factory is MISSING


def _fits(value: Any, annotation: str) -> bool:
    """Whether a JSON value has the annotated type (``X | None`` takes null)."""
    options = [part.strip() for part in annotation.split(" | ")]
    if value is None:
        return "None" in options
    for option in options:
        kinds = _TYPES.get(option)
        if kinds is None:
            continue
        if isinstance(value, bool) and option != "bool":
            # JSON true is no number.
            continue
        if isinstance(value, kinds):
            if option == "dict[str, str]":
                return all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
            if option == "list[str]":
                return all(isinstance(v, str) for v in value)
            return True
    return False


# -- audio frames -------------------------------------------------------------------------

_LENGTH = struct.Struct(">I")


@dataclass(frozen=True)
class WordTime:
    """A word of the caller's text in a frame: starts carry ``end`` None."""

    text: str
    index: int
    start: float
    session_start: float
    estimated: bool
    end: float | None = None
    session_end: float | None = None


@dataclass(frozen=True)
class AudioHeader:
    """What a binary audio frame says about its samples."""

    context: str
    utterance: int
    """The client's utterance number."""
    chunk: int
    frame: int
    last: bool = False
    """The last frame of an engine utterance (not of the client's)."""
    words: list[WordTime] = field(default_factory=list)
    """Words starting in this frame."""
    completed_words: list[WordTime] = field(default_factory=list)
    """Words ending by it."""


def pack_audio(header: AudioHeader, samples: bytes) -> bytes:
    """One binary frame: header length, JSON header, samples."""
    head = json.dumps(asdict(header), ensure_ascii=False, separators=(",", ":")).encode()
    return _LENGTH.pack(len(head)) + head + samples


def unpack_audio(data: bytes) -> tuple[AudioHeader, bytes]:
    """The header and samples of a binary frame; ``ProtocolError`` when it is not one."""
    try:
        (length,) = _LENGTH.unpack_from(data)
        raw = json.loads(data[4 : 4 + length])
        raw["words"] = [WordTime(**w) for w in raw.get("words", [])]
        raw["completed_words"] = [WordTime(**w) for w in raw.get("completed_words", [])]
        header = AudioHeader(**raw)
    except (struct.error, ValueError, TypeError) as e:
        raise ProtocolError(CloseCode.MALFORMED, f"not an audio frame: {e}") from None
    return header, data[4 + length :]


__all__ = [
    "ENCODINGS",
    "MULAW_RATE",
    "Admitted",
    "AudioHeader",
    "Cancel",
    "Cancelled",
    "CheckText",
    "CheckVoice",
    "ClientMessage",
    "CloseCode",
    "Done",
    "End",
    "Error",
    "ErrorCode",
    "Flush",
    "Mark",
    "MarkerReached",
    "Ping",
    "Pong",
    "ProtocolError",
    "Ready",
    "ServerMessage",
    "Start",
    "Started",
    "Text",
    "TextChecked",
    "UtteranceEnd",
    "VoiceChecked",
    "WordTime",
    "decode_client",
    "decode_server",
    "encode",
    "pack_audio",
    "unpack_audio",
]
