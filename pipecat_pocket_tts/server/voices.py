"""Which voice a client's string names: one of the pack's, or a file of the server's voice folder.

No client string ever reaches a file path: a name is looked up among the pack's voices, then
among the files of the folder the operator configured (``NAME.safetensors`` voice states,
``NAME.wav`` recordings), listed once at start.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..engine import PocketTTS, UnknownVoiceError

OPENAI_VOICES = (
    "alloy", "ash", "ballad", "cedar", "coral", "echo", "fable", "marin", "nova", "onyx", "sage",
    "shimmer", "verse",
)  # fmt: skip
"""The voice names OpenAI clients send (Pipecat's ``OpenAITTSService`` takes no others)."""

_VOICE_FILES = (".safetensors", ".wav")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


class ServerVoices:
    """The voices clients may name: the pack's and the voice folder's."""

    def __init__(
        self,
        tts: PocketTTS,
        folder: Path | None = None,
        aliases: dict[str, str] | None = None,
    ) -> None:
        self._pack = set(tts.voices)
        self.default = tts.default_voice
        #: Other names for voices (OpenAI's "alloy"... for OpenAI clients), told to clients.
        self.aliases = dict(aliases or {})
        self._files: dict[str, Path] = {}
        if folder is not None:
            for path in sorted(Path(folder).iterdir()):
                if path.suffix in _VOICE_FILES and _NAME.fullmatch(path.stem):
                    self._files.setdefault(path.stem, path.resolve())
        for alias, name in self.aliases.items():
            if name not in self._pack and name not in self._files:
                raise UnknownVoiceError(
                    f"voice alias {alias!r} names {name!r}, which this server does not have; "
                    f"its voices: {', '.join(self.names) or 'none'}"
                )

    @property
    def names(self) -> list[str]:
        return sorted(self._pack | set(self._files))

    def resolve(self, name: str | None) -> str | Path | None:
        """What the engine takes for ``name`` (None: the pack's default voice)."""
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


__all__ = ["OPENAI_VOICES", "ServerVoices"]
