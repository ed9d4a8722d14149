"""PocketTTSService: Pipecat frames ⇄ one PocketTTS engine session.

Text of a turn goes into a persistent engine session (``Session.enqueue``), which synthesizes it
on its own worker thread while earlier audio plays. Frames come back through ``async for`` on
the session, are resampled to the pipeline's rate by the service's own soxr stream, and are
appended to the turn's Pipecat audio context. An interruption cancels the session (compute
stops within one frame); the next turn opens a fresh one.

Vocabulary: a *turn* is one Pipecat audio context (an LLM reply or a ``TTSSpeakFrame``); a
*stream* is one engine session with its consumer task and resampler. Turns of interruptible
speech share the main stream; an uninterruptible turn gets a private stream, so cancelling
the main one never cuts it.
"""

from __future__ import annotations

import asyncio
import secrets
from collections import deque
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loguru import logger
from pipecat.frames.frames import (
    ErrorFrame,
    Frame,
    InterruptionFrame,
    StartFrame,
    TTSAudioRawFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessorSetup
from pipecat.services.settings import TTSSettings
from pipecat.services.tts_service import TextAggregationMode, TTSService
from pipecat.transcriptions.language import Language
from pipecat.utils.tracing.service_decorators import traced_tts
from pipecat.utils.types import NOT_GIVEN, NotGiven, is_given

from .engine.config import SAMPLE_RATE
from .engine.errors import PocketTTSError, UnknownLanguageError
from .engine.text.normalize import checked_lexicon
from .engine.text.prepare import ChunkStream
from .languages import language_to_pack, pack_iso_code, resolve_pack, text_variant
from .resampler import StreamResampler

if TYPE_CHECKING:
    from pipecat.frames.frames import CancelFrame, EndFrame

    from .engine import PocketTTS, Session

KEEPALIVE_INTERVAL_S = 1.0
"""While a turn waits for a model (loading, warming up, switching packs), its audio context is
refreshed this often so Pipecat's 3 s no-audio timeout never writes it off."""

SETUP_LOAD_BUDGET_S = 15.0
"""How long ``setup`` waits for the model before letting the pipeline start (Pipecat gives up
on a setup after 20 s). A load still running then finishes in the background; the first turn
waits for it, its audio context kept alive."""

WARMUP_TEXT = "Hello."
WARMUP_FRAMES = 2


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
    """

    temperature: float | NotGiven | None = field(default_factory=lambda: NOT_GIVEN)
    seed: int | NotGiven | None = field(default_factory=lambda: NOT_GIVEN)
    normalize: bool | NotGiven = field(default_factory=lambda: NOT_GIVEN)
    lexicon: dict[str, str] | NotGiven | None = field(default_factory=lambda: NOT_GIVEN)


# Settings applied per utterance through Session.enqueue (a new seed restarts the session's
# random generator at the next utterance).
_UTTERANCE_SETTINGS = frozenset({"voice", "temperature", "normalize", "lexicon", "seed"})


@dataclass(eq=False)
class _Stream:
    """One engine session, the task that consumes its frames, and its resampler."""

    session: Session
    resampler: StreamResampler
    private: bool  # owned by one uninterruptible turn
    seed_version: int = 0  # the service's seed version this session's generator follows
    utterances: dict[int, _Turn] = field(default_factory=dict)  # enqueued, not finished
    turns: set[_Turn] = field(default_factory=set)  # open turns on this stream
    consumer: asyncio.Task | None = None
    audio_turn: _Turn | None = None  # the turn whose audio the resampler holds
    retired: bool = False  # takes no new turns; closed once its turns are
    closed: bool = False


@dataclass(eq=False)
class _Turn:
    """Bookkeeping of one audio context while its speech is synthesized."""

    context_id: str
    stream: _Stream
    chunker: ChunkStream | None = None  # TOKEN aggregation: LLM tokens → planned chunks
    enqueued: int = 0  # utterances handed to the session (failed ones included)
    completed: int = 0  # utterances whose last frame arrived (or that failed), in order
    failed: set[int] = field(default_factory=set)  # 1-based ordinals whose enqueue raised
    text_done: bool = False  # flush_audio() was called: no more text
    closed: bool = False
    # Non-audio frames of the context, each released once `completed` reaches its barrier.
    held: deque[tuple[int, Frame]] = field(default_factory=deque)


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
            settings: Voice, temperature, seed, normalize, lexicon (see ``Settings``).
            text_aggregation_mode: SENTENCE (default) or TOKEN. With TOKEN, LLM tokens go to
                the engine's text stream, which releases the first sentence alone for the
                fastest first audio and prepares each piece of an overlong sentence as the
                batch path does (mid-sentence: no capital, same padding and EOS rules).
            warmup: Run a short synthesis in ``setup`` so the first turn is fast.
            resampler_quality: soxr quality of the output resampler (QQ, LQ, MQ, HQ, VHQ).
            **kwargs: Other ``TTSService`` arguments (``sample_rate``, ``text_transforms``...).
        """
        defaults = self.Settings(
            model=None,
            voice=None,
            language="english",
            temperature=None,
            seed=None,
            normalize=True,
            lexicon=None,
        )
        if language is not None:
            defaults.language = language
        if settings is not None:
            defaults.apply_update(settings)
            if is_given(settings.model) and settings.model:
                defaults.language = settings.model  # the model is the pack
        self._model_dir = Path(model_dir).expanduser() if model_dir is not None else None
        #: A regional variant for the text normalizer ("pt-BR"), or None for the pack's own.
        self._text_language = text_variant(defaults.language)
        pack = self._resolve_pack(defaults.language)
        defaults.language = pack
        defaults.model = pack
        if defaults.lexicon:
            checked_lexicon(defaults.lexicon)  # LexiconError now, not at the first turn

        kwargs.setdefault("push_stop_frames", True)  # a stop frame even if a context times out
        super().__init__(
            push_start_frame=True,
            push_text_frames=True,
            text_aggregation_mode=text_aggregation_mode,
            settings=defaults,
            **kwargs,
        )
        self._set_sentence_language(pack)

        self._backend = backend
        self._revision = revision
        self._token = token
        self._sampler_steps = sampler_steps
        self._warmup = warmup
        self._resampler_quality = resampler_quality

        self._engine: PocketTTS | None = None
        self._load_task: asyncio.Task | None = None  # the pack of the current settings
        self._switch_task: asyncio.Task | None = None  # a pack requested at runtime
        self._main_stream: _Stream | None = None
        self._streams: set[_Stream] = set()
        self._turns: dict[str, _Turn] = {}
        self._seed_version = 0  # bumped by every seed update
        self._stopped = False

    # ------------------------------------------------------------------ Pipecat hooks

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
        return self._engine

    @property
    def pack(self) -> str:
        """The pack of the current settings."""
        return str(self._settings.language)

    async def setup(self, setup: FrameProcessorSetup) -> None:
        """Start loading (and warming up) the pack, off the event loop.

        The pipeline sets processors up concurrently; this waits up to ``SETUP_LOAD_BUDGET_S``
        and lets a slower load (a first download) finish in the background.
        """
        await super().setup(setup)
        self._load_task = self.create_task(self._load_engine(self.pack), name="pocket_tts_load")
        await asyncio.wait({self._load_task}, timeout=SETUP_LOAD_BUDGET_S)
        outcome = _outcome(self._load_task)
        if outcome is not None and not isinstance(outcome, Exception):
            self._engine = outcome

    async def start(self, frame: StartFrame) -> None:
        """Start the service; report a pack that failed to load."""
        await super().start(frame)
        self._stopped = False
        outcome = _outcome(self._load_task)
        if isinstance(outcome, Exception):
            await self._report_load_error(self.pack, outcome)

    async def stop(self, frame: EndFrame) -> None:
        """Play everything already queued, then release the sessions."""
        await super().stop(frame)  # waits until every audio context has played
        self._stopped = True
        await self._close_all_streams()

    async def cancel(self, frame: CancelFrame) -> None:
        """Stop at once: no more audio, compute stops within one frame."""
        await super().cancel(frame)
        self._stopped = True
        await self._close_all_streams()

    async def cleanup(self) -> None:
        """Release the sessions and the model reference (the shared cache keeps the model)."""
        await super().cleanup()
        self._stopped = True
        await self._close_all_streams()
        for task in (self._load_task, self._switch_task):
            if task is not None and not task.done():
                await self.cancel_task(task)
        self._load_task = self._switch_task = None
        self._engine = None

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        """Pipecat's processing, plus a check that an interruption left no synthesis running."""
        await super().process_frame(frame, direction)
        if isinstance(frame, InterruptionFrame):
            # Every turn of the main stream is interruptible: none may outlive an interruption
            # (one whose context had already timed out never reached the hook).
            stream = self._main_stream
            if stream is not None and (stream.turns or stream.utterances):
                await self._cancel_stream(stream)

    @traced_tts
    async def run_tts(self, text: str, context_id: str) -> AsyncGenerator[Frame | None, None]:
        """Hand text to the turn's session; audio arrives through the stream's consumer.

        Args:
            text: A sentence (SENTENCE aggregation) or an LLM token (TOKEN aggregation).
            context_id: The audio context of the turn.
        """
        if self._stopped:
            yield None
            return
        try:
            turn = self._turns.get(context_id)
            if turn is None:
                turn = await self._open_turn(context_id)
            if turn.chunker is not None:
                for chunk in turn.chunker.push(text):
                    self._enqueue(turn, chunk.text, continues_sentence=chunk.is_mid_sentence)
            else:
                self._enqueue(turn, text)
                await self.start_tts_usage_metrics(text)
            yield None
        except PocketTTSError as e:
            logger.error(f"{self}: {e}")
            yield ErrorFrame(error=f"PocketTTS: {e}")
        except Exception as e:
            logger.exception(f"{self}: synthesis request failed")
            yield ErrorFrame(error=f"PocketTTS: unexpected error: {e}")

    async def flush_audio(self, context_id: str | None = None) -> None:
        """The turn's text is complete: synthesize what the chunker holds, close when played."""
        context_id = context_id or self.get_active_audio_context_id()
        if not context_id:
            return
        turn = self._turns.get(context_id)
        if turn is None:
            # Text never reached a session (an error, or all of it was whitespace).
            await self._end_context(context_id)
            return
        if turn.chunker is not None and not turn.closed:
            try:
                for chunk in turn.chunker.flush():
                    self._enqueue(turn, chunk.text, continues_sentence=chunk.is_mid_sentence)
            except PocketTTSError as e:
                await self.push_error(error_msg=f"PocketTTS: {e}", exception=e)
        turn.text_done = True
        await self._maybe_close_turn(turn)

    async def on_audio_context_interrupted(self, context_id: str) -> None:
        """Cancel the session computing this context: no more audio, compute stops now."""
        await self.stop_all_metrics()
        turn = self._turns.get(context_id)
        if turn is not None:
            # Only interruptible turns come here, all on the main stream: cancel it whole.
            await self._cancel_stream(turn.stream)
        await super().on_audio_context_interrupted(context_id)

    async def on_audio_context_completed(self, context_id: str) -> None:
        """Forget a turn whose context ended on Pipecat's side (e.g. a no-audio timeout)."""
        turn = self._turns.get(context_id)
        if turn is not None and turn.closed:
            self._turns.pop(context_id, None)
        await super().on_audio_context_completed(context_id)

    async def append_to_audio_context(self, context_id: str | None, frame: Any) -> None:
        """Hold the base class's text frames of a turn until the audio before them has played.

        ``TTSTextFrame`` (the sentence, once spoken) and the next sentence's announcement are
        appended by Pipecat right after the text is handed over, long before the audio
        exists; each is released after the utterances enqueued before it. A ``TTSTextFrame``
        whose audio is never made (its utterance failed, or its text reached no session) is
        dropped, so the assistant aggregator never adds unspoken text to the LLM context.
        """
        turn = self._turns.get(context_id) if context_id else None
        if isinstance(frame, TTSTextFrame) and (turn is None or turn.closed):
            return  # no session got this text: not loaded, failed, stopped or interrupted
        if (
            turn is not None
            and not turn.closed
            and frame is not None
            and not isinstance(frame, (TTSAudioRawFrame, TTSStoppedFrame))
        ):
            pending = turn.chunker is not None and bool(turn.chunker.pending_text.strip())
            barrier = turn.enqueued + (1 if pending else 0)
            if isinstance(frame, TTSTextFrame) and barrier in turn.failed:
                return  # the utterance that ends this text failed: nothing was spoken
            if turn.held or turn.completed < barrier:
                turn.held.append((barrier, frame))
                return
        await super().append_to_audio_context(context_id, frame)

    # ------------------------------------------------------------------ settings

    async def _update_settings(self, delta: PocketTTSSettings) -> dict[str, Any]:
        """Apply a settings delta: utterance settings (seed included) at the next utterance."""
        requested_pack = self._requested_pack(delta)
        if requested_pack is not None:
            variant = text_variant(delta.language) if is_given(delta.language) else None
            if variant != self._text_language:
                self._text_language = variant
                self._retire_main_stream()  # the next turn's session reads the new variant
            delta.language = requested_pack
            delta.model = requested_pack
        if is_given(delta.lexicon) and delta.lexicon:
            try:
                checked_lexicon(delta.lexicon)
            except PocketTTSError as e:
                await self.push_error(error_msg=f"PocketTTS: {e}")
                delta.lexicon = NOT_GIVEN
        if is_given(delta.voice) and not self._voice_exists(delta.voice):
            await self.push_error(
                error_msg=f"PocketTTS: unknown voice {delta.voice!r}; "
                f"voices of {self.pack}: {', '.join(self._engine.voices) if self._engine else '?'}"
            )
            delta.voice = NOT_GIVEN

        changed = await super()._update_settings(delta)
        if "voice" in changed and self._engine is not None:
            self._prefetch_voice(self._engine, self._settings.voice)
        if "language" in changed or "model" in changed:
            self._set_sentence_language(self.pack)
            self._request_pack_switch(self.pack)
        if "seed" in changed:
            self._seed_version += 1  # each stream restarts its generator at its next utterance
        known = _UTTERANCE_SETTINGS | {"language", "model"}  # the rest is unknown here
        self._warn_unhandled_updated_settings(set(changed) - known)
        return changed

    def _requested_pack(self, delta: PocketTTSSettings) -> str | None:
        """The pack a delta asks for (through ``language`` or ``model``), or None."""
        requested = delta.model if is_given(delta.model) and delta.model else delta.language
        if not is_given(requested) or requested is None:
            return None
        try:
            return self._resolve_pack(requested)
        except UnknownLanguageError as e:
            logger.error(f"{self}: {e}")
            delta.language = NOT_GIVEN
            delta.model = NOT_GIVEN
            return None

    def _resolve_pack(self, language: Language | str) -> str:
        """A pack name for a language; any name a ``model_dir`` provides is accepted."""
        custom = (
            self._model_dir is not None
            and isinstance(language, str)
            and (
                (self._model_dir / "config.json").is_file() or (self._model_dir / language).is_dir()
            )
        )
        return resolve_pack(language, custom_pack=custom)

    def _pack_dir(self, pack: str) -> Path | None:
        """The folder of a pack under ``model_dir`` (its subfolder, or model_dir itself)."""
        if self._model_dir is not None and (self._model_dir / pack).is_dir():
            return self._model_dir / pack
        return self._model_dir

    def _voice_exists(self, voice: Any) -> bool:
        """False only for a voice name the loaded pack does not ship."""
        if self._engine is None:
            return True
        if isinstance(voice, str) and Path(voice).suffix == ".safetensors":
            return True
        return _voice_known_to(self._engine, voice)

    def _prefetch_voice(self, engine: PocketTTS, voice: Any) -> None:
        """Load a new voice off the event loop, so the next ``enqueue`` finds it cached."""

        async def load() -> None:
            try:
                await asyncio.to_thread(engine.voice_state, voice)
            except Exception as e:  # enqueue reports it where it matters
                logger.warning(f"{self}: could not load voice {voice!r}: {e}")

        self.create_task(load(), name="pocket_tts_voice")

    def _set_sentence_language(self, pack: str) -> None:
        """Give Pipecat's sentence splitters the pack's ISO code (they get pack names)."""
        code = pack_iso_code(pack)
        for aggregator in (self._text_aggregator, getattr(self, "_skipped_text_aggregator", None)):
            if aggregator is not None and hasattr(aggregator, "set_language"):
                aggregator.set_language(code)

    def _request_pack_switch(self, pack: str) -> None:
        """Load ``pack`` in the background; the next turn switches to it.

        A previous request still loading is superseded, not cancelled (its thread could not be
        stopped anyway); the shared cache keeps what it loaded.
        """
        logger.info(f"{self}: loading pack {pack!r} in the background")
        self._switch_task = self.create_task(self._load_engine(pack), name="pocket_tts_switch")

    # ------------------------------------------------------------------ engine and streams

    async def _load_engine(self, pack: str) -> PocketTTS | Exception:
        """Load a pack through the process-wide shared cache, then warm it up (off the loop).

        Returns the failure instead of raising it: Pipecat's task manager would swallow it.
        """
        try:
            return await self._load_and_warm_up(pack)
        except Exception as e:
            return e

    async def _load_and_warm_up(self, pack: str) -> PocketTTS:
        engine = await asyncio.to_thread(
            load_shared_engine,
            pack,
            backend=self._backend,
            model_dir=self._pack_dir(pack),
            revision=self._revision,
            token=self._token,
            sampler_steps=self._sampler_steps,
        )
        if self._warmup:
            voice = self._settings.voice
            known = _voice_known_to(engine, voice)
            await asyncio.to_thread(warm_up_engine, engine, voice if known else None)
        return engine

    async def _ready_engine(self, context_id: str) -> PocketTTS:
        """The engine for a new turn: waits for a load still running, switches packs."""
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
                    await self._report_load_error(self.pack, e, permanent=False)
                    if self._engine is not None:  # keep speaking the pack that works
                        self._settings.language = self._settings.model = self._engine.language
            else:
                if self._switch_task is task:
                    self._switch_task = None
                    self._adopt_engine(engine)
        if self._engine is None:
            if self._load_task is None:
                self._load_task = self.create_task(self._load_engine(self.pack))
            try:
                self._engine = await self._wait_alive(context_id, self._load_task)
            except Exception as e:
                self._load_task = None  # the next turn tries again
                raise PocketTTSError(f"could not load pack {self.pack!r}: {e}") from e
        return self._engine

    def _adopt_engine(self, engine: PocketTTS) -> None:
        """Switch to a newly loaded pack: later turns open sessions on it."""
        if engine is self._engine:
            return
        self._engine = engine
        self._load_task = None
        voice = self._settings.voice
        if not _voice_known_to(engine, voice):
            logger.warning(
                f"{self}: pack {engine.language!r} has no voice {voice!r}; using its default voice"
            )
            self._settings.voice = None
        self._retire_main_stream()
        logger.info(f"{self}: switched to pack {engine.language!r}")

    async def _wait_alive(self, context_id: str, task: asyncio.Task) -> PocketTTS:
        """Await a load while refreshing the context, so Pipecat's no-audio timeout never fires.

        The load is not cancelled when the caller is (an interruption): it keeps going for the
        next turn. Raises the load's failure.
        """
        while not task.done():
            await asyncio.wait({task}, timeout=KEEPALIVE_INTERVAL_S)
            self._refresh_audio_context(context_id)
        outcome = _outcome(task)
        if outcome is None:
            raise PocketTTSError("the model load was cancelled")
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    async def _open_turn(self, context_id: str) -> _Turn:
        """Bind a new audio context to a stream (the main one, or a private one)."""
        engine = await self._ready_engine(context_id)
        private = not self._context_interruptible(context_id)
        stream = self._main_stream
        if private or stream is None or stream.retired or stream.closed:
            stream = await self._open_stream(engine, private=private)
            if not private:
                self._main_stream = stream
        turn = _Turn(context_id=context_id, stream=stream)
        if self._is_streaming_tokens:
            # The engine's text stream normalizes whole sentences and releases chunks as soon
            # as they are certain (the first sentence alone, an overlong one cut early); each
            # becomes one utterance, prepared as the batch path prepares it (mid-sentence
            # pieces included). Normalization and lexicon are those of the turn's start.
            settings = self._settings
            turn.chunker = stream.session.text_stream(
                normalize=bool(settings.normalize), lexicon=settings.lexicon or None
            )
        stream.turns.add(turn)
        self._turns[context_id] = turn
        return turn

    def _context_interruptible(self, context_id: str) -> bool:
        # Pipecat keeps per-context flags in a private map (1.14); default to interruptible.
        contexts = getattr(self, "_tts_contexts", {})
        context = contexts.get(context_id)
        return True if context is None else bool(getattr(context, "interruptible", True))

    async def _open_stream(self, engine: PocketTTS, *, private: bool) -> _Stream:
        """A new engine session with its consumer task and resampler."""
        options = self._session_options(engine)
        # Opening a session prefills the voice (cached per voice by the engine): off the loop.
        session = await asyncio.to_thread(engine.session, **options)
        stream = _Stream(
            session=session,
            resampler=StreamResampler(
                SAMPLE_RATE, self.sample_rate, quality=self._resampler_quality
            ),
            private=private,
            seed_version=self._seed_version,
        )
        self._streams.add(stream)
        stream.consumer = self.create_task(self._consume(stream), name="pocket_tts_consumer")
        return stream

    def _session_options(self, engine: PocketTTS) -> dict[str, Any]:
        """Keyword arguments of ``engine.session()`` for the current settings."""
        settings = self._settings
        options: dict[str, Any] = {
            "voice": settings.voice,
            "temperature": settings.temperature,
            "seed": settings.seed if is_given(settings.seed) else None,
            "normalize": settings.normalize,
            "text_language": self._text_language,
        }
        return options

    def _enqueue(self, turn: _Turn, text: str, *, continues_sentence: bool | None = None) -> None:
        """Hand one piece of text to the turn's session (settings as of now).

        ``continues_sentence`` (not None) marks a chunk of the turn's text stream: already
        normalized, and mid-sentence when True.
        """
        if turn.closed or turn.stream.closed or not text.strip():
            return
        settings = self._settings
        stream = turn.stream
        reseed = None
        if stream.seed_version != self._seed_version:  # the seed changed since the last one
            seed = settings.seed if is_given(settings.seed) else None
            reseed = secrets.randbits(64) if seed is None else seed
        streamed = continues_sentence is not None
        try:
            index = stream.session.enqueue(
                text,
                voice=settings.voice,
                temperature=settings.temperature,
                normalize=bool(settings.normalize) and not streamed,
                lexicon=settings.lexicon or None,
                seed=reseed,
                continues_sentence=bool(continues_sentence),
            )
        except Exception:
            _count_failed_utterance(turn)
            raise
        if index is None:  # nothing speakable after normalization (the seed still waits)
            return
        stream.seed_version = self._seed_version
        turn.enqueued += 1
        turn.stream.utterances[index] = turn

    async def _consume(self, stream: _Stream) -> None:
        """Move a session's frames into audio contexts until the session ends."""
        try:
            async for frame in stream.session:
                await self._deliver(stream, frame)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            logger.exception(f"{self}: synthesis failed")
            await self.push_error(error_msg=f"PocketTTS synthesis failed: {e}", exception=e)
            await self._abort_stream(stream)

    async def _deliver(self, stream: _Stream, frame: Any) -> None:
        """One engine frame (24 kHz) → resampled audio in its turn's context."""
        turn = stream.utterances.get(frame.utterance_index)
        if frame.is_last_in_utterance:
            stream.utterances.pop(frame.utterance_index, None)
        if turn is None or turn.closed:
            return
        if stream.audio_turn is not turn:
            await self._flush_resampler(stream)  # the previous turn's audio ends here
            stream.audio_turn = turn
        await self._append_audio(turn, stream.resampler.process(frame.samples))
        if frame.is_last_in_utterance:
            _count_completed_utterance(turn)
            if not stream.utterances:  # the session has nothing queued: the audio pauses
                await self._flush_resampler(stream)
            await self._release_held(turn)
            await self._maybe_close_turn(turn)

    async def _append_audio(self, turn: _Turn, pcm: bytes) -> None:
        if not pcm or turn.closed:
            return
        frame = TTSAudioRawFrame(
            audio=pcm, sample_rate=self.sample_rate, num_channels=1, context_id=turn.context_id
        )
        await TTSService.append_to_audio_context(self, turn.context_id, frame)

    async def _flush_resampler(self, stream: _Stream) -> None:
        """Emit the audio the resampler holds into the turn it belongs to."""
        turn, stream.audio_turn = stream.audio_turn, None
        tail = stream.resampler.flush()
        if turn is not None:
            await self._append_audio(turn, tail)

    async def _release_held(self, turn: _Turn, *, everything: bool = False) -> None:
        while turn.held and (everything or turn.held[0][0] <= turn.completed):
            barrier, frame = turn.held.popleft()
            if isinstance(frame, TTSTextFrame) and barrier in turn.failed:
                continue  # its audio was never made: the text was not spoken
            if self.audio_context_available(turn.context_id):
                await TTSService.append_to_audio_context(self, turn.context_id, frame)

    async def _maybe_close_turn(self, turn: _Turn) -> None:
        """Close a turn whose text is complete and fully synthesized: tail, text, stop."""
        if turn.closed or not turn.text_done or turn.completed < turn.enqueued:
            return
        stream = turn.stream
        if stream.audio_turn is turn:
            await self._flush_resampler(stream)
        await self._release_held(turn, everything=True)
        turn.closed = True
        stream.turns.discard(turn)
        self._turns.pop(turn.context_id, None)
        await self._end_context(turn.context_id)
        if (stream.retired or stream.private) and not stream.turns:
            await self._close_stream(stream)

    async def _end_context(self, context_id: str) -> None:
        """``TTSStoppedFrame`` and the end marker for a context that is still registered."""
        if self.audio_context_available(context_id):
            await TTSService.append_to_audio_context(
                self, context_id, TTSStoppedFrame(context_id=context_id)
            )
            await self.remove_audio_context(context_id)

    def _retire_main_stream(self) -> None:
        """New turns get a new session; the current one finishes the turns it has."""
        stream, self._main_stream = self._main_stream, None
        if stream is None:
            return
        stream.retired = True
        if not stream.turns:
            self.create_task(self._close_stream(stream), name="pocket_tts_close")

    async def _cancel_stream(self, stream: _Stream) -> None:
        """Cancel a session now (interruption): its turns are dropped, its filter cleared."""
        for turn in list(stream.turns):
            turn.closed = True
            turn.held.clear()
            self._turns.pop(turn.context_id, None)
        stream.turns.clear()
        stream.utterances.clear()
        stream.audio_turn = None
        stream.resampler.reset()
        await self._close_stream(stream)

    async def _abort_stream(self, stream: _Stream) -> None:
        """A session failed: end its turns' contexts so the pipeline moves on."""
        turns = list(stream.turns)
        await self._cancel_stream(stream)
        for turn in turns:
            await self._end_context(turn.context_id)

    async def _close_stream(self, stream: _Stream) -> None:
        """Cancel the session (returns once its worker stopped) and its consumer task."""
        if stream.closed:
            return
        stream.closed = True
        if self._main_stream is stream:
            self._main_stream = None
        self._streams.discard(stream)
        await stream.session.acancel()
        consumer = stream.consumer
        if consumer is not None and consumer is not asyncio.current_task() and not consumer.done():
            await self.cancel_task(consumer)

    async def _close_all_streams(self) -> None:
        for stream in list(self._streams):
            await self._cancel_stream(stream)
        self._turns.clear()
        self._main_stream = None

    async def _report_load_error(
        self, pack: str, error: BaseException | None, *, permanent: bool = True
    ) -> None:
        """An ErrorFrame upstream; ``permanent`` when the service has no model to speak with."""
        message = f"PocketTTS could not load pack {pack!r}: {error}"
        logger.error(f"{self}: {message}")
        await self.push_error(
            error_msg=message,
            exception=error if isinstance(error, Exception) else None,
            force_treat_as_permanent=permanent,
        )


# ---------------------------------------------------------------------- engine glue


def _outcome(task: asyncio.Task | None) -> Any:
    """A finished load task's result (an engine or an exception); None if not finished."""
    if task is None or not task.done() or task.cancelled():
        return None
    return task.result()


def _count_completed_utterance(turn: _Turn) -> None:
    """The turn's next utterance finished; failed ones right after it count as finished too."""
    turn.completed += 1
    while turn.completed + 1 in turn.failed:
        turn.completed += 1


def _count_failed_utterance(turn: _Turn) -> None:
    """An utterance of the turn failed to enqueue: it takes an ordinal but makes no audio."""
    turn.enqueued += 1
    turn.failed.add(turn.enqueued)
    if turn.completed == turn.enqueued - 1:  # nothing before it is still playing
        turn.completed += 1


def _voice_known_to(engine: PocketTTS, voice: Any) -> bool:
    """False only for a name that is neither a voice of ``engine``'s pack nor an existing path."""
    return not isinstance(voice, str) or voice in engine.voices or Path(voice).exists()


def load_shared_engine(
    pack: str,
    *,
    backend: str = "auto",
    model_dir: Path | None = None,
    revision: str | None = None,
    token: str | None = None,
    sampler_steps: int = 1,
) -> PocketTTS:
    """Load a pack once per process: every service of the same pack shares the weights."""
    from .engine import PocketTTS

    return PocketTTS.load_shared(
        pack,
        backend=backend,
        model_dir=model_dir,
        revision=revision,
        token=token,
        sampler_steps=sampler_steps,
    )


def warm_up_engine(engine: PocketTTS, voice: Any = None) -> None:
    """Run every stage once (and cache the voice) so the first turn pays no first-call cost."""
    engine.voice_state(voice)
    try:
        engine.synthesize(WARMUP_TEXT, voice=voice, max_frames=WARMUP_FRAMES, seed=0)
    except PocketTTSError as e:  # a warm-up problem must not keep the service from starting
        logger.warning(f"PocketTTS warm-up failed: {e}")
