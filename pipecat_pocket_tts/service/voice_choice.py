"""Which voice the service speaks with: the user's choice, or the pack's default voice.

While the voice setting follows the pack's default, it is reported by that voice's name (from
the language's record at construction, from the engine once loaded). A chosen voice the engine
cannot use is reported once and the default voice followed instead.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ..engine.contract import SpeechEngine
from ..engine.errors import PocketTTSError


class VoiceChoice:
    """The voice setting's meaning: chosen by the user, or following the pack's default."""

    def __init__(
        self,
        voice: Callable[[], Any],
        set_voice: Callable[[Any], None],
        *,
        follows_default: bool,
    ) -> None:
        self._voice = voice  # the voice setting as it stands
        self._set_voice = set_voice  # writes the voice setting (its name, when following)
        self.follows_default = follows_default

    def chosen(self) -> Any:
        """The voice the user chose (None: the pack's default)."""
        return None if self.follows_default else self._voice()

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
