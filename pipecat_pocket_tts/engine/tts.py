"""PocketTTS: load a language pack once, then synthesize, stream or open sessions on it.

    tts = PocketTTS.load("english")              # or load_shared(...) to share one model
    audio = tts.synthesize("Hello there.")       # float32 [n] at 24 kHz
    for frame in tts.stream("Hello there."): ...
    session = tts.session(seed=1)                # utterances in, 80 ms frames out

Every path runs through a ``Session``, so the same seed, text and voice give the same audio
whichever is used. One loaded model serves any number of sessions on any threads: weights
live in the backend and are shared; voices are prefilled once per voice and copied per chunk.
"""

from __future__ import annotations

import logging
import os
import weakref
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from .audio import output_file
from .audio.signal import post_process as polish
from .audio.wav import write_wav
from .backends.base import Backend, FlowState
from .contract import EngineCapabilities, SpeechProbe
from .errors import (
    BreakTagError,
    EmptyTextError,
    PocketTTSError,
    SessionClosedError,
    UnknownVoiceError,
)
from .frames import AudioFrame
from .model.assembly import SharedModels, load_parts, resolve_load
from .model.config import SAMPLE_RATE, ModelConfig
from .model.options import LoadOptions
from .model.packs import PackFiles
from .runtime.lazy_scheduler import LazyScheduler
from .runtime.scheduler import Scheduler
from .runtime.slots import AdmissionWait
from .session import Session
from .text.breaks import has_breaks, strip_breaks
from .text.planner import TextPlanner
from .text.prepare import TextPreparer
from .text.tokenizer import Tokenizer
from .timing.heads import Heads, heads_fit, heads_for
from .timing.word_timing import Word
from .utterance import UtteranceOptions
from .voices.cloning import AudioSource, clone_voice
from .voices.source import VoiceSource, fetch_hub_voice, parse_voice
from .voices.state_cache import VoiceStateCache
from .voices.voice import WEIGHTS_METADATA_KEY, Voice

logger = logging.getLogger(__name__)

WARMUP_TEXT = "Hello."
WARMUP_FRAMES = 2
_IN_PROCESS = EngineCapabilities(answers_locally=True)

VoiceLike = str | os.PathLike[str] | Voice
"""A pack voice name, a voice-state or recording path, an ``hf://`` hub file, or a Voice."""


class TimedAudio(NamedTuple):
    """``synthesize(..., timestamps=True)``: the audio and the caller's words in it."""

    audio: np.ndarray  # float32 [n] at 24 kHz
    words: tuple[Word, ...]


class PocketTTS:
    """One loaded model (config, backend, tokenizer, voices) and the ways to make it speak."""

    sample_rate: int = SAMPLE_RATE

    def __init__(
        self,
        *,
        config: ModelConfig,
        backend: Backend,
        tokenizer: Tokenizer,
        pack: PackFiles,
        options: LoadOptions | None = None,
    ) -> None:
        """Assemble from loaded parts (``load`` is the usual way in)."""
        #: How the model was loaded (the hub token is also used for ``hf://`` voices).
        self.options = options or LoadOptions(backend=backend.name)
        self.config = config
        self.backend = backend
        self.tokenizer = tokenizer
        self.pack = pack
        self._pool = LazyScheduler()  # made on first use; closed when the model is dropped
        self._closed = False
        # A dropped model frees itself: its pool threads reference only the scheduler (never
        # this object), so it can be collected; this then stops those threads, which lets
        # the scheduler and the backend (weights, mapped files) go.
        weakref.finalize(self, self._pool.close_later)
        self._planner = TextPlanner(config, tokenizer)
        self._timestamp_heads = heads_for(config) if backend.capabilities.attention_probe else None
        self._voice_states = VoiceStateCache()

    @property
    def timestamp_heads(self) -> Heads | None:
        """The FlowLM (layer, head) pairs word timestamps read, or None: times are estimated.

        From the checkpoint's head table (``engine/timing/heads.json``); None for a custom
        ``config.json``, an unknown checkpoint or a backend without attention (CoreML). Set it
        for a fine-tuned model whose heads you know; a pair outside the model is refused.
        """
        return self._timestamp_heads

    @timestamp_heads.setter
    def timestamp_heads(self, heads: Heads | None) -> None:
        if heads is not None:
            heads = tuple((int(layer), int(head)) for layer, head in heads)
            if not heads_fit(heads, self.config):
                raise ValueError(
                    f"timestamp heads {list(heads)} do not all exist in {self.config.name!r} "
                    f"({self.config.num_layers} layers × "
                    f"{self.config.flow_lm.transformer.num_heads} heads)"
                )
            if not self.backend.capabilities.attention_probe:
                raise ValueError(
                    f"the {self.backend.name} backend cannot read attention: its word times "
                    "are estimated"
                )
        self._timestamp_heads = heads

    # -- loading ------------------------------------------------------------------------
    @classmethod
    def load(
        cls, language: str = "english", *, options: LoadOptions | None = None, **keywords: Any
    ) -> PocketTTS:
        """Load a language pack on a backend.

        ``language``: a pack name (``config_names()``), a language code ("en", "pt-BR") or name
        ("English"). The options are ``LoadOptions`` fields, given as ``options=`` or as
        keywords (``backend="numpy"``, ``model_dir=...``, ``revision``, ``token``,
        ``sampler_steps``, ``precision``, ``compute_units``…); keywords override ``options``.
        ``model_dir``: a local pack folder (nothing is downloaded; its ``config.json``, if any,
        replaces the registry config); otherwise files come from the Hugging Face hub at the
        pinned revisions (or ``revision``), through the HF cache and ``HF_TOKEN``/``token``.
        ``precision`` (a backend option): on NumPy "fp32" (default), "bf16" or "int8" FlowLM
        transformer linears (narrow ones need the ``fast`` extra); on CoreML "fp16" or "int8".
        """
        parts = load_parts(resolve_load(language, LoadOptions.build(options, **keywords)))
        return cls(
            config=parts.pack.config,
            backend=parts.backend,
            tokenizer=parts.tokenizer,
            pack=parts.pack,
            options=parts.options,
        )

    @classmethod
    def load_shared(
        cls, language: str = "english", *, options: LoadOptions | None = None, **keywords: Any
    ) -> PocketTTS:
        """Like ``load``, but every call with the same pack and options returns the same
        instance.

        For servers: ten calls each opening a session load the weights once. The key is the
        pack and ``LoadOptions.cache_key`` (the concrete backend, model_dir, revision…).
        """
        resolved = resolve_load(language, LoadOptions.build(options, **keywords))
        return _SHARED.get(
            resolved.shared_key, lambda: cls.load(resolved.pack_name, options=resolved.options)
        )

    @staticmethod
    def clear_shared() -> None:
        """Forget the models ``load_shared`` keeps: each is freed (its threads end, its files
        close) once nobody holds it; services and sessions in use keep theirs alive."""
        _SHARED.clear()

    # -- life ---------------------------------------------------------------------------
    def close(self) -> None:
        """Stop this model's compute threads now and forget it in the shared cache.

        Sessions still speaking on it are cancelled; later calls that speak raise
        ``SessionClosedError``. Idempotent. A model that is simply dropped frees itself too
        (once nobody holds it); ``close`` is for doing it at a known moment.
        """
        self._closed = True
        _SHARED.forget(self)
        self._pool.close()
        self._voice_states.clear()

    @property
    def closed(self) -> bool:
        """True once ``close`` was called."""
        return self._closed

    def __enter__(self) -> PocketTTS:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def has_speech(
        self,
        text: str,
        language: str | None = None,
        *,
        normalize: bool = True,
        lexicon: Mapping[str, str] | None = None,
    ) -> bool:
        """Whether ``text`` gives this pack anything to say (``TextPlanner.has_speech``);
        ``language``: a regional variant of the pack's language to normalize as ("pt-BR").
        ``<break/>`` tags are not speech (a malformed one: True, so enqueue names the error)."""
        try:
            text = strip_breaks(text) if has_breaks(text) else text
        except BreakTagError:
            return True  # enqueue raises the error that names what is wrong
        return self._planner.with_text_language(language).has_speech(
            text, normalize=normalize, lexicon=lexicon
        )

    def speech_probe(
        self,
        language: str | None = None,
        *,
        normalize: bool = True,
        lexicon: Mapping[str, str] | None = None,
    ) -> SpeechProbe:
        """Streamed text in, True once it has released a chunk to speak: the text stream a
        session's ``feed`` runs, without the session (``contract.SpeechProbe``)."""
        planner = self._planner.with_text_language(language)
        return planner.speech_probe(normalize=normalize, lexicon=lexicon)

    def warm_up(self, voice: VoiceLike | None = None) -> None:
        """Run every stage once and prefill ``voice``, so the first utterance pays no
        first-call cost. A voice this pack cannot use is logged and the default voice warmed
        instead (speaking with it reports the error); a failed warm-up is logged, not raised."""
        try:
            self.voice_state(voice)
        except PocketTTSError as e:
            logger.warning("PocketTTS warm-up: voice %r unusable: %s", voice, e)
            voice = None
        try:
            self.synthesize(WARMUP_TEXT, voice=voice, max_frames=WARMUP_FRAMES, seed=0)
        except PocketTTSError as e:
            logger.warning("PocketTTS warm-up failed: %s", e)

    # -- facts --------------------------------------------------------------------------
    @property
    def capabilities(self) -> EngineCapabilities:
        """In process: load options, warm-up and any voice file apply; checks run here."""
        return _IN_PROCESS

    @property
    def language(self) -> str:
        """The model config name (e.g. 'english', 'french_24l')."""
        return self.config.name

    @property
    def voices(self) -> list[str]:
        """Names of the voices this pack ships."""
        return list(self.pack.voice_names)

    @property
    def default_voice(self) -> str | None:
        """The voice used when none is given."""
        return self.pack.default_voice

    @property
    def text_preparer(self) -> TextPreparer:
        """The pack's text cleaning, chunking and tokenizing, as every session uses them."""
        return self._planner.preparer

    @property
    def scheduler(self) -> Scheduler:
        """The scheduler every batched session of this model runs on (made on first use)."""
        self._check_open()
        options = self.options
        return self._pool.get(
            lambda: Scheduler(
                self.backend, threads=options.threads, max_streams=options.max_streams
            )
        )

    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosedError(f"{self!r} was closed: load the model again to speak")

    # -- speaking -----------------------------------------------------------------------
    def session(
        self,
        options: UtteranceOptions | None = None,
        *,
        max_frames: int | None = None,
        text_language: str | None = None,
        timestamps: bool = False,
        on_admission_wait: Callable[[AdmissionWait], None] | None = None,
        **keywords: Any,
    ) -> Session:
        """A session: ``enqueue`` text, iterate frames; one voice, RNG and Mimi state.

        ``options`` (``UtteranceOptions``, or its fields as keywords: ``voice``,
        ``temperature``, ``eos_threshold``, ``seed``, ``normalize``, ``lexicon``, ``speed``) are
        the session's defaults for every utterance; ``seed`` seeds its random generator.
        ``speed`` (0.25-4.0) time-scales the audio, pitch kept: frames then hold more or fewer
        than 1920 samples; ``<break time="500ms"/>`` in a text is a pause of that length.
        ``max_frames`` bounds the frames of each chunk; ``text_language`` makes the normalizer
        read the text as a regional variant of the pack's language (``"pt-BR"`` on the
        portuguese pack). ``timestamps``: each frame carries the caller's words that start in
        it (``AudioFrame.words``) and those whose end it makes known, with start and end
        (``AudioFrame.completed_words``). ``on_admission_wait``: called (on the scheduler's
        thread, keep it short) when the session waits for a slot of the model's scheduler
        (``max_streams``) and when it gets one (``AdmissionWait.waited``: seconds).
        """
        self._check_open()
        options = UtteranceOptions.build(options, **keywords)
        defaults = UtteranceOptions(
            temperature=self.config.default_temperature,
            eos_threshold=self.config.default_eos_threshold,
            normalize=True,
        )
        return Session(
            scheduler=self.scheduler,
            planner=self._planner.with_text_language(text_language),
            resolve_voice=self.voice_state,
            defaults=options.over(defaults),  # the seed stays the caller's (over never fills it)
            max_frames=_check_max_frames(max_frames),
            timestamps=timestamps,
            timestamp_heads=self._timestamp_heads,
            on_admission_wait=on_admission_wait,
        )

    def stream(
        self,
        text: str,
        options: UtteranceOptions | None = None,
        *,
        max_frames: int | None = None,
        timestamps: bool = False,
        **keywords: Any,
    ) -> Iterator[AudioFrame]:
        """Speak ``text``, frame by frame as they are made (80 ms each).

        ``options``/keywords and ``max_frames`` as in ``session``. Raises ``EmptyTextError``
        (a ValueError) right away when there is nothing to say. Leaving the loop early stops
        the computation. ``timestamps``: each frame carries the words of ``text`` that start in
        it (``AudioFrame.words``) and those it completes (``AudioFrame.completed_words``).
        """
        session = self.session(options, max_frames=max_frames, timestamps=timestamps, **keywords)
        try:
            if session.enqueue(text) is None:
                raise EmptyTextError(
                    f"nothing to say in {_preview(text)}: the text is empty once normalized and "
                    "stripped of characters the model cannot say. Pass some words."
                )
            session.finish()
        except BaseException:
            session.cancel()
            raise
        return _frames_of(session)

    def synthesize(
        self,
        text: str,
        options: UtteranceOptions | None = None,
        *,
        max_frames: int | None = None,
        post_process: bool = False,
        timestamps: bool = False,
        **keywords: Any,
    ) -> np.ndarray | TimedAudio:
        """Speak ``text`` into one float32 array [n] at 24 kHz.

        ``options``/keywords and ``max_frames`` as in ``session``. ``post_process`` applies an
        80 Hz high-pass and a gentle 6 kHz shelf to the result. ``timestamps=True`` returns
        ``TimedAudio(audio, words)`` instead: every word of ``text`` as written, with its start
        and end in seconds (``Word``).
        """
        frames = list(
            self.stream(text, options, max_frames=max_frames, timestamps=timestamps, **keywords)
        )
        samples = [frame.samples for frame in frames]
        audio = np.concatenate(samples) if samples else np.zeros(0, np.float32)
        if post_process:
            audio = polish(audio, self.sample_rate)
        if timestamps:
            return TimedAudio(audio, tuple(w for frame in frames for w in frame.completed_words))
        return audio

    def synthesize_to_file(
        self,
        text: str,
        path: str | os.PathLike[str],
        *,
        audio_format: str | None = None,
        **options: Any,
    ) -> Path:
        """``synthesize`` into a 16-bit PCM mono WAV (or raw) file at 24 kHz; returns its path.

        The path is checked before synthesis: ``"-"`` is stdout, a device or FIFO is written
        through, a symlink's target is replaced, a regular file appears only when complete;
        a missing folder or an extension other than .wav/.raw/.pcm (without ``audio_format``)
        is an error.
        """
        output = output_file.check_output(path)
        chosen = output_file.audio_format(output, audio_format)
        audio = self.synthesize(text, **options)
        return write_wav(path, audio, self.sample_rate, audio_format=chosen)

    # -- voices -------------------------------------------------------------------------
    def clone_voice(self, source: AudioSource, *, sample_rate: float | None = None) -> Voice:
        """A ``Voice`` cloned from a recording (a path, or samples with ``sample_rate``).

        Pass it as ``voice=`` anywhere, or ``voice.save(path)`` it. Raises
        ``CloningUnavailableError`` when the pack has no voice-cloning weights and
        ``CloneAudioError`` for unusable audio (see ``engine.cloning``).
        """
        voice = clone_voice(
            self.backend, source, sample_rate=sample_rate, config_name=self.config.name
        )
        voice.metadata[WEIGHTS_METADATA_KEY] = self.pack.weights_id
        return voice

    def check_voice(self, voice: VoiceLike | None = None) -> VoiceSource:
        """What ``voice`` means here, checked cheaply (no download, no cloning, no prefill).

        The one voice parser: pack voice names, voice-state ``.safetensors`` paths,
        recordings (``.wav``; ``.flac``/``.ogg``/``.mp3`` with soundfile), ``hf://`` hub files
        and ``Voice`` objects; None is the pack's default voice. Raises ``UnknownVoiceError``,
        ``VoiceFileError`` or ``CloneAudioError`` saying what to do (``TypeError`` for other
        types).
        """
        if voice is None:
            voice = self.default_voice
            if voice is None:
                raise UnknownVoiceError(
                    f"pack {self.language!r} ships no voice; pass voice= as the path of a "
                    "voice .safetensors file or a Voice"
                )
        source = parse_voice(voice, self.pack)
        if source.voice is not None:
            source.voice.check_compatible(self.config, weights_id=self.pack.weights_id)
        return source

    def voice_state(self, voice: VoiceLike | None = None) -> FlowState:
        """The prefilled FlowLM state of a voice (cached; never modified by synthesis).

        ``voice``: anything ``check_voice`` takes; hub files are downloaded (HF cache) and
        recordings cloned once, on first use.
        """
        source = self.check_voice(voice)
        if source.voice is not None:
            return self.backend.flow_state_from_voice(source.voice.kv)
        if source.name is not None:
            name = source.name
            return self._prefilled(
                ("pack", name), lambda: Voice.load(self.pack.voice_path(name), self.config)
            )
        if source.hub is not None:
            hub = source.hub
            path = fetch_hub_voice(hub, token=self.options.token)
            key = ("hub", hub.repo, hub.path, hub.revision)
        else:
            assert source.path is not None
            path = source.path
            stat = path.stat()
            key = ("file", str(path), stat.st_mtime_ns, stat.st_size)
        if source.is_recording:  # a recording: clone it once, then reuse the state
            return self._prefilled(("clone", *key), lambda: self.clone_voice(path))
        weights_id = self.pack.weights_id
        return self._prefilled(key, lambda: Voice.load(path, self.config, weights_id=weights_id))

    def _prefilled(self, key: tuple[object, ...], make_voice: Callable[[], Voice]) -> FlowState:
        """The voice's prefilled state, made once per key."""
        return self._voice_states.get(
            key, lambda: self.backend.flow_state_from_voice(make_voice().kv)
        )

    @property
    def kernels(self) -> dict[str, str]:
        """Which kernels the loaded backend runs, by part ("flow_lm", "mimi"), as the load log
        says them; empty for a backend that does not say (CoreML)."""
        return self.backend.kernels

    def __repr__(self) -> str:
        precision = self.backend.precision
        shown = "" if precision is None else f", precision={precision!r}"
        return f"PocketTTS(language={self.language!r}, backend={self.backend.name!r}{shown})"


_SHARED: SharedModels[PocketTTS] = SharedModels()


def _frames_of(session: Session) -> Iterator[AudioFrame]:
    """Iterate a finished session; leaving early cancels it."""
    try:
        yield from session
    finally:
        session.cancel()


def _check_max_frames(value: int | None) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"max_frames must be an integer ≥ 1 (frames per chunk), got {value!r}")
    return value


def _preview(text: object) -> str:
    shown = repr(text)
    return shown if len(shown) <= 40 else shown[:37] + "..."


__all__ = ["WARMUP_FRAMES", "WARMUP_TEXT", "PocketTTS", "VoiceLike"]
