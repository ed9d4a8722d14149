"""The runtime-updatable settings of ``PocketTTSService`` (``PocketTTSService.Settings``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pipecat.services.settings import TTSSettings
from pipecat.utils.types import NOT_GIVEN, NotGiven, is_given

from ..engine import check_lexicon, check_normalize, check_seed, check_speed, check_temperature
from ..engine.errors import PocketTTSError

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
        speed: Speaking rate, 0.25-4.0 (None or 1.0: the model's own pace, audio unchanged);
            pitch is kept (time-scaled, not resampled); word times follow. Next utterance.
    """

    temperature: float | NotGiven | None = field(default_factory=lambda: NOT_GIVEN)
    seed: int | NotGiven | None = field(default_factory=lambda: NOT_GIVEN)
    normalize: bool | NotGiven = field(default_factory=lambda: NOT_GIVEN)
    lexicon: dict[str, str] | NotGiven | None = field(default_factory=lambda: NOT_GIVEN)
    speed: float | NotGiven | None = field(default_factory=lambda: NOT_GIVEN)

    def refuse_invalid(self) -> list[PocketTTSError]:
        """Check every given engine setting (``engine.checks``); an invalid one is no longer
        given, so the previous value stays. Returns why each was refused."""
        errors = []
        for name, check in _CHECKS.items():
            value = getattr(self, name)
            if not is_given(value) or (value is None and name in _NONE_MEANS_DEFAULT):
                continue
            try:
                setattr(self, name, check(value))
            except PocketTTSError as e:
                setattr(self, name, NOT_GIVEN)
                errors.append(e)
        return errors


_CHECKS: dict[str, Callable[[Any], Any]] = {
    "temperature": check_temperature,
    "seed": check_seed,
    "normalize": check_normalize,
    "lexicon": check_lexicon,
    "speed": check_speed,
}
# None means: the pack's default temperature, a random seed, no lexicon, speed 1.
_NONE_MEANS_DEFAULT = frozenset({"temperature", "seed", "lexicon", "speed"})


def initial_settings(
    language: Language | str | None, settings: PocketTTSSettings | None
) -> PocketTTSSettings:
    """Complete settings from the constructor's ``language`` and ``settings`` (these win; a
    ``model`` names the pack). Raises the first setting's error (``InvalidSettingError``,
    ``LexiconError``) now, not at the first turn."""
    defaults = PocketTTSSettings(
        model=None,
        voice=None,
        language="english",
        temperature=None,
        seed=None,
        normalize=True,
        lexicon=None,
        speed=None,
    )
    if language is not None:
        defaults.language = language
    if settings is not None:
        defaults.apply_update(settings)
        if is_given(settings.model) and settings.model:
            defaults.language = settings.model  # the model is the pack
    errors = defaults.refuse_invalid()
    if errors:
        raise errors[0]
    return defaults


UTTERANCE_SETTINGS = frozenset({"voice", "temperature", "normalize", "lexicon", "seed", "speed"})
"""Settings applied per utterance (a new seed restarts the session's generator there)."""


def session_options(settings: PocketTTSSettings, text_language: str | None) -> dict[str, Any]:
    """Keyword arguments of ``PocketTTS.session()`` for the service's current settings."""
    return {
        "voice": settings.voice,
        "temperature": settings.temperature,
        "seed": settings.seed if is_given(settings.seed) else None,
        "normalize": settings.normalize,
        "text_language": text_language,
        "timestamps": True,  # frames carry their words: the context holds what was played
    }


__all__ = ["UTTERANCE_SETTINGS", "PocketTTSSettings", "initial_settings", "session_options"]
