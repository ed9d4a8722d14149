"""Settings and constructor arguments: what the service is asked to do, checked once.

- ``PocketTTSSettings`` (``PocketTTSService.Settings``): the runtime-updatable settings, each
  value checked by the engine's own checks; ``initial_settings`` completes them at
  construction and ``session_options``/``TurnOptions`` read them for a session and a turn.
- A settings update is checked before Pipecat applies it (``check_update``): a refused value
  keeps the previous one, and the update names the pack it asks for (through ``language`` or
  ``model``) and the regional text variant that comes with it.
- The constructor's extra keyword arguments (``service_load_settings``): Pipecat's pass, load
  options become ``LoadSettings``, and any other is a ``TypeError`` saying what to use.
  Pipecat's ``TTSService`` takes ``**kwargs`` and drops what it does not know, so a typo or an
  argument of Pipecat's built-in ``PocketTTSService`` (``temp=0.5``, ``quantize=True``) would
  otherwise be ignored without a word.
- Pipecat ``Language`` values → packs (``language_to_pack``): the facts and the one resolver
  live in the engine; regional variants resolve through their base code, so
  ``Language.PT_BR`` speaks with the ``portuguese`` pack (its text read as Brazilian).
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any, Protocol

from pipecat.services.settings import TTSSettings
from pipecat.services.tts_service import TTSService
from pipecat.transcriptions.language import Language
from pipecat.utils.types import NOT_GIVEN, NotGiven, is_given

from ..engine import (
    LANGUAGES,
    LoadOptions,
    UtteranceOptions,
    check_lexicon,
    check_normalize,
    check_seed,
    check_speed,
    check_temperature,
    concrete_options,
    config_language_code,
    find_language,
    is_config_reference,
    resolve_backend_name,
    text_variant,
)
from ..engine.errors import LoadOptionError, PocketTTSError, UnknownLanguageError


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
            # Pipecat's model setting names the pack.
            defaults.language = settings.model
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
        # Frames carry their words, so the context holds what was played.
        "timestamps": True,
    }


@dataclass(frozen=True)
class TurnOptions:
    """The service's settings at the time a turn's text is handed over."""

    # Voice, temperature, normalize, lexicon and speed; the seed is apart.
    utterance: UtteranceOptions
    # The seed setting (None: random), applied when its version changes.
    seed: int | None
    # Bumped by every seed update.
    seed_version: int

    @classmethod
    def of(cls, settings: PocketTTSSettings, seed_version: int) -> TurnOptions:
        """The options of the service's current settings.

        Args:
            settings: The service's settings now.
            seed_version: How many seed updates the service has seen.

        Returns:
            The options a turn's next text is handed over with.
        """
        return cls(
            utterance=UtteranceOptions(
                voice=settings.voice,
                temperature=settings.temperature,
                normalize=bool(settings.normalize),
                lexicon=settings.lexicon or None,
                speed=settings.speed if is_given(settings.speed) else None,
            ),
            seed=settings.seed if is_given(settings.seed) else None,
            seed_version=seed_version,
        )

    def with_seed(self, seed: int | None) -> UtteranceOptions:
        """The utterance options, restarting the generator from ``seed`` (None: no restart)."""
        return self.utterance if seed is None else replace(self.utterance, seed=seed)


# -- Pipecat languages -------------------------------------------------------------------
#: One pack per spoken language (the registry's defaults: the 6-layer distilled models, fast
#: enough for real time on a CPU). The 24-layer variants (``french_24l``...) go by pack name.
LANGUAGE_TO_PACK: dict[Language, str] = {
    Language(info.code): info.default_pack for info in LANGUAGES
}


def language_to_pack(language: Language) -> str | None:
    """The pack speaking ``language`` (regional variants by base code), or None."""
    info = find_language(language)
    return None if info is None else info.default_pack


def pack_iso_code(pack: str, stated: dict[str, str] | None = None) -> str:
    """ISO 639-1 code of the language a pack speaks.

    Args:
        pack: A pack name ("english_7m_2026-10", an upstream config's path or URL).
        stated: Codes callers stated for upstream configs, by pack (``stated_language``).

    Returns:
        The pack's language code ("en"); an upstream config's: the stated one, else what its
        names tell ("…/czech.yaml": "cs"); "en" when nothing tells a language.
    """
    info = find_language(pack)
    if info is not None:
        return info.code
    if stated and pack in stated:
        return stated[pack]
    return (config_language_code(pack) if is_config_reference(pack) else None) or "en"


def stated_language(language: object, pack: str) -> dict[str, str]:
    """The language a caller states for an upstream config.

    Args:
        language: The constructor's ``language`` (a Pipecat ``Language`` states one).
        pack: The pack the settings name (the ``model`` setting wins over ``language``).

    Returns:
        {pack: code} when ``pack`` is an upstream config and ``language`` a ``Language``, else
        {}.
    """
    if not isinstance(language, Language) or not is_config_reference(pack):
        return {}
    return {pack: str(language.value).split("-", 1)[0].lower()}


def config_speaks(language: object, pack: str, stated: dict[str, str]) -> bool:
    """Whether an upstream config speaks a Pipecat ``Language``.

    Args:
        language: A settings value (only a ``Language`` can match).
        pack: The pack in use.
        stated: Codes callers stated for upstream configs (``stated_language``).

    Returns:
        True when ``pack`` is an upstream config whose language has ``language``'s base code.
    """
    if not isinstance(language, Language) or not is_config_reference(pack):
        return False
    return pack_iso_code(pack, stated) == str(language.value).split("-", 1)[0].lower()


def pack_default_voice(pack: str) -> str | None:
    """The voice a pack's language speaks with by default ("english" → "alba"); None when
    the name tells no language (a custom pack: its voices are known once it is loaded)."""
    info = find_language(pack)
    return None if info is None else info.default_voice


# -- settings updates --------------------------------------------------------------------
@dataclass(frozen=True)
class CheckedUpdate:
    """A settings update as the service applies it."""

    # The update without its refused values.
    delta: PocketTTSSettings
    # The pack asked for, or None when the update names no language or model.
    pack: str | None
    # The regional variant of the language asked for, such as "pt-BR".
    text_language: str | None
    # True for voice=None: the pack's default voice, reported by name.
    follows_default_voice: bool
    # Each refusal as (error, what it refused: "" or "voice 'x'").
    refused: tuple[tuple[PocketTTSError, str], ...]


class PackAndVoice(Protocol):
    """What checking an update asks of the service's engine load (``EngineLoader``)."""

    def requested_pack(self, model: Any, language: Any) -> str | None: ...

    async def checked_voice(self, voice: Any) -> tuple[Any, PocketTTSError | None]: ...


async def check_update(delta: PocketTTSSettings, loader: PackAndVoice) -> CheckedUpdate:
    """Check every value ``delta`` gives (the caller's delta is left as it is).

    Args:
        delta: The update, as Pipecat hands it to the service.
        loader: The service's engine load: the pack a name means, the voice checked on it.

    Returns:
        The update less its refused values, with the pack it asks for and each refusal.
    """
    delta = copy.copy(delta)
    refused: list[tuple[PocketTTSError, str]] = []
    try:
        pack = loader.requested_pack(delta.model, delta.language)
    except UnknownLanguageError as e:
        # The update is refused and the pack in use stays.
        refused.append((e, ""))
        pack, delta.language, delta.model = None, NOT_GIVEN, NOT_GIVEN
    variant = None
    if pack is not None:
        variant = text_variant(delta.language) if is_given(delta.language) else None
        delta.language = delta.model = pack
    refused += [(error, "") for error in delta.refuse_invalid()]
    follows_default = is_given(delta.voice) and delta.voice is None
    # None means the pack's default voice, reported by its name.
    if is_given(delta.voice):
        voice, error = await loader.checked_voice(delta.voice)
        if error is None:
            delta.voice = voice
        else:
            delta.voice = NOT_GIVEN
            refused.append((error, f"voice {voice!r}"))
    return CheckedUpdate(delta, pack, variant, follows_default, tuple(refused))


# -- constructor arguments ---------------------------------------------------------------
@dataclass(frozen=True)
class LoadSettings:
    """How the service loads packs: the engine's ``LoadOptions`` and whether to warm up."""

    load_options: LoadOptions = field(default_factory=LoadOptions)
    warmup: bool = True
    # A TTS server to use instead of a model in this process.
    server_url: str | None = None
    # The server's bearer key.
    api_key: str | None = None
    # Freeze the process's heap once the first model is loaded.
    freeze_gc: bool = True


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
        # It is absent, or was refused with advice by check_extra_arguments.
        return load
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
        # A precision NumPy does not run is refused now rather than at load.
        concrete_options(options, "numpy")
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
        # Not a known foreign argument: perhaps a typo of a known one.
        if advice is None:
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
    "LANGUAGE_TO_PACK",
    "UTTERANCE_SETTINGS",
    "CheckedUpdate",
    "LoadSettings",
    "PocketTTSSettings",
    "TurnOptions",
    "check_extra_arguments",
    "check_update",
    "initial_settings",
    "language_to_pack",
    "pack_default_voice",
    "pack_iso_code",
    "pipecat_arguments",
    "service_load_settings",
    "session_options",
    "take_quantize",
]
