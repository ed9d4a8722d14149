"""What one utterance is spoken with: the caller's choices, checked once, and what they resolve to.

``UtteranceOptions`` is the one value a caller (``PocketTTS``, ``Session``, the Pipecat
service) passes per utterance; each field left None keeps the session's choice. A session
resolves it into an ``UtteranceRun`` (the voice state, the sampling settings and a generator
restart), which travels with every chunk to the scheduler.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

from .checks import (
    check_eos_threshold,
    check_lexicon,
    check_normalize,
    check_seed,
    check_speed,
    check_temperature,
)
from .frames import GenerationSettings

if TYPE_CHECKING:
    from .backends.base import FlowState
    from .voices.voice import Voice


@dataclass(frozen=True)
class UtteranceOptions:
    """Per-utterance choices; None keeps the session's (or the pack's) choice.

    ``voice``: a pack voice name, a voice-state or recording path, an ``hf://`` file or a
    ``Voice``; ``temperature`` (0-2) and ``eos_threshold``: sampling; ``seed``: restart the
    session's random generator from it at this utterance; ``normalize``: spoken forms of
    numbers, dates, markdown…; ``lexicon``: {word: spoken form}, replacing the session's;
    ``speed``: speaking rate, 0.25-4.0 (pitch kept, ``engine.tempo``; 1.0 or None: the audio
    exactly as the model makes it).
    Values are checked when the options are made: a bad one raises before any text is taken.
    """

    voice: str | os.PathLike[str] | Voice | None = None
    temperature: float | None = None
    eos_threshold: float | None = None
    seed: int | None = None
    normalize: bool | None = None
    lexicon: Mapping[str, str] | None = None
    speed: float | None = None

    def __post_init__(self) -> None:
        checked = {
            "temperature": check_temperature,
            "eos_threshold": check_eos_threshold,
            "seed": check_seed,
            "normalize": check_normalize,
            "lexicon": check_lexicon,
            "speed": check_speed,
        }
        for name, check in checked.items():
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, check(value))

    @classmethod
    def build(cls, options: UtteranceOptions | None = None, **keywords: Any) -> UtteranceOptions:
        """``options`` with ``keywords`` replacing its fields (unknown keywords: TypeError)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(keywords) - known)
        if unknown:
            raise TypeError(
                f"unknown utterance option(s) {', '.join(unknown)}; "
                f"options: {', '.join(sorted(known))}"
            )
        if options is not None and not isinstance(options, UtteranceOptions):
            raise TypeError(f"options must be UtteranceOptions, got {type(options).__name__}")
        if not keywords:
            return options or cls()
        return replace(options, **keywords) if options is not None else cls(**keywords)

    def over(self, defaults: UtteranceOptions) -> UtteranceOptions:
        """These options, with ``defaults`` wherever a field is None (the seed never carries:
        a default seed restarts the generator only where it was given)."""
        merged = {
            f.name: getattr(defaults, f.name)
            for f in fields(self)
            if f.name != "seed" and getattr(self, f.name) is None
        }
        return replace(self, **merged) if merged else self


@dataclass(frozen=True, eq=False)
class UtteranceRun:
    """An utterance's options resolved: what its chunks start from and are sampled with."""

    # The prefilled voice every chunk starts from.
    voice_state: FlowState
    settings: GenerationSettings
    # Restart the stream's generator from this seed first.
    restart_seed: int | None = None
    # The speaking rate its audio is played at (the scheduler's pacing).
    speed: float = 1.0


__all__ = ["UtteranceOptions", "UtteranceRun"]
