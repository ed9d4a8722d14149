"""Through a server process, replies that normalize to nothing open no context (issue 43, item 1).

The client's speech check asks the server, which plans the text as its engine will: a reply
that is only a code block (letters, nothing to say) three times in a row must not mute the bot.
"""

from __future__ import annotations

import re

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
from server_process import ServerProcess

from pipecat_pocket_tts import PocketTTSService

START = 30.0
CODE_BLOCK = "```\nprint('hi')\n```"
LINK_WITH_NO_TEXT = '<a href="https://example.com/docs"></a>'
FINAL = "Hello, are you still there?"


def llm_reply(text: str) -> list[Frame]:
    tokens = [w[i : i + 4] for w in re.findall(r"\s*\S+", text) for i in range(0, len(w), 4)]
    return [LLMFullResponseStartFrame(), *map(LLMTextFrame, tokens), LLMFullResponseEndFrame()]


@pytest.mark.parametrize("as_speech", [True, False], ids=["speak_frame", "llm_reply"])
@pytest.mark.parametrize(
    "mode", [TextAggregationMode.SENTENCE, TextAggregationMode.TOKEN], ids=["sentence", "token"]
)
async def test_replies_with_nothing_to_say_through_the_server_never_mute_the_bot(
    server: ServerProcess, mode: TextAggregationMode, as_speech: bool
) -> None:
    tts = PocketTTSService(
        server_url=server.ws_url,
        settings=PocketTTSService.Settings(seed=5),
        text_aggregation_mode=mode,
    )
    frames: list[Frame] = []
    for text in (CODE_BLOCK, LINK_WITH_NO_TEXT, CODE_BLOCK):
        frames += [TTSSpeakFrame(text)] if as_speech else llm_reply(text)
    frames += [TTSSpeakFrame(FINAL)] if as_speech else llm_reply(FINAL)
    down, up = await run_test(tts, frames_to_send=frames, start_timeout=START)
    assert [f.error for f in up if isinstance(f, ErrorFrame)] == []
    assert tts.is_usable
    started = sum(isinstance(f, TTSStartedFrame) for f in down)
    assert started == sum(isinstance(f, TTSStoppedFrame) for f in down) == 1
    words = " ".join(f.text for f in down if isinstance(f, TTSTextFrame))
    assert " ".join(words.split()) == FINAL
    audio = b"".join(f.audio for f in down if isinstance(f, TTSAudioRawFrame))
    assert np.frombuffer(audio, dtype="<i2").size > 0
