"""engine.text.breaks: SSML <break/> tags → pauses, whole or streamed."""

from __future__ import annotations

import pytest

from pipecat_pocket_tts.engine.errors import BreakTagError
from pipecat_pocket_tts.engine.text.breaks import (
    Break,
    BreakStream,
    has_breaks,
    split_breaks,
    strip_breaks,
)


@pytest.mark.parametrize(
    ("tag", "seconds"),
    [
        ('<break time="500ms"/>', 0.5),
        ('<break time="1s"/>', 1.0),
        ("<break time='1.5s' />", 1.5),
        ("<break time=250ms>", 0.25),
        ("<BREAK TIME='2S'/>", 2.0),
        ("<break/>", 0.75),
        ('<break strength="none"/>', 0.0),
        ('<break strength="x-weak"/>', 0.25),
        ('<break strength="strong"/>', 1.0),
        ('<break strength="x-strong"/>', 1.25),
        ('<break strength="weak" time="2s"/>', 2.0),  # SSML: time wins
        ('<break time="10s"/>', 10.0),
    ],
)
def test_tags_give_their_pause(tag: str, seconds: float) -> None:
    assert split_breaks(f"Hello.{tag}Bye.") == ["Hello.", Break(seconds), "Bye."]


def test_text_without_tags_is_one_piece() -> None:
    text = "A < B and C > D, <b>bold</b>, a breakfast."
    assert not has_breaks(text)
    assert split_breaks(text) == [text]
    assert strip_breaks('Hello there. <break time="800ms"/> And now more.') == (
        "Hello there.  And now more."
    )


@pytest.mark.parametrize(
    ("tag", "says"),
    [
        ('<break time="-1s"/>', "negative"),
        ('<break time="10.5s"/>', "at most 10 s"),
        ('<break time="1h"/>', "ms or s"),
        ('<break time="soon"/>', "ms or s"),
        ('<break pause="1s"/>', "unknown attribute"),
        ('<break strength="loud"/>', "strength must be"),
        ('<break time="1s" ="x"/>', "cannot read"),
    ],
)
def test_bad_tags_are_refused_by_name(tag: str, says: str) -> None:
    with pytest.raises(BreakTagError, match=says):
        split_breaks(f"Hi {tag} there")


def test_stream_holds_only_an_open_tag() -> None:
    stream = BreakStream()
    fragments = ["Hello <", "bre", 'ak time="8', '00ms"/', "> and a<b", " c <", "3 end"]
    pieces = [piece for fragment in fragments for piece in stream.push(fragment)]
    pieces += stream.flush()
    assert [p for p in pieces if isinstance(p, Break)] == [Break(0.8)]
    text = "".join(p for p in pieces if isinstance(p, str))
    assert text == "Hello  and a<b c <3 end"
    assert stream.push("plain text") == ["plain text"]  # nothing held without a "<"


def test_stream_refuses_a_tag_left_open() -> None:
    stream = BreakStream()
    assert stream.push('Bye <break time="1s"') == ["Bye "]
    with pytest.raises(BreakTagError, match="not closed"):
        stream.flush()
