"""Which voice the service speaks with: the user's choice, or the pack's default voice.

While the voice setting follows the pack's default, it is reported by that voice's name (from
the language's record at construction, from the engine once loaded). A chosen voice the engine
cannot use is reported once and the default voice followed instead.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pipecat.services.tts_service import TTSService

from ..engine.contract import SpeechEngine
from ..engine.errors import PocketTTSError
from .pipecat_internals import stored_settings


class VoiceChoice:
    """The voice setting's meaning: chosen by the user, or following the pack's default."""

    def __init__(self, service: TTSService, follows_default: bool) -> None:
        self._service = service  # whose voice setting this is (read and, to name, written)
        self.follows_default = follows_default

    def _voice(self) -> Any:
        return stored_settings(self._service).voice

    def _set_voice(self, voice: Any) -> None:
        stored_settings(self._service).voice = voice

    def chosen(self) -> Any:
        """The voice the user chose (None: the pack's default)."""
        return None if self.follows_default else self._voice()

    def name_pack_default(self, name: str | None) -> None:
        """Report the pack's default voice by ``name`` (from its record) while following it."""
        if self.follows_default:
            self._set_voice(name)

    def name_default(self, engine: SpeechEngine) -> None:
        """Report the engine's default voice by name while following it."""
        if self.follows_default:
            self._set_voice(engine.default_voice)

    async def check(
        self,
        engine: SpeechEngine,
        voice_error: Callable[[SpeechEngine, Any], Awaitable[PocketTTSError | None]],
    ) -> PocketTTSError | None:
        """Why ``engine`` cannot use the chosen voice (then the default is followed and
        named), or None."""
        if self.follows_default:
            self.name_default(engine)
            return None
        error = await voice_error(engine, self._voice())
        if error is not None:
            self.follows_default = True
        self.name_default(engine)
        return error


__all__ = ["VoiceChoice"]
