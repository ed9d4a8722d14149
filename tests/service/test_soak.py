"""A CI-sized soak (``benchmarks.soak.service``): replies with random barge-ins through real
pipelines whose output transport plays in real time, two services on one model (SENTENCE
and TOKEN aggregation). Asserts the correctness figures only, never the timing ones."""

from __future__ import annotations

from pathlib import Path

from benchmarks.soak import service as soak_service
from benchmarks.soak.long_session import long_session
from benchmarks.soak.replies import build_tiny_pack


async def test_soak_with_barge_ins_leaves_nothing_wrong(tmp_path: Path) -> None:
    pack = build_tiny_pack(tmp_path)
    outcomes, samples = await soak_service.soak(
        pack, services=2, replies=10, modes="mixed", barge_in=0.5, silent=0.2, seed=3
    )
    figures = soak_service.figures(outcomes)
    print(soak_service.report(outcomes, samples, 0.0))
    assert figures.replies == 20 and figures.interrupted >= 2  # 8 barge-ins planned
    assert figures.stale_frames == 0
    assert figures.orphan_audio_frames == 0
    assert figures.unpaired == 0
    assert figures.mute == 0
    assert figures.silent_that_opened_audio == 0  # text with nothing to say opens no context
    assert figures.errors == ()
    assert figures.session_threads_after_end == 0


async def test_a_long_session_speaks_every_reply_at_a_steady_level(tmp_path: Path):
    """``benchmarks.soak.long_session``, CI-sized: one service, replies back to back until 1.2
    minutes of audio on the virtual-clock playback."""
    result = await long_session(build_tiny_pack(tmp_path), 1.2, seed=3)
    assert result.replies >= 10
    start, middle, end = (c.audio_minutes for c in result.checkpoints)
    assert 0 < start < 0.6 <= middle < 1.2 <= end
    assert len(result.levels_dbfs) == 1  # one whole minute; the part-minute is left out
    assert -40 < result.levels_dbfs[0] < -3  # speech, neither silence nor clipping
    assert result.mute == []
    assert result.ledger.stale_frames == 0
    assert result.ledger.orphan_audio_frames == 0
    assert sum(result.ledger.unpaired(set()).values()) == 0
    assert result.ledger.errors == []
