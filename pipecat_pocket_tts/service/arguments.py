"""The service constructor's extra keyword arguments: Pipecat's pass, the rest are refused.

Pipecat's ``TTSService`` (and its bases) take ``**kwargs`` and drop what they do not know, so a
typo or an argument of Pipecat's built-in ``PocketTTSService`` (``temp=0.5``,
``quantize=True``) would be ignored without a word. ``check_extra_arguments`` lets through
exactly the keywords Pipecat's constructors declare and raises ``TypeError`` for any other,
saying what to use instead; ``take_quantize`` accepts the built-in's default
``quantize=False``, which means what this service does by default.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
from collections.abc import Iterable, Mapping
from dataclasses import replace
from functools import cache
from typing import Any

from pipecat.services.tts_service import TTSService

from ..engine import LoadOptions, concrete_options, resolve_backend_name
from ..engine.errors import LoadOptionError
from .loading import LoadSettings

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
    "speed": "the speaking rate is " + _SETTING.format(name="speed"),
    "lsd_decode_steps": "use sampler_steps=N (flow-matching decode steps of the sampler)",
    "sampler_decode_steps": "use sampler_steps=N (flow-matching decode steps of the sampler)",
    "quantize": (
        "quantize=True is precision='int8' here (int8 FlowLM weights; NumPy runs 'fp32', "
        "'bf16' or 'int8', CoreML 'fp16' or 'int8'; precision=None is the backend's default)"
    ),
}


def take_quantize(load: LoadOptions, kwargs: dict[str, Any]) -> LoadOptions:
    """``quantize=`` of Pipecat's built-in service, taken out of ``kwargs``.

    ``quantize=False`` (the built-in's default: full-precision weights) is accepted and changes
    nothing unless it contradicts a narrow ``precision``; ``quantize=True`` raises ``TypeError``
    pointing at ``precision='int8'``, which is what it means here.
    """
    if "quantize" not in kwargs or kwargs["quantize"] is not False:
        return load  # absent, or refused with advice by check_extra_arguments
    del kwargs["quantize"]
    if load.precision not in (None, "fp32", "fp16"):
        raise LoadOptionError(
            f"quantize=False asks for unquantized weights but precision={load.precision!r} "
            "narrows them; drop one of the two"
        )
    return load


def take_load_options(load: LoadOptions | None, kwargs: dict[str, Any]) -> LoadOptions:
    """``load`` with the ``LoadOptions`` fields found in ``kwargs`` (taken out of it).

    Where the backend is NumPy whatever the language (off Apple), a precision it does not
    run is a ``LoadOptionError`` here, at construction.
    """
    fields = {f.name for f in dataclasses.fields(LoadOptions)}
    given = {name: kwargs.pop(name) for name in list(kwargs) if name in fields}
    options = LoadOptions.build(load, **given)
    if options.backend != "coreml" and resolve_backend_name(options.backend) == "numpy":
        concrete_options(options, "numpy")  # a precision NumPy does not run: refused now
    return options


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


def service_load_settings(
    load: LoadOptions | None,
    kwargs: dict[str, Any],
    signature: inspect.Signature,
    given: LoadSettings,
) -> LoadSettings:
    """``given`` with the constructor's load options, checked and taken out of ``kwargs``
    (what is left is Pipecat's): given whole or as keywords, ``quantize``, unknown keywords
    refused, and no load options beside a ``server_url`` (the server's own decide)."""
    options = take_quantize(take_load_options(load, kwargs), kwargs)
    check_extra_arguments(kwargs, known=signature.parameters)
    if given.server_url is not None and options != LoadOptions():
        raise TypeError(
            "load options (backend, precision, threads...) choose how this process loads a "
            "model; with server_url the server's own options decide: drop them here"
        )
    return replace(given, load_options=options)


__all__ = [
    "FOREIGN_ARGUMENTS",
    "check_extra_arguments",
    "pipecat_arguments",
    "service_load_settings",
    "take_quantize",
]
