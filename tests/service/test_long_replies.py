"""Long replies with nothing to say never mute the bot (issue 34), in real ``run_test`` pipelines.

Pipecat writes a service off after three audio contexts in a row that made no audio. Replies
far over the length the speech check once skipped (2,000 characters) — emoji, punctuation, a
script the pack cannot read — as ``TTSSpeakFrame``s and as LLM replies, in both aggregation
modes, must open no context at all; the sentence after them is spoken.
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
from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict
from pipecat_pocket_tts.engine.contract import OFF_LOOP_CHARS

START = 60.0
LONG = OFF_LOOP_CHARS + 700
#: Nothing the tiny English pack can say: emoji, punctuation, and scripts its tokenizer lacks.
UNSPEAKABLE = {
    "emoji": "🙂👍🎉",
    "punctuation": "*** ... !? -- ",
    "script": "中文字符 Привет ",
}
FINAL = "Hello, are you still there?"


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_pack(tmp_path_factory.mktemp("long_replies") / "english", tiny_config_dict())


def long_text(kind: str) -> str:
    unit = UNSPEAKABLE[kind]
    return (unit * (LONG // len(unit) + 1))[:LONG]


def llm_reply(text: str) -> list[Frame]:
    """An LLM reply as tokens of at most 4 characters (spaces kept with the word after)."""
    tokens = [w[i : i + 4] for w in re.findall(r"\s*\S+", text) for i in range(0, len(w), 4)]
    return [LLMFullResponseStartFrame(), *map(LLMTextFrame, tokens), LLMFullResponseEndFrame()]


def replies(count: int, as_speech: bool) -> list[Frame]:
    kinds = list(UNSPEAKABLE)
    frames: list[Frame] = []
    for n in range(count):
        text = long_text(kinds[n % len(kinds)])
        frames += [TTSSpeakFrame(text)] if as_speech else llm_reply(text)
    return frames


@pytest.mark.parametrize("count", [3, 10])
@pytest.mark.parametrize("as_speech", [True, False], ids=["speak_frame", "llm_reply"])
@pytest.mark.parametrize("mode", [TextAggregationMode.SENTENCE, TextAggregationMode.TOKEN])
async def test_long_replies_with_nothing_to_say_never_mute_the_bot(
    pack: Path, mode: TextAggregationMode, as_speech: bool, count: int
) -> None:
    tts = PocketTTSService(
        model_dir=pack,
        backend="numpy",
        settings=PocketTTSService.Settings(seed=5),
        text_aggregation_mode=mode,
    )
    final = [TTSSpeakFrame(FINAL)] if as_speech else llm_reply(FINAL)
    down, up = await run_test(
        tts, frames_to_send=[*replies(count, as_speech), *final], start_timeout=START
    )
    assert [f.error for f in up if isinstance(f, ErrorFrame)] == []  # no silent context at all
    assert tts.is_usable
    started = sum(isinstance(f, TTSStartedFrame) for f in down)
    assert started == sum(isinstance(f, TTSStoppedFrame) for f in down) == 1  # only the final
    words = " ".join(f.text for f in down if isinstance(f, TTSTextFrame))
    assert " ".join(words.split()) == FINAL
    audio = b"".join(f.audio for f in down if isinstance(f, TTSAudioRawFrame))
    assert np.frombuffer(audio, dtype="<i2").size > 0
