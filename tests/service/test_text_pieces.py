"""Bounded pieces of text for Pipecat's word tracking (issue 34): no word split, text unchanged.

The rules on their own (``text_gate``), then in a real pipeline: every piece Pipecat's
sequencer registers is bounded, for a ``TTSSpeakFrame`` and LLM replies in both aggregation
modes, and the assistant's context holds the reply as written.
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pipecat.frames.frames import (
    EndFrame,
    Frame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TTSSpeakFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMAssistantAggregator
from pipecat.services.tts_service import TextAggregationMode
from pipecat.utils.context.aggregated_frame_sequencer import AggregatedFrameSequencer
from pipecat.workers.runner import WorkerRunner
from pipecat_playback import PlaybackClock, PlaybackOutput, timed_frames_on

from pipecat_pocket_tts import PocketTTSService
from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict
from pipecat_pocket_tts.service.text_gate import PIECE_CHARS, STREAMED_PIECE_CHARS, split_pieces

LONGEST_PIECE = 4 * PIECE_CHARS + 40  # a piece with no whitespace ends at a mark past 4×


@settings(max_examples=200, deadline=None)
@given(st.text(st.sampled_from("ab ,;.\n-🙂é"), max_size=3000))
def test_pieces_put_together_are_the_text_and_never_split_a_word(text: str) -> None:
    pieces = split_pieces(text)
    assert "".join(pieces) == text
    for piece, after in itertools.pairwise(pieces):
        assert not (piece[-1].isalnum() and after[0].isalnum())  # a word is never cut
    assert all(len(u) <= LONGEST_PIECE or " " not in u for u in pieces)


def test_a_long_text_with_spaces_is_cut_near_the_piece_length() -> None:
    text = "one, two three four five six seven eight nine ten " * 200
    pieces = split_pieces(text)
    assert len(pieces) > 10
    assert all(len(u) <= 2 * PIECE_CHARS for u in pieces)
    assert all(u.endswith(" ") for u in pieces[:-1])


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pieces")
    return build_pack(root / "english", tiny_config_dict("standard"))


WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "mu",
]
RUN_ON = " ".join(WORDS[i % len(WORDS)] for i in range(500))  # 3 KB, no sentence end


def reply(text: str, burst: bool) -> list[Frame]:
    pieces = [text] if burst else [text[i : i + 5] for i in range(0, len(text), 5)]
    return [LLMFullResponseStartFrame(), *map(LLMTextFrame, pieces), LLMFullResponseEndFrame()]


async def run(pack: Path, frames: list[Frame], mode: TextAggregationMode, monkeypatch):
    registered: list[str] = []
    real = AggregatedFrameSequencer._append_spoken_slot

    def recording(self, frame, context_id, tracker, *args, **kwargs):
        if tracker is not None:
            registered.append(tracker._tts_text)
        return real(self, frame, context_id, tracker, *args, **kwargs)

    monkeypatch.setattr(AggregatedFrameSequencer, "_append_spoken_slot", recording)
    clock = PlaybackClock()
    output = PlaybackOutput(clock, 24000)
    tts = PocketTTSService(
        model_dir=pack,
        backend="numpy",
        settings=PocketTTSService.Settings(seed=2),
        text_aggregation_mode=mode,
    )
    context = LLMContext()
    worker = PipelineWorker(
        Pipeline([tts, output, LLMAssistantAggregator(context)]),
        clock=clock,
        params=PipelineParams(audio_out_sample_rate=24000),
        cancel_on_idle_timeout=False,
    )
    started = asyncio.Event()

    @tts.event_handler("on_model_loaded")  # the pipeline runs and the model is loaded
    async def _started(*_args) -> None:
        started.set()

    async def drive() -> None:
        await asyncio.wait_for(started.wait(), 60)
        await worker.queue_frames([*frames, EndFrame()])

    with timed_frames_on(clock):
        runner = WorkerRunner(handle_sigint=False)
        await runner.add_workers(worker)
        await asyncio.gather(runner.run(), drive())
    said = [m["content"] for m in context.get_messages() if m.get("role") == "assistant"]
    return registered, said


@pytest.mark.parametrize(
    ("kind", "mode"),
    [
        ("speak", TextAggregationMode.SENTENCE),
        ("speak", TextAggregationMode.TOKEN),
        ("tokens", TextAggregationMode.SENTENCE),
        ("tokens", TextAggregationMode.TOKEN),
        ("burst", TextAggregationMode.SENTENCE),
        ("burst", TextAggregationMode.TOKEN),
    ],
)
async def test_pipecat_sees_bounded_pieces_and_the_context_keeps_the_text(
    pack: Path, kind: str, mode: TextAggregationMode, monkeypatch: pytest.MonkeyPatch
) -> None:
    frames = [TTSSpeakFrame(RUN_ON)] if kind == "speak" else reply(RUN_ON, kind == "burst")
    registered, said = await run(pack, frames, mode, monkeypatch)
    limit = STREAMED_PIECE_CHARS if mode == TextAggregationMode.TOKEN else PIECE_CHARS
    assert len(registered) >= len(RUN_ON) // (2 * limit)
    # past the limit at most until a token edge meets whitespace (5-character tokens here)
    assert max(map(len, registered)) <= 2 * limit + 60
    assert " ".join(registered).split() == RUN_ON.split()  # no word split, none lost
    assert [" ".join(s.split()) for s in said] == [RUN_ON]
