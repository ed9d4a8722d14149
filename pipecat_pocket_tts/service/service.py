"""PocketTTSService: the Pipecat hooks over one persistent PocketTTS engine session.

Text goes to the session (``enqueue`` per sentence, ``feed`` per token with TOKEN aggregation);
its audio, text frames and turn ends come back in order (``turns``); an interruption cancels
the session before the ``InterruptionFrame`` goes on. Loading and pack switching: ``loading``.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

from loguru import logger
from pipecat.frames.frames import (
    AggregatedTextFrame,
    EndFrame,
    ErrorFrame,
    Frame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    OutputAudioRawFrame,
    StartFrame,
    TTSAudioRawFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessorSetup
from pipecat.services.tts_service import TextAggregationMode
from pipecat.transcriptions.language import Language
from pipecat.utils.context.word_timestamp_tracker import WordTimestamp
from pipecat.utils.tracing.service_decorators import traced_tts

from ..engine.errors import PocketTTSError, ServerUnavailableError
from ..engine.model.config import SAMPLE_RATE
from ..engine.model.languages import text_variant
from ..engine.model.options import LoadOptions
from .arguments import check_extra_arguments, take_load_options, take_quantize
from .context_output import ContextOutput
from .languages import language_to_pack, pack_default_voice, pack_iso_code
from .loading import WARMUP_FRAMES, WARMUP_TEXT, EngineLoader, LoadReported, LoadSettings
from .pipecat_internals import (
    TTSServiceHooks,
    bound_text_units,
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
from .playout import Playout
from .resampler import StreamResampler
from .settings import UTTERANCE_SETTINGS, PocketTTSSettings, initial_settings, session_options
from .speech_stream import Turn, TurnOptions
from .text_gate import TextGate
from .text_units import STREAMED_UNIT_CHARS, UNIT_CHARS, split_units
from .turns import Turns
from .unspoken import UnspokenContexts
from .updates import check_update

if TYPE_CHECKING:
    from pipecat.frames.frames import CancelFrame

    from ..engine import PocketTTS
    from ..server.client import RemoteTTS

__all__ = ["WARMUP_FRAMES", "WARMUP_TEXT", "PocketTTSService", "PocketTTSSettings"]

_TURN_FRAMES = (LLMFullResponseStartFrame, TTSStartedFrame, LLMFullResponseEndFrame)


class PocketTTSService(TTSServiceHooks):
    """Kyutai PocketTTS on a local NumPy (or CoreML) engine, streaming and interruptible.

    Event ``on_model_loaded(service)``: the model of the current settings is loaded and warmed
    up (a turn from now on pays no load).

    Example::

        tts = PocketTTSService(
            language=Language.EN,
            settings=PocketTTSService.Settings(voice="alba", temperature=0.5),
        )
    """

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
        """Create the service; the model loads in the background from ``setup`` on (never in
        the constructor; the first turn waits for it).

        Args:
            language: A Pipecat ``Language`` (regional variants by base code) or a pack name;
                defaults to English. ``settings.language`` wins when both are given.
            load: How packs load (``LoadOptions``); its fields may also be given as keywords:
                ``backend`` ("numpy", "coreml", "auto"), ``model_dir`` (a pack folder, or one
                subfolder per pack named after it; nothing is downloaded), ``revision``,
                ``token``, ``sampler_steps``, ``precision`` ("fp32", "bf16", "int8"),
                ``threads`` and ``max_streams`` (the model's scheduler)...
            settings: Voice, temperature, seed, normalize, lexicon (see ``Settings``).
            text_aggregation_mode: SENTENCE (default) or TOKEN: LLM tokens go to the session's
                text stream (``Session.feed``), which cuts and prepares as the batch path.
            warmup: Run a short synthesis in ``setup`` so the first turn is fast.
            resampler_quality: soxr quality of the output resampler (QQ, LQ, MQ, HQ, VHQ).
            server_url: ``ws://host:port`` of a TTS server (``python -m pipecat_pocket_tts
                serve``) to speak with instead of loading a model in this process; every
                behaviour is the same. The server's pack must be ``language``'s; voices are
                the server's names; ``load`` options are the server's own.
            api_key: The server's API key (sent as a bearer token).
            freeze_gc: Once the first model of this process has loaded, ``gc.freeze()`` what
                is alive then (the libraries, the model), so Python's full garbage
                collections, which stall every event loop and model thread, skip it
                (``service/collector.py``). False leaves the collector alone.
            **kwargs: Other ``TTSService`` arguments (``sample_rate``, ``text_transforms``...);
                any other keyword (``temp``, ``quantize``, a typo) is a ``TypeError`` saying
                what to use.
        """
        options = take_quantize(take_load_options(load, kwargs), kwargs)  # checked now
        check_extra_arguments(kwargs, known=inspect.signature(PocketTTSService).parameters)
        if server_url is not None and options != LoadOptions():
            raise TypeError(
                "load options (backend, precision, threads...) choose how this process loads a "
                "model; with server_url the server's own options decide: drop them here"
            )
        defaults = initial_settings(language, settings)
        # Words are timed from when their audio plays, on the pipeline's clock (read when used).
        self._playout = Playout(lambda: self.get_clock().get_time())
        self._output = ContextOutput(self, self._playout)  # reads the service only when used
        self._loader = EngineLoader(
            LoadSettings(options, warmup and server_url is None, server_url, api_key, freeze_gc),
            self._output,
            self._loaded,
        )
        self._started = asyncio.Event()  # the load's outcome is reported once started
        #: A regional variant for the text normalizer ("pt-BR"), or None for the pack's own.
        self._text_language = text_variant(defaults.language)
        defaults.language = defaults.model = self._loader.pack_for(defaults.language)

        kwargs.setdefault("push_stop_frames", True)  # a stop frame even if a context times out
        super().__init__(
            push_start_frame=True,
            push_text_frames=False,  # word timestamps: Pipecat releases words as played
            text_aggregation_mode=text_aggregation_mode,
            settings=defaults,
            **kwargs,
        )
        self._register_event_handler("on_model_loaded")  # (service): ready to speak at once
        bound_text_units(self)  # the units Pipecat's word tracking sees stay short
        self._set_sentence_language(self.pack)
        self._gate = TextGate(self._has_speech)  # after the user's transforms
        gate = self._gate.token if streams_tokens(self) else self._gate.sentence
        self.add_text_transformer(gate, "*")
        #: The voice setting follows the pack's default voice (reported by its name, from
        #: the language's record now and from the pack once loaded).
        self._default_voice = defaults.voice is None
        if self._default_voice:
            stored_settings(self).voice = pack_default_voice(self.pack)
        self._turns = Turns(
            self._output,
            lambda: StreamResampler(SAMPLE_RATE, self.sample_rate, quality=resampler_quality),
        )
        self._seed_version = 0  # bumped by every seed update
        self._stopped = False
        self._unspoken = UnspokenContexts()
        self._load_error: Exception | None = None
        self._unspoken_turn_noted: str | None = None  # the turn last said to go unspoken

    def can_generate_metrics(self) -> bool:
        """TTFB, usage and text-aggregation metrics are supported."""
        return True

    @property
    def supports_processing_metrics(self) -> bool:
        """False: ``run_tts`` only hands text to the session; TTFB carries the latency."""
        return False

    def language_to_service_language(self, language: Language) -> str | None:
        """The pack speaking a Pipecat ``Language`` (regional variants by base code)."""
        return language_to_pack(language)

    @property
    def engine(self) -> PocketTTS | RemoteTTS | None:
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

    async def setup(self, setup: FrameProcessorSetup) -> None:
        """Start loading (and warming up) the pack in the background, off the event loop:
        setup returns at once, within any start timeout; the first turn waits for the model."""
        await super().setup(setup)
        self._loader.start_load(self.pack, self._chosen_voice())

    async def start(self, frame: StartFrame) -> None:
        """Start the service (the load's outcome is reported from now on)."""
        await super().start(frame)
        self._stopped = False
        self._started.set()

    async def _loaded(self, outcome: PocketTTS | RemoteTTS | Exception) -> None:
        """Report a pack that failed to load (one ErrorFrame; permanent: no model to speak
        with, though a server may come back) or a constructor voice the pack cannot use."""
        await self._started.wait()
        if isinstance(outcome, Exception):
            self._load_error = outcome
            permanent = not isinstance(outcome, ServerUnavailableError)
            await self._refuse(outcome, f"could not load pack {self.pack!r}", permanent)
            return
        self._load_error = None
        if not self._default_voice:  # the constructor's voice, now
            error = await self._loader.voice_error(outcome, self.settings.voice)
            if error is not None:
                self._default_voice = True
                self._name_default_voice(outcome)
                about = f"voice unusable, speaking with {self.settings.voice!r} instead"
                await self._refuse(error, about)
        self._name_default_voice(outcome)
        await self._call_event_handler("on_model_loaded")

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

    async def _release(self) -> None:
        self._stopped = True
        await self._turns.close_all()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        """Pipecat's, after cancelling the main session at an interruption (all its turns are
        interruptible) and ending a reply still open at an ``EndFrame`` (its rest is spoken:
        Pipecat would stop the service first)."""
        if isinstance(frame, InterruptionFrame):
            self._playout.interrupted()
            await self._turns.interrupt()
        if self._gate.observe(frame):
            await self.process_frame(LLMFullResponseEndFrame(), direction)
        await super().process_frame(frame, direction)

    async def on_text_while_unusable(self, text: str, context_id: str) -> None:
        """A service with no model to speak with says so once per turn, where Pipecat warns
        for every piece of text (every LLM token with TOKEN aggregation)."""
        if context_id != self._unspoken_turn_noted:
            self._unspoken_turn_noted = context_id
            why = f" ({self._load_error})" if self._load_error is not None else ""
            logger.warning(f"{self}: no model to speak with{why}; this reply is not spoken")

    async def push_frame(
        self, frame: Frame, direction: FrameDirection = FrameDirection.DOWNSTREAM
    ) -> None:
        """Pipecat's, noting when the audio pushed downstream will play, and timing a turn's
        start and end frames after the commit of the turn before it when that commit is timed
        at the end of its audio (``Playout.turn_start``)."""
        if direction == FrameDirection.DOWNSTREAM and isinstance(frame, OutputAudioRawFrame):
            seconds = len(frame.audio) / (2 * frame.num_channels * frame.sample_rate)
            self._playout.pushed(seconds)
        elif (
            direction == FrameDirection.DOWNSTREAM
            and isinstance(frame, _TURN_FRAMES)
            and frame.pts is None
            and not getattr(frame, "skip_tts", False)  # TTSStartedFrame has none
        ):  # an end frame without a time: its reply timed no word; it follows the start
            frame.pts = self._playout.turn_start(last_word_pts(self))
        await super().push_frame(frame, direction)

    async def start_word_timestamps(self) -> None:
        """Time the playing context's words from when its first audio plays: after all the
        audio pushed before it (a greeting, an earlier reply), not when it is pushed; and
        after its start frames when they wait for the commit of the turn before it."""
        await start_word_timestamps_at(self, self._playout.words_start(last_word_pts(self)))

    async def on_aggregated_text(
        self, src_frame: AggregatedTextFrame, context_id: str | None = None
    ) -> None:
        """Pipecat's, one bounded unit at a time for a long text (a ``TTSSpeakFrame``, a
        burst of tokens): Pipecat's word tracking costs grow with the unit."""
        text = src_frame.text
        limit = STREAMED_UNIT_CHARS if streams_tokens(self) else UNIT_CHARS
        if (
            len(text) < limit
            or src_frame.raw_text not in (None, text)
            or src_frame.text_type in skipped_text_types(self)
        ):
            return await super().on_aggregated_text(src_frame, context_id)
        context_id = context_id or self.create_context_id()
        for unit in split_units(text, limit):
            frame = AggregatedTextFrame(unit, src_frame.text_type, raw_text=unit)
            frame.interruptible = src_frame.interruptible
            await super().on_aggregated_text(frame, context_id)
            await asyncio.sleep(0)  # one unit per loop slice: the loop serves others between

    @traced_tts
    async def run_tts(self, text: str, context_id: str) -> AsyncGenerator[Frame | None, None]:
        """Hand a sentence (SENTENCE aggregation) or an LLM token (TOKEN) of the context's
        turn to its session; the audio arrives through the stream's consumer."""
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
        except LoadReported:  # its ErrorFrame went out when the load failed
            self._unspoken.text_failed(context_id, word_sequencer(self))
            yield None
        except Exception as e:  # a PocketTTSError is the caller's; anything else is logged whole
            expected = isinstance(e, PocketTTSError)
            (logger.error if expected else logger.exception)(f"{self}: synthesis failed: {e}")
            self._unspoken.text_failed(context_id, word_sequencer(self))
            yield ErrorFrame(error=f"PocketTTS: {'' if expected else 'unexpected error: '}{e}")

    async def flush_audio(self, context_id: str | None = None) -> None:
        """The turn's text is complete: speak what is held, end the context once played."""
        context_id = context_id or self.get_active_audio_context_id()
        if not context_id:
            return
        turn = self._turns.get(context_id)
        if turn is None:  # text never reached a session (an error, or all whitespace)
            self._unspoken.add(context_id)
            await self._output.end_context(context_id)
            return
        try:
            turn.stream.end_turn(turn, self._turn_options())
        except PocketTTSError as e:
            await self.push_error(error_msg=f"PocketTTS: {e}", exception=e)

    async def on_audio_context_interrupted(self, context_id: str) -> None:
        """Cancel the session computing this context: no more audio, compute stops now."""
        await self.stop_all_metrics()
        turn = self._turns.get(context_id)
        if turn is not None:  # only interruptible turns come here, all on the main stream
            await turn.stream.close()
        await super().on_audio_context_interrupted(context_id)

    async def append_to_audio_context(self, context_id: str | None, frame: Any) -> None:
        """Let Pipecat's frames of a turn (``TTSTextFrame``, announcements: appended before the
        audio exists) out after the audio before them, as session markers. A ``TTSTextFrame``
        whose audio is never made (failed, or reached no session) is dropped, so unspoken
        text never enters the LLM context."""
        turn = self._turns.get(context_id)
        if isinstance(frame, TTSTextFrame) and (turn is None or turn.closed):
            return  # no session got this text: not loaded, failed, stopped or interrupted
        if turn is not None and not isinstance(
            frame, (TTSAudioRawFrame, TTSStoppedFrame, WordTimestamp, type(None))
        ):  # word timestamps come from the stream, already in order with the audio
            turn.stream.follow_audio(turn, frame)
            return
        await super().append_to_audio_context(context_id, frame)

    async def on_audio_context_completed(self, context_id: str) -> None:
        self._unspoken.discard(context_id)
        await super().on_audio_context_completed(context_id)

    async def on_context_force_complete(self, context_id: str) -> None:
        """At a context's end, Pipecat writes the text no word covered into the context; for
        a context whose text made no audio, that text is dropped instead."""
        if context_id not in self._unspoken:
            return await super().on_context_force_complete(context_id)
        sequencer = word_sequencer(self)
        for frame in self._unspoken.completed(sequencer, context_id, last_word_pts(self)):
            await self.push_frame(frame)

    async def _open_turn(self, context_id: str) -> Turn:
        """Bind a new audio context to a stream (the main one, or a private one)."""
        ready = await self._loader.ready(context_id, self.pack, self._chosen_voice())
        if ready.switch_error is not None:
            await self._refuse(ready.switch_error, f"could not load pack {self.pack!r}")
            stored_settings(self).language = stored_settings(self).model = ready.engine.language
        if ready.switched:  # later turns open sessions on the new pack, with a voice it has
            if not self._default_voice and await self._loader.voice_error(
                ready.engine, self.settings.voice
            ):
                self._default_voice = True
            self._turns.retire_main()
        self._name_default_voice(ready.engine)
        return await self._turns.open(
            context_id,
            ready.engine,
            private=not is_interruptible(self, context_id),
            streamed=streams_tokens(self),
            session_options=session_options(self.settings, self._text_language),
            seed_version=self._seed_version,
        )

    def _chosen_voice(self) -> Any:
        """The voice the user chose (None: the pack's default)."""
        return None if self._default_voice else self.settings.voice

    def _name_default_voice(self, engine: PocketTTS | RemoteTTS) -> None:
        if self._default_voice:
            stored_settings(self).voice = engine.default_voice

    async def _has_speech(self, text: str) -> bool:
        settings = self.settings
        return await self._loader.has_speech(
            text, settings.normalize, settings.lexicon, self._text_language
        )

    def _turn_options(self) -> TurnOptions:  # settings as of now
        return TurnOptions.of(self.settings, self._seed_version)

    async def on_settings_update(self, delta: PocketTTSSettings) -> dict[str, Any]:
        """Apply a settings delta: utterance settings (seed included) at the next utterance;
        an invalid value is an ErrorFrame and the previous one stays."""
        update = await check_update(delta, self._loader)
        for error, about in update.refused:
            await self._refuse(error, about)
        if update.pack is not None and update.text_language != self._text_language:
            self._text_language = update.text_language
            self._turns.retire_main()  # the next turn's session reads the new variant
        changed = await super().on_settings_update(update.delta)
        if "voice" in changed:
            self._default_voice = update.follows_default_voice
        if update.pack is not None:  # Pipecat gave its splitters the pack name: mend it
            self._set_sentence_language(self.pack)
        if "language" in changed or "model" in changed:
            self._loader.request_switch(self.pack, self._chosen_voice())
        if "seed" in changed:
            self._seed_version += 1  # each stream restarts its generator at its next utterance
        known = UTTERANCE_SETTINGS | {"language", "model"}  # the rest is unknown here
        warn_unhandled_settings(self, set(changed) - known)
        return changed

    def _set_sentence_language(self, pack: str) -> None:
        """Give Pipecat's sentence splitters the pack's ISO code (they get pack names)."""
        set_sentence_language(self, pack_iso_code(pack))

    async def _refuse(self, error: Exception, about: str = "", permanent: bool = False) -> None:
        """Log ``error`` and send it upstream as an ErrorFrame (``permanent``: the service has
        no model to speak with); otherwise the service keeps working."""
        message = f"PocketTTS: {about}: {error}" if about else f"PocketTTS: {error}"
        logger.error(f"{self}: {message}")
        await self.push_error(
            error_msg=message, exception=error, force_treat_as_permanent=permanent
        )
