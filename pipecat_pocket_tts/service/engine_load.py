"""The background load: the service's engine, loaded, warmed up, switched; its voice; the heap.

``EngineLoader`` owns the engine and the load tasks: the pack of the current settings, loaded
in the background from setup on (setup never waits for it: Pipecat's ``run_test`` gives a
start one second; the text gate, voice checks and the first turn wait for it; how it ended is
reported once, from the pipeline's start), and a pack requested at runtime, loaded in the
background and adopted at the next turn. With a server URL the engine
is a ``RemoteTTS`` (a TTS server's one model, used through the same interface): "loading" is
connecting to it, and a pack is one the server serves. Loads go through the
process-wide shared cache (services of one pack share the weights) and run off the event
loop, on the service's task manager; a turn waiting for one has its audio context kept alive
as often as a speech stream's (both through ``ContextOutput``). The calls into the engine's
loading API are all in ``load_shared_engine`` and ``EngineLoader.pack_for`` below.

Which voice the service speaks with (``VoiceChoice``): the user's choice, or the pack's
default voice, reported by that voice's name (from the language's record at construction,
from the engine once loaded); a chosen voice the engine cannot use is reported once and the
default voice followed instead.

Python's garbage collector and the event loop (``freeze_heap_once``): a full collection walks
every container object of the process while it holds the GIL, every event loop and model
thread waiting. After the imports and a model load that is about 190,000 objects with the
full-size pack and 260,000 with the tiny test pack, and one such collection took 94–164 ms of
CPU (``benchmarks.profiles.loop``). Nearly all of them live as long as the process, so the
service calls ``gc.freeze()`` once per process, after its first model has loaded and warmed
up (``PocketTTSService(freeze_gc=False)`` or ``leave_collector_alone()`` to opt out). Once
only: an object alive then that later becomes cyclic garbage is never collected, so the
objects of the call running then may be kept; a freeze per call would keep every call's.
"""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from loguru import logger
from pipecat.services.tts_service import TTSService
from pipecat.utils.types import is_given

from ..client import RemoteTTS
from ..engine import LoadOptions, pack_name, served_name
from ..engine.contract import SpeechEngine
from ..engine.errors import (
    PocketTTSError,
    ServerKeyRefusedError,
    ServerUnavailableError,
    UnknownLanguageError,
)
from .pipecat_internals import stored_settings
from .settings import LoadSettings

if TYPE_CHECKING:
    from pipecat.transcriptions.language import Language

    from ..engine import PocketTTS
    from .output import ContextOutput


class LoadReported(PocketTTSError):
    """The load a turn waited for failed; its failure was reported (once) when it happened."""


@dataclass(frozen=True)
class TurnEngine:
    """The engine a new turn speaks with, and what changed to get it."""

    engine: SpeechEngine
    # True once a pack requested at runtime has been adopted.
    switched: bool = False
    # Why a requested pack failed to load; the engine in use stays the old one.
    switch_error: Exception | None = None


class EngineLoader:
    """Loads packs off the event loop and hands the engine to new turns."""

    def __init__(
        self,
        settings: LoadSettings,
        contexts: ContextOutput,
        emit: Callable[[str], Awaitable[None]],
    ) -> None:
        self.settings = settings
        # The task group runs the loads and keeps a waiting turn's context alive.
        self._contexts = contexts
        # The service's event emitter, for on_model_loaded.
        self._emit = emit
        # A load's outcome is reported only once the pipeline runs.
        self._started = asyncio.Event()
        # Why the last load failed, once that has been reported.
        self.load_error: Exception | None = None
        self._engine: SpeechEngine | None = None
        # The client is made at the first load, never in __init__.
        self._remote: RemoteTTS | None = None
        # The load of the pack the current settings name.
        self._load_task: asyncio.Task | None = None
        # The load of a pack requested at runtime.
        self._switch_task: asyncio.Task | None = None

    @property
    def engine(self) -> SpeechEngine | None:
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

    def start_load(self, pack: str, voice: VoiceChoice) -> None:
        """Load ``pack`` in the background; its outcome is reported once started."""
        self._load_task = self._contexts.create_task(
            self._load_and_report(pack, voice), "pocket_tts_load"
        )

    def started(self) -> None:
        """The pipeline has started: a load's outcome can be reported from now on."""
        self._started.set()

    async def settled(self) -> None:
        """Wait for the load of the current settings, if one is running."""
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

    async def _load_and_report(self, pack: str, voice: VoiceChoice) -> SpeechEngine | Exception:
        """The load of the current settings, its outcome reported once the pipeline has
        started and before any turn waiting for it goes on: a failure is one ErrorFrame
        (permanent: no model to speak with, but a server may come back) and is forgotten for
        the next turn to try again; a loaded pack's voice is checked and named."""
        outcome = await self._load(pack, voice.chosen())
        if isinstance(outcome, Exception) and self._load_task is asyncio.current_task():
            self._load_task = None
        elif not isinstance(outcome, Exception) and self._engine is None:
            self._engine = outcome
        await self._started.wait()
        if isinstance(outcome, Exception):
            self.load_error = outcome
            permanent = not isinstance(outcome, ServerUnavailableError)
            # A refused key says so itself: no pack load was tried.
            refused = isinstance(outcome, ServerKeyRefusedError)
            about = "" if refused else f"could not load pack {pack!r}"
            await self._contexts.refuse(outcome, about, permanent)
            return outcome
        self.load_error = None
        await self._check_voice(outcome, voice)
        voice.name_default(outcome)
        await self._emit("on_model_loaded")
        return outcome

    async def _check_voice(self, engine: SpeechEngine, voice: VoiceChoice) -> None:
        error = await voice.check(engine, self.voice_error)
        if error is not None:
            about = f"voice unusable, speaking with {engine.default_voice!r} instead"
            await self._contexts.refuse(error, about)

    async def ready(self, context_id: str, pack: str, voice: VoiceChoice) -> TurnEngine:
        """The engine for a new turn: waits for a load still running, switches packs (a
        failed switch is reported and the pack in use kept; after a switch the chosen voice
        is checked on the new pack); the voice setting names the pack's default voice."""
        turn_engine = await self._ready(context_id, pack, voice)
        if turn_engine.switch_error is not None:
            await self._contexts.refuse(turn_engine.switch_error, f"could not load pack {pack!r}")
        if turn_engine.switched:
            await self._check_voice(turn_engine.engine, voice)
        voice.name_default(turn_engine.engine)
        return turn_engine

    async def _ready(self, context_id: str, pack: str, voice: VoiceChoice) -> TurnEngine:
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
            # The last load failed, so this turn tries again.
            if self._load_task is None:
                self.start_load(pack, voice)
            assert self._load_task is not None
            try:
                self._engine = await self._wait_alive(context_id, self._load_task)
            except Exception as e:
                raise LoadReported(f"could not load pack {pack!r}: {e}") from e
        return TurnEngine(self._engine, switched=switched, switch_error=switch_error)

    def requested_pack(self, model: Any, language: Any) -> str | None:
        """The pack a settings delta asks for (``model`` wins over ``language``), or None."""
        requested = model if is_given(model) and model else language
        if not is_given(requested) or requested is None:
            return None
        return self.pack_for(requested)

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

    async def voice_error(self, engine: SpeechEngine, voice: Any) -> PocketTTSError | None:
        """Why ``engine`` cannot use ``voice`` (None: it can): the engine's own parser decides,
        off the loop (the voice is cached by it for the next utterance)."""
        try:
            await asyncio.to_thread(engine.voice_state, voice)
        except PocketTTSError as e:
            logger.warning(f"PocketTTS: pack {engine.pack_name!r} cannot use voice {voice!r}: {e}")
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

    async def _wait_alive(self, context_id: str, task: asyncio.Task) -> SpeechEngine:
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

    async def _load(self, pack: str, voice: Any) -> SpeechEngine | Exception:
        """Load and warm up ``pack``; returns the failure instead of raising it (Pipecat's task
        manager would swallow it)."""
        if self.settings.server_url is not None:
            return await self._connect(pack)
        options = self.settings.load_options
        model_dir = options.model_dir
        if model_dir is not None and (model_dir / pack).is_dir():
            # Each pack is kept in its own subfolder.
            options = replace(options, model_dir=model_dir / pack)
        try:
            engine = await asyncio.to_thread(load_shared_engine, pack, options)
            if self.settings.warmup:
                await asyncio.to_thread(engine.warm_up, voice)
        except Exception as e:
            return e
        if self.settings.freeze_gc:
            # What is alive now (libraries, the model) lives on, so the collector stops walking it.
            freeze_heap_once()
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
        # An upstream config is served under a name of its own.
        if remote.pack_name not in (pack, served_name(pack)):
            return UnknownLanguageError(
                f"the TTS server at {remote.url} serves pack {remote.pack_name!r}, not {pack!r}: "
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


# -- the voice ---------------------------------------------------------------------------
class VoiceChoice:
    """The voice setting's meaning: chosen by the user, or following the pack's default."""

    def __init__(self, service: TTSService, follows_default: bool) -> None:
        # The service whose voice setting this is; it is read, and written to name the voice.
        self._service = service
        self.follows_default = follows_default

    def _voice(self) -> Any:
        return stored_settings(self._service).voice

    def _set_voice(self, voice: Any) -> None:
        stored_settings(self._service).voice = voice

    def chosen(self) -> Any:
        """The voice the user chose (None: the pack's default)."""
        return None if self.follows_default else self._voice()

    def name_pack_default(self, name: str | None) -> None:
        """Report the pack's default voice by ``name`` (from its record) while following it."""
        if self.follows_default:
            self._set_voice(name)

    def name_default(self, engine: SpeechEngine) -> None:
        """Report the engine's default voice by name while following it."""
        if self.follows_default:
            self._set_voice(engine.default_voice)

    async def check(
        self,
        engine: SpeechEngine,
        voice_error: Callable[[SpeechEngine, Any], Awaitable[PocketTTSError | None]],
    ) -> PocketTTSError | None:
        """Why ``engine`` cannot use the chosen voice (then the default is followed and
        named), or None."""
        if self.follows_default:
            self.name_default(engine)
            return None
        error = await voice_error(engine, self._voice())
        if error is not None:
            self.follows_default = True
        self.name_default(engine)
        return error


# -- the heap, frozen once -----------------------------------------------------------------
class _HeapFreeze:
    """Whether this process's heap was frozen (or left alone for good), decided once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._decided = False
        # How many objects were frozen (0 if never).
        self.froze = 0

    def freeze_once(self) -> bool:
        """``gc.freeze()`` if nothing decided yet; True if it froze now."""
        with self._lock:
            if self._decided:
                return False
            self._decided = True
            gc.freeze()
            self.froze = gc.get_freeze_count()
        logger.debug(
            f"PocketTTS: froze the {self.froze} objects alive after the model load (gc.freeze()):"
            " garbage collections skip them (PocketTTSService(freeze_gc=False) to opt out)"
        )
        return True

    def leave_alone(self) -> None:
        with self._lock:
            self._decided = True


_HEAP = _HeapFreeze()


def freeze_heap_once() -> bool:
    """Freeze the process's heap the first time a service's model is loaded; True if now."""
    return _HEAP.freeze_once()


def leave_collector_alone() -> None:
    """No service of this process ever freezes the heap (an application managing ``gc``
    itself, a test suite)."""
    _HEAP.leave_alone()


def frozen_objects() -> int:
    """How many objects the service froze (0: it did not)."""
    return _HEAP.froze


__all__ = [
    "EngineLoader",
    "LoadReported",
    "TurnEngine",
    "VoiceChoice",
    "freeze_heap_once",
    "frozen_objects",
    "leave_collector_alone",
    "load_shared_engine",
]
