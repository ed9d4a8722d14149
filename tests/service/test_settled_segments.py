"""The word sequencer's per-word cost no longer grows with its unit (issue 34, loop CPU):
``SettledSegment`` works out ``is_transformed`` once per segment, where Pipecat 1.14 works it
out from both sides of the whole segment for every word; the words and their times are
Pipecat's own."""

from __future__ import annotations

import pytest
from pipecat.frames.frames import AggregatedTextFrame, TTSTextFrame
from pipecat.utils.context import text_segment_map
from pipecat.utils.context.aggregated_frame_sequencer import AggregatedFrameSequencer
from pipecat.utils.text.base_text_aggregator import TextType

from pipecat_pocket_tts.service.pipecat_internals import BoundedFrameSequencer, SettledSegment

UNIT = " ".join(["the quick brown fox jumps over a lazy dog"] * 14)  # ~600 characters
TEXTS = {
    "plain": (UNIT, UNIT),
    "punctuation": ("Hello, world! It's 5 o'clock — time to go.",) * 2,
    "markup": ("I love to count <spell>1234</spell> and more.",) * 2,
    "rewritten": ("That costs $42.50 today.", "That costs forty two dollars fifty today."),
}


async def spoken_words(
    sequencer: AggregatedFrameSequencer, original: str, spoken: str
) -> list[tuple[str, int]]:
    """Register ``original`` (sent to the TTS as ``spoken``), then report each spoken word."""
    frame = AggregatedTextFrame(original, TextType.SENTENCE)
    await sequencer.register_spoken(frame, "c1", spoken, append_to_context=True)
    frames = []
    for n, word in enumerate(spoken.split()):
        frames += sequencer.process_word(word, 1_000 + n, "c1")
    frames += sequencer.force_complete("c1", 1_000 + len(spoken.split()))
    return [(f.text, f.pts) for f in frames if isinstance(f, TTSTextFrame)]


@pytest.mark.parametrize("name", list(TEXTS))
async def test_settled_segments_give_pipecat_s_words_and_times(name: str) -> None:
    original, spoken = TEXTS[name]
    pipecats = await spoken_words(AggregatedFrameSequencer(), original, spoken)
    ours = await spoken_words(BoundedFrameSequencer(), original, spoken)
    assert ours == pipecats
    assert ours  # words came out


def test_a_settled_segment_answers_as_pipecat_s() -> None:
    for original, spoken in TEXTS.values():
        segment = text_segment_map.TextSegment(original, spoken, 0, len(original))
        assert SettledSegment.of(segment).is_transformed == segment.is_transformed
        assert SettledSegment.of(segment).tts == segment.tts


async def test_whole_unit_scans_per_word_are_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Count the scans of (nearly) the whole unit in Pipecat's text map: one per side per
    word with Pipecat's sequencer, none per word with the service's."""
    scans = 0
    real = text_segment_map.alnum_only

    def counted(text: str) -> str:
        nonlocal scans
        scans += len(text) >= len(UNIT) // 2
        return real(text)

    monkeypatch.setattr(text_segment_map, "alnum_only", counted)
    words = len(UNIT.split())
    await spoken_words(AggregatedFrameSequencer(), UNIT, UNIT)
    assert scans >= 2 * words  # Pipecat's: grows with words × unit length
    scans = 0
    await spoken_words(BoundedFrameSequencer(), UNIT, UNIT)
    assert scans <= 2  # once, when the segment is settled
