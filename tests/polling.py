"""Bounded polls for tests: a condition checked a bounded number of times, failing clearly.

A test that must wait for a state it cannot be told about (a server's metric, a readiness
probe) checks it again and again; the bound is on the number of checks, so a condition that
never comes fails the test with what it waited for instead of hanging the suite.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

POLL_TRIES = 2000
"""Checks before a poll gives up (with ``POLL_INTERVAL_S``: generous, about 100 s)."""
POLL_INTERVAL_S = 0.05


async def poll_until(
    predicate: Callable[[], bool],
    *,
    what: str,
    tries: int = POLL_TRIES,
    interval: float = POLL_INTERVAL_S,
) -> None:
    """Return once ``predicate()`` is true; ``AssertionError`` naming ``what`` after
    ``tries`` checks (``interval`` seconds apart; 0: one loop pass apart)."""
    for _ in range(tries):
        if predicate():
            return
        await asyncio.sleep(interval)
    raise AssertionError(f"still waiting for {what} after {tries} checks")


__all__ = ["POLL_INTERVAL_S", "POLL_TRIES", "poll_until"]
