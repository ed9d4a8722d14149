"""The PocketTTS engine: text in, 24 kHz audio out, on NumPy or CoreML (never torch).

``PocketTTS.load("english")`` loads a pack; ``synthesize``, ``stream`` and ``session`` make it
speak. Everything a caller needs is importable from here.
"""

from __future__ import annotations

from .errors import (
    BackendUnavailableError,
    BreakTagError,
    CloneAudioError,
    CloningUnavailableError,
    ContextOverflowError,
    EmptyTextError,
    GatedRepoError,
    HubUnreachableError,
    LexiconError,
    LoadOptionError,
    OutputFormatError,
    PackFilesMissingError,
    PocketTTSError,
    PrecisionUnavailableError,
    ServerConfigError,
    ServerUnavailableError,
    SessionClosedError,
    TimestampsFormatError,
    TokenizerFileError,
    UnknownBackendError,
    UnknownLanguageError,
    UnknownVoiceError,
    VoiceFileError,
    WeightsMismatchError,
)
from .frames import AudioFrame
from .model.config import FRAME_SIZE, SAMPLE_RATE, get_config
from .model.config_registry import config_names
from .model.options import LoadOptions
from .runtime.channel import Marker
from .runtime.scheduler import AdmissionWait
from .session import Session
from .timing.subtitles import write_timestamps
from .timing.word_timing import Word, WordStart
from .tts import PocketTTS, TimedAudio
from .utterance import UtteranceOptions
from .voices.voice import Voice

__all__ = [
    "FRAME_SIZE",
    "SAMPLE_RATE",
    "AdmissionWait",
    "AudioFrame",
    "BackendUnavailableError",
    "BreakTagError",
    "CloneAudioError",
    "CloningUnavailableError",
    "ContextOverflowError",
    "EmptyTextError",
    "GatedRepoError",
    "HubUnreachableError",
    "LexiconError",
    "LoadOptionError",
    "LoadOptions",
    "Marker",
    "OutputFormatError",
    "PackFilesMissingError",
    "PocketTTS",
    "PocketTTSError",
    "PrecisionUnavailableError",
    "ServerConfigError",
    "ServerUnavailableError",
    "Session",
    "SessionClosedError",
    "TimedAudio",
    "TimestampsFormatError",
    "TokenizerFileError",
    "UnknownBackendError",
    "UnknownLanguageError",
    "UnknownVoiceError",
    "UtteranceOptions",
    "Voice",
    "VoiceFileError",
    "WeightsMismatchError",
    "Word",
    "WordStart",
    "config_names",
    "get_config",
    "write_timestamps",
]
