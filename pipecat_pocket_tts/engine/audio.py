"""Audio helpers: WAV files, channel mixing, resampling, fades and the output polish filter.

Samples are float32 in [-1, 1]. Mono audio is ``[n]``; multichannel audio is ``[n, channels]``.
Nothing here imports scipy: the filters run as block-wise linear recurrences in NumPy.
"""

from __future__ import annotations

import math
import os
import struct
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from . import output_file
from .errors import CloneAudioError

_PCM = 0x0001
_IEEE_FLOAT = 0x0003
_EXTENSIBLE = 0xFFFE

# -- WAV -------------------------------------------------------------------------------------


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


def to_pcm16(samples: np.ndarray) -> np.ndarray:
    """float samples [n] → little-endian int16 [n] (clipped to ±1, rounded half to even)."""
    return np.rint(np.clip(samples, -1.0, 1.0) * 32767.0).astype("<i2")


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
            data = body  # a truncated last chunk is read as far as it goes
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
        tag = struct.unpack_from("<H", body, 24)[0]  # first two bytes of the subformat GUID
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


# -- channels, rates, fades --------------------------------------------------------------------


def to_mono(samples: np.ndarray) -> np.ndarray:
    """[n], [n, channels] or [channels, n] → [n] float32, the mean of the channels.

    In 2-D input the shorter axis is the channel axis (a recording has more frames than
    channels); other shapes raise ``CloneAudioError`` (a ``ValueError``).
    """
    audio = np.asarray(samples, dtype=np.float32)
    if audio.ndim == 1:
        return audio
    if audio.ndim == 2:
        channel_axis = 1 if audio.shape[1] <= audio.shape[0] else 0
        return audio.mean(axis=channel_axis, dtype=np.float32)
    raise CloneAudioError(
        f"audio samples must be [n], [n, channels] or [channels, n], got shape {audio.shape}"
    )


def resample(samples: np.ndarray, from_sr: int, to_sr: int) -> np.ndarray:
    """Resample [n] or [n, channels] float audio with soxr (high quality) → float32."""
    audio = np.asarray(samples, dtype=np.float32)
    if from_sr <= 0 or to_sr <= 0:
        raise ValueError(f"sample rates must be positive, got {from_sr} → {to_sr}")
    if from_sr == to_sr or audio.shape[0] == 0:
        return audio.copy()
    import soxr

    return np.asarray(soxr.resample(audio, from_sr, to_sr, quality="HQ"), dtype=np.float32)


def fade_in(samples: np.ndarray, n: int) -> np.ndarray:
    """A copy of ``samples`` [n_samples] with a linear fade-in over the first ``n`` samples.

    Gains are 0, 1/n, …, (n-1)/n, so the very first sample is silent.
    """
    audio = np.array(samples, dtype=np.float32)
    count = min(max(int(n), 0), audio.shape[0])
    if count:
        ramp = np.arange(count, dtype=np.float32) / np.float32(n)
        audio[:count] *= ramp if audio.ndim == 1 else ramp[:, None]
    return audio


# -- post-processing -------------------------------------------------------------------------

HIGH_PASS_HZ = 80.0
SHELF_HZ = 6_000.0
SHELF_GAIN_DB = -3.0
SHELF_Q = 0.707


def post_process(samples: np.ndarray, sample_rate: int = 24_000) -> np.ndarray:
    """The buffered-output polish of FluidAudio's PocketTTS: [n] float → [n] float32.

    1. One-pole high-pass at 80 Hz (DC and rumble): y[i] = α(y[i-1] + x[i] - x[i-1]) for
       i ≥ 1 with y[0] = 0 as the starting state; the first sample passes unchanged.
    2. RBJ high shelf at 6 kHz, -3 dB, Q 0.707 (tames hiss and sibilance), zero initial state.
    """
    x = np.asarray(samples, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"post_process takes mono samples [n], got shape {x.shape}")
    if x.size == 0:
        return x.astype(np.float32)
    high_passed = _high_pass(x, sample_rate)
    b, a = high_shelf_coefficients(sample_rate)
    return _biquad(high_passed, b, a).astype(np.float32)


def _high_pass(x: np.ndarray, sample_rate: int) -> np.ndarray:
    rc = 1.0 / (2.0 * math.pi * HIGH_PASS_HZ)
    dt = 1.0 / sample_rate
    alpha = rc / (rc + dt)
    drive = np.zeros_like(x)
    drive[1:] = alpha * np.diff(x)
    y = _all_pole(drive, (-alpha,))
    y[0] = x[0]
    return y


def high_shelf_coefficients(
    sample_rate: int,
    frequency: float = SHELF_HZ,
    gain_db: float = SHELF_GAIN_DB,
    q: float = SHELF_Q,
) -> tuple[tuple[float, float, float], tuple[float, float]]:
    """RBJ cookbook high-shelf biquad, normalized: ((b0, b1, b2), (a1, a2))."""
    amp = 10.0 ** (gain_db / 40.0)
    w0 = 2.0 * math.pi * frequency / sample_rate
    cos_w0 = math.cos(w0)
    alpha = math.sin(w0) / (2.0 * q)
    root = 2.0 * math.sqrt(amp) * alpha
    b0 = amp * ((amp + 1) + (amp - 1) * cos_w0 + root)
    b1 = -2.0 * amp * ((amp - 1) + (amp + 1) * cos_w0)
    b2 = amp * ((amp + 1) + (amp - 1) * cos_w0 - root)
    a0 = (amp + 1) - (amp - 1) * cos_w0 + root
    a1 = 2.0 * ((amp - 1) - (amp + 1) * cos_w0)
    a2 = (amp + 1) - (amp - 1) * cos_w0 - root
    return (b0 / a0, b1 / a0, b2 / a0), (a1 / a0, a2 / a0)


def _biquad(x: np.ndarray, b: Sequence[float], a: Sequence[float]) -> np.ndarray:
    """Biquad with zero initial state (same output as Direct Form II transposed)."""
    drive = b[0] * x
    drive[1:] += b[1] * x[:-1]
    drive[2:] += b[2] * x[:-2]
    return _all_pole(drive, a)


_BLOCK = 128


def _all_pole(v: np.ndarray, a: Sequence[float], block: int = _BLOCK) -> np.ndarray:
    """y[i] = v[i] - Σ_k a[k]·y[i-1-k] with zero initial state; v float64 [n] → [n].

    Vectorized by blocks: inside a block the output is (zero-state response, a Toeplitz
    product) + (response to the state entering the block); only the p-value state is carried
    from block to block in a short Python loop (n / block iterations).
    """
    order = len(a)
    n = v.shape[0]
    blocks = -(-n // block)
    padded = np.zeros(blocks * block)
    padded[:n] = v
    drive = padded.reshape(blocks, block)

    toeplitz, from_state = _block_matrices(tuple(float(c) for c in a), block)
    zero_state = drive @ toeplitz.T  # [blocks, block]

    # State entering each block: (y[-1], y[-2], …) of the previous block's output. A scalar
    # recursion over blocks, in plain floats (numpy call overhead dominates at this size).
    last = block - 1 - np.arange(order)
    ends = zero_state[:, last].tolist()  # zero-state (y[B-1], y[B-2], …) of each block
    carry = from_state[last].tolist()  # [order][order]: how an entering state reaches them
    state = [0.0] * order
    entering = []
    for end in ends:
        entering.append(state)
        state = [
            e + sum(c * s for c, s in zip(row, state, strict=True))
            for e, row in zip(end, carry, strict=True)
        ]
    states = np.array(entering)  # [blocks, order]
    return (zero_state + states @ from_state.T).reshape(-1)[:n]


@lru_cache(maxsize=16)
def _block_matrices(a: tuple[float, ...], block: int) -> tuple[np.ndarray, np.ndarray]:
    """Zero-state response matrix [block, block] (lower-triangular Toeplitz of the impulse
    response) and responses to unit initial states [block, order]. Read-only, cached."""
    order = len(a)

    def run(drive0: float, history: list[float]) -> np.ndarray:
        past = list(history)  # past[k] = y[i-1-k]
        out = np.empty(block)
        for i in range(block):
            y = (drive0 if i == 0 else 0.0) - sum(c * p for c, p in zip(a, past, strict=True))
            out[i] = y
            past = [y, *past[:-1]]
        return out

    impulse = run(1.0, [0.0] * order)
    from_state = np.stack(
        [run(0.0, [1.0 if j == k else 0.0 for j in range(order)]) for k in range(order)], axis=1
    )
    index = np.arange(block)
    lag = index[:, None] - index[None, :]
    toeplitz = np.where(lag >= 0, impulse[np.clip(lag, 0, None)], 0.0)
    toeplitz.flags.writeable = False
    from_state.flags.writeable = False
    return toeplitz, from_state
