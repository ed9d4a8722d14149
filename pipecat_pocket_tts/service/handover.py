"""How many engine frames a speech stream takes from its session per wake-up of the loop.

Every item the engine puts into a session's output wakes the event loop that serves every
call of the process. While the output transport still has plenty of audio queued to play,
waking for each 80 ms frame buys nothing: the frames can reach Pipecat several at a time, as
one longer audio frame. Below the mark, every frame is taken as soon as it is made, so the
playback never waits for a batch. A marker (a sentence's text frame, a turn's end, a pause)
is taken at once, and so is the first frame after it: where a turn or an utterance begins
nothing is held back (first audio and its metrics stay as they were).
"""

from __future__ import annotations

from dataclasses import dataclass

BATCH_FRAMES = 6
"""Engine frames taken together while the output is far ahead (0.48 s of audio)."""

BATCH_AHEAD_S = 1.0
"""Audio queued for playback from which frames are taken in batches."""

LOW_WATER_S = 0.5
"""A batch is taken, however small, before the queued audio falls below this."""

LIMIT = 2 * BATCH_FRAMES
"""Most items taken per wake-up: a backlog (the loop was busy) is handed over a batch per
loop slice."""


@dataclass(frozen=True)
class Handover:
    """What the next wake-up waits for (``at_least`` items, or ``within`` seconds) and takes
    (at most ``limit`` items)."""

    at_least: int
    within: float | None
    limit: int


def handover(queued_s: float, *, after_marker: bool) -> Handover:
    """The next wait, with ``queued_s`` seconds of audio queued for playback; after a marker
    the next frame (an utterance's first) is taken alone."""
    if after_marker or queued_s < BATCH_AHEAD_S:
        return Handover(at_least=1, within=None, limit=LIMIT)
    return Handover(at_least=BATCH_FRAMES, within=queued_s - LOW_WATER_S, limit=LIMIT)


__all__ = ["BATCH_AHEAD_S", "BATCH_FRAMES", "LIMIT", "LOW_WATER_S", "Handover", "handover"]
