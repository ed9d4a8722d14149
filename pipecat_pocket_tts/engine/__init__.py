"""The PocketTTS engine: text in, 24 kHz audio out, on NumPy or CoreML (never torch).

``PocketTTS.load("english")`` loads a pack; ``synthesize``, ``stream`` and ``session`` make it
speak. Everything a caller needs is importable from here.
"""

from __future__ import annotations

from .channel import Marker
from .config import FRAME_SIZE, SAMPLE_RATE, config_names, get_config
from .errors import (
    BackendUnavailableError,
    CloneAudioError,
    CloningUnavailableError,
    ContextOverflowError,
    EmptyTextError,
    GatedRepoError,
    LexiconError,
    LoadOptionError,
    PackFilesMissingError,
    PocketTTSError,
    SessionClosedError,
    TokenizerFileError,
    UnknownBackendError,
    UnknownLanguageError,
    UnknownVoiceError,
    VoiceFileError,
    WeightsMismatchError,
)
from .options import LoadOptions
from .session import Session
from .synthesis import AudioFrame
from .tts import PocketTTS
from .voices import Voice

__all__ = [
    "FRAME_SIZE",
    "SAMPLE_RATE",
    "AudioFrame",
    "BackendUnavailableError",
    "CloneAudioError",
    "CloningUnavailableError",
    "ContextOverflowError",
    "EmptyTextError",
    "GatedRepoError",
    "LexiconError",
    "LoadOptionError",
    "LoadOptions",
    "Marker",
    "PackFilesMissingError",
    "PocketTTS",
    "PocketTTSError",
    "Session",
    "SessionClosedError",
    "TokenizerFileError",
    "UnknownBackendError",
    "UnknownLanguageError",
    "UnknownVoiceError",
    "Voice",
    "VoiceFileError",
    "WeightsMismatchError",
    "config_names",
    "get_config",
]
