"""The longest synchronous slice of the event loop, in the loop thread's CPU time.

On a loaded 2-core machine, wall-clock loop lag measures the machine; the CPU time the loop's
thread spends inside one callback (``asyncio.Handle._run``: one task step, one timer) measures
the code that ran. Pipecat's own text handling runs on the loop too and is subtracted: its
sentence aggregator (SENTENCE mode; about 180 ms for a 100 KB burst) and the word-timestamp
sequencer (it re-reads the open text at each token and at each played word). What remains
is the service's (and the rest of Pipecat's frame handling).

It also counts the engine's text work done on the loop's thread, in characters handed to the
stages whose cost grows with their text (normalizing, cleaning, finding sentence ends,
tokenizing): ``chars`` in all, ``most_chars`` in one slice and ``largest_call`` in one call of
a stage. Unlike a time, ``chars`` and ``largest_call`` are the same on any machine, so bounds on
them (per call, per character of the reply) show at a few KB what would stall the loop at
100 KB. ``most_chars`` is not: how many queued frames one slice handles depends on the machine.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import threading
import time
import weakref
from collections.abc import AsyncIterator

import pytest
from pipecat.utils.context.aggregated_frame_sequencer import AggregatedFrameSequencer
from pipecat.utils.text.simple_text_aggregator import SimpleTextAggregator

from pipecat_pocket_tts.engine.text.chunking import Chunker
from pipecat_pocket_tts.engine.text.normalize import TextNormalizer
from pipecat_pocket_tts.engine.text.tokenizer import Tokenizer

#: Pipecat's word-timestamp sequencer: it registers the text, then matches each played word
#: against the context's whole open text (1.14: ``alnum_only`` of all of it per word, so its
#: cost grows with an unpunctuated TOKEN reply). Pipecat's cost, not the service's.
SEQUENCER_ENTRIES = ("register_spoken", "finalize", "process_word", "flush", "force_complete")

#: The engine's text stages whose cost grows with the text they are given (owner, name).
TEXT_STAGES = (
    (TextNormalizer, "__call__"),  # every normalization (texts, streams, caller words)
    (Chunker, "certain_end"),
    (Tokenizer, "filter_unrepresentable"),
    (Tokenizer, "encode"),
    (Tokenizer, "count"),
)


def _describe(handle: asyncio.events.Handle) -> str:
    """The task (its coroutine's name) or callback a slice ran."""
    owner = getattr(handle._callback, "__self__", None)
    if isinstance(owner, asyncio.Task):
        coroutine = owner.get_coro()
        return f"task {owner.get_name()}: {getattr(coroutine, '__qualname__', coroutine)}"
    return repr(handle)[:300]


class LoopSlices:
    """Install with a ``monkeypatch``; ``reset()`` once the pipeline runs; read ``longest``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.longest = 0.0  # seconds of CPU
        self.longest_callback = ""
        self.slices = 0
        self.chars = 0  # characters of text the engine's text stages took on the loop thread
        self.most_chars = 0  # ... in one slice
        self.largest_call = 0  # ... in one call of a stage
        self._slice_chars = 0
        self._loop_thread: int | None = None  # set by ``reset``, on the loop
        self._foreign = 0.0  # Pipecat's aggregator CPU inside the current slice
        self.gc_seconds = 0.0  # garbage collections on the loop thread (not the slice's work)
        self._gc_start: float | None = None
        run = asyncio.events.Handle._run
        aggregate = SimpleTextAggregator.aggregate
        slices = self

        _watch_collections(self)

        def timed_run(handle: asyncio.events.Handle) -> None:
            slices._foreign = 0.0
            slices._slice_chars = 0
            start = time.thread_time()
            try:
                run(handle)
            finally:
                spent = time.thread_time() - start - slices._foreign
                slices.slices += 1
                slices.most_chars = max(slices.most_chars, slices._slice_chars)
                if spent > slices.longest:
                    slices.longest = spent
                    slices.longest_callback = _describe(handle)

        async def timed_aggregate(aggregator, text: str) -> AsyncIterator:
            inner = aggregate(aggregator, text)
            while True:
                start = time.thread_time()
                try:
                    item = await inner.__anext__()
                except StopAsyncIteration:
                    return
                finally:
                    slices._foreign += time.thread_time() - start
                yield item

        depth = 0  # sequencer calls nest (finalize → process_word): time the outermost

        def timed(method):
            def run_timed(sequencer, *args, **kwargs):
                nonlocal depth
                start, depth = time.thread_time(), depth + 1
                try:
                    return method(sequencer, *args, **kwargs)
                finally:
                    depth -= 1
                    if depth == 0:
                        slices._foreign += time.thread_time() - start

            async def run_timed_async(sequencer, *args, **kwargs):
                nonlocal depth
                start, depth = time.thread_time(), depth + 1
                try:
                    return await method(sequencer, *args, **kwargs)
                finally:
                    depth -= 1
                    if depth == 0:
                        slices._foreign += time.thread_time() - start

            return run_timed_async if inspect.iscoroutinefunction(method) else run_timed

        def counted(stage):
            def run_counted(*args, **kwargs):
                if threading.get_ident() == slices._loop_thread:
                    text = next(a for a in args if isinstance(a, str))
                    slices.chars += len(text)
                    slices._slice_chars += len(text)
                    slices.largest_call = max(slices.largest_call, len(text))
                return stage(*args, **kwargs)

            return run_counted

        monkeypatch.setattr(asyncio.events.Handle, "_run", timed_run)
        for name in SEQUENCER_ENTRIES:
            method = getattr(AggregatedFrameSequencer, name)
            monkeypatch.setattr(AggregatedFrameSequencer, name, timed(method))
        monkeypatch.setattr(SimpleTextAggregator, "aggregate", timed_aggregate)
        for owner, name in TEXT_STAGES:
            monkeypatch.setattr(owner, name, counted(getattr(owner, name)))

    def reset(self) -> None:
        """Start measuring; call it on the loop's thread."""
        self.longest = 0.0
        self.longest_callback = ""
        self.slices = 0
        self.chars = self.most_chars = self.largest_call = 0
        self._loop_thread = threading.get_ident()


def _watch_collections(slices: LoopSlices) -> None:
    """Count garbage collections on the loop thread apart from the slice they fall in.

    A collection pauses every thread of the process, whoever triggers it: its time is the
    process's, not the slice's work (issue 34 measures it apart, ``benchmarks.profiles.loop``).
    The callback holds ``slices`` weakly and removes itself once it is gone.
    """
    ref = weakref.ref(slices)

    def collecting(phase: str, info: dict) -> None:
        target = ref()
        if target is None:
            gc.callbacks.remove(collecting)
            return
        if threading.get_ident() != target._loop_thread:
            return
        if phase == "start":
            target._gc_start = time.thread_time()
        elif target._gc_start is not None:
            spent = time.thread_time() - target._gc_start
            target._foreign += spent
            target.gc_seconds += spent
            target._gc_start = None

    gc.callbacks.append(collecting)
