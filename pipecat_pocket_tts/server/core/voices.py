"""Which voice a client's string names: one of the pack's, or a file of the server's voice folder.

No client string ever reaches a file path: a name is looked up among the pack's voices, then
among the files of the folder the operator configured (``NAME.safetensors`` voice states,
``NAME.wav`` recordings), listed once at start. The operator's ``--default-voice`` is a name,
or a voice file (a ``.safetensors`` state or a recording) served under its file's stem.
"""

from __future__ import annotations

import re
from pathlib import Path

from ...engine import AUDIO_SUFFIXES, PocketTTS, UnknownVoiceError
from ...engine.errors import ServerConfigError

OPENAI_VOICES = (
    "alloy", "ash", "ballad", "cedar", "coral", "echo", "fable", "marin", "nova", "onyx", "sage",
    "shimmer", "verse",
)  # fmt: skip
"""The voice names OpenAI clients send (Pipecat's ``OpenAITTSService`` takes no others)."""

_VOICE_FILES = (".safetensors", ".wav")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def default_voice_arg(text: str) -> str | Path:
    """``--default-voice``: a voice name, or the path of a voice file (which must exist)."""
    path = Path(text)
    if path.suffix.lower() not in (".safetensors", *AUDIO_SUFFIXES) and "/" not in text:
        return text
    if not path.is_file():
        raise ServerConfigError(f"--default-voice {text}: no such file")
    if not _NAME.fullmatch(path.stem):
        raise ServerConfigError(
            f"--default-voice {text}: clients name it by its stem, which must be letters, "
            "digits, '_', '.' or '-' (64 at most)"
        )
    return path.resolve()


def _packed(path: Path, pack_dir: Path | None) -> bool:
    """Whether ``path`` is a file of the pack folder ``pack_dir``."""
    return pack_dir is not None and path.resolve().is_relative_to(Path(pack_dir).resolve())


class ServerVoices:
    """The voices clients may name: the pack's, the voice folder's and a default voice file."""

    def __init__(
        self,
        tts: PocketTTS,
        folder: Path | None = None,
        aliases: dict[str, str] | None = None,
        default: str | Path | None = None,
        pack_dir: Path | None = None,
    ) -> None:
        """``aliases`` None: OpenAI's voice names are the default voice; ``default`` None:
        the pack's; ``pack_dir``: the local pack folder, whose own voice files are its voices
        (a default voice file there is the pack voice of its name)."""
        self._pack = set(tts.voices)
        self._files: dict[str, Path] = {}
        if folder is not None:
            for path in sorted(Path(folder).iterdir()):
                if path.suffix in _VOICE_FILES and _NAME.fullmatch(path.stem):
                    self._files.setdefault(path.stem, path.resolve())
        if isinstance(default, Path) and _packed(default, pack_dir) and default.stem in self._pack:
            default = default.stem
        if isinstance(default, Path):
            if default.stem in self._pack or self._files.get(default.stem, default) != default:
                raise ServerConfigError(
                    f"the default voice file's name {default.stem!r} is already a voice of "
                    "this server: rename the file"
                )
            self._files[default.stem] = default
            default = default.stem
        if default is not None and default not in self._pack and default not in self._files:
            raise UnknownVoiceError(
                f"default voice {default!r}: no such voice; the voices: {', '.join(self.names)}"
            )
        #: The voice of a request that names none.
        self.default = default if default is not None else tts.default_voice
        if aliases is None:
            aliases = dict.fromkeys(OPENAI_VOICES, self.default) if self.default else {}
        #: Other names for voices (OpenAI's "alloy"... for OpenAI clients), told to clients.
        self.aliases = dict(aliases)
        for alias, name in self.aliases.items():
            if name not in self._pack and name not in self._files:
                raise UnknownVoiceError(
                    f"voice alias {alias!r} names {name!r}, which this server does not have; "
                    f"its voices: {', '.join(self.names) or 'none'}"
                )

    def hide_paths(self, message: str) -> str:
        """``message`` with each voice file's path cut to its file name (clients see no path)."""
        for path in self._files.values():
            message = message.replace(str(path), path.name)
        return message

    @property
    def names(self) -> list[str]:
        return sorted(self._pack | set(self._files))

    def resolve(self, name: str | None) -> str | Path | None:
        """What the engine takes for ``name`` (None: the default voice)."""
        if name is None:
            name = self.default
            if name is None:
                return None
        name = self.aliases.get(name, name)
        if name in self._pack:
            return name
        path = self._files.get(name)
        if path is None:
            raise UnknownVoiceError(
                f"no voice {name!r} on this server; its voices: {', '.join(self.names) or 'none'}"
            )
        return path


__all__ = ["OPENAI_VOICES", "ServerVoices", "default_voice_arg"]
