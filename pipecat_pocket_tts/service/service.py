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
        # An uninterruptible greeting plays on through an interruption.
        interruptible = partial(is_interruptible, self)
        # The playout clock times the words as their audio plays.
        self._playout = Playout(lambda: self.get_clock().get_time(), interruptible)
        self._output = ContextOutput(self, self._playout, resampler_quality)
        self._loader = EngineLoader(loading, self._output, self.emit_event)
        # A regional variant such as "pt-BR", or None to use the pack's own.
        self._text_language = text_variant(defaults.language)
        defaults.language = defaults.model = self._loader.pack_for(defaults.language)
        # The languages an upstream config was said to speak.
        self._stated_languages = stated_language(language, defaults.language)
        # A stop frame goes out even when a context times out.
        kwargs.setdefault("push_stop_frames", True)
        super().__init__(
            push_start_frame=True,
            # Pipecat releases the words from their timestamps as the audio plays.
            push_text_frames=False,
            text_aggregation_mode=text_aggregation_mode,
            settings=defaults,
            **kwargs,
        )
        # The model loads in the background, so the first turn does not pay for it.
        self.register_event("on_model_loaded")
        # The text pieces Pipecat's word tracking sees are kept short.
        bound_text_pieces(self)
        self._set_sentence_language(self.pack)
        checks = SpeechChecks(
            lambda: self._loader.engine, self._loader.settled, self._text_settings
        )
        self._gate = TextGate(checks.has_speech, checks.new_probe, streamed=streams_tokens(self))
        # The gate runs after the user's text transformers.
        self.add_text_transformer(self._gate.check, "*")
        # With no voice set, the pack's default voice is used and, for now, named.
        self._voice = VoiceChoice(self, defaults.voice is None)
        self._voice.name_pack_default(pack_default_voice(self.pack))
        self._turns = Turns(self._output)
        # Bumped by every seed update.
        self._seed_version = 0
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
        """Find the pack speaking a Pipecat ``Language`` (regional variants by base code).

        Args:
            language: The language to speak.

        Returns:
            The pack's name, or None when no pack speaks it.
        """
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
        """Apply a settings update; utterance settings take effect at the next utterance.

        An invalid value is reported as an ``ErrorFrame`` and the previous one stays.

        Args:
            delta: The settings that changed.

        Returns:
            The settings that changed, by name.
        """
        if config_speaks(delta.language, self.pack, self._stated_languages):
            # The upstream config in use speaks this language, so there is no switch.
            delta = copy.copy(delta)
            delta.language = self.pack
        update = await check_update(delta, self._loader)
        for error, about in update.refused:
            await self._refuse(error, about)
        if update.pack is not None and update.text_language != self._text_language:
            self._text_language = update.text_language
            # The next turn's session reads the new regional variant.
            self._turns.retire_main()
        changed = await super().on_settings_update(update.delta)
        if "voice" in changed:
            self._voice.follows_default = update.follows_default_voice
        # Pipecat gave its sentence splitters the pack name; give them the language instead.
        if update.pack is not None:
            self._set_sentence_language(self.pack)
        if "language" in changed or "model" in changed:
            self._loader.request_switch(self.pack, self._voice.chosen())
        if "seed" in changed:
            # Each stream restarts its generator at its next utterance.
            self._seed_version += 1
        warn_unhandled_settings(self, set(changed) - UTTERANCE_SETTINGS - {"language", "model"})
        return changed

    def _set_sentence_language(self, pack: str) -> None:
        """Give Pipecat's sentence splitters the pack's language (they were given a pack)."""
        set_sentence_language(self, pack_iso_code(pack, self._stated_languages))

    async def _refuse(self, error: Exception, about: str = "", permanent: bool = False) -> None:
        await self._output.refuse(error, about, permanent)

    # -- the background load
    async def setup(self, setup: FrameProcessorSetup) -> None:
        """Start loading the pack in the background (within any start timeout; turns wait).

        Args:
            setup: Pipecat's processor setup.
        """
        await super().setup(setup)
        self._loader.start_load(self.pack, self._voice)

    async def start(self, frame: StartFrame) -> None:
        """Start the service; the load's outcome is reported from now on.

        Args:
            frame: The pipeline's start frame.
        """
        await super().start(frame)
        self._stopped = False
        self._loader.started()

    # -- the text gate and text pieces
    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        """Handle a frame as Pipecat does, once through the text gate.

        An interruption first cancels the main session; an ``EndFrame`` first ends a reply
        still open, so its rest is spoken.

        Args:
            frame: The frame to handle.
            direction: The direction it travels.
        """
        if isinstance(frame, InterruptionFrame):
            self._playout.interrupted()
            await self._turns.interrupt()
        # With TOKEN aggregation, a reply's tokens are held until they speak.
        for item in await self._gate.admit(frame):
            if self._gate.observe(item):
                await self.process_frame(LLMFullResponseEndFrame(), direction)
            await super().process_frame(item, direction)

    async def on_text_while_unusable(self, text: str, context_id: str) -> None:
        """Report text that no engine can speak, once per turn (Pipecat warns per token).

        Args:
            text: The text that goes unspoken.
            context_id: Its audio context.
        """
        self._unspoken.note_unusable(self, context_id, self._loader.load_error)

    async def on_aggregated_text(
        self, src_frame: AggregatedTextFrame, context_id: str | None = None
    ) -> None:
        """Hand aggregated text on as Pipecat does, a long text in bounded pieces.

        Args:
            src_frame: The aggregated text.
            context_id: Its audio context, if any.
        """
        pieces = piece_frames(src_frame, streams_tokens(self), skipped_text_types(self))
        if pieces is None:
            return await super().on_aggregated_text(src_frame, context_id)
        context_id = context_id or self.create_context_id()
        for frame in pieces:
            await super().on_aggregated_text(frame, context_id)
            # One piece per loop slice lets the loop serve others in between.
            await asyncio.sleep(0)

    # -- turns and the speech stream
    @traced_tts
    async def run_tts(self, text: str, context_id: str) -> AsyncGenerator[Frame | None, None]:
        """Queue a sentence (SENTENCE) or a token (TOKEN) on its turn's session.

        Args:
            text: The text to speak.
            context_id: The turn's audio context.

        Returns:
            A generator of None or an ``ErrorFrame``; the audio comes through the stream.
        """
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
        except LoadReported:
            # Its ErrorFrame went out when the load failed, so there is nothing to yield.
            self._unspoken.text_failed(context_id, word_sequencer(self))
        except Exception as e:
            # A PocketTTSError is the caller's to read; anything else is logged whole.
            expected = isinstance(e, PocketTTSError)
            (logger.error if expected else logger.exception)(f"{self}: synthesis failed: {e}")
            self._unspoken.text_failed(context_id, word_sequencer(self))
            yield ErrorFrame(error=f"PocketTTS: {'' if expected else 'unexpected error: '}{e}")

    async def _open_turn(self, context_id: str) -> Turn:
        """Bind a new audio context to a stream (the main one, or a private one)."""
        ready = await self._loader.ready(context_id, self.pack, self._voice)
        # A failed switch leaves the pack in use: the settings name it again.
        if ready.switch_error is not None:
            stored_settings(self).language = stored_settings(self).model = ready.engine.pack_name
        # Later turns open their sessions on the new pack.
        if ready.switched:
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

    def _turn_options(self) -> TurnOptions:
        """The turn options of the settings as of now."""
        return TurnOptions.of(self.settings, self._seed_version)

    async def append_to_audio_context(self, context_id: str | None, frame: Any) -> None:
        """Place a turn's frame (``TTSTextFrame``, announcements) after its audio queued so far.

        A ``TTSTextFrame`` whose audio is never made is dropped: it never enters the context.

        Args:
            context_id: The turn's audio context.
            frame: The frame to place.
        """
        turn = self._turns.get(context_id)
        if isinstance(frame, TTSTextFrame) and (turn is None or turn.closed):
            # No session got this text: not loaded, failed, stopped or interrupted.
            return
        if turn is not None and not isinstance(
            frame, (TTSAudioRawFrame, TTSStoppedFrame, WordTimestamp, type(None))
        ):
            # Word timestamps come from the stream, already in order with the audio.
            turn.stream.follow_audio(turn, frame)
            return
        await super().append_to_audio_context(context_id, frame)

    async def flush_audio(self, context_id: str | None = None) -> None:
        """Mark the turn's text complete: speak what is held, end the context once played.

        Args:
            context_id: The turn's audio context (default: the active one).
        """
        if not (context_id := context_id or self.get_active_audio_context_id()):
            return
        turn = self._turns.get(context_id)
        # The text never reached a session (an error, or only whitespace).
        if turn is None:
            self._unspoken.add(context_id)
            await self._output.end_context(context_id)
            return
        try:
            turn.stream.end_turn(turn, self._turn_options())
        except PocketTTSError as e:
            # The text held back to the end (a short sentence) failed.
            self._unspoken.text_failed(context_id, word_sequencer(self))
            await self.push_error(error_msg=f"PocketTTS: {e}", exception=e)

    # -- playout and the word clock
    async def push_frame(
        self, frame: Frame, direction: FrameDirection = FrameDirection.DOWNSTREAM
    ) -> None:
        """Push a frame as Pipecat does, noting when audio pushed downstream plays.

        Turn frames that must follow the turn before's commit are timed after it.

        Args:
            frame: The frame to push.
            direction: The direction to push it.
        """
        if direction == FrameDirection.DOWNSTREAM:
            self._playout.note(frame, last_word_pts(self))
        await super().push_frame(frame, direction)

    async def start_word_timestamps(self) -> None:
        """Time the context's words from when its first audio plays (``Playout``)."""
        await start_word_timestamps_at(self, self._playout.words_start(last_word_pts(self)))

    # -- a context's end
    async def on_audio_context_interrupted(self, context_id: str) -> None:
        """Cancel the session computing this context: no more audio, compute stops now.

        Args:
            context_id: The interrupted audio context.
        """
        await self.stop_all_metrics()
        turn = self._turns.get(context_id)
        # Only interruptible turns come here, all on the main stream.
        if turn is not None:
            await turn.stream.close()
        await super().on_audio_context_interrupted(context_id)

    async def on_audio_context_completed(self, context_id: str) -> None:
        """Forget the unspoken record of a context once all its audio has played."""
        self._unspoken.discard(context_id)
        await super().on_audio_context_completed(context_id)

    async def on_context_force_complete(self, context_id: str) -> None:
        """Put the text no word covered into the context, unless that text made no audio.

        Args:
            context_id: The audio context being completed.
        """
        if context_id not in self._unspoken:
            return await super().on_context_force_complete(context_id)
        sequencer = word_sequencer(self)
        for frame in self._unspoken.completed(sequencer, context_id, last_word_pts(self)):
            await self.push_frame(frame)

    # -- the pipeline's end
    async def stop(self, frame: EndFrame) -> None:
        """Play everything queued (a load still running included), then release the sessions.

        Args:
            frame: The pipeline's end frame.
        """
        # This waits until every audio context has played.
        await super().stop(frame)
        await self._loader.settled()
        await self._release()

    async def cancel(self, frame: CancelFrame) -> None:
        """Stop at once: no more audio, compute stops within one frame.

        Args:
            frame: The pipeline's cancel frame.
        """
        await super().cancel(frame)
        await self._release()

    async def cleanup(self) -> None:
        """Release the sessions and the model reference (the shared cache keeps the model)."""
        await super().cleanup()
        await self._release()
        await self._loader.close()

    async def _release(self) -> None:
        """Take no more turns and cancel every session."""
        self._stopped = True
        await self._turns.close_all()
