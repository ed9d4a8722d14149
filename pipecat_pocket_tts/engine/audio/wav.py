"""WAV files: 16-bit PCM written (whole files or raw), and 8–32-bit PCM or float WAV read.

Samples are float32 in [-1, 1]. Mono audio is ``[n]``; multichannel audio is ``[n, channels]``.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np

from ..errors import CloneAudioError
from . import output_file
from .pcm import to_pcm16

_PCM = 0x0001
_IEEE_FLOAT = 0x0003
_EXTENSIBLE = 0xFFFE


def write_wav(
    path: str | os.PathLike[str],
    samples: np.ndarray,
    sample_rate: int = 24_000,
    *,
    audio_format: str | None = None,
) -> Path:
    """Write mono float samples [n] as 16-bit PCM (clipped to ±1, rounded): WAV, or raw.

    ``path`` follows the rules of ``output_file`` (``"-"`` is stdout; devices and FIFOs are
    written through; a symlink's target is replaced; a regular file appears only when
    complete; its folder must exist). The format is ``audio_format`` ("wav" or "raw") or the
    one the extension names; another extension raises ``OutputFormatError``.
    """
    output = output_file.check_output(path)
    chosen = output_file.audio_format(output, audio_format)
    output_file.write_output(output, encode_pcm16(samples, sample_rate, chosen))
    return output.path


def encode_pcm16(samples: np.ndarray, sample_rate: int, audio_format: str = "wav") -> bytes:
    """Mono float samples [n] as the bytes of a 16-bit PCM WAV file, or raw (no header)."""
    audio = np.asarray(samples, dtype=np.float32)
    if audio.ndim == 2 and audio.shape[1] == 1:
        audio = audio[:, 0]
    if audio.ndim != 1:
        raise ValueError(f"write_wav takes mono samples [n], got shape {audio.shape}")
    if not np.isfinite(audio).all():
        raise ValueError("write_wav: samples hold NaN or infinite values")
    data = to_pcm16(audio).tobytes()
    if audio_format == "raw":
        return data
    header = _wav_header(num_channels=1, sample_rate=int(sample_rate), bits=16, data_size=len(data))
    return header + data


def _wav_header(*, num_channels: int, sample_rate: int, bits: int, data_size: int) -> bytes:
    block_align = num_channels * bits // 8
    fmt = struct.pack(
        "<HHIIHH", _PCM, num_channels, sample_rate, sample_rate * block_align, block_align, bits
    )
    return (
        b"RIFF"
        + struct.pack("<I", 4 + (8 + len(fmt)) + (8 + data_size))
        + b"WAVE"
        + b"fmt "
        + struct.pack("<I", len(fmt))
        + fmt
        + b"data"
        + struct.pack("<I", data_size)
    )


def read_wav(path: str | os.PathLike[str]) -> tuple[np.ndarray, int]:
    """Read a WAV file → (float32 samples, sample rate).

    Mono files give ``[n]``, others ``[n, channels]``. Supports 8/16/24/32-bit PCM and 32/64-bit
    IEEE float (also in WAVE_FORMAT_EXTENSIBLE). Raises ``CloneAudioError`` for anything else.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CloneAudioError(f"cannot read audio file {path}: {exc.strerror or exc}") from exc
    if len(raw) < 12 or raw[:4] not in (b"RIFF", b"RF64") or raw[8:12] != b"WAVE":
        raise CloneAudioError(
            f"{path} is not a WAV file (no RIFF/WAVE header); convert it to WAV "
            "(e.g. `ffmpeg -i input.mp3 output.wav`)"
        )
    fmt: tuple[int, int, int, int] | None = None
    data: bytes | None = None
    pos = 12
    while pos + 8 <= len(raw):
        chunk_id = raw[pos : pos + 4]
        size = struct.unpack_from("<I", raw, pos + 4)[0]
        body = raw[pos + 8 : pos + 8 + size]
        if chunk_id == b"fmt ":
            fmt = _parse_fmt(body, path)
        elif chunk_id == b"data":
            # A truncated last chunk is read as far as it goes.
            data = body
            if fmt is not None:
                break
        pos += 8 + size + (size & 1)
    if fmt is None or data is None:
        missing = "fmt" if fmt is None else "data"
        raise CloneAudioError(f"{path}: malformed WAV file (no '{missing}' chunk)")
    tag, channels, sample_rate, bits = fmt
    samples = _decode_samples(data, tag, bits, channels, path)
    return (samples[:, 0] if channels == 1 else samples), sample_rate


def _parse_fmt(body: bytes, path: Path) -> tuple[int, int, int, int]:
    if len(body) < 16:
        raise CloneAudioError(f"{path}: malformed WAV 'fmt' chunk")
    tag, channels, sample_rate, _, _, bits = struct.unpack_from("<HHIIHH", body)
    if tag == _EXTENSIBLE and len(body) >= 26:
        # The first two bytes of the subformat GUID.
        tag = struct.unpack_from("<H", body, 24)[0]
    if channels < 1 or sample_rate < 1:
        raise CloneAudioError(f"{path}: WAV with {channels} channels at {sample_rate} Hz")
    return tag, channels, sample_rate, bits


def _decode_samples(data: bytes, tag: int, bits: int, channels: int, path: Path) -> np.ndarray:
    """Interleaved WAV payload → float32 [frames, channels]."""
    width = bits // 8
    if bits % 8 or width == 0:
        raise CloneAudioError(f"{path}: unsupported WAV sample width of {bits} bits")
    frames = len(data) // (width * channels)
    data = data[: frames * width * channels]
    if tag == _IEEE_FLOAT and bits in (32, 64):
        out = np.frombuffer(data, dtype="<f4" if bits == 32 else "<f8").astype(np.float32)
    elif tag == _PCM and bits == 8:
        out = (np.frombuffer(data, dtype=np.uint8).astype(np.float32) - 128.0) / 128.0
    elif tag == _PCM and bits == 16:
        out = np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0
    elif tag == _PCM and bits == 24:
        triplets = np.frombuffer(data, dtype=np.uint8).reshape(-1, 3).astype(np.int32)
        values = triplets[:, 0] | (triplets[:, 1] << 8) | (triplets[:, 2] << 16)
        values = np.where(values >= 1 << 23, values - (1 << 24), values)
        out = values.astype(np.float32) / float(1 << 23)
    elif tag == _PCM and bits == 32:
        out = (np.frombuffer(data, dtype="<i4").astype(np.float64) / float(1 << 31)).astype(
            np.float32
        )
    else:
        kind = {_PCM: "PCM", _IEEE_FLOAT: "float"}.get(tag, f"format tag {tag:#06x}")
        raise CloneAudioError(
            f"{path}: unsupported WAV encoding ({kind}, {bits} bits); use 8/16/24/32-bit PCM or "
            "32/64-bit float WAV"
        )
    return out.reshape(frames, channels)
