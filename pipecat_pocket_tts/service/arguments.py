"""The service constructor's extra keyword arguments: Pipecat's pass, the rest are refused.

Pipecat's ``TTSService`` (and its bases) take ``**kwargs`` and drop what they do not know, so a
typo or an argument of Pipecat's built-in ``PocketTTSService`` (``temp=0.5``,
``quantize=True``) would be ignored without a word. ``check_extra_arguments`` lets through
exactly the keywords Pipecat's constructors declare and raises ``TypeError`` for any other,
saying what to use instead.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

from pipecat.services.tts_service import TTSService

from ..engine.model.options import LoadOptions

_SETTING = "a setting here: settings=PocketTTSService.Settings({name}=...)"

#: Arguments of Pipecat's built-in PocketTTSService and of upstream's ``load_model``, and what
#: this service takes instead.
FOREIGN_ARGUMENTS: dict[str, str] = {
    "temp": "the temperature is " + _SETTING.format(name="temperature"),
    "temperature": "the temperature is " + _SETTING.format(name="temperature"),
    "voice": "the voice is " + _SETTING.format(name="voice"),
    "seed": "the seed is " + _SETTING.format(name="seed"),
    "normalize": "normalization is " + _SETTING.format(name="normalize"),
    "lexicon": "the lexicon is " + _SETTING.format(name="lexicon"),
    "lsd_decode_steps": "use sampler_steps=N (flow-matching decode steps of the sampler)",
    "sampler_decode_steps": "use sampler_steps=N (flow-matching decode steps of the sampler)",
    "quantize": (
        "use precision='int8' (the weights' precision: NumPy runs 'fp32', 'bf16' or 'int8', "
        "CoreML 'fp16' or 'int8'); None is the backend's default"
    ),
}


def take_load_options(load: LoadOptions | None, kwargs: dict[str, Any]) -> LoadOptions:
    """``load`` with the ``LoadOptions`` fields found in ``kwargs`` (taken out of it)."""
    fields = {f.name for f in dataclasses.fields(LoadOptions)}
    given = {name: kwargs.pop(name) for name in list(kwargs) if name in fields}
    return LoadOptions.build(load, **given)


@cache
def pipecat_arguments() -> frozenset[str]:
    """Every keyword ``TTSService`` and its base classes declare."""
    names: set[str] = set()
    for cls in TTSService.__mro__:
        init = cls.__dict__.get("__init__")
        if init is None or cls is object:
            continue
        for name, parameter in inspect.signature(init).parameters.items():
            if name != "self" and parameter.kind not in (
                inspect.Parameter.VAR_KEYWORD,
                inspect.Parameter.VAR_POSITIONAL,
            ):
                names.add(name)
    return frozenset(names)


def check_extra_arguments(kwargs: Mapping[str, Any], known: Iterable[str] = ()) -> None:
    """``TypeError`` for the first keyword Pipecat's constructors do not declare.

    ``known``: the service's own argument names, offered as suggestions for a typo.
    """
    allowed = pipecat_arguments()
    for name in kwargs:
        if name in allowed:
            continue
        message = f"PocketTTSService got an unexpected keyword argument {name!r}"
        advice = FOREIGN_ARGUMENTS.get(name)
        if advice is None:  # a typo?
            candidates = sorted({*allowed, *known, *FOREIGN_ARGUMENTS})
            close = difflib.get_close_matches(name, candidates, n=1)
            if close:
                advice = f"did you mean {close[0]!r}?"
                if close[0] in FOREIGN_ARGUMENTS:
                    advice += " " + FOREIGN_ARGUMENTS[close[0]]
        raise TypeError(f"{message}: {advice}" if advice else message)


__all__ = ["FOREIGN_ARGUMENTS", "check_extra_arguments", "pipecat_arguments"]
