"""PocketTTSService: the Pipecat hooks over one persistent engine session (in process or on a
server, ``engine.contract``).

The modules of this package, in the order a frame meets them: ``settings`` (settings and
constructor arguments), ``engine_load`` (the background load), ``text_gate`` (text that says
nothing opens no context), ``turns`` and ``speech_stream`` (each context's turn on an engine
session), ``playout`` (when pushed audio plays: the word clock), ``output`` (audio at the
pipeline's rate into Pipecat's contexts), ``pipecat_internals`` (Pipecat's private names).
"""

from __future__ import annotations

import asyncio
import copy
import inspect
from collections.abc import AsyncGenerator
from functools import partial
from typing import TYPE_CHECKING, Any

from loguru import logger
from pipecat.frames.frames import (
    AggregatedTextFrame,
    EndFrame,
    ErrorFrame,
    Frame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    StartFrame,
    TTSAudioRawFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessorSetup
from pipecat.services.tts_service import TextAggregationMode
from pipecat.transcriptions.language import Language
from pipecat.utils.context.word_timestamp_tracker import WordTimestamp
from pipecat.utils.tracing.service_decorators import traced_tts

from ..engine import LoadOptions, text_variant
from ..engine.errors import PocketTTSError
from .engine_load import EngineLoader, LoadReported, VoiceChoice
from .output import ContextOutput
from .pipecat_internals import (
    TTSServiceHooks,
    bound_text_pieces,
    is_interruptible,
    last_word_pts,
    set_sentence_language,
    skipped_text_types,
    start_word_timestamps_at,
    stored_settings,
    streams_tokens,
    warn_unhandled_settings,
    word_sequencer,
)
from .playout import Playout, UnspokenContexts
from .settings import (
    UTTERANCE_SETTINGS,
    LoadSettings,
    PocketTTSSettings,
    TurnOptions,
    check_update,
    config_speaks,
    initial_settings,
    language_to_pack,
    pack_default_voice,
    pack_iso_code,
    service_load_settings,
    session_options,
    stated_language,
)
from .speech_stream import Turn
from .text_gate import SpeechChecks, TextGate, TextSettings, piece_frames, text_settings
from .turns import Turns

if TYPE_CHECKING:
    from pipecat.frames.frames import CancelFrame

    from ..engine.contract import SpeechEngine

__all__ = ["PocketTTSService", "PocketTTSSettings"]


class PocketTTSService(TTSServiceHooks):
    """Kyutai PocketTTS, streaming and interruptible, e.g. ``PocketTTSService(language=Language.EN,
    settings=PocketTTSService.Settings(voice="alba"))``."""

    Settings = PocketTTSSettings

    def __init__(
        self,
        *,
        language: Language | str | None = None,
        load: LoadOptions | None = None,
        settings: PocketTTSSettings | None = None,
        text_aggregation_mode: TextAggregationMode | None = None,
        warmup: bool = True,
        resampler_quality: str = "HQ",
        server_url: str | None = None,
        api_key: str | None = None,
        freeze_gc: bool = True,
        **kwargs: Any,
    ) -> None:
        """Create the service; the model loads from ``setup`` on, in the background. Every
        argument and ``Settings`` field, with default, range and cost: the README's options
        table.

        Args:
            language: A Pipecat ``Language`` or a pack name (``"french_24l"``); default English.
            load: How this process loads the model; its fields may be keywords too
                (``backend``, ``model_dir``, ``precision``...).
            settings: The runtime-updatable settings (``PocketTTSService.Settings``).
            text_aggregation_mode: Pipecat's: SENTENCE (default) or TOKEN.
            warmup: Warm the model up once loaded, so the first turn pays no compile.
            resampler_quality: soxr's quality for the pipeline's output rate.
            server_url: Speak with a TTS server's model instead (no load options then).
            api_key: The server's bearer key.
            freeze_gc: Freeze the process's heap once the first model is loaded.
            **kwargs: Pipecat's ``TTSService`` arguments; any other is a ``TypeError`` that
                says what to use.
        """
        loading = LoadSettings(LoadOptions(), warmup, server_url, api_key, freeze_gc)
        loading = service_load_settings(load, kwargs, inspect.signature(type(self)), loading)
        defaults = initial_settings(language, settings)
        interruptible = partial(is_interruptible, self)  # an uninterruptible greeting plays on
        self._playout = Playout(lambda: self.get_clock().get_time(), interruptible)  # words' clock
        self._output = ContextOutput(self, self._playout, resampler_quality)  # read when used
        self._loader = EngineLoader(loading, self._output, self.emit_event)  # on_model_loaded
        self._text_language = text_variant(defaults.language)  # "pt-BR", or None: the pack's
        defaults.language = defaults.model = self._loader.pack_for(defaults.language)
        self._stated_languages = stated_language(language, defaults.language)  # of a config
        kwargs.setdefault("push_stop_frames", True)  # a stop frame even if a context times out
        super().__init__(
            push_start_frame=True,
            push_text_frames=False,  # word timestamps: Pipecat releases words as played
            text_aggregation_mode=text_aggregation_mode,
            settings=defaults,
            **kwargs,
        )
        self.register_event("on_model_loaded")  # the first turn pays no load
        bound_text_pieces(self)  # the pieces Pipecat's word tracking sees stay short
        self._set_sentence_language(self.pack)
        checks = SpeechChecks(
            lambda: self._loader.engine, self._loader.settled, self._text_settings
        )
        self._gate = TextGate(checks.has_speech, checks.new_probe, streamed=streams_tokens(self))
        self.add_text_transformer(self._gate.check, "*")  # after the user's transforms
        self._voice = VoiceChoice(self, defaults.voice is None)  # or the pack's default voice,
        self._voice.name_pack_default(pack_default_voice(self.pack))  # by name, for now
        self._turns = Turns(self._output)
        self._seed_version = 0  # bumped by every seed update
        self._stopped = False
        self._unspoken = UnspokenContexts()

    def can_generate_metrics(self) -> bool:
        """TTFB, usage and text-aggregation metrics are supported."""
        return True

    @property
    def supports_processing_metrics(self) -> bool:
        """False: ``run_tts`` only hands text to the session; TTFB carries the latency."""
        return False

    def language_to_service_language(self, language: Language) -> str | None:
        """The pack speaking a Pipecat ``Language`` (regional variants by base code)."""
        if config_speaks(language, self.pack, self._stated_languages):
            return self.pack
        return language_to_pack(language)

    @property
    def engine(self) -> SpeechEngine | None:
        """The loaded engine (None before setup or after cleanup)."""
        return self._loader.engine

    @property
    def settings(self) -> PocketTTSSettings:
        """The current settings, for reading (change them with a settings update frame)."""
        return stored_settings(self)

    @property
    def pack(self) -> str:
        """The pack of the current settings."""
        return str(self.settings.language)

    # -- settings: a settings update is checked, then applied
    async def on_settings_update(self, delta: PocketTTSSettings) -> dict[str, Any]:
        """Utterance settings apply at the next utterance; an invalid value is an ErrorFrame
        and the previous one stays."""
        if config_speaks(delta.language, self.pack, self._stated_languages):
            delta = copy.copy(delta)  # the upstream config in use speaks it: no switch
            delta.language = self.pack
        update = await check_update(delta, self._loader)
        for error, about in update.refused:
            await self._refuse(error, about)
        if update.pack is not None and update.text_language != self._text_language:
            self._text_language = update.text_language
            self._turns.retire_main()  # the next turn's session reads the new variant
        changed = await super().on_settings_update(update.delta)
        if "voice" in changed:
            self._voice.follows_default = update.follows_default_voice
        if update.pack is not None:  # Pipecat gave its splitters the pack name: mend it
            self._set_sentence_language(self.pack)
        if "language" in changed or "model" in changed:
            self._loader.request_switch(self.pack, self._voice.chosen())
        if "seed" in changed:
            self._seed_version += 1  # each stream restarts its generator at its next utterance
        warn_unhandled_settings(self, set(changed) - UTTERANCE_SETTINGS - {"language", "model"})
        return changed

    def _set_sentence_language(self, pack: str) -> None:  # Pipecat gave its splitters a pack
        set_sentence_language(self, pack_iso_code(pack, self._stated_languages))

    async def _refuse(self, error: Exception, about: str = "", permanent: bool = False) -> None:
        await self._output.refuse(error, about, permanent)

    # -- the background load
    async def setup(self, setup: FrameProcessorSetup) -> None:
        """Start loading the pack in the background (within any start timeout; turns wait)."""
        await super().setup(setup)
        self._loader.start_load(self.pack, self._voice)

    async def start(self, frame: StartFrame) -> None:  # the load's outcome is reported from now on
        await super().start(frame)
        self._stopped = False
        self._loader.started()

    # -- the text gate and text pieces
    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        """Pipecat's, after cancelling the main session at an interruption, through the text
        gate, ending a reply still open at an ``EndFrame`` first (its rest is spoken)."""
        if isinstance(frame, InterruptionFrame):
            self._playout.interrupted()
            await self._turns.interrupt()
        for item in await self._gate.admit(frame):  # TOKEN: a reply's tokens held until spoken
            if self._gate.observe(item):
                await self.process_frame(LLMFullResponseEndFrame(), direction)
            await super().process_frame(item, direction)

    async def on_text_while_unusable(self, text: str, context_id: str) -> None:
        """Said once per turn (Pipecat warns for every token)."""
        self._unspoken.note_unusable(self, context_id, self._loader.load_error)

    async def on_aggregated_text(
        self, src_frame: AggregatedTextFrame, context_id: str | None = None
    ) -> None:
        """Pipecat's, one bounded piece at a time for a long text (``text_gate``)."""
        pieces = piece_frames(src_frame, streams_tokens(self), skipped_text_types(self))
        if pieces is None:
            return await super().on_aggregated_text(src_frame, context_id)
        context_id = context_id or self.create_context_id()
        for frame in pieces:
            await super().on_aggregated_text(frame, context_id)
            await asyncio.sleep(0)  # one piece per loop slice: the loop serves others between

    # -- turns and the speech stream
    @traced_tts
    async def run_tts(self, text: str, context_id: str) -> AsyncGenerator[Frame | None, None]:
        """A sentence (SENTENCE) or a token (TOKEN) to its turn's session; audio comes back
        through the stream's consumer."""
        if self._stopped:
            yield None
            return
        try:
            turn = self._turns.get(context_id) or await self._open_turn(context_id)
            if turn.streamed:
                await turn.stream.feed(turn, text, self._turn_options())
                # Pipecat hands queued frames over without suspending: a backlog of tokens
                # would run in one loop slice. One token per slice keeps every call's loop free.
                await asyncio.sleep(0)
            else:
                await turn.stream.enqueue(turn, text, self._turn_options())
                await self.start_tts_usage_metrics(text)
            yield None
        except LoadReported:  # its ErrorFrame went out when the load failed: nothing to yield
            self._unspoken.text_failed(context_id, word_sequencer(self))
        except Exception as e:  # a PocketTTSError is the caller's; anything else is logged whole
            expected = isinstance(e, PocketTTSError)
            (logger.error if expected else logger.exception)(f"{self}: synthesis failed: {e}")
            self._unspoken.text_failed(context_id, word_sequencer(self))
            yield ErrorFrame(error=f"PocketTTS: {'' if expected else 'unexpected error: '}{e}")

    async def _open_turn(self, context_id: str) -> Turn:
        """Bind a new audio context to a stream (the main one, or a private one)."""
        ready = await self._loader.ready(context_id, self.pack, self._voice)
        if ready.switch_error is not None:  # the pack in use stays
            stored_settings(self).language = stored_settings(self).model = ready.engine.pack_name
        if ready.switched:  # later turns open sessions on the new pack
            self._turns.retire_main()
        return await self._turns.open(
            context_id,
            ready.engine,
            private=not is_interruptible(self, context_id),
            streamed=streams_tokens(self),
            session_options=session_options(self.settings, self._text_language),
            seed_version=self._seed_version,
        )

    def _text_settings(self) -> TextSettings:
        return text_settings(self.settings, self._text_language)

    def _turn_options(self) -> TurnOptions:  # settings as of now
        return TurnOptions.of(self.settings, self._seed_version)

    async def append_to_audio_context(self, context_id: str | None, frame: Any) -> None:
        """A turn's frames (``TTSTextFrame``, announcements) follow its audio as session
        markers; a ``TTSTextFrame`` whose audio is never made is dropped (never in context)."""
        turn = self._turns.get(context_id)
        if isinstance(frame, TTSTextFrame) and (turn is None or turn.closed):
            return  # no session got this text: not loaded, failed, stopped or interrupted
        if turn is not None and not isinstance(
            frame, (TTSAudioRawFrame, TTSStoppedFrame, WordTimestamp, type(None))
        ):  # word timestamps come from the stream, already in order with the audio
            turn.stream.follow_audio(turn, frame)
            return
        await super().append_to_audio_context(context_id, frame)

    async def flush_audio(self, context_id: str | None = None) -> None:
        """The turn's text is complete: speak what is held, end the context once played."""
        if not (context_id := context_id or self.get_active_audio_context_id()):
            return
        turn = self._turns.get(context_id)
        if turn is None:  # text never reached a session (an error, or all whitespace)
            self._unspoken.add(context_id)
            await self._output.end_context(context_id)
            return
        try:
            turn.stream.end_turn(turn, self._turn_options())
        except PocketTTSError as e:  # the text held to the end (a short sentence) failed
            self._unspoken.text_failed(context_id, word_sequencer(self))
            await self.push_error(error_msg=f"PocketTTS: {e}", exception=e)

    # -- playout and the word clock
    async def push_frame(
        self, frame: Frame, direction: FrameDirection = FrameDirection.DOWNSTREAM
    ) -> None:
        """Pipecat's, noting when audio pushed downstream plays and timing turn frames that
        must follow the commit of the turn before (``Playout.time_turn_frame``)."""
        if direction == FrameDirection.DOWNSTREAM:
            self._playout.note(frame, last_word_pts(self))
        await super().push_frame(frame, direction)

    async def start_word_timestamps(self) -> None:
        """Time the context's words from when its first audio plays (``Playout``)."""
        await start_word_timestamps_at(self, self._playout.words_start(last_word_pts(self)))

    # -- a context's end
    async def on_audio_context_interrupted(self, context_id: str) -> None:
        """Cancel the session computing this context: no more audio, compute stops now."""
        await self.stop_all_metrics()
        turn = self._turns.get(context_id)
        if turn is not None:  # only interruptible turns come here, all on the main stream
            await turn.stream.close()
        await super().on_audio_context_interrupted(context_id)

    async def on_audio_context_completed(self, context_id: str) -> None:
        self._unspoken.discard(context_id)
        await super().on_audio_context_completed(context_id)

    async def on_context_force_complete(self, context_id: str) -> None:
        """Text no word covered goes into the context, except where the text made no audio."""
        if context_id not in self._unspoken:
            return await super().on_context_force_complete(context_id)
        sequencer = word_sequencer(self)
        for frame in self._unspoken.completed(sequencer, context_id, last_word_pts(self)):
            await self.push_frame(frame)

    # -- the pipeline's end
    async def stop(self, frame: EndFrame) -> None:
        """Play everything queued (a load still running included), then release the sessions."""
        await super().stop(frame)  # waits until every audio context has played
        await self._loader.settled()
        await self._release()

    async def cancel(self, frame: CancelFrame) -> None:
        """Stop at once: no more audio, compute stops within one frame."""
        await super().cancel(frame)
        await self._release()

    async def cleanup(self) -> None:
        """Release the sessions and the model reference (the shared cache keeps the model)."""
        await super().cleanup()
        await self._release()
        await self._loader.close()

    async def _release(self) -> None:  # no more turns; every session cancelled
        self._stopped = True
        await self._turns.close_all()
