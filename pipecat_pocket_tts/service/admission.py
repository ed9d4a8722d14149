"""A turn's wait for a slot of the model's scheduler, reported as a Pipecat metric.

Beyond the scheduler's limit (``max_streams``: by default ``"auto"``, what the measured cost
of a frame keeps in real time), a session waits for a slot (the scheduler logs the wait). When
it gets one, the service pushes a ``MetricsFrame`` holding an ``AdmissionWaitMetricsData``
(seconds waited, streams speaking then), so a deployment's observers see what the limit costs
a call. Sent only when the pipeline enables metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from pipecat.frames.frames import MetricsFrame
from pipecat.metrics.metrics import MetricsData
from pipecat.processors.frame_processor import FrameProcessor

from ..engine import AdmissionWait


class AdmissionWaitMetricsData(MetricsData):
    """Seconds a session of ``processor`` waited for a slot of its model's scheduler."""

    value: float
    streams_speaking: int  # streams holding a slot when it got one


def admission_reporter(processor: FrameProcessor, model: str) -> Callable[[AdmissionWait], None]:
    """The ``on_admission_wait`` of a session of ``processor`` on pack ``model``, opened now
    (call it on the event loop): each admission after a wait becomes a ``MetricsFrame``."""
    loop = asyncio.get_running_loop()

    def admitted(waited: float, speaking: int) -> None:  # on the event loop
        if not processor.metrics_enabled:
            return
        data = AdmissionWaitMetricsData(
            processor=processor.name, model=model, value=waited, streams_speaking=speaking
        )
        frame = MetricsFrame(data=[data])
        processor.create_task(processor.push_frame(frame), name=f"{processor}::admission-metrics")

    def report(event: AdmissionWait) -> None:  # the scheduler's thread, under its lock
        if event.waited is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody to tell
                loop.call_soon_threadsafe(admitted, event.waited, event.active)

    return report


__all__ = ["AdmissionWaitMetricsData", "admission_reporter"]
