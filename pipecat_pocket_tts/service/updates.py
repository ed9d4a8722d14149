"""A settings update, checked before Pipecat applies it: a refused value keeps the previous one.

``check_update`` gives the update less what it refuses (each refusal with its reason, for an
ErrorFrame), the pack it asks for (through ``language`` or ``model``, as a pack name) and the
regional text variant that comes with it. Voices are checked by the loaded engine, off the loop.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from pipecat.utils.types import NOT_GIVEN, is_given

from ..engine import text_variant
from ..engine.errors import PocketTTSError, UnknownLanguageError
from .loading import EngineLoader
from .settings import PocketTTSSettings


@dataclass(frozen=True)
class CheckedUpdate:
    """A settings update as the service applies it."""

    delta: PocketTTSSettings  # the update less its refused values
    pack: str | None  # the pack asked for (None: the update names no language or model)
    text_language: str | None  # the regional variant of the language asked for ("pt-BR")
    follows_default_voice: bool  # voice=None: the pack's default voice, reported by name
    refused: tuple[tuple[PocketTTSError, str], ...]  # (why, of what: "" or "voice 'x'")


async def check_update(delta: PocketTTSSettings, loader: EngineLoader) -> CheckedUpdate:
    """Check every value ``delta`` gives (the caller's delta is left as it is)."""
    delta = copy.copy(delta)
    refused: list[tuple[PocketTTSError, str]] = []
    try:
        pack = loader.requested_pack(delta.model, delta.language)
    except UnknownLanguageError as e:  # the pack in use stays
        refused.append((e, ""))
        pack, delta.language, delta.model = None, NOT_GIVEN, NOT_GIVEN
    variant = None
    if pack is not None:
        variant = text_variant(delta.language) if is_given(delta.language) else None
        delta.language = delta.model = pack
    refused += [(error, "") for error in delta.refuse_invalid()]
    follows_default = is_given(delta.voice) and delta.voice is None
    if is_given(delta.voice):  # None: the pack's default voice, by its name
        voice, error = await loader.checked_voice(delta.voice)
        if error is None:
            delta.voice = voice
        else:
            delta.voice = NOT_GIVEN
            refused.append((error, f"voice {voice!r}"))
    return CheckedUpdate(delta, pack, variant, follows_default, tuple(refused))


__all__ = ["CheckedUpdate", "check_update"]
