"""The soak's replies: what a reply says, how it is sent into a pipeline, and its waits.

Shared by ``benchmarks.soak.service`` (pipelines with random barge-ins) and
``benchmarks.soak.long_session`` (one session, reply after reply).
"""

from __future__ import annotations

import asyncio
import itertools
import random
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pipecat.frames.frames import (
    Frame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TTSSpeakFrame,
)
from pipecat.pipeline.worker import PipelineWorker

from benchmarks.soak.pipeline import Ledger

SENTENCES = [
    "Sure, I can help with that.",
    "The first train leaves at nine fifteen and the second one at ten.",
    "Your order number is 4521, and it ships on Monday.",
    "Let me check the weather for you... It looks sunny, about 21 degrees.",
    "That costs $12.50 per person, taxes included.",
    "Hmm, I'm not sure; could you say that again?",
    "Here is a longer answer, with a few clauses, some commas, and a pause or two, so the "
    "voice keeps going for a while before the sentence finally comes to an end.",
    "Okay!",
    "The meeting moved to 3:45 pm on Tuesday, room B.",
    "Thanks for waiting.",
]

NOTHING_TO_SAY = ["👍", "***", "``` ```", "🙂🙂", "—", "* * *"]

REPLY_TIMEOUT_S = 60.0  # a reply not finished by then counts as mute


@dataclass
class Reply:
    index: int
    kind: str  # "llm" | "speak" | "silent"
    text: str
    interrupt_after_s: float | None  # barge in this long after the reply starts
    token_delay_s: float  # between LLM tokens (0: a burst)


def make_replies(
    rng: random.Random, count: int | None, barge_in: float, silent: float
) -> Iterator[Reply]:
    """Random replies, made as they are needed (``count`` None: without end)."""
    for index in itertools.count() if count is None else range(count):
        draw = rng.random()
        if draw < silent:
            kind, text = "silent", rng.choice(NOTHING_TO_SAY)
        else:
            kind = "llm" if rng.random() < 0.75 else "speak"
            text = " ".join(rng.sample(SENTENCES, rng.randint(1, 4)))
        interrupt = rng.uniform(0.05, 2.5) if kind != "silent" and rng.random() < barge_in else None
        delay = 0.0 if rng.random() < 0.2 else rng.uniform(0.005, 0.03)
        yield Reply(index, kind, text, interrupt, delay)


def tokens_of(text: str) -> list[str]:
    """LLM-like tokens: words with their leading space, cut into pieces of up to 4 chars."""
    words = re.findall(r"\s*\S+", text)
    return [word[i : i + 4] for word in words for i in range(0, len(word), 4)]


async def send_reply(worker: PipelineWorker, reply: Reply, interrupt_at: float | None) -> bool:
    """Queue the reply's frames; False when the barge-in came before the last token."""
    if reply.kind == "speak":
        await worker.queue_frame(TTSSpeakFrame(reply.text))
        return True
    frames: list[Frame] = [LLMFullResponseStartFrame()]
    frames += [LLMTextFrame(token) for token in tokens_of(reply.text)]
    frames.append(LLMFullResponseEndFrame())
    for frame in frames:
        if interrupt_at is not None and time.monotonic() >= interrupt_at:
            return False  # the LLM is cancelled with the turn
        await worker.queue_frame(frame)
        if reply.token_delay_s and isinstance(frame, LLMTextFrame):
            await asyncio.sleep(reply.token_delay_s)
    return True


async def sleep_until(moment: float) -> None:
    await asyncio.sleep(max(0.0, moment - time.monotonic()))


async def wait_stopped(ledger: Ledger, reply: int, deadline: float) -> None:
    while not ledger.stopped_for(reply) and time.monotonic() < deadline:
        ledger.stopped_event.clear()
        try:
            await asyncio.wait_for(ledger.stopped_event.wait(), deadline - time.monotonic())
        except TimeoutError:
            return


def build_tiny_pack(root: Path) -> Path:
    """A tiny random-weight English pack (EOS at the first allowed frame)."""
    from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict

    return build_pack(root / "english", tiny_config_dict("standard"), voices=("alba",))


def quiet_pipecat() -> None:
    """Pipecat's (loguru's) logs at WARNING and above only."""
    from loguru import logger

    logger.remove()
    logger.add(sys.stderr, level="WARNING")
