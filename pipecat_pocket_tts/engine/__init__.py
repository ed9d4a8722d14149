"""The PocketTTS engine: text in, 24 kHz audio out, on NumPy or CoreML (never torch).

``PocketTTS.load("english")`` loads a pack; ``synthesize``, ``stream`` and ``session`` make it
speak. Everything a caller needs is importable from here: the service, the client and the
server import the engine only from this module, ``engine.contract`` and ``engine.errors``
(``tests/test_import_graph.py`` holds them to it).
"""

from __future__ import annotations

from .audio.pcm import SAMPLE_FORMATS, FrameEncoder, mulaw, to_pcm16
from .audio.wav import read_wav, write_wav
from .backends import concrete_options, resolve_backend_name
from .checks import check_lexicon, check_normalize, check_seed, check_speed, check_temperature
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
    ModelConfigError,
    OutputFormatError,
    PackFilesMissingError,
    PocketTTSError,
    PrecisionUnavailableError,
    ServerConfigError,
    ServerKeyRefusedError,
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
from .model.config import FRAME_RATE, FRAME_SECONDS, FRAME_SIZE, SAMPLE_RATE, get_config
from .model.config_reference import is_config_reference, served_name
from .model.config_registry import config_names
from .model.languages import LANGUAGES, find_language, pack_name, text_variant
from .model.options import LoadOptions
from .model.upstream_config import config_language_code
from .runtime.channel import ChannelOutput, FrameChannel, Marker
from .runtime.slots import AdmissionWait
from .sentence_queue import SentenceQueue
from .session import Session
from .timing.subtitles import write_timestamps
from .timing.word_timing import Word, WordStart
from .tts import PocketTTS, TimedAudio
from .utterance import UtteranceOptions
from .voices.cloning import AUDIO_SUFFIXES
from .voices.voice import Voice

__all__ = [
    "AUDIO_SUFFIXES",
    "FRAME_RATE",
    "FRAME_SECONDS",
    "FRAME_SIZE",
    "LANGUAGES",
    "SAMPLE_FORMATS",
    "SAMPLE_RATE",
    "AdmissionWait",
    "AudioFrame",
    "BackendUnavailableError",
    "BreakTagError",
    "ChannelOutput",
    "CloneAudioError",
    "CloningUnavailableError",
    "ContextOverflowError",
    "EmptyTextError",
    "FrameChannel",
    "FrameEncoder",
    "GatedRepoError",
    "HubUnreachableError",
    "LexiconError",
    "LoadOptionError",
    "LoadOptions",
    "Marker",
    "ModelConfigError",
    "OutputFormatError",
    "PackFilesMissingError",
    "PocketTTS",
    "PocketTTSError",
    "PrecisionUnavailableError",
    "SentenceQueue",
    "ServerConfigError",
    "ServerKeyRefusedError",
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
    "check_lexicon",
    "check_normalize",
    "check_seed",
    "check_speed",
    "check_temperature",
    "concrete_options",
    "config_language_code",
    "config_names",
    "find_language",
    "get_config",
    "is_config_reference",
    "mulaw",
    "pack_name",
    "read_wav",
    "resolve_backend_name",
    "served_name",
    "text_variant",
    "to_pcm16",
    "write_timestamps",
    "write_wav",
]
