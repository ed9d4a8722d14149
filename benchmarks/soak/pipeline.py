"""The two ends of a soak pipeline: ``Probe`` (first: records error frames going upstream)
and ``RealtimeOutput`` (last: a Pipecat output transport that plays audio in real time),
both writing what they see into a ``Ledger``. Used by ``benchmarks.soak.service`` and
``benchmarks.soak.word_release``.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field

from pipecat.frames.frames import (
    ErrorFrame,
    Frame,
    InterruptionFrame,
    OutputAudioRawFrame,
    StartFrame,
    TTSAudioRawFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.transports.base_output import BaseOutputTransport
from pipecat.transports.base_transport import TransportParams


@dataclass
class Ledger:
    """What one pipeline's output saw, in order, and which reply each context belongs to."""

    reply: int = -1  # the reply being sent
    live: set[str] = field(default_factory=set)  # contexts started since the last interruption
    dead: set[str] = field(default_factory=set)  # contexts started before an interruption
    context_reply: dict[str, int] = field(default_factory=dict)
    started: Counter[str] = field(default_factory=Counter)
    stopped: Counter[str] = field(default_factory=Counter)
    audio_bytes: Counter[int] = field(default_factory=Counter)  # per reply
    stale_frames: int = 0
    orphan_audio_frames: int = 0  # audio of a context never started
    errors: list[str] = field(default_factory=list)
    stopped_event: asyncio.Event = field(default_factory=asyncio.Event)

    def observe(self, frame: Frame) -> None:
        if isinstance(frame, InterruptionFrame):
            self.dead |= self.live
            self.live.clear()
        elif isinstance(frame, TTSStartedFrame) and frame.context_id:
            self.started[frame.context_id] += 1
            self.context_reply.setdefault(frame.context_id, self.reply)
            if frame.context_id not in self.dead:
                self.live.add(frame.context_id)
        elif isinstance(frame, TTSStoppedFrame) and frame.context_id:
            self.stopped[frame.context_id] += 1
            self.stopped_event.set()
        elif isinstance(frame, TTSAudioRawFrame):
            context = frame.context_id
            if context in self.dead:
                self.stale_frames += 1
            elif context not in self.live:
                self.orphan_audio_frames += 1
            else:
                self.audio_bytes[self.context_reply[context]] += len(frame.audio)

    def stopped_for(self, reply: int) -> bool:
        return any(self.context_reply.get(c) == reply for c in self.stopped)

    def unpaired(self, interrupted: set[int]) -> Counter[str]:
        """Contexts started or stopped more than once, stopped unstarted, or (not
        interrupted) started and never stopped, by kind."""
        kinds: Counter[str] = Counter()
        for context, n in self.stopped.items():
            if context not in self.started:
                kinds["stopped, never started"] += 1
            elif n > 1:
                kinds["stopped twice"] += 1
        for context, n in self.started.items():
            if n > 1:
                kinds["started twice"] += 1
            elif context not in self.stopped and self.context_reply[context] not in interrupted:
                kinds["never stopped"] += 1
        return kinds


class Probe(FrameProcessor):
    """First processor: records error frames travelling upstream."""

    def __init__(self, ledger: Ledger) -> None:
        super().__init__()
        self._ledger = ledger

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, ErrorFrame) and direction == FrameDirection.UPSTREAM:
            self._ledger.errors.append(frame.error)
        await self.push_frame(frame, direction)


class RealtimeOutput(BaseOutputTransport):
    """An output transport that takes audio at its real duration, like a sound card.

    Pipecat's media sender cuts the audio into 10 ms chunks, queues them and drops the
    queue on an interruption; ``write_audio_frame`` returns once the device would have room
    for the next chunk (one chunk of buffer), so playback runs on the wall clock.
    """

    def __init__(self, ledger: Ledger, sample_rate: int) -> None:
        super().__init__(
            TransportParams(
                audio_out_enabled=True,
                audio_out_sample_rate=sample_rate,
                audio_out_end_silence_secs=0,
            )
        )
        self._ledger = ledger
        self._due = 0.0  # when the audio written so far has finished playing
        self.played_bytes = 0

    async def start(self, frame: StartFrame) -> None:
        await super().start(frame)
        await self.set_transport_ready(frame)

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        if direction == FrameDirection.DOWNSTREAM:
            self._ledger.observe(frame)
        await super().process_frame(frame, direction)

    async def write_audio_frame(self, frame: OutputAudioRawFrame) -> bool:
        now = time.monotonic()
        duration = len(frame.audio) / (2 * frame.num_channels * frame.sample_rate)
        start = max(now, self._due)
        self._due = start + duration
        await asyncio.sleep(max(0.0, start - now))  # wait until the previous chunk is out
        self.played_bytes += len(frame.audio)
        return True

    def playing_for(self) -> float:
        """Seconds of written audio still playing."""
        return max(0.0, self._due - time.monotonic())
