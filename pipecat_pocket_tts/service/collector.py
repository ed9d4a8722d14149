"""Python's garbage collector and the event loop: the heap frozen once the first model loads.

A full (oldest-generation) collection walks every container object of the process while it
holds the GIL: every event loop and every model thread waits. After the imports and a model
load that is about 190,000 objects with the full-size pack and 260,000 with the tiny test pack
(tuples, functions and dicts of Python, numba, llvmlite and Pipecat; the service's own are
about 2,800), and one such collection took 94–164 ms of CPU (``benchmarks/bench_loop.py``).
Nearly all of them live as long as the process. ``gc.freeze()`` moves what is alive to a
permanent generation that later collections skip, so they walk only what came after.

The service does it once per process, after its first model has loaded and warmed up
(``PocketTTSService(freeze_gc=False)`` or ``leave_collector_alone()`` to opt out). Once only:
an object alive at that moment that later becomes cyclic garbage is never collected, so the
objects of the call running then (one pipeline's) may be kept; a freeze per call would keep
every call's.
"""

from __future__ import annotations

import gc
import threading

from loguru import logger


class _HeapFreeze:
    """Whether this process's heap was frozen (or left alone for good), decided once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._decided = False
        self.froze = 0  # objects frozen (0: never)

    def freeze_once(self) -> bool:
        """``gc.freeze()`` if nothing decided yet; True if it froze now."""
        with self._lock:
            if self._decided:
                return False
            self._decided = True
            gc.freeze()
            self.froze = gc.get_freeze_count()
        logger.debug(
            f"PocketTTS: froze the {self.froze} objects alive after the model load (gc.freeze()):"
            " garbage collections skip them (PocketTTSService(freeze_gc=False) to opt out)"
        )
        return True

    def leave_alone(self) -> None:
        with self._lock:
            self._decided = True


_HEAP = _HeapFreeze()


def freeze_heap_once() -> bool:
    """Freeze the process's heap the first time a service's model is loaded; True if now."""
    return _HEAP.freeze_once()


def leave_collector_alone() -> None:
    """No service of this process ever freezes the heap (an application managing ``gc``
    itself, a test suite)."""
    _HEAP.leave_alone()


def frozen_objects() -> int:
    """How many objects the service froze (0: it did not)."""
    return _HEAP.froze


__all__ = ["freeze_heap_once", "frozen_objects", "leave_collector_alone"]
