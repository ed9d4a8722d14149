"""Speaking rate, <break/> pauses and short sentences through PocketTTSService."""

from __future__ import annotations

import numpy as np
import pytest
from audio_checks import centroid, silent_run
from pipecat.frames.frames import TTSSpeakFrame, TTSUpdateSettingsFrame
from pipecat.services.tts_service import TextAggregationMode
from test_service_timestamps import _content, pack, run_pipeline, tokens

from pipecat_pocket_tts import PocketTTSService
from pipecat_pocket_tts.engine.sentence_queue import is_short
from pipecat_pocket_tts.engine.session import Session
from pipecat_pocket_tts.engine.text.breaks import strip_breaks

__all__ = ["pack"]  # the module's pack fixture, shared

LONG_SENTENCE = (
    "This reply is one long sentence with many short words in it so that the voice keeps "
    "talking for a good while before it ever reaches its final word and stops"
)
SENTENCE = TextAggregationMode.SENTENCE


def pcm(tap) -> np.ndarray:
    return np.frombuffer(bytes(tap.audio), dtype=np.int16).astype(np.float32) / 32768


@pytest.fixture
def enqueued(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts the service's turns enqueue into their engine sessions, in order (recorded
    on the way into the real ``Session.enqueue``)."""
    texts: list[str] = []
    original = Session.enqueue

    def enqueue(self, text, *args, **kwargs):
        if self._timestamps:  # a turn's session (the warm-up's has no word times)
            texts.append(text)
        return original(self, text, *args, **kwargs)

    monkeypatch.setattr(Session, "enqueue", enqueue)
    return texts


@pytest.mark.parametrize("speed", [1.5, 0.8])
async def test_speed_setting_scales_the_duration_and_keeps_the_spectrum(pack, speed):
    reply = [TTSSpeakFrame("One two three four five six seven eight.")]
    _, plain, _ = await run_pipeline(pack, reply, rate=24000, mode=None)
    settings = PocketTTSService.Settings(seed=3, speed=speed)
    _, fast, _ = await run_pipeline(pack, reply, rate=24000, mode=None, settings=settings)
    assert fast.audio_seconds / plain.audio_seconds == pytest.approx(1 / speed, rel=0.10)
    assert centroid(pcm(fast), 24000) == pytest.approx(centroid(pcm(plain), 24000), rel=0.05)
    assert [f.text for f in fast.words] == [f.text for f in plain.words]


@pytest.mark.parametrize("form", ["object", "dict"])
async def test_speed_updates_mid_conversation_in_both_forms(pack, form):
    update = (
        TTSUpdateSettingsFrame(delta=PocketTTSService.Settings(speed=2.0))
        if form == "object"
        else TTSUpdateSettingsFrame(settings={"speed": 2.0})
    )
    text = "One two three four five six seven eight."
    _, tap, _ = await run_pipeline(
        pack, [TTSSpeakFrame(text), update, TTSSpeakFrame(text)], rate=24000, mode=None
    )
    first, second = sorted(tap.context_starts.values())[:2]
    one = second - first
    two = tap.audio_seconds - second
    assert two / one == pytest.approx(0.5, rel=0.10)


async def test_a_bad_speed_is_an_error_frame_and_the_bot_keeps_speaking(pack):
    with pytest.raises(ValueError, match="speed"):
        PocketTTSService(model_dir=pack, settings=PocketTTSService.Settings(speed=9.0))
    with pytest.raises(TypeError, match=r"Settings\(speed=\.\.\.\)"):
        PocketTTSService(model_dir=pack, speed=1.2)


async def test_after_a_barge_in_at_speed_the_context_holds_the_words_played(pack):
    pause = 2.0
    settings = PocketTTSService.Settings(seed=3, speed=1.5)
    output, tap, messages = await run_pipeline(
        pack, tokens(LONG_SENTENCE), rate=24000, mode=SENTENCE, pause_at=pause, settings=settings
    )
    written = LONG_SENTENCE.split()
    heard = [f.text for f in tap.words if f.pts is not None and f.pts <= output.interrupted_clock]
    assert 2 <= len(heard) < len(written) - 2
    assert _content(messages[0]).split() == heard == written[: len(heard)]


@pytest.mark.parametrize("mode", [SENTENCE, TextAggregationMode.TOKEN])
async def test_a_break_is_a_pause_never_spoken_and_the_context_keeps_it_as_written(pack, mode):
    """The tag is not a word (no word frame, no audio) but stays in the context as the LLM
    wrote it: Pipecat keeps the untimed text before a word with that word."""
    reply = 'Hello there. <break time="800ms"/> And now more.'
    _, tap, messages = await run_pipeline(pack, tokens(reply), rate=24000, mode=mode)
    assert silent_run(pcm(tap)) >= round(0.7 * 24000)
    assert [f.text for f in tap.words] == ["Hello", "there.", "And", "now", "more."]
    assert _content(messages[0]) == reply


async def test_across_a_break_a_barge_in_keeps_exactly_the_words_heard(pack):
    reply = 'One two three. <break time="1s"/> Four five six seven eight nine ten eleven.'
    _, tap, _ = await run_pipeline(pack, tokens(reply), rate=24000, mode=SENTENCE)
    times = {f.text: (f.pts - tap.first_audio_ns) / 1e9 for f in tap.words}
    assert times["Four"] - times["three."] >= 1.0  # timed after the silence
    pause = times["Four"] + 0.5  # inside the words after the break
    output, tap, messages = await run_pipeline(
        pack, tokens(reply), rate=24000, mode=SENTENCE, pause_at=pause
    )
    heard = [f.text for f in tap.words if f.pts is not None and f.pts <= output.interrupted_clock]
    assert "Four" in heard and "eleven." not in heard
    kept = _content(messages[0])
    assert '<break time="1s"/>' in kept  # as written, with the word after it
    assert strip_breaks(kept).split() == heard


async def test_a_short_sentence_goes_to_the_engine_with_the_next(pack, enqueued):
    reply = "Oui. Je suis là, tout va bien."
    _, tap, messages = await run_pipeline(pack, tokens(reply), rate=24000, mode=SENTENCE)
    assert enqueued == ["Oui. Je suis là, tout va bien."]
    assert _content(messages[0]) == reply  # the context keeps the text as written
    assert [f.text for f in tap.words] == reply.split()


async def test_a_short_last_sentence_is_said_alone_at_the_turn_s_end(pack, enqueued):
    reply = "Bien sûr. Here it is, all of it. Yes."
    _, _, messages = await run_pipeline(pack, tokens(reply), rate=24000, mode=SENTENCE)
    assert enqueued == ["Bien sûr. Here it is, all of it.", "Yes."]
    assert _content(messages[0]) == reply


@pytest.mark.parametrize(
    ("text", "short"),
    [
        ("Oui.", True),
        ("D'accord.", True),
        ("Oh, yes!", True),
        ("Not so fast.", False),
        ("...", False),
        ('Oui. <break time="1s"/>', True),
        ('<break time="1s"/> Not so fast.', False),
        ('Oui <break time="-1s"/>', False),
    ],
)
def test_what_counts_as_short(text, short):
    assert is_short(text) is short
