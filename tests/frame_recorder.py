"""A pipeline processor that records the frames passing it, for tests that wait on frames."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipecat.frames.frames import EndFrame, Frame, StartFrame
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

if TYPE_CHECKING:
    from pipecat.pipeline.worker import PipelineParams

EVENT_TIMEOUT_S = 60.0  # a failure bound only: the tests wait on events
MAX_WAKES = 100_000  # frames a wait looks at before it fails (a count, not a time budget)


class Recorder(FrameProcessor):
    """Records frames passing (both directions, or only ``direction``) and signals what the
    test waits for."""

    def __init__(self, direction: FrameDirection | None = None) -> None:
        super().__init__()
        self.frames: list[Frame] = []
        self.changed = asyncio.Event()
        self._direction = direction

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if self._direction in (None, direction):
            self.frames.append(frame)
            self.changed.set()
        await self.push_frame(frame, direction)

    async def wait_for(
        self, test: Callable[[Frame], bool], after: int = 0, count: int = 1
    ) -> Frame:
        """The ``count``-th frame recorded from index ``after`` on that passes ``test``."""
        for _ in range(MAX_WAKES):
            passed = (frame for frame in self.frames[after:] if test(frame))
            found = next(itertools.islice(passed, count - 1, None), None)
            if found is not None:
                return found
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), EVENT_TIMEOUT_S)
        raise AssertionError(f"no frame passed the test in {MAX_WAKES} frames")


class RecordedPipeline:
    """``[upstream Recorder, processor, downstream Recorder]`` running (24 kHz output unless
    ``params`` say otherwise; no RTVI, as Pipecat's ``run_test``) until ``end``; for tests that
    queue frames and wait on what comes out. The downstream Recorder keeps only the frames
    going downstream."""

    def __init__(self, processor: FrameProcessor, params: PipelineParams | None = None) -> None:
        from pipecat.pipeline.pipeline import Pipeline
        from pipecat.pipeline.worker import PipelineParams, PipelineWorker

        self.upstream, self.downstream = Recorder(), Recorder(FrameDirection.DOWNSTREAM)
        self.worker = PipelineWorker(
            Pipeline([self.upstream, processor, self.downstream]),
            params=params or PipelineParams(audio_out_sample_rate=24000),
            cancel_on_idle_timeout=False,
            enable_rtvi=False,
        )
        self._started = asyncio.Event()

        @self.worker.event_handler("on_pipeline_started")
        async def _started(*_args) -> None:
            self._started.set()

        self._running = asyncio.create_task(self._run())

    async def _run(self) -> None:
        from pipecat.workers.runner import WorkerRunner

        runner = WorkerRunner(handle_sigint=False)
        await runner.add_workers(self.worker)
        await runner.run()

    async def started(self, timeout: float) -> None:
        """Wait until the StartFrame went through (the processor's setup done), at most
        ``timeout`` seconds (a failure bound)."""
        await asyncio.wait_for(self._started.wait(), timeout)

    async def queue(self, frame: Frame) -> None:
        await self.worker.queue_frame(frame)

    async def end(self, timeout: float | None = EVENT_TIMEOUT_S) -> None:
        """End the pipeline (an EndFrame) and wait until it stopped."""
        await self.worker.queue_frame(EndFrame())
        await self.stopped(timeout)

    async def stopped(self, timeout: float | None = EVENT_TIMEOUT_S) -> None:
        """Wait until the pipeline stopped (ended by a frame queued before)."""
        await asyncio.wait_for(self._running, timeout)


@dataclass(frozen=True)
class Until:
    """A pause in a script: the frames after it are queued once ``count`` frames passing
    ``test`` have come out downstream since the previous pause."""

    test: Callable[[Frame], bool]
    count: int = 1


async def run_script(
    processor: FrameProcessor,
    script: Sequence[Frame | Until],
    *,
    start_timeout: float,
    pipeline_params: PipelineParams | None = None,
    send_end_frame: bool = True,
) -> list[Frame]:
    """Pipecat's ``run_test`` with pauses that wait on frames instead of on the clock.

    Args:
        processor: The processor under test (in a ``RecordedPipeline``).
        script: Frames to queue downstream in order, and ``Until`` pauses between them.
        start_timeout: How long the pipeline may take to start (a failure bound only).
        pipeline_params: The worker's ``PipelineParams`` (24 kHz output if None).
        send_end_frame: Queue an ``EndFrame`` after the script and wait for the pipeline to end;
            otherwise the script's last frame must end it (a ``CancelFrame``).

    Returns:
        The frames that came out downstream, without the ``StartFrame`` nor the ``EndFrame``
        the script's end queued, as ``run_test`` returns them.
    """
    pipeline = RecordedPipeline(processor, pipeline_params)
    down = pipeline.downstream
    await pipeline.started(start_timeout)
    seen = 0
    for step in script:
        if isinstance(step, Until):
            await down.wait_for(step.test, after=seen, count=step.count)
            seen = len(down.frames)
        else:
            await pipeline.queue(step)
    if send_end_frame:
        await pipeline.end(timeout=None)
    else:
        await pipeline.stopped(timeout=None)
    out = [f for f in down.frames if not isinstance(f, StartFrame)]
    if send_end_frame and out and isinstance(out[-1], EndFrame):
        out.pop()
    return out
