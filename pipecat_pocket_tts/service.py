"""PocketTTSService: the Pipecat hooks over one persistent PocketTTS engine session.

Text goes to the session (``enqueue`` per sentence, ``feed`` per token with TOKEN aggregation);
its audio, text frames and turn ends come back in order (``turns``); an interruption cancels
the session before the ``InterruptionFrame`` goes on. Loading and pack switching: ``loading``.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loguru import logger
from pipecat.frames.frames import (
    AggregatedTextProgressFrame,
    EndFrame,
    ErrorFrame,
    Frame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    StartFrame,
    TextFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessorSetup
from pipecat.services.tts_service import TextAggregationMode, TTSService
from pipecat.transcriptions.language import Language
from pipecat.utils.context.word_timestamp_tracker import WordTimestamp
from pipecat.utils.tracing.service_decorators import traced_tts
from pipecat.utils.types import NOT_GIVEN, is_given

from .arguments import check_extra_arguments
from .engine.config import SAMPLE_RATE
from .engine.errors import PocketTTSError, UnknownLanguageError
from .engine.options import LoadOptions
from .languages import language_to_pack, pack_iso_code, text_variant
from .loading import WARMUP_FRAMES, WARMUP_TEXT, EngineLoader, LoadSettings
from .resampler import StreamResampler
from .settings import UTTERANCE_SETTINGS, PocketTTSSettings, initial_settings
from .turns import ContextOutput, Turn, Turns, UtteranceOptions, session_options

if TYPE_CHECKING:
    from pipecat.frames.frames import CancelFrame

    from .engine import PocketTTS

_SURROGATE = re.compile("[\ud800-\udfff]")

SETUP_LOAD_BUDGET_S = 15.0
"""How long ``setup`` waits for the model before letting the pipeline start (Pipecat gives up
on a setup after 20 s). A load still running then finishes in the background; the first turn
waits for it, its audio context kept alive."""

__all__ = ["WARMUP_FRAMES", "WARMUP_TEXT", "PocketTTSService", "PocketTTSSettings"]


class PocketTTSService(TTSService):
    """Kyutai PocketTTS on a local NumPy (or CoreML) engine, streaming and interruptible.

    Example::

        tts = PocketTTSService(
            language=Language.EN,
            settings=PocketTTSService.Settings(voice="alba", temperature=0.5),
        )
    """

    Settings = PocketTTSSettings
    _settings: PocketTTSSettings

    def __init__(
        self,
        *,
        language: Language | str | None = None,
        backend: str = "auto",
        model_dir: str | Path | None = None,
        revision: str | None = None,
        token: str | None = None,
        sampler_steps: int = 1,
        precision: str | None = None,
        threads: int | None = None,
        max_streams: int | None = None,
        settings: PocketTTSSettings | None = None,
        text_aggregation_mode: TextAggregationMode | None = None,
        warmup: bool = True,
        resampler_quality: str = "HQ",
        **kwargs: Any,
    ) -> None:
        """Create the service; the model loads in ``setup`` (never in the constructor).

        Args:
            language: A Pipecat ``Language`` (regional variants by base code) or a pack name;
                defaults to English. ``settings.language`` wins when both are given.
            backend: "numpy", "coreml" or "auto".
            model_dir: A local folder with the pack's files, or with one subfolder per pack
                named after it (``english/``, ``french/``: runtime language switches offline).
                Nothing is downloaded then.
            revision: Hub revision of the pack (without ``model_dir``).
            token: Hugging Face token (gated packs); defaults to ``HF_TOKEN``.
            sampler_steps: Flow-matching decode steps of the sampler.
            precision: FlowLM weights: NumPy "fp32", "bf16", "int8" (``fast`` extra); CoreML "int8".
            threads: Compute threads of the model's scheduler, shared by every service and
                session on the pack (default: the usable cores).
            max_streams: Most streams the model speaks at once; later turns wait in order
                (logged). Default: no limit.
            settings: Voice, temperature, seed, normalize, lexicon (see ``Settings``).
            text_aggregation_mode: SENTENCE (default) or TOKEN: LLM tokens go to the session's
                text stream (``Session.feed``), which cuts and prepares as the batch path.
            warmup: Run a short synthesis in ``setup`` so the first turn is fast.
            resampler_quality: soxr quality of the output resampler (QQ, LQ, MQ, HQ, VHQ).
            **kwargs: Other ``TTSService`` arguments (``sample_rate``, ``text_transforms``...);
                any other keyword (``temp``, ``quantize``, a typo) is a ``TypeError`` saying
                what to use.
        """
        check_extra_arguments(kwargs, known=inspect.signature(PocketTTSService).parameters)
        defaults = initial_settings(language, settings)
        options = LoadOptions(  # checked now, not at setup
            backend,
            model_dir,
            revision,
            token,
            sampler_steps,
            precision,
            threads=threads,
            max_streams=max_streams,
        )
        self._loader = EngineLoader(
            LoadSettings(options, warmup),
            create_task=lambda coroutine, name: self.create_task(coroutine, name=name),
            keep_alive=lambda context_id: self._refresh_audio_context(context_id),
        )
        #: A regional variant for the text normalizer ("pt-BR"), or None for the pack's own.
        self._text_language = text_variant(defaults.language)
        defaults.language = defaults.model = self._loader.resolve_pack(defaults.language)

        kwargs.setdefault("push_stop_frames", True)  # a stop frame even if a context times out
        super().__init__(
            push_start_frame=True,
            push_text_frames=False,  # word timestamps: Pipecat releases words as played
            text_aggregation_mode=text_aggregation_mode,
            settings=defaults,
            **kwargs,
        )
        self._set_sentence_language(self.pack)
        # Both run after the user's transforms: text with nothing to say opens no context.
        if self._is_streaming_tokens:
            self.add_text_transformer(self._hold_silent_start, "*")
        else:
            self.add_text_transformer(self._drop_unspeakable, "*")
        self._reply_speaks = False  # TOKEN: a token of this reply had something to say
        self._silent_start = ""  # TOKEN: the reply's tokens so far, none with anything to say
        #: The voice setting follows the pack's default voice (reported by its name).
        self._default_voice = defaults.voice is None
        self._output = ContextOutput(self)
        self._turns = Turns(
            self._output,
            lambda: StreamResampler(SAMPLE_RATE, self.sample_rate, quality=resampler_quality),
        )
        self._seed_version = 0  # bumped by every seed update
        self._stopped = False
        self._reply_open = False  # an LLM reply started and has not ended
        self._unspoken: set[str] = set()  # contexts with text that made no audio
        self._load_error: Exception | None = None

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
    def engine(self) -> PocketTTS | None:
        """The loaded engine (None before setup or after cleanup)."""
        return self._loader.engine

    @property
    def pack(self) -> str:
        """The pack of the current settings."""
        return str(self._settings.language)

    async def setup(self, setup: FrameProcessorSetup) -> None:
        """Start loading (and warming up) the pack, off the event loop; wait a while for it."""
        await super().setup(setup)
        self._load_error = await self._loader.load_at_setup(
            self.pack, self._settings.voice, SETUP_LOAD_BUDGET_S
        )
        if self._loader.engine is not None:
            self._name_default_voice(self._loader.engine)

    async def start(self, frame: StartFrame) -> None:
        """Start the service; report a pack that failed to load."""
        await super().start(frame)
        self._stopped = False
        if self._load_error is not None:
            await self._report_load_error(self.pack, self._load_error)

    async def stop(self, frame: EndFrame) -> None:
        """Play everything queued, then release the sessions."""
        await super().stop(frame)  # waits until every audio context has played
        self._stopped = True
        await self._turns.close_all()

    async def cancel(self, frame: CancelFrame) -> None:
        """Stop at once: no more audio, compute stops within one frame."""
        await super().cancel(frame)
        self._stopped = True
        await self._turns.close_all()

    async def cleanup(self) -> None:
        """Release the sessions and the model reference (the shared cache keeps the model)."""
        await super().cleanup()
        self._stopped = True
        await self._turns.close_all()
        await self._loader.close(self.cancel_task)

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        """Pipecat's, after cancelling the main session at an interruption (all its turns are
        interruptible) and ending a reply still open at an ``EndFrame`` (its rest is spoken:
        Pipecat would stop the service first)."""
        if isinstance(frame, InterruptionFrame):
            await self._turns.interrupt()
        if isinstance(frame, (TextFrame, TTSSpeakFrame)) and _SURROGATE.search(frame.text):
            # A lone UTF-16 half (an emoji split between tokens) makes Pipecat's sentence
            # splitter raise before any text reaches the engine: dropped here.
            frame.text = _SURROGATE.sub("", frame.text)
        if isinstance(frame, (LLMFullResponseStartFrame, LLMFullResponseEndFrame, TTSSpeakFrame)):
            self._reply_speaks, self._silent_start = False, ""  # a new text begins
        if isinstance(frame, LLMFullResponseStartFrame):
            self._reply_open = True
        elif isinstance(frame, (LLMFullResponseEndFrame, InterruptionFrame)):
            self._reply_open = False
        elif isinstance(frame, EndFrame) and self._reply_open:
            await self.process_frame(LLMFullResponseEndFrame(), direction)
        await super().process_frame(frame, direction)

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
                await turn.stream.feed(turn, text, self._utterance_options())
            else:
                await turn.stream.enqueue(turn, text, self._utterance_options())
                await self.start_tts_usage_metrics(text)
            yield None
        except PocketTTSError as e:
            logger.error(f"{self}: {e}")
            self._text_unspoken(context_id)
            yield ErrorFrame(error=f"PocketTTS: {e}")
        except Exception as e:
            logger.exception(f"{self}: synthesis request failed")
            self._text_unspoken(context_id)
            yield ErrorFrame(error=f"PocketTTS: unexpected error: {e}")

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
            turn.stream.end_turn(turn, self._utterance_options())
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

    def _text_unspoken(self, context_id: str) -> None:
        """The text just handed over for ``context_id`` made no audio: it never enters the
        LLM context (its word slot is closed without words; what is left at the end of the
        context is dropped, not force-completed). Pipecat 1.14's sequencer, by its fields."""
        self._unspoken.add(context_id)
        sequencer = self._aggregated_frame_sequencer
        for slot in reversed(getattr(sequencer, "_slots", [])):
            tracker = slot.tracker
            if slot.context_id == context_id and slot.spoken and not slot.complete and tracker:
                if not tracker.get_accumulated_tts_text().strip():  # no word matched yet
                    slot.complete = True
                break

    async def _apply_force_complete(self, context_id: str) -> None:
        """At a context's end, Pipecat writes the text no word covered into the context; for
        a context whose text made no audio, that text is dropped instead."""
        if context_id not in self._unspoken:
            await super()._apply_force_complete(context_id)
            return
        frames = self._aggregated_frame_sequencer.force_complete(
            context_id, self._word_timestamp_tracker.last_pts
        )
        for frame in frames:
            if not isinstance(frame, (TTSTextFrame, AggregatedTextProgressFrame)):
                await self.push_frame(frame)

    async def _open_turn(self, context_id: str) -> Turn:
        """Bind a new audio context to a stream (the main one, or a private one)."""
        ready = await self._loader.ready(context_id, self.pack, self._settings.voice)
        if ready.switch_error is not None:
            await self._report_load_error(self.pack, ready.switch_error, permanent=False)
            self._settings.language = self._settings.model = ready.engine.language
        if ready.switched:  # later turns open sessions on the new pack, with a voice it has
            if not self._default_voice and await self._loader.voice_error(
                ready.engine, self._settings.voice
            ):
                self._default_voice = True
            self._turns.retire_main()
        self._name_default_voice(ready.engine)
        return await self._turns.open(
            context_id,
            ready.engine,
            private=not self._context_interruptible(context_id),
            streamed=self._is_streaming_tokens,
            session_options=session_options(self._settings, self._text_language),
            seed_version=self._seed_version,
        )

    def _context_interruptible(self, context_id: str) -> bool:
        # Pipecat keeps per-context flags in a private map (1.14); default to interruptible.
        context = self._tts_contexts.get(context_id)  # Pipecat-private: pinned by a test
        return True if context is None else context.interruptible

    def _name_default_voice(self, engine: PocketTTS) -> None:
        if self._default_voice:
            self._settings.voice = engine.default_voice

    async def _hold_silent_start(self, text: str, text_type: str) -> str:
        """TOKEN: tokens with nothing to say at the start of a text ("👍", "**") are held back,
        so a reply of only those opens no context; the first token with something to say takes
        them along ("$" then "5" is "$5")."""
        if self._reply_speaks:
            return text
        start = self._silent_start + text
        if not await self._drop_unspeakable(start, text_type):
            self._silent_start = start
            return ""
        self._reply_speaks, self._silent_start = True, ""
        return start

    async def _drop_unspeakable(self, text: str, text_type: str) -> str:
        """Nothing to say ("👍", "***"): no context (Pipecat's no-audio guard never counts it)."""
        s = self._settings
        speech = self._loader.has_speech(text, s.normalize, s.lexicon, self._text_language)
        return text if speech else ""

    def _utterance_options(self) -> UtteranceOptions:  # settings as of now
        return UtteranceOptions.of(self._settings, self._seed_version)

    async def _update_settings(self, delta: PocketTTSSettings) -> dict[str, Any]:
        """Apply a settings delta: utterance settings (seed included) at the next utterance."""
        requested_pack = await self._requested_pack(delta)
        if requested_pack is not None:
            variant = text_variant(delta.language) if is_given(delta.language) else None
            if variant != self._text_language:
                self._text_language = variant
                self._turns.retire_main()  # the next turn's session reads the new variant
            delta.language = delta.model = requested_pack
        for error in delta.refuse_invalid():  # the previous value of each stays
            logger.error(f"{self}: {error}")
            await self.push_error(error_msg=f"PocketTTS: {error}", exception=error)
        engine = self._loader.engine
        follow_default = is_given(delta.voice) and delta.voice is None
        if follow_default and engine is not None:
            delta.voice = engine.default_voice  # reported by its name
        if is_given(delta.voice) and engine is not None:
            error = await self._loader.voice_error(engine, delta.voice)
            if error is not None:
                await self.push_error(error_msg=f"PocketTTS: voice {delta.voice!r}: {error}")
                delta.voice = NOT_GIVEN  # the previous voice stays

        changed = await super()._update_settings(delta)
        if "voice" in changed:
            self._default_voice = follow_default
        if requested_pack is not None:  # Pipecat gave its splitters the pack name: mend it
            self._set_sentence_language(self.pack)
        if "language" in changed or "model" in changed:
            self._loader.request_switch(self.pack, self._settings.voice)
        if "seed" in changed:
            self._seed_version += 1  # each stream restarts its generator at its next utterance
        known = UTTERANCE_SETTINGS | {"language", "model"}  # the rest is unknown here
        self._warn_unhandled_updated_settings(set(changed) - known)
        return changed

    async def _requested_pack(self, delta: PocketTTSSettings) -> str | None:
        """The pack a delta asks for (through ``language`` or ``model``), or None; an unknown
        language is an ErrorFrame (the pack in use stays)."""
        try:
            return self._loader.requested_pack(delta.model, delta.language)
        except UnknownLanguageError as e:
            logger.error(f"{self}: {e}")
            await self.push_error(error_msg=f"PocketTTS: {e}", exception=e)
            delta.language = delta.model = NOT_GIVEN
            return None

    def _set_sentence_language(self, pack: str) -> None:
        """Give Pipecat's sentence splitters the pack's ISO code (they get pack names)."""
        code = pack_iso_code(pack)
        for aggregator in (self._text_aggregator, self._skipped_text_aggregator):  # pinned
            aggregator.set_language(code)

    async def _report_load_error(self, pack: str, error: Exception, *, permanent=True) -> None:
        """An ErrorFrame upstream; ``permanent`` when the service has no model to speak with."""
        message = f"PocketTTS could not load pack {pack!r}: {error}"
        logger.error(f"{self}: {message}")
        await self.push_error(
            error_msg=message, exception=error, force_treat_as_permanent=permanent
        )
