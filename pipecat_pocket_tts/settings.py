"""The runtime-updatable settings of ``PocketTTSService`` (``PocketTTSService.Settings``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pipecat.services.settings import TTSSettings
from pipecat.utils.types import NOT_GIVEN, NotGiven, is_given

from .engine.errors import PocketTTSError
from .engine.text.normalize import checked_lexicon

if TYPE_CHECKING:
    from pipecat.transcriptions.language import Language


@dataclass
class PocketTTSSettings(TTSSettings):
    """Runtime-updatable settings of ``PocketTTSService``.

    Parameters:
        voice: A voice of the pack (``alba``...), a voice-state ``.safetensors`` path, or a
            ``Voice``; None for the pack's default voice. Applies from the next utterance.
        language: A Pipecat ``Language`` or a pack name (``english``, ``french_24l``...). A
            change loads that pack in the background and switches at the next turn.
        model: The pack name (kept equal to ``language``; setting it also switches packs).
        temperature: Sampling temperature (None: the pack's default). Next utterance.
        seed: Seed of the session's noise generator (None: random). Next utterance: the
            running session restarts its generator there (no new session, no seam).
        normalize: Spell out numbers, dates, symbols before synthesis. Next utterance.
        lexicon: ``{written: spoken}`` for the text normalizer (whole words; keys with a capital
            match exactly, lowercase keys in any case); used when ``normalize`` is on.
            Next utterance.
    """

    temperature: float | NotGiven | None = field(default_factory=lambda: NOT_GIVEN)
    seed: int | NotGiven | None = field(default_factory=lambda: NOT_GIVEN)
    normalize: bool | NotGiven = field(default_factory=lambda: NOT_GIVEN)
    lexicon: dict[str, str] | NotGiven | None = field(default_factory=lambda: NOT_GIVEN)

    def drop_invalid_lexicon(self) -> PocketTTSError | None:
        """Why the lexicon is refused (then it is no longer given), or None."""
        if is_given(self.lexicon) and self.lexicon:
            try:
                checked_lexicon(self.lexicon)
            except PocketTTSError as e:
                self.lexicon = NOT_GIVEN
                return e
        return None


def initial_settings(
    language: Language | str | None, settings: PocketTTSSettings | None
) -> PocketTTSSettings:
    """Complete settings from the constructor's ``language`` and ``settings`` (these win; a
    ``model`` names the pack). Raises ``LexiconError`` for a bad lexicon now, not later."""
    defaults = PocketTTSSettings(
        model=None,
        voice=None,
        language="english",
        temperature=None,
        seed=None,
        normalize=True,
        lexicon=None,
    )
    if language is not None:
        defaults.language = language
    if settings is not None:
        defaults.apply_update(settings)
        if is_given(settings.model) and settings.model:
            defaults.language = settings.model  # the model is the pack
    if defaults.lexicon:
        checked_lexicon(defaults.lexicon)
    return defaults


UTTERANCE_SETTINGS = frozenset({"voice", "temperature", "normalize", "lexicon", "seed"})
"""Settings applied per utterance (a new seed restarts the session's generator there)."""

__all__ = ["UTTERANCE_SETTINGS", "PocketTTSSettings", "initial_settings"]
