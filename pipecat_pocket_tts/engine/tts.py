"""PocketTTS: load a pack once, then synthesize, stream or open sessions on it.

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
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from .audio import output_file
from .audio.signal import post_process as polish
from .audio.wav import write_wav
from .backends.base import FlowState
from .contract import EngineCapabilities, SpeechProbe
from .errors import BreakTagError, EmptyTextError, PocketTTSError
from .frames import AudioFrame
from .model.loaded import LoadedModel
from .runtime.slots import AdmissionWait
from .session import Session
from .text.breaks import has_breaks, strip_breaks
from .timing.word_timing import Word
from .utterance import UtteranceOptions
from .voices.cloning import AudioSource
from .voices.pack_voices import VoiceLike
from .voices.source import VoiceSource
from .voices.voice import Voice

logger = logging.getLogger(__name__)

WARMUP_TEXT = "Hello."
WARMUP_FRAMES = 2
_IN_PROCESS = EngineCapabilities(answers_locally=True)


class TimedAudio(NamedTuple):
    """What ``synthesize(..., timestamps=True)`` returns: the audio and the caller's words."""

    audio: np.ndarray
    """float32 [n] at 24 kHz."""
    words: tuple[Word, ...]


class PocketTTS(LoadedModel):
    """A loaded model (``LoadedModel``: loading, sharing, facts, ``close``) and the ways to
    make it speak."""

    def has_speech(
        self,
        text: str,
        text_language: str | None = None,
        *,
        normalize: bool = True,
        lexicon: Mapping[str, str] | None = None,
    ) -> bool:
        """Whether ``text`` gives this pack anything to say, as its sessions would plan it.

        ``<break/>`` tags are not speech; a malformed one counts as speech, so that
        ``enqueue`` raises the error that names it.

        Args:
            text: The text, whole.
            text_language: A regional variant of the pack's language to normalize as
                ("pt-BR"), or None.
            normalize: Whether the text is normalized first, as ``enqueue`` would.
            lexicon: Words spoken as other words, as ``enqueue`` would apply them.

        Returns:
            True if the text makes at least one chunk to speak.
        """
        try:
            text = strip_breaks(text) if has_breaks(text) else text
        except BreakTagError:
            return True
        return self._planner.with_text_language(text_language).has_speech(
            text, normalize=normalize, lexicon=lexicon
        )

    def speech_probe(
        self,
        text_language: str | None = None,
        *,
        normalize: bool = True,
        lexicon: Mapping[str, str] | None = None,
    ) -> SpeechProbe:
        """The text stream a session's ``feed`` runs, without the session.

        Args:
            text_language: As in ``has_speech``.
            normalize: As in ``has_speech``.
            lexicon: As in ``has_speech``.

        Returns:
            A ``SpeechProbe``: streamed text in, True once it has released a chunk to speak.
        """
        planner = self._planner.with_text_language(text_language)
        return planner.speech_probe(normalize=normalize, lexicon=lexicon)

    def warm_up(self, voice: VoiceLike | None = None) -> None:
        """Run every stage once and prefill ``voice``, so the first utterance pays no
        first-call cost.

        A voice this pack cannot use is logged and the default voice warmed instead (speaking
        with it reports the error); a failed warm-up is logged, not raised.

        Args:
            voice: The voice to prefill (a ``VoiceLike``), or None for the pack's default.
        """
        try:
            self.voice_state(voice)
        except PocketTTSError as e:
            logger.warning("PocketTTS warm-up: voice %r unusable: %s", voice, e)
            voice = None
        try:
            self.synthesize(WARMUP_TEXT, voice=voice, max_frames=WARMUP_FRAMES, seed=0)
        except PocketTTSError as e:
            logger.warning("PocketTTS warm-up failed: %s", e)

    @property
    def capabilities(self) -> EngineCapabilities:
        """In process: load options, warm-up and any voice file apply; checks run here."""
        return _IN_PROCESS

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
        """Open a session: ``enqueue`` text, iterate frames; one voice, RNG and Mimi state.

        Args:
            options: The session's defaults for every utterance (``UtteranceOptions``).
            max_frames: At most this many frames per chunk, or None.
            text_language: A regional variant of the pack's language for the normalizer to
                read the text as (``"pt-BR"`` on the portuguese pack), or None.
            timestamps: Whether each frame carries the caller's words that start in it
                (``AudioFrame.words``) and those whose end it makes known, with start and end
                (``AudioFrame.completed_words``).
            on_admission_wait: Called (on the scheduler's thread: keep it short) when the
                session waits for a slot of the model's scheduler (``max_streams``) and when
                it gets one (``AdmissionWait.waited``: seconds).
            **keywords: ``UtteranceOptions`` fields, over ``options``: ``voice``,
                ``temperature``, ``eos_threshold``, ``seed`` (seeds the session's random
                generator), ``normalize``, ``lexicon``, ``speed`` (0.25-4.0: the audio
                time-scaled, pitch kept; frames then hold more or fewer than 1920 samples).

        Returns:
            The session. ``<break time="500ms"/>`` in its text is a pause of that length.
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
            # ``over`` never fills the seed: it stays the caller's.
            defaults=options.over(defaults),
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

        Leaving the loop early stops the computation. Raises ``EmptyTextError`` (a
        ValueError) right away when there is nothing to say.

        Args:
            text: What to say.
            options: As in ``session``.
            max_frames: As in ``session``.
            timestamps: Whether each frame carries the words of ``text`` that start in it
                (``AudioFrame.words``) and those it completes (``AudioFrame.completed_words``).
            **keywords: As in ``session``.

        Returns:
            An iterator of ``AudioFrame``s.
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
        """Speak ``text`` into one array.

        Args:
            text: What to say.
            options: As in ``session``.
            max_frames: As in ``session``.
            post_process: Whether an 80 Hz high-pass and a gentle 6 kHz shelf are applied.
            timestamps: Whether every word of ``text`` is returned too, as written, with its
                start and end in seconds (``Word``).
            **keywords: As in ``session``.

        Returns:
            float32 [n] at 24 kHz, or ``TimedAudio(audio, words)`` with ``timestamps``.
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
        """``synthesize`` into a 16-bit PCM mono WAV (or raw) file at 24 kHz.

        The path is checked before synthesis: ``"-"`` is stdout, a device or FIFO is written
        through, a symlink's target is replaced, a regular file appears only when complete;
        a missing folder or an extension other than .wav/.raw/.pcm (without ``audio_format``)
        is an error.

        Args:
            text: What to say.
            path: Where the audio goes.
            audio_format: "wav" or "raw", or None to go by the extension.
            **options: As in ``synthesize``.

        Returns:
            The path written.
        """
        output = output_file.check_output(path)
        chosen = output_file.audio_format(output, audio_format)
        audio = self.synthesize(text, **options)
        return write_wav(path, audio, self.sample_rate, audio_format=chosen)

    # -- voices -------------------------------------------------------------------------
    def clone_voice(self, source: AudioSource, *, sample_rate: float | None = None) -> Voice:
        """Clone a voice from a recording; pass it as ``voice=`` anywhere, or ``save`` it.

        Raises ``CloningUnavailableError`` when the pack has no voice-cloning weights and
        ``CloneAudioError`` for unusable audio (``engine.voices.cloning``).

        Args:
            source: A recording's path, or its samples.
            sample_rate: The samples' rate (samples only).

        Returns:
            The cloned ``Voice``.
        """
        return self._voices.clone(source, sample_rate=sample_rate)

    def check_voice(self, voice: VoiceLike | None = None) -> VoiceSource:
        """What ``voice`` means here, checked cheaply (no download, no cloning, no prefill).

        The one voice parser: pack voice names, voice-state ``.safetensors`` paths,
        recordings (``.wav``; ``.flac``/``.ogg``/``.mp3`` with soundfile), ``hf://`` hub files
        and ``Voice`` objects. Raises ``UnknownVoiceError``, ``VoiceFileError`` or
        ``CloneAudioError`` saying what to do (``TypeError`` for other types).

        Args:
            voice: A ``VoiceLike``, or None for the pack's default voice.

        Returns:
            The parsed ``VoiceSource``.
        """
        return self._voices.check(voice)

    def voice_state(self, voice: VoiceLike | None = None) -> FlowState:
        """Make ``voice`` ready to speak with: its prefilled FlowLM state, kept.

        Hub files are downloaded (HF cache) and recordings cloned once, on first use.

        Args:
            voice: Anything ``check_voice`` takes.

        Returns:
            The state (never modified by synthesis).
        """
        return self._voices.state(voice)


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


__all__ = ["WARMUP_FRAMES", "WARMUP_TEXT", "PocketTTS", "TimedAudio"]
