"""The HTTP response formats: engine frames (float32, 24 kHz) in, a format's bytes out.

The formats are OpenAI's ``response_format`` names; upstream's ``/tts`` answers in ``wav``.
``pcm`` (16-bit little-endian, no header: ``engine.FrameEncoder``'s) and ``wav`` (the same
after a header whose sizes say "unknown") are written here; ``mp3``, ``opus`` (in Ogg),
``aac`` (ADTS) and ``flac`` are encoded by FFmpeg's coders through PyAV (``av``, the
``server`` extra), one encoder per response, each packet written out as soon as the coder
gives it (a container that cannot seek is never rewritten), except FLAC: its STREAMINFO header
holds the length, which only the end knows (libsndfile, ``soundfile``'s reader, refuses an
unknown one), so a FLAC reply is written whole and sent when it is done. An encoder's bytes so
far are ``encode``'s result; ``finish`` flushes the coder.

A response of no samples is the format's empty audio: no bytes for pcm, mp3 and aac (a
sequence of no frames), a WAV header, a FLAC header, the Ogg Opus header pages.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ...engine import SAMPLE_RATE, FrameEncoder


@dataclass(frozen=True)
class ResponseFormat:
    """One format OpenAI's ``response_format`` names, and how it is made."""

    name: str
    media_type: str
    container: str | None = None
    """An FFmpeg muxer (None: written here)."""
    codec: str | None = None
    bit_rate: int | None = None
    codec_options: dict[str, str] = field(default_factory=dict)
    container_options: dict[str, str] = field(default_factory=dict)
    whole: bool = False
    """Written whole and sent at the end (its header rewritten with the length)."""


FORMATS: dict[str, ResponseFormat] = {
    f.name: f
    for f in (
        ResponseFormat(
            "mp3", "audio/mpeg", "mp3", "libmp3lame", 64_000,
            # LAME -q 5: a third less CPU than its default.
            {"compression_level": "5"},
            # Plain frames: nothing to rewrite.
            {"id3v2_version": "0", "write_xing": "0"},
        ),
        ResponseFormat("opus", "audio/ogg", "ogg", "libopus", 32_000),
        ResponseFormat("aac", "audio/aac", "adts", "aac", 64_000),
        ResponseFormat(
            "flac", "audio/flac", "flac", "flac", None, {"frame_size": "1920"}, whole=True
        ),
        ResponseFormat("wav", "audio/wav"),
        ResponseFormat("pcm", "audio/pcm"),
    )
}  # fmt: skip
"""The formats served, by OpenAI's names; mp3 is OpenAI's default."""


class ResponseEncoder(Protocol):
    """One response's encoder: samples in, the bytes ready so far out."""

    #: Whether ``encode`` costs enough to run off the event loop.
    compresses: bool

    def encode(self, samples: np.ndarray) -> bytes: ...

    def finish(self) -> bytes: ...

    def close(self) -> None: ...


def unsized_wav_header(sample_rate: int) -> bytes:
    """A 16-bit mono WAV header whose sizes say "unknown" (the response's length is not known)."""
    unknown = 0xFFFFFFFF
    fmt = struct.pack("<HHIIHH", 1, 1, sample_rate, sample_rate * 2, 2, 16)
    return (
        b"RIFF" + struct.pack("<I", unknown) + b"WAVE" + b"fmt " + struct.pack("<I", len(fmt))
        + fmt + b"data" + struct.pack("<I", unknown)
    )  # fmt: skip


class PcmEncoder:
    """16-bit PCM, after an unsized WAV header when ``wav``."""

    compresses = False

    def __init__(self, wav: bool = False) -> None:
        self._head = unsized_wav_header(SAMPLE_RATE) if wav else b""
        self._pcm = FrameEncoder(SAMPLE_RATE)

    def encode(self, samples: np.ndarray) -> bytes:
        head, self._head = self._head, b""
        return head + self._pcm.encode(samples)

    def finish(self) -> bytes:
        head, self._head = self._head, b""
        return head

    def close(self) -> None:
        pass


class _Sink(io.RawIOBase):
    """Where the muxer writes: bytes kept until taken (not seekable: never rewritten)."""

    def __init__(self) -> None:
        self._data = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self._data += data
        return len(data)

    def take(self) -> bytes:
        data = bytes(self._data)
        self._data.clear()
        return data


class CodecEncoder:
    """A compressed format through PyAV: one FFmpeg encoder and muxer for one response."""

    compresses = True

    def __init__(self, spec: ResponseFormat) -> None:
        import av

        self._av = av
        self._whole = spec.whole
        self._sink: _Sink | io.BytesIO = io.BytesIO() if spec.whole else _Sink()
        self._container: Any = av.open(
            self._sink, "w", format=spec.container, options=spec.container_options
        )
        track = self._container.add_stream(spec.codec, rate=SAMPLE_RATE, layout="mono")
        if spec.bit_rate:
            track.bit_rate = spec.bit_rate
        track.codec_context.options = dict(spec.codec_options)
        self._track = track
        # The header, even for no audio.
        self._container.start_encoding()
        self._pts = 0
        self._open = True

    def encode(self, samples: np.ndarray) -> bytes:
        """``samples`` [n] float32 → the packets the coder gives back (maybe none yet)."""
        if samples.size:
            frame = self._av.AudioFrame.from_ndarray(
                np.ascontiguousarray(samples, dtype=np.float32)[None, :],
                format="fltp",
                layout="mono",
            )
            frame.sample_rate = SAMPLE_RATE
            frame.pts = self._pts
            self._pts += samples.shape[0]
            self._mux(frame)
        return b"" if self._whole else self._take()

    def finish(self) -> bytes:
        """The coder's last packets and the container's trailer (a whole format: the file)."""
        self._mux(None)
        self.close()
        return self._take()

    def _take(self) -> bytes:
        sink = self._sink
        return sink.getvalue() if isinstance(sink, io.BytesIO) else sink.take()

    def close(self) -> None:
        """Write the trailer and free the coder (once; also for a response the client left)."""
        if self._open:
            self._open = False
            self._container.close()

    def _mux(self, frame: Any) -> None:
        for packet in self._track.encode(frame):
            self._container.mux(packet)


def open_encoder(name: str) -> ResponseEncoder:
    """A new encoder of one response.

    Args:
        name: The format, a key of ``FORMATS``.

    Returns:
        A PCM encoder (``pcm``, ``wav``) or a PyAV one (the compressed formats).
    """
    spec = FORMATS[name]
    if spec.codec is None:
        return PcmEncoder(wav=name == "wav")
    return CodecEncoder(spec)


__all__ = [
    "FORMATS",
    "CodecEncoder",
    "PcmEncoder",
    "ResponseEncoder",
    "ResponseFormat",
    "open_encoder",
    "unsized_wav_header",
]
