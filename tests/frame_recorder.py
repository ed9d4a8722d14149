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
