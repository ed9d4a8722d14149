"""Exception types of the engine. Every message says what to do next."""

from __future__ import annotations


class PocketTTSError(Exception):
    """Base class of every error this package raises on purpose."""


class UnknownLanguageError(PocketTTSError, ValueError):
    """A language or model config name that no pack provides."""


class UnknownVoiceError(PocketTTSError, ValueError):
    """A voice name that the loaded pack does not ship."""


class UnknownBackendError(PocketTTSError, ValueError):
    """A backend name other than numpy, coreml or auto."""


class BackendUnavailableError(PocketTTSError, RuntimeError):
    """The requested backend cannot run on this machine (e.g. CoreML off Apple)."""


class PackFilesMissingError(PocketTTSError, FileNotFoundError):
    """Files of a language pack are neither on disk nor downloadable (offline, empty cache)."""


class HubUnreachableError(PackFilesMissingError):
    """Pack or voice files not in the HF cache while the hub cannot be reached (no network)."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        # Why the probe failed, such as "host:port: Connection refused".
        self.reason = reason


class ModelConfigError(PocketTTSError, ValueError):
    """An upstream model config (YAML path, URL or hf:// reference) that cannot be used."""


class GatedRepoError(PocketTTSError, PermissionError):
    """A Hugging Face repository needs accepted terms and a token."""


class WeightsMismatchError(PocketTTSError, ValueError):
    """A checkpoint whose keys or shapes do not match the model config."""


class VoiceFileError(PocketTTSError, ValueError):
    """A voice-state file that is corrupt, of another layout, or made for another pack."""


class CloneAudioError(PocketTTSError, ValueError):
    """Audio that cannot be used to clone a voice (too short, silent, unreadable)."""


class CloningUnavailableError(PocketTTSError, RuntimeError):
    """The loaded pack has no voice-cloning weights."""


class ContextOverflowError(PocketTTSError, RuntimeError):
    """A sequence ran past the FlowLM KV-cache capacity."""


class SessionClosedError(PocketTTSError, RuntimeError):
    """Text enqueued on a session that was cancelled or finished."""


class TokenizerFileError(PocketTTSError, ValueError):
    """A tokenizer file that is unreadable, of an unsupported kind, or made for another pack."""


class EmptyTextError(PocketTTSError, ValueError):
    """Text that is empty once prepared (blank, or only characters the model cannot say)."""


class BreakTagError(PocketTTSError, ValueError):
    """A ``<break/>`` pause tag that is malformed, negative or longer than 10 s."""


class LexiconError(PocketTTSError, ValueError):
    """A pronunciation lexicon that is not a mapping of non-blank strings to strings."""


class PrecisionUnavailableError(PocketTTSError, RuntimeError):
    """A weight precision whose kernels are not installed (e.g. int8 without numba)."""


class InvalidSettingError(PocketTTSError, ValueError):
    """A setting (temperature, seed, EOS threshold, normalize...) out of its documented range."""


class SettingTypeError(InvalidSettingError, TypeError):
    """A setting of the wrong type (``True`` or ``"0.5"`` as a temperature, 1.5 as a seed)."""


class LoadOptionError(PocketTTSError, ValueError):
    """A load option (``LoadOptions``) of the wrong type or out of range."""


class TimestampsFormatError(PocketTTSError, ValueError):
    """A word-timestamps file name whose extension is not .json, .srt or .vtt."""


class OutputFormatError(PocketTTSError, ValueError):
    """An audio output whose name or requested format is not one the writer produces."""


class ServerUnavailableError(PocketTTSError, ConnectionError):
    """The TTS server cannot be reached, or the connection to it was lost mid-reply."""


class ServerKeyRefusedError(PocketTTSError, PermissionError):
    """The TTS server refused the API key (a missing or wrong one): retrying will not help."""


class ServerConfigError(PocketTTSError, ValueError):
    """A TTS server setting that is unsafe or inconsistent (e.g. a public bind without a key)."""
