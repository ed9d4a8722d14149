"""The last few texts planned, so a text checked for speech is not planned again when it is
then enqueued (the service's gate and the server's ``check_text`` ask first, then speak)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from typing import TypeVar

Plan = TypeVar("Plan")

PLANS_KEPT = 32
"""Plans remembered per model: a sentence is enqueued right after its check, so a few do."""


def plan_key(
    language: str, text: str, normalize: bool, lexicon: Mapping[str, str] | None, *extra: Hashable
) -> Hashable:
    """What a plan depends on, as a dictionary key."""
    words = tuple(sorted(lexicon.items())) if lexicon else ()
    return (language, text, normalize, words, *extra)


class PlanCache:
    """A small thread-safe LRU of plans (the plans themselves are never changed)."""

    def __init__(self, size: int = PLANS_KEPT) -> None:
        self._size = size
        self._plans: OrderedDict[Hashable, object] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, make: Callable[[], list[Plan]]) -> list[Plan]:
        """The plan for ``key`` (a new list each call), made by ``make`` when not kept."""
        with self._lock:
            plan = self._plans.get(key)
            if plan is not None:
                self._plans.move_to_end(key)
                return list(plan)  # type: ignore[call-overload]
        plan = make()
        with self._lock:
            self._plans[key] = tuple(plan)
            while len(self._plans) > self._size:
                self._plans.popitem(last=False)
        return list(plan)


__all__ = ["PLANS_KEPT", "PlanCache", "plan_key"]
