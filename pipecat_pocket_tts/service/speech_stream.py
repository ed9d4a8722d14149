"""Turns and the speech stream: which audio context each engine frame goes to.

A *turn* is one Pipecat audio context (an LLM reply or a ``TTSSpeakFrame``); a *speech stream*
(``SpeechStream``) is one engine session with its consumer task and encoder. Turns of
interruptible speech share the main stream; an uninterruptible turn gets a private stream, so
cancelling the main one never cuts it. Everything that must follow a turn's audio rides in the
session's output as a marker (``Session.mark``), so it comes out after the audio queued before
it:

- a frame Pipecat appends to the context (``TTSTextFrame``, a sentence's announcement): marked
  at once; the engine holds it while it holds the text before it (TOKEN aggregation:
  unfinished fed text, until the chunk that text becomes, dropped if that text makes none;
  SENTENCE: a short sentence waiting for the next, ``SentenceQueue``), so unspoken text is
  never pushed (the rules live in the engine: ``Session.mark``, ``SentenceQueue.mark``);
- the end of a turn: the turn's text is flushed into the session, then marked;
- a pause: after each queueing (not waiting for held text), so the encoder is flushed
  when the session runs dry.

How many engine frames the stream takes per wake-up of the loop (``handover``): every item the
engine puts into a session's output wakes the event loop that serves every call of the
process. While the output transport still has plenty of audio queued to play, waking for each
80 ms frame buys nothing: the frames can reach Pipecat several at a time, as one longer audio
frame. Below the mark, every frame is taken as soon as it is made, so the playback never waits
for a batch. A marker (a sentence's text frame, a turn's end, a pause) is taken at once, and so
is the first frame after it: where a turn or an utterance begins nothing is held back.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from pipecat.frames.frames import Frame, TTSTextFrame

from ..engine import SAMPLE_RATE, Marker, SentenceQueue
from ..engine.contract import OFF_LOOP_CHARS

if TYPE_CHECKING:
    from ..engine import AudioFrame, FrameEncoder
    from ..engine.contract import SpeechSession
    from .output import ContextOutput
    from .settings import TurnOptions


@dataclass(eq=False)
class Turn:
    """One audio context while its speech is synthesized."""

    context_id: str
    stream: SpeechStream
    # With TOKEN aggregation, text goes through Session.feed.
    streamed: bool
    closed: bool = False
    # With SENTENCE aggregation, set when the last enqueue raised.
    failed_text: bool = False
    # Session-clock seconds where the turn's audio begins.
    audio_start: float | None = None

    def close(self) -> None:
        self.closed = True


@dataclass(frozen=True, eq=False)
class _Release:
    turn: Turn
    frame: Frame


@dataclass(frozen=True, eq=False)
class _TurnEnd:
    turn: Turn


# Marked after each queueing: the audio pauses there if nothing follows.
_PAUSE = object()


def _is_marker(item: object) -> bool:
    """Wakes the consumer at once (called on the engine's thread)."""
    return isinstance(item, Marker)


# -- handing frames over ---------------------------------------------------------------
BATCH_FRAMES = 6
"""Engine frames taken together while the output is far ahead (0.48 s of audio)."""

BATCH_AHEAD_S = 1.0
"""Audio queued for playback from which frames are taken in batches."""

LOW_WATER_S = 0.5
"""A batch is taken, however small, before the queued audio falls below this."""

LIMIT = 2 * BATCH_FRAMES
"""Most items taken per wake-up: a backlog (the loop was busy) is handed over a batch per
loop slice."""


@dataclass(frozen=True)
class Handover:
    """What the next wake-up waits for (``at_least`` items, or ``within`` seconds) and takes
    (at most ``limit`` items)."""

    at_least: int
    within: float | None
    limit: int


def handover(queued_s: float, *, after_marker: bool) -> Handover:
    """The next wait, with ``queued_s`` seconds of audio queued for playback; after a marker
    the next frame (an utterance's first) is taken alone."""
    if after_marker or queued_s < BATCH_AHEAD_S:
        return Handover(at_least=1, within=None, limit=LIMIT)
    return Handover(at_least=BATCH_FRAMES, within=queued_s - LOW_WATER_S, limit=LIMIT)


async def _off_loop_if_long(text: str, call: Callable[[], Any]) -> Any:
    return await asyncio.to_thread(call) if len(text) > OFF_LOOP_CHARS else call()


class SpeechStream:
    """One engine session the service speaks through: the task that consumes its output, its
    encoder and its turns (the session's place on the model's scheduler is the engine's
    ``runtime.streams.ScheduledStream``)."""

    def __init__(
        self,
        session: SpeechSession,
        encoder: FrameEncoder,
        output: ContextOutput,
        *,
        private: bool,
        seed_version: int,
        on_closed: Callable[[SpeechStream, list[Turn]], None],
    ) -> None:
        self.session = session
        # With SENTENCE aggregation, whole sentences go in and short ones wait.
        self.sentences = SentenceQueue(session)
        # Owned by one uninterruptible turn.
        self.private = private
        # A retired stream takes no new turns and closes once its turns are done.
        self.retired = False
        self.closed = False
        self._encoder = encoder
        self._output = output
        # The seed version this session's generator follows.
        self._seed_version = seed_version
        self._on_closed = on_closed
        self._turns: list[Turn] = []
        # Utterance index to turn, until the utterance's last frame.
        self._owners: dict[int, Turn] = {}
        # The turn whose audio the encoder holds.
        self._audio_turn: Turn | None = None
        # The turn whose text the engine holds.
        self._feeding: Turn | None = None
        # Session-clock seconds of the frames that came out.
        self._clock = 0.0
        self._consumer = output.create_task(self._consume(), name="pocket_tts_consumer")
        # Runs while a turn is open (``_keep_alive``).
        self._keepalive: asyncio.Task | None = None

    @property
    def busy(self) -> bool:
        """True while it has open turns or utterances whose audio has not come out."""
        return bool(self._turns or self._owners)

    def add(self, turn: Turn) -> None:
        self._turns.append(turn)
        self._keep_open_contexts_alive()

    # -- text in ----------------------------------------------------------------------
    async def enqueue(self, turn: Turn, text: str, options: TurnOptions) -> None:
        """Queue a whole sentence of ``turn`` (SENTENCE aggregation); the engine holds a short
        one to say with the next (``SentenceQueue``)."""
        if turn.closed or self.closed or not text.strip():
            return
        if self._feeding is not None and self._feeding is not turn:
            # Another turn's text ends where this one begins.
            self.flush(self._feeding, options)
        seed = self._reseed(options)
        try:
            indices = await _off_loop_if_long(
                text,
                lambda: self.sentences.enqueue(text, options.with_seed(seed)),
            )
        except Exception:
            if turn.closed or self.closed:
                # Interrupted while a long text was planned off the loop.
                return
            turn.failed_text = True
            raise
        if turn.closed or self.closed:
            return
        turn.failed_text = False
        self._feeding = turn if self.sentences.holds_text else None
        # None queued means held, or nothing speakable; the seed waits.
        self._queued(turn, indices, options)

    async def feed(self, turn: Turn, text: str, options: TurnOptions) -> None:
        """Add a token of ``turn`` to the session's text stream (TOKEN aggregation)."""
        if turn.closed or self.closed:
            return
        if self._feeding is not None and self._feeding is not turn:
            # Another turn's text ends where this one begins.
            self.flush(self._feeding, options)
        self._feeding = turn
        seed = self._reseed(options)

        def feed() -> list[int]:
            return self.session.feed(text, options.with_seed(seed))

        try:
            indices = await _off_loop_if_long(text, feed)
        except Exception:
            if turn.closed or self.closed:
                # Interrupted while a long text was planned off the loop.
                return
            raise
        if not (turn.closed or self.closed):
            self._queued(turn, indices, options)

    def flush(self, turn: Turn, options: TurnOptions) -> None:
        """``turn``'s text is complete: queue what the engine holds of it (a short last
        sentence is said alone)."""
        if self._feeding is not turn or self.closed:
            return
        self._feeding = None
        utterance = options.with_seed(self._reseed(options))
        if turn.streamed:
            indices = self.session.flush(utterance)
        else:
            indices = self.sentences.flush(utterance)
        self._queued(turn, indices, options)

    def _reseed(self, options: TurnOptions) -> int | None:
        """A seed for the next utterance when the seed setting changed since the last one."""
        if self._seed_version == options.seed_version:
            return None
        return secrets.randbits(64) if options.seed is None else options.seed

    def _queued(self, turn: Turn, indices: list[int], options: TurnOptions) -> None:
        if not indices:
            return
        self._seed_version = options.seed_version
        for index in indices:
            self._owners[index] = turn
        self.session.mark(_PAUSE, after_fed_text=False)

    # -- frames of the context ---------------------------------------------------------
    def follow_audio(self, turn: Turn, frame: Frame) -> None:
        """Let ``frame`` of ``turn``'s context out after the audio of the text handed over."""
        if turn.closed or self.closed:
            return
        if isinstance(frame, TTSTextFrame) and turn.failed_text:
            # The utterance that ends this text failed.
            turn.failed_text = False
            return
        # The engine holds this marker back while the text is unfinished.
        self.sentences.mark(_Release(turn, frame))

    def end_turn(self, turn: Turn, options: TurnOptions) -> None:
        """No more text for ``turn``: its context ends after the last of its audio."""
        if turn.closed or self.closed:
            return
        try:
            self.flush(turn, options)
        finally:
            self.session.mark(_TurnEnd(turn))

    # -- keeping contexts alive -----------------------------------------------------------
    def _keep_open_contexts_alive(self) -> None:
        if self._keepalive is None and not self.closed:
            self._keepalive = self._output.create_task(
                self._keep_alive(), name="pocket_tts_keepalive"
            )

    async def _keep_alive(self) -> None:
        """Pipecat ends an audio context that gets nothing for a few seconds, and counts one
        that ended without audio as silent (three in a row write the service off). Every open
        turn's context is kept alive until the turn ends: its audio may be owed (a wait for a
        scheduler slot or a server, a slow first frame on a busy machine) or its text held
        while the LLM pauses mid-reply (a short sentence waiting for the next, a streamed
        sentence not yet ended, Pipecat's own aggregator's last sentence), and the reply must
        be neither lost nor its last words timed as a new context's."""
        while self._turns:
            for turn in list(self._turns):
                self._output.keep_alive(turn.context_id)
            await asyncio.sleep(self._output.keepalive_interval)
        self._keepalive = None

    # -- output ------------------------------------------------------------------------
    async def _consume(self) -> None:
        try:
            after_marker = True
            while True:
                wait = handover(self._output.queued_s, after_marker=after_marker)
                items = await self.session.next_batch(
                    wait.limit, at_least=wait.at_least, wakes_early=_is_marker, within=wait.within
                )
                if not items:
                    break
                after_marker = await self._on_items(items)
                # A backlog (the loop was busy) is handed over a batch per loop slice: the
                # session's channel hands queued items over without suspending.
                await asyncio.sleep(0)
            # The session ended on its own (a remote one whose server closed the connection
            # while it was idle): the next turn opens a new one.
            await self.close(end_turns=True)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            await self._output.report_failure(e)
            await self.close(end_turns=True)

    async def _on_items(self, items: list[AudioFrame | Marker]) -> bool:
        """Frames and markers in order, each run of frames handed over at once; True if the
        last item was a marker."""
        frames: list[AudioFrame] = []
        for item in items:
            if isinstance(item, Marker):
                await self._on_audio(frames)
                frames = []
                await self._on_marker(item.payload)
            else:
                frames.append(item)
        await self._on_audio(frames)
        return not frames

    async def _on_audio(self, frames: list[AudioFrame]) -> None:
        """Engine frames (24 kHz) → resampled audio in their turns' contexts, one audio frame
        per run of frames of the same turn."""
        run: list[AudioFrame] = []
        run_turn: Turn | None = None
        for frame in frames:
            turn = self._owners.get(frame.utterance_index)
            if frame.is_last_in_utterance:
                self._owners.pop(frame.utterance_index, None)
            start, self._clock = self._clock, self._clock + frame.samples.shape[0] / SAMPLE_RATE
            if turn is None or turn.closed:
                continue
            if turn.audio_start is None:
                turn.audio_start = start
            if turn is not run_turn:
                await self._play(run_turn, run)
                run, run_turn = [], turn
            run.append(frame)
        await self._play(run_turn, run)

    async def _play(self, turn: Turn | None, frames: list[AudioFrame]) -> None:
        """Frames of ``turn`` → one audio frame and their words in its context."""
        if turn is None or turn.closed or not frames:
            return
        if self._audio_turn is not turn:
            # The previous turn's audio ends here.
            await self._flush_encoder()
            self._audio_turn = turn
        samples = [frame.samples for frame in frames]
        audio = samples[0] if len(samples) == 1 else np.concatenate(samples)
        await self._output.append_audio(turn.context_id, self._encoder.encode(audio))
        # Times on the context's timeline: the resampled audio stays aligned with the
        # engine's (the filter only delays delivery), so a word at t of the turn's engine
        # audio is heard t after the context's first audio.
        start = turn.audio_start or 0.0
        words = [(w.text, w.session_start - start) for frame in frames for w in frame.words]
        await self._output.add_words(turn.context_id, words)

    async def _on_marker(self, payload: Any) -> None:
        # Nothing is queued after this point, so the audio pauses here.
        if not self._owners:
            await self._flush_encoder()
        if isinstance(payload, _Release):
            if not payload.turn.closed:
                await self._output.append_frame(payload.turn.context_id, payload.frame)
        elif isinstance(payload, _TurnEnd):
            await self._close_turn(payload.turn)

    async def _flush_encoder(self) -> None:
        """Emit the audio the encoder holds into the turn it belongs to."""
        turn, self._audio_turn = self._audio_turn, None
        tail = self._encoder.flush()
        if turn is not None and not turn.closed:
            await self._output.append_audio(turn.context_id, tail)

    async def _close_turn(self, turn: Turn) -> None:
        if turn.closed:
            return
        if self._audio_turn is turn:
            await self._flush_encoder()
        turn.close()
        self._turns.remove(turn)
        self._on_closed(self, [turn])
        await self._output.end_context(turn.context_id)
        if (self.retired or self.private) and not self._turns:
            await self.close()

    # -- life --------------------------------------------------------------------------
    def retire(self) -> None:
        """Take no new turns; close once the open ones have ended."""
        self.retired = True
        if not self._turns:
            self._output.create_task(self.close(), name="pocket_tts_close")

    async def close(self, *, end_turns: bool = False) -> None:
        """Cancel the session now (returns once its worker stopped) and the consumer task.

        Open turns are dropped (interruption, cancel, stop); with ``end_turns`` (the session
        failed) their contexts are ended too, so the pipeline moves on.
        """
        if self.closed:
            return
        self.closed = True
        turns, self._turns = self._turns, []
        for turn in turns:
            turn.close()
        self._owners.clear()
        self._audio_turn = None
        self._feeding = None
        self.sentences.clear()
        self._encoder.reset()
        self._on_closed(self, turns)
        await self.session.acancel()
        for task in (self._consumer, self._keepalive):
            if task is not None and task is not asyncio.current_task() and not task.done():
                await self._output.cancel_task(task)
        if end_turns:
            for turn in turns:
                await self._output.end_context(turn.context_id)


__all__ = [
    "BATCH_AHEAD_S",
    "BATCH_FRAMES",
    "LIMIT",
    "LOW_WATER_S",
    "Handover",
    "SpeechStream",
    "Turn",
    "handover",
]
