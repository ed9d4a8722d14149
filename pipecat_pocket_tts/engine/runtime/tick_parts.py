"""How a tick's chosen work is cut into the pool's tasks (``ticks.choose_tick`` calls these).

- The FlowLM step: one call for up to two threads (every weight read once a call), in parts
  when the tick's other work would leave threads waiting on it (``step_groups``).
- The decodes: shares that level the threads' finishing times (``tick_costs``), block decodes
  in parts of one stream's block that threads take as they come free, the last block
  shortened where it would leave its thread finishing last (``cut_decodes``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .tick_costs import StageCosts, decode_shares, thread_loads

if TYPE_CHECKING:
    from .streams import ScheduledStream

BLOCK_PART_FRAMES = 4
"""Most frames a decode task of frame blocks holds (``_finer``)."""


def step_groups(threads: int, stepping: int, other: float | None, costs: StageCosts) -> int:
    """FlowLM step tasks for ``stepping`` streams: one for up to 2 threads (a call reads every
    weight once); a tick with nothing but steps (``other`` None) gives every thread a part
    (its threads would otherwise wait), and so does one whose other work (``other`` seconds,
    estimated) would leave threads waiting on one step longer than the smaller steps' extra
    cost (``costs.step`` by batch size)."""
    if other is None:
        return threads
    fewer = 1 if threads <= 2 else threads // 2
    if stepping < 2 * threads:
        return fewer

    def makespan(groups: int) -> float:
        part = costs.step(-(-stepping // groups))
        return max(part, (groups * part + other) / threads)

    return threads if makespan(threads) < makespan(fewer) else fewer


def cut_decodes(
    decoding: list[ScheduledStream],
    frames: dict[ScheduledStream, int],
    first_frames: list[tuple[ScheduledStream, int]],
    step_parts: list[list[ScheduledStream]],
    prefills: list[tuple[ScheduledStream, int]],
    threads: int,
    costs: StageCosts,
    spare: dict[ScheduledStream, int],
) -> list[list[ScheduledStream]]:
    """The decodes cut so every thread finishes at about the same time (``tick_costs``;
    a decode is priced per frame, so a stream's share counts its block's frames). With block
    decodes, the last block may be shortened by up to its stream's ``spare`` frames (``frames``
    changed) to level the threads."""
    first_frame = 2 * costs.step(1) + costs.decode_per_stream
    loads = thread_loads(
        [costs.prefill_per_token * tokens + first_frame for _, tokens in first_frames]
        + [costs.step(len(part)) for part in step_parts]
        + [costs.prefill_per_token * tokens for _, tokens in prefills],
        threads,
    )
    total = sum(frames[s] for s in decoding)
    shares = [share for share in decode_shares(loads, total, costs.decode_per_stream) if share]
    if not any(count > 1 for count in frames.values()):
        return cut_frames(decoding, frames, sorted(shares, reverse=True))
    parts = cut_frames(decoding, frames, sorted(_finer(shares), reverse=True))
    _level_last_block(parts, frames, loads, costs.decode_per_stream, spare)
    return parts


def _level_last_block(
    parts: list[list[ScheduledStream]],
    frames: dict[ScheduledStream, int],
    loads: list[float],
    per_frame: float,
    spare: dict[ScheduledStream, int],
) -> None:
    """If the last decode part would leave the thread that takes it finishing after every
    other (the pool takes parts in order, each by the thread free first), decode fewer of its
    last stream's block now: the frames it would run past the others wait a tick, as many as
    that stream can ``spare``."""
    finish = list(loads)
    taker = 0
    for part in parts:
        taker = finish.index(min(finish))
        finish[taker] += per_frame * sum(frames[s] for s in part)
    others = [load for i, load in enumerate(finish) if i != taker]
    if not parts or not others or finish[taker] <= max(others):
        return
    stream = parts[-1][-1]
    over = int((finish[taker] - max(others)) / per_frame)
    trim = min(frames[stream] - 1, over, spare.get(stream, 0))
    if trim > 0:
        frames[stream] -= trim


def _finer(shares: list[int]) -> list[int]:
    """Shares of block decodes cut into parts of at most ``BLOCK_PART_FRAMES`` frames: the
    threads take them as they come free, so an estimate off by a few frames leaves no thread
    waiting long (a block's decode costs about as much a frame in a part of one stream as of
    several: the block already fills the kernels' tiles)."""
    finer = []
    for share in shares:
        parts = -(-share // BLOCK_PART_FRAMES)
        finer += [share // parts + (i < share % parts) for i in range(parts)]
    return finer


def _cut(streams: list[ScheduledStream], sizes: list[int]) -> list[list[ScheduledStream]]:
    """Streams cut into consecutive parts of the given sizes (summing to their number)."""
    parts, start = [], 0
    for size in sizes:
        parts.append(streams[start : start + size])
        start += size
    return parts


def cut_frames(
    streams: list[ScheduledStream], frames: dict[ScheduledStream, int], shares: list[int]
) -> list[list[ScheduledStream]]:
    """Streams cut into consecutive parts holding about ``shares`` frames each (summing to
    their frames): a part closes once it holds its share; the last takes the rest."""
    if all(frames[s] == 1 for s in streams):
        return _cut(streams, shares)
    parts: list[list[ScheduledStream]] = []
    current: list[ScheduledStream] = []
    held = 0
    for stream in streams:
        current.append(stream)
        held += frames[stream]
        if len(parts) < len(shares) - 1 and held >= shares[len(parts)]:
            parts.append(current)
            current, held = [], 0
    if current:
        parts.append(current)
    return parts


def split_streams(streams: list[ScheduledStream], groups: int) -> list[list[ScheduledStream]]:
    """Streams cut into at most ``groups`` contiguous, non-empty parts."""
    if not streams:
        return []
    groups = min(groups, len(streams))
    size = -(-len(streams) // groups)
    return [streams[i : i + size] for i in range(0, len(streams), size)]
