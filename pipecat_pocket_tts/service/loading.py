"""The model of ``PocketTTSService``: loading the pack, warming it up, switching packs.

``EngineLoader`` owns the engine and the load tasks: the pack of the current settings, loaded
in the background from setup on (setup never waits for it: Pipecat's ``run_test`` gives a
start one second; the first turn waits, its context kept alive; how the load ended goes to
the service's hook once), and a pack requested at runtime, loaded in the background and
adopted at the next turn. With a server URL the engine
is a ``RemoteTTS`` (a TTS server's one model, used through the same interface): "loading" is
connecting to it, and a pack is one the server serves. Loads go through the
process-wide shared cache (services of one pack share the weights) and run off the event
loop, on the service's task manager; a turn waiting for one has its audio context kept alive
as often as a speech stream's (both through ``ContextOutput``). The calls into the engine's
loading API are all in ``load_shared_engine`` and ``EngineLoader.pack_for`` below.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from loguru import logger
from pipecat.utils.types import is_given

from ..engine.errors import PocketTTSError, UnknownLanguageError
from ..engine.model.languages import pack_name
from ..engine.model.options import LoadOptions
from ..server.client import RemoteTTS
from .collector import freeze_heap_once

if TYPE_CHECKING:
    from pipecat.transcriptions.language import Language

    from ..engine import PocketTTS
    from .context_output import ContextOutput


WARMUP_TEXT = "Hello."
WARMUP_FRAMES = 2


@dataclass(frozen=True)
class LoadSettings:
    """How the service loads packs: the engine's ``LoadOptions`` and whether to warm up."""

    load_options: LoadOptions = field(default_factory=LoadOptions)
    warmup: bool = True
    server_url: str | None = None  # a TTS server instead of a model in this process
    api_key: str | None = None  # the server's bearer key
    freeze_gc: bool = True  # freeze the process's heap once the first model is loaded


@dataclass(frozen=True)
class Ready:
    """The engine a new turn speaks with, and what changed to get it."""

    engine: PocketTTS | RemoteTTS
    switched: bool = False  # a pack requested at runtime was adopted
    switch_error: Exception | None = None  # a requested pack failed; the engine is the old one


LoadHook = Callable[["PocketTTS | RemoteTTS | Exception"], Awaitable[None]]
"""Told how a load of the current settings ended (the engine, or why not), before any turn
waiting for it goes on."""


class LoadReported(PocketTTSError):
    """The load a turn waited for failed; its failure was reported (once) when it happened."""


SPEECH_CHECK_CHARS = 2000
"""Longest text ``has_speech`` plans on the event loop (about 5 ms of CPU); longer text is
planned on a worker thread."""


class EngineLoader:
    """Loads packs off the event loop and hands the engine to new turns."""

    def __init__(self, settings: LoadSettings, contexts: ContextOutput, on_load: LoadHook) -> None:
        self.settings = settings
        self._contexts = contexts  # runs the load tasks, keeps a waiting turn's context alive
        self._on_load = on_load
        self._engine: PocketTTS | RemoteTTS | None = None
        self._remote: RemoteTTS | None = None  # made at the first load (never in __init__)
        self._load_task: asyncio.Task | None = None  # the pack of the current settings
        self._switch_task: asyncio.Task | None = None  # a pack requested at runtime

    @property
    def engine(self) -> PocketTTS | RemoteTTS | None:
        return self._engine

    def pack_for(self, language: Language | str) -> str:
        """The pack a language or pack name means; any name a ``model_dir`` provides is
        accepted. ``UnknownLanguageError`` listing the choices otherwise."""
        model_dir = self.settings.load_options.model_dir
        custom = (
            model_dir is not None
            and isinstance(language, str)
            and ((model_dir / "config.json").is_file() or (model_dir / language).is_dir())
        )
        return pack_name(language, custom=custom)

    def start_load(self, pack: str, voice: Any) -> None:
        """Load ``pack`` in the background; the first turn waits for it (``ready``)."""
        self._load_task = self._contexts.create_task(
            self._load_and_report(pack, voice), "pocket_tts_load"
        )

    async def settled(self) -> None:
        """Wait for the load of the current settings, if one is running (a graceful end)."""
        task = self._load_task
        if task is not None and not task.done():
            await asyncio.wait({task})

    def request_switch(self, pack: str, voice: Any) -> None:
        """Load ``pack`` in the background; the next turn switches to it.

        A previous request still loading is superseded, not cancelled (its thread could not be
        stopped anyway); the shared cache keeps what it loaded.
        """
        logger.debug(f"PocketTTS: loading pack {pack!r} in the background")
        self._switch_task = self._contexts.create_task(self._load(pack, voice), "pocket_tts_switch")

    async def ready(self, context_id: str, pack: str, voice: Any) -> Ready:
        """The engine for a new turn: waits for a load still running, switches packs."""
        switched = False
        switch_error: Exception | None = None
        task = self._switch_task
        if task is not None:
            # Not forgotten before it is done: an interrupted turn leaves it to the next one.
            try:
                engine = await self._wait_alive(context_id, task)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                if self._switch_task is task:
                    self._switch_task = None
                    switch_error = e
            else:
                if self._switch_task is task:
                    self._switch_task = None
                    switched = engine is not self._engine
                    self._engine = engine
                    self._load_task = None
        if self._engine is None:
            if self._load_task is None:  # the last one failed: the next turn tries again
                self.start_load(pack, voice)
            assert self._load_task is not None
            try:
                self._engine = await self._wait_alive(context_id, self._load_task)
            except Exception as e:
                raise LoadReported(f"could not load pack {pack!r}: {e}") from e
        return Ready(self._engine, switched=switched, switch_error=switch_error)

    def requested_pack(self, model: Any, language: Any) -> str | None:
        """The pack a settings delta asks for (``model`` wins over ``language``), or None."""
        requested = model if is_given(model) and model else language
        if not is_given(requested) or requested is None:
            return None
        return self.pack_for(requested)

    async def has_speech(self, text: str, normalize: Any, lexicon: Any, text_language: Any) -> bool:
        """False when ``text`` says nothing once normalized and filtered ("👍", "***", a script
        the pack cannot read), whatever its length: text longer than ``SPEECH_CHECK_CHARS`` is
        checked off the event loop. A load of the current settings still running is waited
        for; True if none succeeded (the turn finds out)."""
        await self.settled()
        engine = self._engine
        if engine is None:
            return True

        def check() -> bool:
            return engine.has_speech(
                text, text_language, normalize=bool(normalize), lexicon=lexicon or None
            )

        return await asyncio.to_thread(check) if len(text) > SPEECH_CHECK_CHARS else check()

    async def checked_voice(self, voice: Any) -> tuple[Any, PocketTTSError | None]:
        """A voice setting as the loaded pack takes it (None: its default voice, by name),
        and why the pack cannot use it (None: it can). A load of the current settings still
        running is waited for; unchecked if it failed."""
        await self.settled()
        engine = self._engine
        if engine is None:
            return voice, None
        voice = engine.default_voice if voice is None else voice
        return voice, await self.voice_error(engine, voice)

    async def voice_error(self, engine: PocketTTS | RemoteTTS, voice: Any) -> PocketTTSError | None:
        """Why ``engine`` cannot use ``voice`` (None: it can): the engine's own parser decides,
        off the loop (the voice is cached by it for the next utterance)."""
        try:
            await asyncio.to_thread(engine.voice_state, voice)
        except PocketTTSError as e:
            logger.warning(f"PocketTTS: pack {engine.language!r} cannot use voice {voice!r}: {e}")
            return e
        return None

    async def close(self) -> None:
        """Forget the engine (the shared cache keeps the model) and stop waiting for loads."""
        for task in (self._load_task, self._switch_task):
            if task is not None and not task.done():
                await self._contexts.cancel_task(task)
        self._load_task = self._switch_task = None
        self._engine = None
        remote, self._remote = self._remote, None
        if remote is not None:
            await asyncio.to_thread(remote.close)

    async def _wait_alive(self, context_id: str, task: asyncio.Task) -> PocketTTS | RemoteTTS:
        """Await a load while refreshing the context as often as a speech stream's, so
        Pipecat's no-audio timeout never fires, however short the service set it.

        The load is not cancelled when the caller is (an interruption): it keeps going for the
        next turn. Raises the load's failure.
        """
        while not task.done():
            await asyncio.wait({task}, timeout=self._contexts.keepalive_interval)
            self._contexts.keep_alive(context_id)
        outcome = _outcome(task)
        if outcome is None:
            raise PocketTTSError("the model load was cancelled")
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    async def _load_and_report(self, pack: str, voice: Any) -> PocketTTS | RemoteTTS | Exception:
        """The load of the current settings, its outcome told to the hook (before any turn
        waiting for it goes on); a failed one is forgotten, for the next turn to try again."""
        outcome = await self._load(pack, voice)
        if isinstance(outcome, Exception):
            if self._load_task is asyncio.current_task():
                self._load_task = None
        elif self._engine is None:
            self._engine = outcome
        await self._on_load(outcome)
        return outcome

    async def _load(self, pack: str, voice: Any) -> PocketTTS | RemoteTTS | Exception:
        """Load and warm up ``pack``; returns the failure instead of raising it (Pipecat's task
        manager would swallow it)."""
        if self.settings.server_url is not None:
            return await self._connect(pack)
        options = self.settings.load_options
        model_dir = options.model_dir
        if model_dir is not None and (model_dir / pack).is_dir():
            options = replace(options, model_dir=model_dir / pack)  # one subfolder per pack
        try:
            engine = await asyncio.to_thread(load_shared_engine, pack, options)
            if self.settings.warmup:
                await asyncio.to_thread(warm_up_engine, engine, voice)
        except Exception as e:
            return e
        if self.settings.freeze_gc:
            freeze_heap_once()  # what is alive now (libraries, the model) lives on: not walked
        return engine

    async def _connect(self, pack: str) -> RemoteTTS | Exception:
        """The TTS server, once connected, if it serves ``pack`` (else why not)."""
        settings = self.settings
        assert settings.server_url is not None
        if self._remote is None:
            self._remote = RemoteTTS(settings.server_url, api_key=settings.api_key)
        remote = self._remote
        try:
            await asyncio.to_thread(remote.connect)
        except PocketTTSError as e:
            return e
        if remote.language != pack:
            return UnknownLanguageError(
                f"the TTS server at {remote.url} serves pack {remote.language!r}, not {pack!r}: "
                "set the service's language to it, or start a server with that pack"
            )
        return remote


def _outcome(task: asyncio.Task | None) -> Any:
    """A finished load task's result (an engine or an exception); None if not finished."""
    if task is None or not task.done() or task.cancelled():
        return None
    return task.result()


def load_shared_engine(pack: str, options: LoadOptions) -> PocketTTS:
    """Load a pack once per process: every service of the same pack shares the weights."""
    from ..engine import PocketTTS

    return PocketTTS.load_shared(pack, options=options)


def warm_up_engine(engine: PocketTTS, voice: Any = None) -> None:
    """Run every stage once (and cache the voice) so the first turn pays no first-call cost."""
    try:
        engine.voice_state(voice)
    except PocketTTSError as e:  # the turn reports it; warm up with the pack's default voice
        logger.warning(f"PocketTTS warm-up: voice {voice!r} unusable: {e}")
        voice = None
        engine.voice_state(voice)
    try:
        engine.synthesize(WARMUP_TEXT, voice=voice, max_frames=WARMUP_FRAMES, seed=0)
    except PocketTTSError as e:  # a warm-up problem must not keep the service from starting
        logger.warning(f"PocketTTS warm-up failed: {e}")


__all__ = [
    "WARMUP_FRAMES",
    "WARMUP_TEXT",
    "EngineLoader",
    "LoadHook",
    "LoadReported",
    "LoadSettings",
    "Ready",
    "load_shared_engine",
    "warm_up_engine",
]
