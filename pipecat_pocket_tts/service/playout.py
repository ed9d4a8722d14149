"""When the audio a service pushes is played: the clock its words are timed on.

The output transport plays the audio it gets back to back, from when it arrives: audio pushed
while earlier audio still plays starts when that ends. A context's words are timed from the
moment its first audio plays, never from the moment it was pushed (the engine makes audio
ahead of real time, so a reply queued behind a greeting is pushed long before it is heard).
"""

from __future__ import annotations

NS = 1_000_000_000


class Playout:
    """The end of the audio pushed so far, on the pipeline's clock (nanoseconds)."""

    def __init__(self) -> None:
        self._end = 0

    def pushed(self, now: int, seconds: float) -> None:
        """``seconds`` of audio were pushed at ``now``: they play after what is queued."""
        self._end = max(self._end, now) + round(seconds * NS)

    def next_start(self, now: int) -> int:
        """When audio pushed at ``now`` starts playing."""
        return max(self._end, now)

    def queued_s(self, now: int) -> float:
        """Seconds of pushed audio not yet played at ``now``."""
        return max(0, self._end - now) / NS

    def interrupted(self) -> None:
        """The transport dropped the audio it had queued."""
        self._end = 0


__all__ = ["Playout"]
