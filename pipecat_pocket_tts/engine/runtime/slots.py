"""Admission to a scheduler: which streams have work now and which wait, in arrival order.

``max_streams`` is None (no limit), an integer ≥ 1, or ``"auto"``: a stream is admitted while
a tick with it added is estimated (``StageCosts.tick_seconds``) to take at most ``AUTO_LOAD``
of a frame, so the streams already speaking stay in real time. The estimate is the CPU seconds
a frame of that many streams costs on the kernels the load chose (a batched step and a decode
each, as the ticks measured them), spread over the pool's threads, times the wall seconds
ticks have taken per second of that work (``tick_stretch``: 1 on a quiet machine, more where
other processes share the cores), plus a fixed overhead. Above ``FREE_LOAD`` of a frame
at most one stream is admitted a tick (each priced with the one before it at work). The
waiting streams are looked at again whenever a slot frees and after every tick, as the
estimates move. Each wait and each admission after one is logged and told to the hooks (under
the scheduler's lock: keep them short and do not call the scheduler from them).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..model.options import AUTO_STREAMS, is_stream_limit

if TYPE_CHECKING:
    from .streams import ScheduledStream
    from .tick_costs import StageCosts

logger = logging.getLogger(__name__)

"""``max_streams`` value: the limit follows the measured cost of a tick."""
AUTO_LOAD = 0.85
"""Share of a frame's time that ticks may fill under ``max_streams="auto"`` (the rest is the
margin for prefills, the machine's other work and estimates that lag behind)."""
FREE_LOAD = 0.7
"""Below this share of a frame, "auto" admits any number of streams in one tick (above it, one
a tick: streams arriving together near the limit start one after another)."""


@dataclass(frozen=True)
class AdmissionWait:
    """A stream waiting for a slot (``waited`` None) or admitted after a wait (seconds)."""

    stream: str
    # 1 is next in line; 0 once admitted.
    position: int
    active: int
    waited: float | None = None


class StreamSlots:
    """The streams with work (``active``) and those in line for a slot (``waiting``)."""

    def __init__(
        self,
        limit: int | str | None,
        costs: StageCosts,
        threads: int,
        frame_seconds: float,
        clock: Callable[[], float],
        on_wait: Callable[[AdmissionWait], None] | None,
    ) -> None:
        if not is_stream_limit(limit):
            raise ValueError(f"max_streams must be an integer ≥ 1, 'auto' or None, got {limit!r}")
        self.limit = limit
        self.active: list[ScheduledStream] = []
        self.waiting: deque[ScheduledStream] = deque()
        self._costs = costs
        self._threads = threads
        self._frame_seconds = frame_seconds
        self._clock = clock
        self._on_wait = on_wait
        # The tick count when a stream was last admitted.
        self._admitted_at = -1

    def request(self, stream: ScheduledStream, tick: int) -> None:
        """Give ``stream`` a slot now, or put it in line (told to the hooks)."""
        if stream.admitted or stream in self.waiting:
            return
        if not self.waiting and self._free(tick):
            self._admit(stream, tick)
            return
        stream.waiting_since = self._clock()
        self.waiting.append(stream)
        event = AdmissionWait(stream.name, len(self.waiting), len(self.active))
        logger.info(
            "%s waits for a slot: %d streams speak (max_streams=%s), %d in line",
            stream.name,
            len(self.active),
            self._limit_text(),
            len(self.waiting),
        )
        self._notify(stream, event)

    def release(self, stream: ScheduledStream, tick: int) -> None:
        """``stream`` has no more work (or stopped): its slot, or its place in line, frees."""
        if stream in self.waiting:
            self.waiting.remove(stream)
        if stream.admitted:
            stream.admitted = False
            self.active.remove(stream)
        self.admit_waiting(tick)

    def admit_waiting(self, tick: int) -> None:
        """Admit the streams first in line while there is a slot for them."""
        while self.waiting and self._free(tick):
            admitted = self.waiting.popleft()
            self._admit(admitted, tick)
            waited = self._clock() - (admitted.waiting_since or self._clock())
            logger.info("%s admitted after waiting %.2f s", admitted.name, waited)
            self._notify(admitted, AdmissionWait(admitted.name, 0, len(self.active), waited))

    def _free(self, tick: int) -> bool:
        """Whether one more stream may have work at ``tick``."""
        active = len(self.active)
        if self.limit is None or active == 0:
            return True
        if self.limit == AUTO_STREAMS:
            estimate = self._costs.tick_seconds(active + 1, self._threads)
            if estimate <= FREE_LOAD * self._frame_seconds:
                return True
            return tick > self._admitted_at and estimate <= AUTO_LOAD * self._frame_seconds
        return active < self.limit

    def _admit(self, stream: ScheduledStream, tick: int) -> None:
        stream.admitted = True
        self.active.append(stream)
        self._admitted_at = tick

    def _limit_text(self) -> str:
        if self.limit != AUTO_STREAMS:
            return str(self.limit)
        streams = len(self.active) + 1
        estimate = self._costs.tick_seconds(streams, self._threads)
        return f"auto: a tick of {streams} streams is estimated at {1e3 * estimate:.0f} ms"

    def _notify(self, stream: ScheduledStream, event: AdmissionWait) -> None:
        for hook in (self._on_wait, stream.on_wait):
            if hook is not None:
                try:
                    hook(event)
                except Exception:
                    logger.exception("an on_wait hook of the scheduler failed")
