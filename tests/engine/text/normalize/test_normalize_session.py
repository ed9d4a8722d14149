"""Normalization switched per session and overridden per utterance (issue 7)."""

from __future__ import annotations

import numpy as np

from pipecat_pocket_tts.engine import PocketTTS


def _say(session, *texts: str, **options) -> np.ndarray:
    for text in texts:
        session.enqueue(text, **options)
    session.finish()
    return np.concatenate([frame.samples for frame in session])


def test_session_normalize_off_and_per_utterance_override(engine_tts: PocketTTS) -> None:
    words = _say(engine_tts.session(seed=9), "I have three cats.")
    raw = _say(engine_tts.session(seed=9, normalize=False), "I have 3 cats.")
    assert not np.array_equal(raw, words)  # the session setting really turns it off
    np.testing.assert_array_equal(_say(engine_tts.session(seed=9), "I have 3 cats."), words)
    overridden = _say(engine_tts.session(seed=9, normalize=False), "I have 3 cats.", normalize=True)
    np.testing.assert_array_equal(overridden, words)
    np.testing.assert_array_equal(
        _say(engine_tts.session(seed=9), "I have 3 cats.", normalize=False), raw
    )
