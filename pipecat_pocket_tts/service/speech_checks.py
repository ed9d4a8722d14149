"""The text gate's questions to the engine, asked where the event loop is not held.

``has_speech`` and the speech probe are the engine's own planning (``engine.contract``): on an
engine that answers locally, short text is checked on the loop (a sentence costs well under a
millisecond, and the plan is kept for the enqueue that follows) and text over
``OFF_LOOP_CHARS`` on a worker thread; an engine that asks a server is always asked from a
worker thread. A load of the current settings still running is waited for; with no engine
every text passes (the turn finds out).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from ..engine.contract import OFF_LOOP_CHARS, SpeechEngine, SpeechProbe
from .loading import EngineLoader

Result = TypeVar("Result")


@dataclass(frozen=True)
class TextSettings:
    """How the service's text is read: normalized or not, its lexicon, a regional variant."""

    normalize: bool
    lexicon: dict[str, str] | None
    text_language: str | None


async def _answer(engine: SpeechEngine, text: str, ask: Callable[[], Result]) -> Result:
    """``ask()`` on the loop when the engine answers locally and the text is short."""
    if engine.capabilities.answers_locally and len(text) <= OFF_LOOP_CHARS:
        return ask()
    return await asyncio.to_thread(ask)


class EngineProbe:
    """A ``SpeechProbe`` of the engine, each push asked off the loop when it must be."""

    def __init__(self, engine: SpeechEngine, probe: SpeechProbe) -> None:
        self._engine = engine
        self._probe = probe

    async def push(self, text: str) -> bool:
        return await _answer(self._engine, text, lambda: self._probe.push(text))

    async def flush(self) -> bool:
        return await _answer(self._engine, "", self._probe.flush)


class SpeechChecks:
    """Whether text says anything on the service's current engine and settings."""

    def __init__(self, loader: EngineLoader, settings: Callable[[], TextSettings]) -> None:
        """``loader``: the service's (its engine, once loaded; ``settled`` waits for a load
        still running)."""
        self._engine = lambda: loader.engine
        self._settings = settings
        self._settled = loader.settled

    async def has_speech(self, text: str) -> bool:
        """False when the engine would say nothing of ``text``; True with no engine."""
        if self._engine() is None:
            await self._settled()
        engine = self._engine()
        if engine is None:
            return True
        settings = self._settings()

        def ask() -> bool:
            return engine.has_speech(
                text,
                settings.text_language,
                normalize=settings.normalize,
                lexicon=settings.lexicon,
            )

        return await _answer(engine, text, ask)

    async def new_probe(self) -> EngineProbe | None:
        """A probe for a reply's streamed text, once a load still running has settled (None
        with no engine)."""
        if self._engine() is None:
            await self._settled()
        engine = self._engine()
        if engine is None:
            return None
        settings = self._settings()
        probe = engine.speech_probe(
            settings.text_language, normalize=settings.normalize, lexicon=settings.lexicon
        )
        return EngineProbe(engine, probe)


def text_settings(settings: Any, text_language: str | None) -> TextSettings:
    """The text settings of the service's settings object."""
    return TextSettings(bool(settings.normalize), settings.lexicon or None, text_language)


__all__ = ["EngineProbe", "SpeechChecks", "TextSettings", "text_settings"]
