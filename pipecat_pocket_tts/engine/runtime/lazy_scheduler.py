"""A model's scheduler: made on first use, closed now or, when the model is collected, on a
thread of its own (a collection may run on any thread, a pool thread holding the scheduler's
lock included)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from .scheduler import Scheduler


class LazyScheduler:
    """Holds at most one scheduler; closing forgets it, so the next ``get`` makes a new one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._scheduler: Scheduler | None = None

    def get(self, make: Callable[[], Scheduler]) -> Scheduler:
        """The scheduler, made by ``make`` on first use."""
        with self._lock:
            if self._scheduler is None:
                self._scheduler = make()
            return self._scheduler

    def _take(self) -> Scheduler | None:
        with self._lock:
            scheduler, self._scheduler = self._scheduler, None
        return scheduler

    def close(self) -> None:
        """Stop the scheduler's threads now (waits for them)."""
        scheduler = self._take()
        if scheduler is not None:
            scheduler.close()

    def close_later(self) -> None:
        """Stop the scheduler's threads from a thread of its own, without waiting."""
        scheduler = self._take()
        if scheduler is not None:
            threading.Thread(target=scheduler.close, name="pocket-tts-release", daemon=True).start()


__all__ = ["LazyScheduler"]
