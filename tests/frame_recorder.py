"""A pipeline processor that records the frames passing it, for tests that wait on frames."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from pipecat.frames.frames import Frame
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

EVENT_TIMEOUT_S = 60.0  # a failure bound only: the tests wait on events
MAX_WAKES = 100_000  # frames a wait looks at before it fails (a count, not a time budget)


class Recorder(FrameProcessor):
    """Records frames passing (both directions) and signals what the test waits for."""

    def __init__(self) -> None:
        super().__init__()
        self.frames: list[Frame] = []
        self.changed = asyncio.Event()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        self.frames.append(frame)
        self.changed.set()
        await self.push_frame(frame, direction)

    async def wait_for(self, test: Callable[[Frame], bool], after: int = 0) -> Frame:
        """The first frame recorded from index ``after`` on that passes ``test``."""
        for _ in range(MAX_WAKES):
            for frame in self.frames[after:]:
                if test(frame):
                    return frame
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), EVENT_TIMEOUT_S)
        raise AssertionError(f"no frame passed the test in {MAX_WAKES} frames")


class RecordedPipeline:
    """``[upstream Recorder, processor, downstream Recorder]`` running (24 kHz output) until
    ``end``; for tests that queue frames and wait on what comes out."""

    def __init__(self, processor: FrameProcessor) -> None:
        from pipecat.pipeline.pipeline import Pipeline
        from pipecat.pipeline.worker import PipelineParams, PipelineWorker
        from pipecat.workers.runner import WorkerRunner

        self.upstream, self.downstream = Recorder(), Recorder()
        self.worker = PipelineWorker(
            Pipeline([self.upstream, processor, self.downstream]),
            params=PipelineParams(audio_out_sample_rate=24000),
            cancel_on_idle_timeout=False,
        )
        self._running = asyncio.create_task(WorkerRunner(handle_sigint=False).run(self.worker))

    async def queue(self, frame: Frame) -> None:
        await self.worker.queue_frame(frame)

    async def end(self) -> None:
        """End the pipeline (an EndFrame) and wait until it stopped."""
        from pipecat.frames.frames import EndFrame

        await self.worker.queue_frame(EndFrame())
        await asyncio.wait_for(self._running, EVENT_TIMEOUT_S)
