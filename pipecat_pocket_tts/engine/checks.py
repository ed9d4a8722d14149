"""Checks of the settings a caller gives: each returns the value in its canonical type or
raises a named error (``engine.errors``) saying what to use instead.

Numbers are accepted as Python or NumPy numbers (``np.float32(0.5)``, ``np.int64(7)``); bools
and strings are refused (``True`` is not a temperature, ``"0.5"`` is text). Every entry point
that takes these settings (``PocketTTS.session``, ``Session.enqueue``, the Pipecat service's
constructor and settings updates) calls these, so a bad value fails where it is given, not
at the first frame.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

from .errors import InvalidSettingError, SettingTypeError
from .text.spoken.lexicon import Lexicon

MIN_TEMPERATURE = 0.0
MAX_TEMPERATURE = 2.0
"""Temperature is the variance of the sampler's starting noise (std √temperature). The flow net
was trained from unit-variance noise (temperature 1); upstream's default is 0.3 and 0 is fully
deterministic. 2 (twice the trained variance) leaves room to experiment; far beyond it the
net starts from noise it has never seen and speaks full-scale noise (1e6 does)."""

MIN_SPEED = 0.25
MAX_SPEED = 4.0
"""Speaking rates (``engine.tempo``): OpenAI's ``speed`` range; 1.0 is the model's own pace."""

MAX_SEED = 2**64 - 1
"""Seeds are the 64-bit integers NumPy's generators take (the service draws fresh ones so)."""


def check_temperature(value: Any) -> float:
    """A float in [0, MAX_TEMPERATURE], or InvalidSettingError / SettingTypeError."""
    return _ranged(
        "temperature",
        value,
        (MIN_TEMPERATURE, MAX_TEMPERATURE),
        "a number such as 0.3",
        "0.3 is the pack default, 0 is deterministic",
    )


def check_speed(value: Any) -> float:
    """A float in [MIN_SPEED, MAX_SPEED] (1.0: unchanged), or a named error."""
    return _ranged(
        "speed",
        value,
        (MIN_SPEED, MAX_SPEED),
        "a speaking rate such as 1.2",
        "1.0 = the model's own pace, 1.5 = half as fast again",
    )


def _ranged(name: str, value: Any, bounds: tuple[float, float], example: str, hint: str) -> float:
    """``value`` as a finite float within ``bounds`` (inclusive), or a named error."""
    number = _real(name, value, example)
    low, high = bounds
    if not math.isfinite(number) or not low <= number <= high:
        raise InvalidSettingError(
            f"{name} must be between {low:g} and {high:g} ({hint}), got {value!r}"
        )
    return number


def check_eos_threshold(value: Any) -> float:
    """A finite float (a logit: the pack default is about -4), or a named error."""
    number = _real("eos_threshold", value, "a logit such as -4.0")
    if not math.isfinite(number):
        raise InvalidSettingError(
            f"eos_threshold must be a finite logit (the pack default is about -4), got {value!r}"
        )
    return number


def check_seed(value: Any) -> int | None:
    """None (a random seed) or an int in [0, MAX_SEED], or a named error."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise SettingTypeError(
            f"seed must be a whole number from 0 to 2**64-1 or None (random), got {value!r} "
            f"({type(value).__name__})"
        )
    seed = int(value)
    if not 0 <= seed <= MAX_SEED:
        raise InvalidSettingError(
            f"seed must be from 0 to 2**64-1, got {seed}; pass None for a random seed"
        )
    return seed


def check_normalize(value: Any) -> bool:
    """True or False (NumPy bools too), or SettingTypeError."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise SettingTypeError(
        f"normalize must be True or False, got {value!r} ({type(value).__name__})"
    )


def check_lexicon(value: Any) -> dict[str, str] | None:
    """A copy of a ``{written: spoken}`` mapping of non-blank strings to strings, None for none
    (or an empty one); ``LexiconError`` saying what is wrong otherwise."""
    if value is None or (isinstance(value, Mapping) and not value):
        return None
    # Constructing it validates the value.
    Lexicon(value)
    return dict(value)


def _real(name: str, value: Any, example: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise SettingTypeError(
            f"{name} must be {example} (int, float or a NumPy number), got {value!r} "
            f"({type(value).__name__})"
        )
    return float(value)


__all__ = [
    "MAX_SEED",
    "MAX_SPEED",
    "MAX_TEMPERATURE",
    "MIN_SPEED",
    "MIN_TEMPERATURE",
    "check_eos_threshold",
    "check_lexicon",
    "check_normalize",
    "check_seed",
    "check_speed",
    "check_temperature",
]
