"""FrameChannel: several items per wake-up of an async consumer (``aget_batch``)."""

from __future__ import annotations

import asyncio
import threading

import pytest
from polling import poll_until

from pipecat_pocket_tts.engine.runtime.channel import FrameChannel


async def _waiting(channel: FrameChannel, task: asyncio.Task) -> None:
    """Until ``task`` waits on ``channel`` (its waiter is registered)."""
    await poll_until(
        lambda: bool(channel._waiters) or task.done(), what="the consumer's wait", interval=0
    )


async def test_a_batch_waits_for_at_least_that_many_items():
    channel: FrameChannel[int] = FrameChannel()
    task = asyncio.create_task(channel.aget_batch(10, at_least=3))
    await _waiting(channel, task)
    for item in (1, 2):
        channel.put(item)
    assert len(channel._waiters) == 1  # below the count, put woke nobody
    channel.put(3)
    assert channel._waiters == []  # the third woke it
    assert await task == [1, 2, 3]


async def test_a_batch_takes_at_most_its_limit_and_keeps_the_rest_in_order():
    channel: FrameChannel[int] = FrameChannel()
    for item in range(5):
        channel.put(item)
    assert await channel.aget_batch(3) == [0, 1, 2]
    assert await channel.aget_batch(3) == [3, 4]


async def test_an_item_that_wakes_early_ends_the_wait():
    channel: FrameChannel[object] = FrameChannel()
    task = asyncio.create_task(
        channel.aget_batch(10, at_least=6, wakes_early=lambda item: item == "marker")
    )
    await _waiting(channel, task)
    channel.put("frame")
    channel.put("marker")
    assert await task == ["frame", "marker"]


async def test_after_within_seconds_the_items_queued_are_taken():
    channel: FrameChannel[int] = FrameChannel()
    channel.put(1)
    assert await channel.aget_batch(10, at_least=6, within=0.001) == [1]


async def test_within_never_returns_an_empty_batch_before_the_end():
    channel: FrameChannel[int] = FrameChannel()
    task = asyncio.create_task(channel.aget_batch(10, at_least=6, within=0.001))
    await _waiting(channel, task)
    channel.put(7)  # the deadline may have passed: the first item ends the wait
    assert await task == [7]


async def test_a_closed_channel_hands_over_what_is_left_then_nothing():
    channel: FrameChannel[int] = FrameChannel()
    task = asyncio.create_task(channel.aget_batch(10, at_least=6))
    await _waiting(channel, task)
    channel.put(1)
    channel.close()
    assert await task == [1]
    assert await channel.aget_batch(10, at_least=6) == []


async def test_a_workers_error_is_raised_once_the_items_before_it_are_taken():
    channel: FrameChannel[int] = FrameChannel()
    channel.put(1)
    channel.close(RuntimeError("worker failed"))
    assert await channel.aget_batch(10, at_least=6) == [1]
    with pytest.raises(RuntimeError, match="worker failed"):
        await channel.aget_batch(10)


async def test_a_producer_thread_wakes_the_loop_once_per_batch():
    """Items put from another thread: the consumer is woken when the sixth arrives."""
    channel: FrameChannel[int] = FrameChannel()
    task = asyncio.create_task(channel.aget_batch(6, at_least=6))
    await _waiting(channel, task)
    producer = threading.Thread(target=lambda: [channel.put(i) for i in range(6)])
    producer.start()
    assert await task == list(range(6))
    producer.join()


async def test_a_cancelled_wait_leaves_no_waiter_behind():
    channel: FrameChannel[int] = FrameChannel()
    task = asyncio.create_task(channel.aget_batch(10, at_least=6, within=60))
    await _waiting(channel, task)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert channel._waiters == []
    channel.put(1)  # nobody to wake
    assert await channel.aget() == 1
