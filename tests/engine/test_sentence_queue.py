"""Whole sentences into a session: a short one waits to be said with the next (engine rule)."""

from __future__ import annotations

import pytest

from pipecat_pocket_tts.engine import SentenceQueue
from pipecat_pocket_tts.engine.errors import BreakTagError


class RecordingSession:
    """A session that records what it is given, in order."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.given: list[tuple[str, object]] = []
        self._fail_on = fail_on

    def enqueue(self, text, options=None):
        if text == self._fail_on:
            raise BreakTagError("refused")
        self.given.append(("text", text))
        return len([g for g in self.given if g[0] == "text"]) - 1

    def mark(self, payload, *, after_fed_text=True):
        self.given.append(("mark", payload))


def test_a_short_sentence_is_said_with_the_next_and_its_markers_follow_them():
    session = RecordingSession()
    queue = SentenceQueue(session)
    assert queue.enqueue("Oui.") == []
    assert queue.holds_text
    queue.mark("after oui")
    assert session.given == []
    assert queue.enqueue("Not so fast.") == [0]
    assert session.given == [("text", "Oui. Not so fast."), ("mark", "after oui")]
    assert not queue.holds_text


def test_a_short_last_sentence_is_said_alone_at_the_flush():
    session = RecordingSession()
    queue = SentenceQueue(session)
    assert queue.enqueue("It was a long day.") == [0]
    queue.mark("first")
    assert queue.enqueue("Thanks!") == []
    assert queue.flush() == [1]
    assert session.given == [("text", "It was a long day."), ("mark", "first"), ("text", "Thanks!")]
    assert queue.flush() == []


def test_markers_held_with_a_sentence_whose_utterance_fails_are_dropped():
    session = RecordingSession(fail_on="Oui. Bad one.")
    queue = SentenceQueue(session)
    queue.enqueue("Oui.")
    queue.mark("held")
    with pytest.raises(BreakTagError):
        queue.enqueue("Bad one.")
    assert queue.enqueue("Then this one.") == [0]
    assert session.given == [("text", "Then this one.")]
