"""Which voice a caller means: the one parser of every form ``voice=`` takes.

    "alba"                                     a voice the pack ships
    "voices/me.safetensors", Path(...)         a saved voice state (upstream layout)
    "me.wav", "take2.flac"                     a recording, cloned on first use
    "hf://kyutai/tts-voices/alba-mackenna/casual.wav"   a hub file (recording or voice state),
                                               as Pipecat's built-in PocketTTSService takes it:
                                               downloaded through huggingface_hub into its cache
    Voice(...)                                 a voice object (``clone_voice``, ``Voice.load``)

``parse_voice`` decides, cheaply (a file check; no download, no model work), and raises the
named error saying what to do: ``UnknownVoiceError`` (a name the pack lacks),
``VoiceFileError`` (a missing voice-state file, a malformed ``hf://`` URL), ``CloneAudioError``
(a missing recording). ``PocketTTS.voice_state`` loads what it returns.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import CloneAudioError, UnknownVoiceError, VoiceFileError
from ..model.config import HubFile
from ..model.packs import PackFiles, hub_download
from .cloning import is_audio_path
from .voice import Voice

HUB_PREFIX = "hf://"
VOICE_STATE_SUFFIX = ".safetensors"


@dataclass(frozen=True)
class VoiceSource:
    """A parsed voice: exactly one of ``name``, ``path``, ``hub`` or ``voice`` is set."""

    # One of "pack", "file", "recording", "hub" or "object".
    kind: str
    name: str | None = None
    path: Path | None = None
    hub: HubFile | None = None
    voice: Voice | None = None

    @property
    def is_recording(self) -> bool:
        """Whether loading it means cloning (a local or hub audio file)."""
        target = self.path if self.path is not None else self.hub.path if self.hub else None
        return target is not None and is_audio_path(target)


def parse_voice(voice: object, pack: PackFiles) -> VoiceSource:
    """What ``voice`` means for ``pack`` (see the module docstring); raises the named error."""
    if isinstance(voice, Voice):
        return VoiceSource("object", voice=voice)
    if isinstance(voice, str) and voice.startswith(HUB_PREFIX):
        return VoiceSource("hub", hub=parse_hub_voice(voice))
    if isinstance(voice, str) and voice in pack.voice_names:
        return VoiceSource("pack", name=voice)
    if isinstance(voice, os.PathLike) or (
        isinstance(voice, str)
        and (voice.endswith(VOICE_STATE_SUFFIX) or os.sep in voice or is_audio_path(voice))
    ):
        path = Path(voice).expanduser().resolve()
        if is_audio_path(path):
            if not path.is_file():
                raise CloneAudioError(
                    f"recording not found: {path}. Pass an existing audio file to clone, a pack "
                    "voice name or a voice-state .safetensors file."
                )
            return VoiceSource("recording", path=path)
        if not path.is_file():
            raise VoiceFileError(
                f"voice file not found: {path}. Pass a pack voice name or the path of an "
                "existing voice-state .safetensors file."
            )
        return VoiceSource("file", path=path)
    if isinstance(voice, str):
        # This raises UnknownVoiceError listing the valid names.
        pack.voice_path(voice)
        # Not reached: voice_path always raised.
        raise UnknownVoiceError(f"unknown voice {voice!r}")
    raise TypeError(
        f"voice must be a voice name, a path, an hf:// URL or a Voice, got {type(voice).__name__}"
    )


def parse_hub_voice(url: str) -> HubFile:
    """``hf://owner/repo/path/to/file.wav[@revision]`` → the hub file (``VoiceFileError`` if
    the URL is malformed or names neither a recording nor a voice state)."""
    try:
        file = HubFile.parse(url)
    except ValueError:
        file = None
    if file is None or not file.path:
        raise VoiceFileError(
            f"malformed hub voice {url!r}: write hf://<owner>/<repo>/<path of the file>"
            "[@revision], e.g. hf://kyutai/tts-voices/alba-mackenna/casual.wav"
        )
    if not (is_audio_path(file.path) or file.path.endswith(VOICE_STATE_SUFFIX)):
        raise VoiceFileError(
            f"hub voice {url!r} is neither a recording (.wav, .flac, …) nor a voice state "
            f"({VOICE_STATE_SUFFIX}); point it at one of those files"
        )
    return file


def fetch_hub_voice(file: HubFile, *, token: str | bool | None = None) -> Path:
    """The local copy of a hub voice file, downloaded into the Hugging Face cache if needed.

    Offline with an empty cache raises ``PackFilesMissingError`` (``HubUnreachableError`` when
    the hub cannot be reached: probed once, no retries); a file the repository lacks raises
    ``UnknownVoiceError``.
    """
    return hub_download(
        file,
        token=token,
        what=f"voice hf://{file.repo}/{file.path}",
        missing_is_unknown_voice=True,
    )


__all__ = ["VoiceSource", "fetch_hub_voice", "parse_hub_voice", "parse_voice"]
