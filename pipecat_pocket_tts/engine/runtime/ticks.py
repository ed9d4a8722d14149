"""One tick of the scheduler, chosen: which streams step, decode and prefill.

``choose_tick`` picks the work from the streams' state (changing none of them), under the
scheduler's lock; ``tick_plan.TickPlan`` turns the choice into tasks and applies their results.
``start_next_runs`` starts the next chunk of each stream whose chunk ended.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..model.config import FRAME_SECONDS
from .tick_costs import StageCosts
from .tick_parts import cut_decodes, split_streams, step_groups

if TYPE_CHECKING:
    from .streams import ScheduledStream

PREFILL_PIECE_TOKENS = 16
"""Largest prefill piece of one stream in a tick while other streams are stepping."""
PREFILL_TOKENS_PER_TICK = 32
"""Prefill tokens, over all streams, one busy tick takes on."""
PREFILL_SLACK_SECONDS = 0.4
"""Lead every speaking stream has when a new utterance's whole prefill may go in one tick."""
BLOCK_FRAMES = 4
"""Most frames of one stream a decode call takes (a frame block, on backends with
``capabilities.frame_blocks``)."""
BLOCK_LEAD_SECONDS = 0.4
"""Lead from which a stream's decode may wait a tick to grow into a block: below it (and for
an utterance's first frame) every sampled frame is decoded at once."""


def start_next_runs(
    active: list[ScheduledStream],
) -> tuple[
    list[ScheduledStream],
    list[tuple[ScheduledStream, list[Any]]],
    dict[ScheduledStream, BaseException],
]:
    """Set up each active stream's next chunk run (its text embedded) before a tick: the
    streams with work, the notices now due (before any frame of the tick) and the failures."""
    candidates: list[ScheduledStream] = []
    due_outputs: list[tuple[ScheduledStream, list[Any]]] = []
    failures: dict[ScheduledStream, BaseException] = {}
    for stream in active:
        if stream.stopped:
            continue
        try:
            due = stream.next_run()
        except Exception as exc:
            failures[stream] = exc
            continue
        if due:
            due_outputs.append((stream, due))
        if stream.ready:
            candidates.append(stream)
    return candidates, due_outputs, failures


@dataclass(frozen=True, eq=False)
class TickChoice:
    """Who does what this tick: chosen from the streams' state, changing none of them."""

    stepping: list[ScheduledStream]
    decoding: list[ScheduledStream]
    prefills: list[tuple[ScheduledStream, int]]
    """Each prefilling stream and its prefill tokens this tick."""
    frames: dict[ScheduledStream, int]
    """The frames each decoding stream decodes (a block when above 1)."""
    first_frames: list[tuple[ScheduledStream, int]]
    """Starting streams: their last prefill and first frame, in one task."""
    step_parts: list[list[ScheduledStream]]
    """The streams of each FlowLM step task."""
    decode_parts: list[list[ScheduledStream]]
    """The streams of each Mimi decode task, largest first."""
    carried: bool = False
    """The decode tasks run on beyond the tick: its other work does not wait for them, and
    their frames come out as each ends (fewer streams than threads: ``choose_tick``)."""

    @property
    def streams(self) -> set[ScheduledStream]:
        """Every stream with work in this tick (busy until it ends)."""
        return {
            *self.stepping,
            *self.decoding,
            *(s for s, _ in self.prefills),
            *(s for s, _ in self.first_frames),
        }


def choose_tick(
    candidates: list[ScheduledStream],
    now: float,
    threads: int,
    max_lead: float,
    costs: StageCosts,
    blocks: bool = False,
) -> TickChoice:
    """The work of one tick for ``candidates`` (streams with work, their next chunk run set up).

    First frames first, then the stream nearest to running dry; a stream more than
    ``max_lead`` ahead sits out while another is behind. ``blocks`` (a backend whose
    ``decode_frames`` is exact in one pass): a stream far enough ahead lets its sampled frames
    gather into a block before their decode (``_block_frames``), while the streams are at
    least as many as the threads. With fewer, a decode is *carried*: it runs on a thread the
    steps leave idle and the tick does not wait for it, so the step chain never waits on a
    decode; a stream whose decode is still running steps on, and its next decode takes
    every frame sampled meanwhile (a block, with ``blocks``).
    """
    spare_threads = threads > 1 and len(candidates) < threads
    carry_blocks = blocks and spare_threads
    blocks = blocks and not spare_threads
    leads = {stream: stream.lead(now) for stream in candidates}
    ordered = sorted(candidates, key=lambda s: (s.started, leads[s]))
    allowed = _may_compute(ordered, leads, max_lead)
    tick = costs.tick_seconds(len(candidates), threads)
    if blocks:
        frames = {s: _block_frames(s, leads[s], tick) for s in allowed if s.wants_decode}
    else:
        # A carried decode takes every frame its stream sampled while the last one ran.
        most = BLOCK_FRAMES if carry_blocks else 1
        frames = {s: min(s.pending_frames, most) for s in allowed if s.wants_decode}
    decoding = [s for s in allowed if frames.get(s)]
    stepping = _stepping(allowed)
    prefills = _prefills([s for s in allowed if s.wants_prefill], stepping, leads)
    first_frames = _first_frames(
        prefills, starting=sum(not s.started for s in ordered), threads=threads
    )
    prefills = [item for item in prefills if item not in first_frames]
    # Seconds of the tick's work beside its steps, or None when there is none.
    other = None
    if decoding or prefills:
        other = costs.decode_per_stream * sum(frames[s] for s in decoding) + sum(
            costs.prefill_per_token * tokens for _, tokens in prefills
        )
    step_parts = split_streams(stepping, step_groups(threads, len(stepping), other, costs))
    frames = {s: frames[s] for s in decoding}
    carried = spare_threads and bool(decoding and (step_parts or prefills or first_frames))
    # Frames a block may leave for the next tick: those its lead covers beyond the block lead
    # (with threads to spare, a decode takes them all: no step waits for it).
    spare = {}
    if not spare_threads:
        spare = {s: int((leads[s] - BLOCK_LEAD_SECONDS) / FRAME_SECONDS) for s in decoding}
    decode_parts = cut_decodes(
        decoding, frames, first_frames, step_parts, prefills, threads, costs, spare
    )
    return TickChoice(
        stepping=stepping,
        decoding=decoding,
        prefills=prefills,
        frames=frames,
        first_frames=first_frames,
        step_parts=step_parts,
        decode_parts=decode_parts,
        carried=carried,
    )


def _block_frames(stream: ScheduledStream, lead: float, tick: float) -> int:
    """Frames ``stream`` decodes this tick (0: its sampled frames wait to grow a block).

    An utterance's first frames, a stream whose lead is under ``BLOCK_LEAD_SECONDS``, and one
    that samples no more frames for now, decode what they have (up to ``BLOCK_FRAMES``). A
    stream further ahead waits until it has as many frames as its lead beyond that allows,
    one a tick of ``tick`` seconds (the estimate of this tick's length), at most
    ``BLOCK_FRAMES``."""
    pending = stream.pending_frames
    whole = min(pending, BLOCK_FRAMES)
    if not stream.started or lead < BLOCK_LEAD_SECONDS or not stream.wants_step:
        return whole
    wanted = min(BLOCK_FRAMES, 1 + int((lead - BLOCK_LEAD_SECONDS) / max(tick, 1e-3)))
    return whole if pending >= wanted else 0


def _may_compute(
    ordered: list[ScheduledStream], leads: dict[ScheduledStream, float], max_lead: float
) -> list[ScheduledStream]:
    """The streams not held back: all, unless some are behind (within ``max_lead``); then the
    ones more than ``max_lead`` ahead both of real time and of the stream furthest behind wait.
    Streams whose leads lie within ``max_lead`` of each other compute together, even past it:
    when every stream runs ahead, holding back whichever crossed ``max_lead`` first would cut
    each batch in two (a step of two streams costs ~1.5× a stream of a step of sixteen) and
    help nobody."""
    if not any(leads[s] <= max_lead for s in ordered):
        return ordered
    furthest_behind = min(leads[s] for s in ordered)
    return [s for s in ordered if leads[s] <= max_lead or leads[s] - furthest_behind <= max_lead]


def _stepping(allowed: list[ScheduledStream]) -> list[ScheduledStream]:
    """Streams that step. A stream decoding its first frame steps again next tick: the
    decodes of the tick's first frames have its threads to themselves (first audio sooner)."""
    return [s for s in allowed if s.wants_step and (s.started or not s.wants_decode)]


def _prefills(
    wanting: list[ScheduledStream],
    stepping: list[ScheduledStream],
    leads: dict[ScheduledStream, float],
) -> list[tuple[ScheduledStream, int]]:
    """Prefill tokens per stream. Idle, or every speaking stream has audio in hand: a new
    utterance's text goes in whole (its first frame sooner); otherwise in small pieces."""
    slack = min((leads[s] for s in stepping if s.started), default=None)
    roomy = slack is None or slack >= PREFILL_SLACK_SECONDS
    budget = None if not stepping else PREFILL_TOKENS_PER_TICK
    prefills: list[tuple[ScheduledStream, int]] = []
    for stream in wanting:
        assert stream.run is not None
        tokens = stream.run.prefill_left
        if budget is not None and not (roomy and not stream.started):
            tokens = min(tokens, PREFILL_PIECE_TOKENS, budget)
            if tokens <= 0:
                break
            budget -= tokens
        prefills.append((stream, tokens))
    return prefills


def _first_frames(
    prefills: list[tuple[ScheduledStream, int]], *, starting: int, threads: int
) -> list[tuple[ScheduledStream, int]]:
    """Starting streams whose prefill ends this tick, no frame of theirs waiting for its
    decode nor in one: they also step, sample and decode their first frame in the same task,
    while no more streams start than there are threads (each is a lone step and decode; a
    crowd starting together batches them instead)."""
    if starting > threads:
        return []
    return [
        (stream, tokens)
        for stream, tokens in prefills
        if not (stream.started or stream.wants_decode or stream.decoding)
        and tokens == stream.run.prefill_left  # type: ignore[union-attr]
    ]
