"""The prefilled voice states a model keeps: each made once, even when many threads ask."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable

from ..backends.base import FlowState


class VoiceStateCache:
    """Voice states by key (a pack voice, a file's path and stamp, a clone's source)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._states: dict[Hashable, FlowState] = {}
        self._making: dict[Hashable, threading.Lock] = {}

    def get(self, key: Hashable, make_state: Callable[[], FlowState]) -> FlowState:
        """The state under ``key``, made by ``make_state`` on the first call. Threads asking
        for the same key wait for that one making; other keys are made meanwhile."""
        with self._lock:
            state = self._states.get(key)
            if state is not None:
                return state
            making = self._making.setdefault(key, threading.Lock())
        with making:
            with self._lock:
                state = self._states.get(key)
            if state is None:
                state = make_state()
                with self._lock:
                    self._states[key] = state
            return state

    def clear(self) -> None:
        """Forget every state."""
        with self._lock:
            self._states.clear()
            self._making.clear()


__all__ = ["VoiceStateCache"]
