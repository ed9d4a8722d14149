"""Replies that normalize to nothing never open a context (issue 43, item 1).

A reply that is only a code block, a link with no text or a table of markup has letters in
it, yet normalization and planning leave nothing to say. Pipecat writes a service off after
three audio contexts with no audio, so such a reply must open no context at all — in both
aggregation modes, as an LLM reply or a ``TTSSpeakFrame`` — and the reply after three of them
is spoken. The gate's check is the planning the engine runs, done once per text.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from pipecat.frames.frames import (
    ErrorFrame,
    Frame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.services.tts_service import TextAggregationMode
from pipecat.tests.utils import run_test

from pipecat_pocket_tts import PocketTTSService
from pipecat_pocket_tts.engine import PocketTTS
from pipecat_pocket_tts.engine.text.prepare import TextPreparer

START = 60.0
MODES = [TextAggregationMode.SENTENCE, TextAggregationMode.TOKEN]

#: Letters in every one, nothing to say in any (the tiny English pack).
CODE_BLOCK = "```\nprint('hi')\n```"
NOTHING_TO_SAY = {
    "code block": CODE_BLOCK,
    "fenced with a language": "```python\nimport os\nprint(os.getcwd())\n```\n",
    "link with no text": '<a href="https://example.com/docs"></a>',
    "table of markup": "| <br> | &nbsp; |\n|:---|---:|\n| <hr> | [^1] |",
}
FINAL = "Hello, are you still there?"


def llm_reply(text: str) -> list[Frame]:
    """An LLM reply as tokens of at most 4 characters (whitespace kept with the word after)."""
    tokens = [w[i : i + 4] for w in re.findall(r"\s*\S+", text) for i in range(0, len(w), 4)]
    return [LLMFullResponseStartFrame(), *map(LLMTextFrame, tokens), LLMFullResponseEndFrame()]


def as_frames(text: str, as_speech: bool) -> list[Frame]:
    return [TTSSpeakFrame(text)] if as_speech else llm_reply(text)


def check_only_the_final_reply_spoke(tts: PocketTTSService, down: list[Frame], up: list[Frame]):
    assert [f.error for f in up if isinstance(f, ErrorFrame)] == []  # no empty context at all
    assert tts.is_usable
    started = sum(isinstance(f, TTSStartedFrame) for f in down)
    assert started == sum(isinstance(f, TTSStoppedFrame) for f in down) == 1  # the final only
    words = " ".join(f.text for f in down if isinstance(f, TTSTextFrame))
    assert " ".join(words.split()) == FINAL
    audio = b"".join(f.audio for f in down if isinstance(f, TTSAudioRawFrame))
    assert np.frombuffer(audio, dtype="<i2").size > 0


@pytest.mark.parametrize("text", list(NOTHING_TO_SAY.values()), ids=list(NOTHING_TO_SAY))
def test_the_engine_says_such_text_has_no_speech(engine_tts: PocketTTS, text: str) -> None:
    assert any(c.isascii() and c.isalpha() for c in text)  # letters: no character-class shortcut
    assert not engine_tts.has_speech(text)
    with engine_tts.session() as session:
        assert session.enqueue(text) is None  # and indeed nothing is queued


def test_the_speech_check_plans_once_for_the_enqueue_that_follows(
    engine_tts: PocketTTS, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``has_speech`` then ``enqueue`` of the same text: the text is planned once."""
    text = "It costs $12.50 at 3:45 pm, said Dr. Smith. " * 3
    calls: list[str] = []
    split = TextPreparer.split

    def counting(self, text, **kw):
        calls.append(text)
        return split(self, text, **kw)

    monkeypatch.setattr(TextPreparer, "split", counting)
    with engine_tts.session() as session:
        assert engine_tts.has_speech(text)
        assert session.enqueue(text) == 0
    assert len(calls) == 1


@pytest.mark.parametrize("as_speech", [True, False], ids=["speak_frame", "llm_reply"])
@pytest.mark.parametrize("mode", MODES, ids=["sentence", "token"])
async def test_three_code_block_replies_then_a_real_one_speaks(
    engine_pack_dir: Path, mode: TextAggregationMode, as_speech: bool
) -> None:
    tts = PocketTTSService(
        model_dir=engine_pack_dir,
        backend="numpy",
        settings=PocketTTSService.Settings(seed=5),
        text_aggregation_mode=mode,
    )
    frames = [f for _ in range(3) for f in as_frames(CODE_BLOCK, as_speech)]
    frames += as_frames(FINAL, as_speech)
    down, up = await run_test(tts, frames_to_send=frames, start_timeout=START)
    check_only_the_final_reply_spoke(tts, down, up)


@pytest.mark.parametrize("mode", MODES, ids=["sentence", "token"])
async def test_every_kind_of_reply_with_nothing_to_say_opens_no_context(
    engine_pack_dir: Path, mode: TextAggregationMode
) -> None:
    tts = PocketTTSService(
        model_dir=engine_pack_dir,
        backend="numpy",
        settings=PocketTTSService.Settings(seed=5),
        text_aggregation_mode=mode,
    )
    frames: list[Frame] = []
    for n, text in enumerate(NOTHING_TO_SAY.values()):  # each kind as both, in turn
        frames += as_frames(text, n % 2 == 0) + as_frames(text, n % 2 == 1)
    frames += llm_reply(FINAL)
    down, up = await run_test(tts, frames_to_send=frames, start_timeout=START)
    check_only_the_final_reply_spoke(tts, down, up)
