"""What the event loop's thread spends, for ``benchmarks.profiles.loop``.

``LoopMeter`` wraps every callback the loop runs (``asyncio.events.Handle._run``) to find the
longest one, in the thread's CPU time, with and without the garbage collector's pauses in it,
and sums the loop thread's CPU; ``AudioCount`` counts the seconds of audio a pipeline made;
``print_census`` lists what a full garbage collection walks.
"""

from __future__ import annotations

import asyncio
import gc
import time
import types
from collections import Counter

from pipecat.frames.frames import Frame, TTSAudioRawFrame
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

from tests.loop_slices import _describe  # the task or callback a loop slice ran


class LoopMeter:
    """The loop thread's longest callback (with and without the garbage collector's pauses
    in it), total CPU and longest GC pause (CPU seconds)."""

    def __init__(self) -> None:
        self.longest = 0.0
        self.longest_without_gc = 0.0
        self.longest_callback = ""
        self.longest_gc = 0.0
        self._cpu_start = 0.0
        self.cpu = 0.0
        self._wall_start = 0.0
        self.wall = 0.0
        self._gc_start: float | None = None
        self._gc_in_callback = 0.0
        self._run = asyncio.events.Handle._run

    def __enter__(self) -> LoopMeter:
        meter, run = self, self._run

        def timed(handle: asyncio.events.Handle) -> None:
            meter._gc_in_callback = 0.0
            start = time.thread_time()
            try:
                run(handle)
            finally:
                spent = time.thread_time() - start
                meter.longest = max(meter.longest, spent)
                if spent - meter._gc_in_callback > meter.longest_without_gc:
                    meter.longest_without_gc = spent - meter._gc_in_callback
                    meter.longest_callback = _describe(handle)

        asyncio.events.Handle._run = timed  # type: ignore[method-assign]
        gc.callbacks.append(self._on_gc)
        self._cpu_start = time.thread_time()
        self._wall_start = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cpu = time.thread_time() - self._cpu_start
        self.wall = time.monotonic() - self._wall_start
        asyncio.events.Handle._run = self._run  # type: ignore[method-assign]
        gc.callbacks.remove(self._on_gc)

    def _on_gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_start = time.thread_time()
        elif self._gc_start is not None:
            pause = time.thread_time() - self._gc_start
            self.longest_gc = max(self.longest_gc, pause)
            self._gc_in_callback += pause
            self._gc_start = None


class AudioCount(FrameProcessor):
    def __init__(self) -> None:
        super().__init__()
        self.seconds = 0.0

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, TTSAudioRawFrame):
            self.seconds += len(frame.audio) / 2 / frame.sample_rate
        await self.push_frame(frame, direction)


def print_census(top: int = 12) -> None:
    """The objects the garbage collector tracks (what a full collection walks), by type and
    by the package of their type."""
    objects = gc.get_objects()
    by_type = Counter(type(o).__qualname__ for o in objects)
    by_package = Counter(_package(o) for o in objects)
    frozen = gc.get_freeze_count()
    print(f"tracked objects: {len(objects)} (+{frozen} frozen)")
    print("  by type:    " + ", ".join(f"{n} {c}" for n, c in by_type.most_common(top)))
    print("  by package: " + ", ".join(f"{n} {c}" for n, c in by_package.most_common(top)))
    del objects


def _package(o: object) -> str:
    """The top package of a function or class, else of the object's type."""
    owner = o if isinstance(o, (type, types.FunctionType)) else type(o)
    return str(getattr(owner, "__module__", None) or "?").split(".")[0]
