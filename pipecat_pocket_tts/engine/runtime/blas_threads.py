"""BLAS threads while schedulers run: one per call, process-wide, until the last one closes.

OpenBLAS's thread count is one setting for the whole process, and every scheduler (one per
loaded model) wants it at 1 while its pool runs: the pool's threads are the parallelism, and no
BLAS worker spins after the work ends. So the schedulers of a process share one count here:

- ``hold()`` when a pool starts: the first holder sets BLAS to one thread;
- ``release()`` when a pool closes: the last holder restores what was set before the first;
- ``widened(threads)`` around a lone task of an otherwise idle pool: BLAS on ``threads``
  threads for that call, only while a single scheduler holds the setting (another model's pool
  may be computing at that moment). A ``hold()`` during the window narrows BLAS at once.

Without threadpoolctl (a dependency, so only in a broken install) BLAS keeps its threads and a
warning says so.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from typing import Any

logger = logging.getLogger(__name__)


def usable_cores() -> int:
    """CPU cores this process may run on (the default size of a scheduler's pool)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        # Not on Linux.
        return os.cpu_count() or 1


class BlasThreads:
    """The process's BLAS thread setting, shared by the schedulers that hold it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders = 0
        self._controller: Any = None
        # The limiter whose restore puts back the first setting.
        self._original: Any = None
        self._unavailable = False

    @property
    def holders(self) -> int:
        with self._lock:
            return self._holders

    def hold(self) -> None:
        """One more running pool: BLAS runs one thread per call from now on."""
        with self._lock:
            self._holders += 1
            controller = self._controller_locked()
            if controller is None:
                return
            if self._original is None:
                self._original = controller.limit(limits=1, user_api="blas")
            else:
                # A lone call of another pool may have widened it: narrow it now.
                controller.limit(limits=1, user_api="blas")

    def release(self) -> None:
        """One running pool fewer; the last one restores the setting found by the first."""
        with self._lock:
            if self._holders == 0:
                raise RuntimeError("BlasThreads.release without a matching hold")
            self._holders -= 1
            if self._holders == 0 and self._original is not None:
                self._original.restore_original_limits()
                self._original = None

    @contextlib.contextmanager
    def widened(self, threads: int) -> Iterator[None]:
        """BLAS on ``threads`` threads inside, if one holder alone runs; else unchanged."""
        with self._lock:
            wide = self._holders == 1 and self._original is not None and threads > 1
            if wide:
                self._controller.limit(limits=threads, user_api="blas")
        try:
            yield
        finally:
            if wide:
                with self._lock:
                    # While the limit is still held, go back to one thread.
                    if self._original is not None:
                        self._controller.limit(limits=1, user_api="blas")

    def _controller_locked(self) -> Any:
        if self._controller is None and not self._unavailable:
            try:
                from threadpoolctl import ThreadpoolController
            except ImportError:  # pragma: no cover - a dependency; BLAS then keeps its threads
                self._unavailable = True
                logger.warning("threadpoolctl is missing: BLAS keeps its own threads")
                return None
            self._controller = ThreadpoolController()
        return self._controller


BLAS_THREADS = BlasThreads()
"""The one setting of this process."""
