"""Voice cloning: a recording of a speaker → a ``Voice`` (a prefilled FlowLM state).

The path, stage by stage, and what each step guarantees:

    file or samples ─▶ float32, mono (mean of channels) ─▶ truncated to the prompt limit
      ─▶ 24 kHz (soxr) ─▶ end on a pause ─▶ zero-padded to whole frames [A]
      ─▶ backend.encode → conditioning [T, d_model]
      ─▶ backend.prefill([bos_before_voice?, conditioning…]) ─▶ VoiceKV ─▶ Voice

"End on a pause" prepares the prompt as upstream pocket-tts does: the signal is cut after its
last 20 ms window that is within 35 dB of the loudest window, its last 20 ms are faded out
linearly, and 80 ms of zeros are appended. A prompt that stops mid-word makes the model go on
with that word; one that ends on a long silence delays every answer.

Limits (checked here, before any model work):

* at least ``MIN_PROMPT_SECONDS`` (1 s) of input and a loudest 20 ms window above
  ``SILENCE_DBFS`` (−60 dBFS RMS), else ``CloneAudioError``;
* at most ``MAX_PROMPT_SECONDS`` (30 s) of input: longer recordings keep their first 30 s and
  emit a ``CloneAudioTruncatedWarning``. 30 s is what upstream's CLI and server clone
  (``truncate=True``); the prompt is then at most 376 frames, i.e. 377 positions with
  ``bos_before_voice``, within the NumPy backend's default KV capacity (660). A backend with a
  smaller prompt window declares it as ``max_voice_frames`` (e.g. 125 for CoreML's 10 s
  encoder); the input is then cut so the prepared prompt, pause included, fits that window.

The code is backend-agnostic: it needs ``encode``, ``bos_before_voice``, ``new_flow_state``,
``prefill`` and ``voice_from_flow_state`` of ``backends.base.Backend``, and reads the
backend's declared ``capabilities`` (why cloning is off, ``max_voice_frames``).
"""

from __future__ import annotations

import math
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from ..audio.signal import resample, to_mono
from ..audio.wav import read_wav
from ..backends.base import Backend, VoiceKV
from ..errors import CloneAudioError, CloningUnavailableError
from ..model.config import FRAME_SIZE, SAMPLE_RATE
from .voice import Voice

#: Shortest input accepted, in seconds.
MIN_PROMPT_SECONDS = 1.0
#: Longest input used, in seconds (upstream's ``truncate=True`` limit); the rest is dropped.
MAX_PROMPT_SECONDS = 30.0
#: Input whose loudest 20 ms window is quieter than this (RMS, dB full scale) is silent.
SILENCE_DBFS = -60.0

#: ``end_on_pause`` parameters (upstream's defaults).
LEVEL_WINDOW_SECONDS = 0.02
PAUSE_SECONDS = 0.08
FADE_SECONDS = 0.02
TRAILING_FLOOR_DB = 35.0

#: File suffixes read without ``soundfile``.
WAV_SUFFIXES = (".wav", ".wave")
#: Suffixes of recordings ``clone_voice`` reads (all but WAV through ``soundfile``).
AUDIO_SUFFIXES = (*WAV_SUFFIXES, ".flac", ".ogg", ".oga", ".opus", ".mp3", ".aiff", ".aif")

AudioSource = str | os.PathLike[str] | np.ndarray | tuple[Any, int | float]


class CloneAudioTruncatedWarning(UserWarning):
    """A clone recording longer than the model's prompt limit was cut to its start."""


# -- the whole path ----------------------------------------------------------------------------


def clone_voice(
    backend: Backend,
    source: AudioSource,
    *,
    sample_rate: int | float | None = None,
    config_name: str | None = None,
) -> Voice:
    """Clone the voice of a recording into a ``Voice`` for ``backend``'s model.

    ``source``: a path to an audio file (WAV always; FLAC, OGG, MP3… with the optional
    ``soundfile`` package), samples ([n], [n, channels] or [channels, n]; float in [-1, 1] or
    int PCM) with ``sample_rate``, or a ``(samples, sample_rate)`` tuple. ``config_name``
    (default: the backend's config name) is recorded in the voice so that using it with
    another pack is detected.

    Raises ``CloningUnavailableError`` when the loaded weights cannot clone, and
    ``CloneAudioError`` for unreadable, too short or silent audio.
    """
    require_cloning(backend)
    samples, rate, label = load_source(source, sample_rate)
    mimi = backend.config.mimi
    prompt = prepare_prompt(
        samples,
        rate,
        max_frames=backend.capabilities.max_voice_frames,
        model_rate=mimi.sample_rate,
        frame_size=mimi.frame_size,
    )
    # Shape [T, d_model].
    conditioning = backend.encode(prompt)
    kv = prefill_voice(backend, conditioning)
    name = config_name or backend.config.name
    return Voice(kv=kv, config_name=name, source=f"cloned from {label}")


def require_cloning(backend: Backend) -> None:
    """Raise ``CloningUnavailableError`` with the backend's reason if it cannot clone."""
    reason = backend.capabilities.cloning_unavailable_reason
    if reason is not None:
        raise CloningUnavailableError(reason)


def prefill_voice(backend: Backend, conditioning: np.ndarray) -> VoiceKV:
    """Voice conditioning [T, d_model] → the K/V after prefilling [bos_before_voice?, frames…]."""
    frames = np.asarray(conditioning, dtype=np.float32)
    parts = [frames]
    if backend.config.flow_lm.insert_bos_before_voice:
        bos = backend.bos_before_voice()
        if bos is None:
            raise CloningUnavailableError(
                f"model {backend.config.name!r} puts bos_before_voice before a voice, but its "
                "weights lack it: re-download the pack"
            )
        parts.insert(0, np.asarray(bos, dtype=np.float32).reshape(1, -1))
    state = backend.new_flow_state()
    # One call, as upstream does.
    backend.prefill(state, np.concatenate(parts, axis=0))
    return backend.voice_from_flow_state(state)


# -- reading ------------------------------------------------------------------------------------


def load_source(
    source: AudioSource, sample_rate: int | float | None = None
) -> tuple[np.ndarray, float, str]:
    """Any accepted source → (float32 mono samples [n], sample rate, a label for messages)."""
    if isinstance(source, tuple):
        if len(source) != 2:
            raise TypeError("a tuple source must be (samples, sample_rate)")
        if sample_rate is not None:
            raise TypeError("give the sample rate either in the tuple or as sample_rate=, not both")
        source, sample_rate = source
    if isinstance(source, (str, os.PathLike)):
        if sample_rate is not None:
            raise TypeError(
                "sample_rate= is for raw samples; an audio file carries its own sample rate"
            )
        path = Path(source).expanduser()
        samples, rate = read_audio(path)
        label = path.name
    elif isinstance(source, (bytes, bytearray)):
        raise TypeError("pass audio as a file path or as samples with sample_rate=, not bytes")
    else:
        if sample_rate is None:
            raise TypeError(
                "raw samples need their sample rate: clone_voice(samples, sample_rate=16000)"
            )
        samples, rate = source, sample_rate
        label = "samples"
    rate = _check_rate(rate)
    return to_mono(_as_float(samples)), rate, label


def is_audio_path(value: object) -> bool:
    """True for a str/PathLike naming a recording by its suffix (``AUDIO_SUFFIXES``)."""
    if not isinstance(value, (str, os.PathLike)):
        return False
    return Path(value).suffix.lower() in AUDIO_SUFFIXES


def read_audio(path: Path) -> tuple[np.ndarray, int]:
    """An audio file → (samples [n] or [n, channels], sample rate). Errors: CloneAudioError.

    WAV files are read without extra packages; other formats need ``soundfile``.
    """
    if not path.is_file():
        raise CloneAudioError(
            f"audio file not found: {path}. Pass the path of a recording of the voice to clone."
        )
    if path.suffix.lower() == ".safetensors":
        raise CloneAudioError(
            f"{path.name} is a saved voice, not a recording: use it directly as the voice "
            "(voice=path, or --voice on the command line) instead of cloning it"
        )
    if _looks_like_wav(path):
        try:
            return read_wav(path)
        except CloneAudioError as wav_error:
            if _soundfile() is None:
                raise
            try:
                return _read_with_soundfile(path)
            except CloneAudioError:
                raise wav_error from None
    if _soundfile() is None:
        raise CloneAudioError(
            f"{path.name}: reading {path.suffix or 'this'} audio needs the optional 'soundfile' "
            "package: pip install 'pipecat-pocket-tts[audio]' (or convert the file to WAV, e.g. "
            f"ffmpeg -i {path.name} speaker.wav)"
        )
    return _read_with_soundfile(path)


def _looks_like_wav(path: Path) -> bool:
    if path.suffix.lower() in WAV_SUFFIXES:
        return True
    try:
        with open(path, "rb") as f:
            head = f.read(12)
    except OSError as exc:
        raise CloneAudioError(f"cannot read audio file {path}: {exc.strerror or exc}") from exc
    return head[:4] in (b"RIFF", b"RF64") and head[8:12] == b"WAVE"


def _soundfile() -> Any | None:
    try:
        import soundfile
    except (ImportError, OSError):
        # OSError: the libsndfile library itself is missing.
        return None
    return soundfile


def _read_with_soundfile(path: Path) -> tuple[np.ndarray, int]:
    soundfile = _soundfile()
    assert soundfile is not None
    try:
        data, rate = soundfile.read(str(path), dtype="float32", always_2d=True)
    except Exception as exc:
        # Libsndfile reports every failure as an error type of its own.
        reason = str(exc).rstrip(". ")
        raise CloneAudioError(
            f"cannot decode audio file {path.name}: {reason}. Use a WAV, FLAC, OGG or MP3 file."
        ) from exc
    return data, int(rate)


def _check_rate(rate: Any) -> float:
    try:
        value = float(rate)
    except (TypeError, ValueError):
        raise TypeError(f"sample_rate must be a number, got {rate!r}") from None
    if not math.isfinite(value) or value < 1000.0:
        raise CloneAudioError(f"sample rate {rate!r} Hz is not usable (need at least 1000 Hz)")
    return value


def _as_float(samples: Any) -> np.ndarray:
    """Samples of any supported dtype → float32 in [-1, 1] (int PCM scaled)."""
    array = np.asarray(samples)
    if array.dtype == np.uint8:
        return (array.astype(np.float32) - 128.0) / 128.0
    if np.issubdtype(array.dtype, np.signedinteger):
        scale = float(2 ** (8 * array.dtype.itemsize - 1))
        return (array.astype(np.float64) / scale).astype(np.float32)
    if np.issubdtype(array.dtype, np.floating):
        return array.astype(np.float32, copy=False)
    raise CloneAudioError(
        f"audio samples of dtype {array.dtype} are not supported: use float (in [-1, 1]) or "
        "int16/int32 PCM"
    )


# -- preparing the prompt -----------------------------------------------------------------------


def prepare_prompt(
    samples: np.ndarray,
    sample_rate: float,
    *,
    max_frames: int | None = None,
    model_rate: int = SAMPLE_RATE,
    frame_size: int = FRAME_SIZE,
) -> np.ndarray:
    """Mono samples [n] at ``sample_rate`` → the encoder input [A] at 24 kHz, A = k·frame_size.

    Checks the length and loudness, truncates long input (with a warning), resamples with soxr,
    ends the prompt on a pause and zero-pads to whole frames. ``max_frames`` caps the prepared
    prompt (a backend's encoder window); None keeps upstream's 30 s input limit only.
    """
    audio = np.asarray(samples, dtype=np.float32)
    if audio.ndim != 1:
        raise CloneAudioError(f"expected mono samples [n], got shape {audio.shape}")
    if not np.all(np.isfinite(audio)):
        raise CloneAudioError("the audio contains NaN or infinite samples: clean it first")
    seconds = audio.shape[0] / sample_rate
    if seconds < MIN_PROMPT_SECONDS:
        raise CloneAudioError(
            f"the recording is too short to clone a voice: {seconds:.2f} s, at least "
            f"{MIN_PROMPT_SECONDS:g} s needed (5–15 s of clean speech works best)"
        )

    # In model-rate samples.
    limit = round(MAX_PROMPT_SECONDS * model_rate)
    if max_frames is not None:
        pause = round(PAUSE_SECONDS * model_rate)
        limit = min(limit, max_frames * frame_size - pause)
    keep = math.floor(limit * sample_rate / model_rate)
    if audio.shape[0] > keep:
        warnings.warn(
            f"the clone recording lasts {seconds:.1f} s; only its first "
            f"{keep / sample_rate:.2f} s are used (the model's voice-prompt limit)",
            CloneAudioTruncatedWarning,
            stacklevel=3,
        )
        audio = audio[:keep]

    if sample_rate != model_rate:
        audio = resample(audio, _rate_arg(sample_rate), model_rate)[:limit]

    window = max(1, round(LEVEL_WINDOW_SECONDS * model_rate))
    loudest = float(np.max(_window_rms(audio, window), initial=0.0))
    if 20.0 * math.log10(loudest + 1e-12) < SILENCE_DBFS:
        raise CloneAudioError(
            f"the recording is silent (loudest 20 ms at {20 * math.log10(loudest + 1e-12):.0f} "
            f"dBFS, below {SILENCE_DBFS:g} dBFS): record the speaker closer to the microphone "
            "or check the input device"
        )
    return pad_to_frames(end_on_pause(audio, model_rate), frame_size)


def _rate_arg(rate: float) -> int | float:
    return int(rate) if float(rate).is_integer() else rate


def _window_rms(audio: np.ndarray, window: int) -> np.ndarray:
    """RMS of consecutive whole windows: [n] → [n // window] float64."""
    count = audio.shape[0] // window
    frames = audio[: count * window].astype(np.float64).reshape(count, window)
    return np.sqrt(np.mean(frames * frames, axis=1))


def end_on_pause(audio: np.ndarray, sample_rate: int) -> np.ndarray:
    """Make a prompt [n] end on exactly ``PAUSE_SECONDS`` of silence → [m] float32.

    Drops the trailing 20 ms windows more than ``TRAILING_FLOOR_DB`` below the loudest one,
    fades the last ``FADE_SECONDS`` of the rest out (gains 1 … 0) and appends the pause.
    Audio shorter than one window is returned unchanged (as upstream does).
    """
    audio = np.asarray(audio, dtype=np.float32)
    window = max(1, round(LEVEL_WINDOW_SECONDS * sample_rate))
    levels = _window_rms(audio, window)
    if levels.size == 0:
        return audio.copy()
    level_db = 20.0 * np.log10(levels + 1e-12)
    loud = np.flatnonzero(level_db > level_db.max() - TRAILING_FLOOR_DB)
    end = (int(loud[-1]) + 1) * window
    kept = audio[:end].copy()
    fade = min(round(FADE_SECONDS * sample_rate), end)
    if fade:
        kept[end - fade :] *= np.linspace(1.0, 0.0, fade, dtype=np.float32)
    pause = np.zeros(round(PAUSE_SECONDS * sample_rate), dtype=np.float32)
    return np.concatenate([kept, pause])


def pad_to_frames(audio: np.ndarray, frame_size: int) -> np.ndarray:
    """Right-pad [n] with zeros to a whole number of frames → [ceil(n / frame_size)·frame_size]."""
    frames = -(-audio.shape[0] // frame_size)
    out = np.zeros(frames * frame_size, dtype=np.float32)
    out[: audio.shape[0]] = audio
    return out


__all__ = [
    "AUDIO_SUFFIXES",
    "MAX_PROMPT_SECONDS",
    "MIN_PROMPT_SECONDS",
    "SILENCE_DBFS",
    "CloneAudioTruncatedWarning",
    "clone_voice",
    "end_on_pause",
    "is_audio_path",
    "load_source",
    "pad_to_frames",
    "prefill_voice",
    "prepare_prompt",
    "read_audio",
    "require_cloning",
]
