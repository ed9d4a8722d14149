"""Where the event loop's CPU goes: ``cProfile`` on the loop's thread, grouped by owner.

``cProfile`` hooks the thread it is enabled on only, so enabled on the loop's thread it sees
nothing of the engine's threads. Its timer is the wall clock (the thread's CPU clock is a
system call here, which made the profiled loop ~10× slower), less the loop's idle waits in
``epoll``; a wait for the GIL while the engine's threads hold it counts for the function that
waits. Each function's own time goes to the group its file belongs to; a built-in or
generated function (``len``, a dataclass's ``__init__``) has no file and counts for whoever
called it. The profiler slows every Python call, so the groups are shares of a profiled run,
not the run's true CPU (``benchmarks.profiles.loop`` prints the shares scaled to its unprofiled
total).
"""

from __future__ import annotations

import cProfile
import pstats
from collections import Counter

#: (group, parts of a file's path), tried in order: the first that matches owns the file.
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("service", ("pipecat_pocket_tts/service/", "benchmarks/profiles/reference_tts.py")),
    ("engine", ("pipecat_pocket_tts/",)),
    (
        "pipecat TTS",
        ("pipecat/services/", "pipecat/utils/", "pipecat/metrics/", "pipecat/processors/metrics"),
    ),
    (
        "transport",
        ("pipecat/transports/", "tests/pipecat_playback.py", "benchmarks/profiles/loop.py"),
    ),
    ("pipecat frames", ("pipecat/",)),
    ("logging", ("loguru/",)),
)
REST = "asyncio, rest"
IDLE = "<method 'poll' of 'select.epoll' objects>"  # the loop waiting for work
NAMES = (*(name for name, _ in GROUPS), REST)

Function = tuple[str, int, str]  # pstats' key: file, line, name


def group_of_file(filename: str) -> str | None:
    """The group owning a file; None for a built-in or generated function (no real file)."""
    if filename.startswith(("~", "<")):
        return None
    path = filename.replace("\\", "/")
    for name, parts in GROUPS:
        if any(part in path for part in parts):
            return name
    return REST


class LoopProfile:
    """Enable on the loop's thread; ``seconds()``: CPU seconds by group afterwards."""

    def __init__(self) -> None:
        self._profile = cProfile.Profile()

    def enable(self) -> None:
        self._profile.enable()

    def disable(self) -> None:
        self._profile.disable()

    def seconds(self) -> Counter[str]:
        """Own CPU seconds by group (built-ins counted for their callers)."""
        stats: dict = pstats.Stats(self._profile).stats  # type: ignore[attr-defined]
        totals: Counter[str] = Counter()
        for function, (_cc, _nc, own, _ct, callers) in stats.items():
            if function[2] == IDLE:
                continue
            group = group_of_file(function[0])
            if group is not None:
                totals[group] += own
                continue
            by_caller = {caller: entry[2] for caller, entry in callers.items()}
            spread = sum(by_caller.values())
            for caller, share in by_caller.items():
                owner = _owner(caller, stats, set()) or REST
                totals[owner] += own * (share / spread if spread else 1 / len(by_caller))
            if not callers:
                totals[REST] += own
        return totals


def _owner(function: Function, stats: dict, seen: set[Function]) -> str | None:
    """The group of ``function``, or of its heaviest caller with a file (built-ins)."""
    group = group_of_file(function[0])
    if group is not None or function in seen or function not in stats:
        return group
    seen.add(function)
    callers = stats[function][4]
    if not callers:
        return None
    heaviest = max(callers, key=lambda caller: callers[caller][2])
    return _owner(heaviest, stats, seen)


__all__ = ["GROUPS", "NAMES", "REST", "LoopProfile", "group_of_file"]
