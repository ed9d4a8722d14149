"""An output transport that plays audio in real time on a virtual clock, for pipeline tests.

Real-time playback without wall-clock waits: ``PlaybackClock`` is the pipeline's clock and
counts the audio the output has played, and the output transport's timed-frame task (which
releases word frames at their presentation time) sleeps on that clock instead of the wall
clock. Each 10 ms chunk ``PlaybackOutput`` writes moves the clock on by 10 ms, so a word whose
time is t is released exactly when the audio up to t has been played, whatever the speed of
the machine. ``PlaybackOutput.pause_at(seconds)`` holds the audio at that point: the test
waits until it is reached and every word due by then was released, then interrupts;
``start_after(seconds)`` starts the playback late, as a real-time output lags the engine.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Iterator
from contextlib import contextmanager

from pipecat.clocks.base_clock import BaseClock
from pipecat.frames.frames import (
    EndFrame,
    Frame,
    InterruptionFrame,
    OutputAudioRawFrame,
    StartFrame,
    TTSStoppedFrame,
)
from pipecat.processors.frame_processor import FrameDirection
from pipecat.transports import base_output
from pipecat.transports.base_output import BaseOutputTransport
from pipecat.transports.base_transport import TransportParams

NS = 1_000_000_000


class PlaybackClock(BaseClock):
    """Nanoseconds of audio played; ``sleep`` waits for the playback to get there."""

    def __init__(self, start_ns: int = NS) -> None:
        # Not 0: Pipecat reads a presentation time of 0 as "no time" (1.14).
        self._now = start_ns
        self._sleepers: list[tuple[int, asyncio.Future[None]]] = []

    def start(self) -> None:
        pass

    def get_time(self) -> int:
        return self._now

    def advance(self, ns: int) -> None:
        self._now += ns
        due = [(t, f) for t, f in self._sleepers if t <= self._now]
        self._sleepers = [(t, f) for t, f in self._sleepers if t > self._now]
        for _, future in due:
            if not future.done():
                future.set_result(None)

    async def sleep(self, seconds: float) -> None:
        target = self._now + round(seconds * NS)
        if target <= self._now:
            await asyncio.sleep(0)
            return
        future = asyncio.get_running_loop().create_future()
        self._sleepers.append((target, future))
        await future

    def sleepers_due_by(self, ns: int) -> int:
        """How many sleepers wait for a time ≤ ``ns`` (none once all due words are out)."""
        return sum(1 for t, f in self._sleepers if t <= ns and not f.done())


@contextmanager
def timed_frames_on(clock: PlaybackClock) -> Iterator[None]:
    """Make the output transport's timed-frame task sleep on ``clock``."""
    real = base_output.asyncio

    async def sleep(delay: float, result: object = None) -> object:
        if delay > 0:
            await clock.sleep(delay)
        else:
            await real.sleep(0)
        return result

    proxy = types.SimpleNamespace(**{name: getattr(real, name) for name in dir(real)})
    proxy.sleep = sleep
    base_output.asyncio = proxy  # type: ignore[assignment]
    try:
        yield
    finally:
        base_output.asyncio = real


class PlaybackOutput(BaseOutputTransport):
    """Plays audio chunks in real time on a ``PlaybackClock``; keeps what it played."""

    def __init__(self, clock: PlaybackClock, sample_rate: int) -> None:
        super().__init__(TransportParams(audio_out_enabled=True, audio_out_sample_rate=sample_rate))
        self.clock = clock
        self.played_samples = 0
        self.reached = asyncio.Event()
        self._pause_ns: int | None = None
        self._resume = asyncio.Event()
        self.interrupted_at: float | None = None  # seconds played when interrupted
        self.interrupted_clock: int | None = None  # the clock then (ns)
        self.received_samples = 0  # audio that reached the transport (played or queued)
        self._received = asyncio.Condition()
        self._ended = False  # the speech ended: no more audio is coming
        self._hold_seconds = 0.0  # playback starts once this much audio has arrived
        self._input_ended = False  # an EndFrame came: no more audio, the hold is over

    def pause_at(self, seconds: float) -> None:
        """Hold playback once ``seconds`` of audio have been played (until interrupted)."""
        self._pause_ns = self.clock.get_time() + round(seconds * NS)

    def start_after(self, seconds: float) -> None:
        """Start playing once ``seconds`` of audio have arrived, as a real-time output lags an
        engine that runs ahead of real time (later contexts are pushed while earlier ones
        still play)."""
        self._hold_seconds = seconds  # in seconds: the sample rate is known only at start

    async def start(self, frame: StartFrame) -> None:
        await super().start(frame)
        await self.set_transport_ready(frame)

    async def received_at_least(self, seconds: float) -> None:
        """Wait until ``seconds`` of audio reached the transport (or its input ended)."""
        async with self._received:
            await self._received.wait_for(
                lambda: self.received_samples >= seconds * self.sample_rate or self._ended
            )

    async def quiet(self) -> None:
        """Let the interruption run through the transport (a few loop turns)."""
        for _ in range(50):
            await asyncio.sleep(0)

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        if isinstance(frame, OutputAudioRawFrame):
            async with self._received:
                self.received_samples += len(frame.audio) // 2
                self._received.notify_all()
        if isinstance(frame, (TTSStoppedFrame, EndFrame)):
            async with self._received:
                self._ended = True
                self._input_ended = self._input_ended or isinstance(frame, EndFrame)
                self._received.notify_all()
        if isinstance(frame, InterruptionFrame):
            self.interrupted_at = self.played_seconds
            self.interrupted_clock = self.clock.get_time()
            self._pause_ns = None
            self._resume.set()
        await super().process_frame(frame, direction)

    async def write_audio_frame(self, frame: OutputAudioRawFrame) -> bool:
        if self._hold_seconds:
            hold = self._hold_seconds * self.sample_rate
            async with self._received:
                await self._received.wait_for(
                    lambda: self.received_samples >= hold or self._input_ended
                )
            self._hold_seconds = 0.0
        if self._pause_ns is not None and self.clock.get_time() >= self._pause_ns:
            self.reached.set()
            await self._resume.wait()  # set by the interruption (or the task is cancelled)
            return True  # the user barged in here: the held chunk is never played
        samples = len(frame.audio) // 2
        self.played_samples += samples
        self.clock.advance(round(samples * NS / frame.sample_rate))
        await asyncio.sleep(0)
        return True

    @property
    def played_seconds(self) -> float:
        return self.played_samples / self.sample_rate
