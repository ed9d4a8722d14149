"""A reply the pack cannot say never opens a silent context, in process or through a server
(issue 39): the gate asks the engine itself (``SpeechEngine.has_speech`` / ``speech_probe``),
and a remote engine asks its server (``check_text``), so three such replies in a row never
write the service off and the next sentence speaks."""

from __future__ import annotations

from pathlib import Path

import pytest
from pipecat.frames.frames import (
    ErrorFrame,
    TTSAudioRawFrame,
    TTSStartedFrame,
    TTSTextFrame,
)
from pipecat.services.tts_service import TextAggregationMode
from pipecat.tests.utils import run_test
from server_process import ServerProcess
from test_remote_service import llm_turn

from pipecat_pocket_tts import PocketTTSService

START = 30.0
UNSAYABLE = ["ⲁⲛⲟⲕ ⲡⲉ ⲡⲣⲱⲙⲉ.", "สวัสดีครับ ยินดีที่ได้รู้จัก", "ᚠᚢᚦᚨᚱᚲ ᚷᚹᚺ.", "```\nprint('hi')\n```"]


@pytest.mark.parametrize("where", ["server", "in process"])
@pytest.mark.parametrize("mode", [TextAggregationMode.SENTENCE, TextAggregationMode.TOKEN])
async def test_replies_the_pack_cannot_say_open_no_context_and_the_next_speaks(
    server: ServerProcess, engine_pack_dir: Path, mode: TextAggregationMode, where: str
) -> None:
    if where == "server":
        tts = PocketTTSService(server_url=server.ws_url, text_aggregation_mode=mode)
    else:
        tts = PocketTTSService(
            model_dir=engine_pack_dir, backend="numpy", text_aggregation_mode=mode
        )
    frames = [frame for reply in [*UNSAYABLE, "Hello there."] for frame in llm_turn(reply)]
    down, up = await run_test(tts, frames_to_send=frames, start_timeout=START)
    assert tts.is_usable
    assert not [f for f in up if isinstance(f, ErrorFrame)]
    assert sum(isinstance(f, TTSStartedFrame) for f in down) == 1  # the last reply only
    assert [f.text for f in down if isinstance(f, TTSTextFrame)] == ["Hello", "there."]
    assert any(isinstance(f, TTSAudioRawFrame) for f in down)


@pytest.mark.parametrize("text", ["👋", "...", "```\nprint('hi')\n```", "ᚠᚢᚦ"])
def test_the_server_and_the_model_agree_on_what_says_nothing(
    server: ServerProcess, engine_pack_dir: Path, text: str
) -> None:
    from pipecat_pocket_tts.client import RemoteTTS
    from pipecat_pocket_tts.engine import PocketTTS

    model = PocketTTS.load_shared("english", backend="numpy", model_dir=engine_pack_dir)
    remote = RemoteTTS(server.ws_url).connect()
    try:
        for check in (model, remote):
            assert not check.has_speech(text)
            assert check.has_speech(f"Hello there.\n{text}")
            probe = check.speech_probe()
            assert not probe.push(text)
            assert not probe.flush()
    finally:
        remote.close()


def test_a_streamed_text_is_probed_on_the_server_fragment_by_fragment_as_in_process(
    server: ServerProcess, engine_pack_dir: Path
) -> None:
    """The server keeps the probe of a streamed text: each fragment is sent once (no text
    sent again with every token) and the answers are the in-process probe's, step by step."""
    from pipecat_pocket_tts.client import RemoteTTS
    from pipecat_pocket_tts.engine import PocketTTS

    model = PocketTTS.load_shared("english", backend="numpy", model_dir=engine_pack_dir)
    remote = RemoteTTS(server.ws_url).connect()
    # A fence opens only where a line starts ("ᚦ. ```" is text there, as enqueue reads it).
    fragments = ["ᚠᚢ", "ᚦ.\n", "```\n", "x = 1\n", "```\n", "Hel", "lo the", "re. And", " more"]
    try:
        for count, speaks in ((5, False), (len(fragments), True)):  # with "Hello there." or not
            here, there = model.speech_probe(), remote.speech_probe()
            steps = [(here.push(f), there.push(f)) for f in fragments[:count]]
            steps.append((here.flush(), there.flush()))
            assert [a for a, _ in steps] == [b for _, b in steps]
            assert steps[-1][0] is speaks
    finally:
        remote.close()
