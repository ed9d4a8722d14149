"""Markers in a session's output: after the audio queued before them, dropped on cancel."""

from __future__ import annotations

import asyncio
import threading

import pytest

from pipecat_pocket_tts.engine import AudioFrame, Marker, PocketTTS, SessionClosedError


def layout(items: list) -> list:
    """Each marker's payload, and ("u", index) for each utterance's last frame."""
    out = []
    for item in items:
        if isinstance(item, Marker):
            out.append(item.payload)
        elif item.is_last_in_utterance:
            out.append(("u", item.utterance_index))
    return out


def test_markers_follow_the_audio_queued_before_them(tts: PocketTTS) -> None:
    session = tts.session(seed=1)
    session.mark("start")  # nothing queued: comes out first
    session.enqueue("The first sentence is here.")
    session.enqueue("Then a second one follows.")
    session.mark("after two")
    session.mark("right after")
    session.enqueue("And a third.")
    session.mark("end")
    session.finish()
    items = list(session)
    expected = ["start", ("u", 0), ("u", 1), "after two", "right after", ("u", 2), "end"]
    assert layout(items) == expected
    # no audio frame of an utterance comes after a marker placed before it was queued
    cut = items.index(next(i for i in items if isinstance(i, Marker) and i.payload == "after two"))
    assert all(not isinstance(i, AudioFrame) or i.utterance_index < 2 for i in items[:cut])
    assert all(not isinstance(i, AudioFrame) or i.utterance_index == 2 for i in items[cut:])


def test_a_marker_with_nothing_queued_comes_out_at_once(tts: PocketTTS) -> None:
    session = tts.session()
    session.mark({"turn": 1})
    got = next(iter(session))
    assert got == Marker({"turn": 1})
    # and on a session whose queue ran dry: out as soon as the worker sees it
    session.enqueue("Hello there.")
    frames = []
    for item in session:
        frames.append(item)
        if isinstance(item, AudioFrame) and item.is_last_in_utterance:
            break
    session.mark("idle")
    assert next(iter(session)) == Marker("idle")
    session.cancel()


def test_markers_are_dropped_on_cancel(engine_endless_tts: PocketTTS) -> None:
    session = engine_endless_tts.session(seed=1)
    session.enqueue("A long sentence that would go on for many, many frames of audio.")
    session.mark("never")
    received = []
    for item in session:
        received.append(item)
        if len(received) == 2:
            session.cancel()
    assert not [i for i in received if isinstance(i, Marker)]
    with pytest.raises(SessionClosedError):
        session.mark("too late")


def test_a_session_never_marked_yields_only_frames(tts: PocketTTS) -> None:
    session = tts.session(seed=1)
    session.enqueue("Only audio here.")
    session.finish()
    assert all(isinstance(item, AudioFrame) for item in session)


async def test_async_iteration_yields_markers_in_order(tts: PocketTTS) -> None:
    session = tts.session(seed=1)
    session.enqueue("The first sentence is here.")
    session.mark("one")
    # marked from another thread while the worker runs
    worker = threading.Thread(target=session.enqueue, args=("And a second.",))
    worker.start()
    worker.join()
    session.mark("two")
    session.finish()
    items = [item async for item in session]
    assert layout(items) == [("u", 0), "one", ("u", 1), "two"]
    await asyncio.sleep(0)


def test_a_marker_after_held_fed_text_follows_that_texts_audio(tts: PocketTTS) -> None:
    """The one place the rule lives: a marker placed while the text stream holds fed text
    waits for the chunk that text becomes, whoever feeds it (the service, the server)."""
    session = tts.session(seed=1)
    for piece in ["Hello", " there.", " How are", " you?"]:
        session.feed(piece)
    session.mark("after how are you")  # "How are you?" is still held by the text stream
    session.mark("now", after_fed_text=False)  # after what is queued: "Hello there."
    session.flush()
    session.mark("after flush")
    session.finish()
    assert layout(list(session)) == [("u", 0), "now", ("u", 1), "after how are you", "after flush"]


def test_a_marker_held_for_fed_text_that_says_nothing_is_dropped(tts: PocketTTS) -> None:
    session = tts.session(seed=1)
    session.feed("Hello there.")
    session.feed(" 👍")  # held by the text stream, and it says nothing
    session.mark("after the emoji")
    assert session.flush() == []
    session.mark("after flush")
    session.finish()
    assert layout(list(session)) == [("u", 0), "after flush"]


def test_a_marker_needs_no_slot_while_another_stream_holds_the_only_one(
    engine_endless_tts: PocketTTS,
) -> None:
    """At the scheduler's limit a marker of an idle session still goes out before the next
    tick: it needs no compute, so it never waits for another call's slot."""
    from pipecat_pocket_tts.engine.model.options import LoadOptions

    base = engine_endless_tts
    model = PocketTTS(
        config=base.config,
        backend=base.backend,
        tokenizer=base.tokenizer,
        pack=base.pack,
        options=LoadOptions(backend="numpy", max_streams=1),
    )
    hog = model.session(seed=1, max_frames=100_000)
    quiet = model.session(seed=2)
    try:
        hog.enqueue("This one speaks on and on and never stops at all.")
        next(iter(hog))  # the hog holds the only slot and speaks
        # a session that spoke and went idle, then is marked: the end of a turn
        quiet_items = iter(quiet)
        quiet.enqueue("Hi.")  # waits for the hog's slot: never admitted while it speaks
        idle = model.session(seed=3)
        got: list = []
        out = threading.Event()

        def read_idle() -> None:
            got.extend(idle)
            out.set()

        reader = threading.Thread(target=read_idle, daemon=True)
        reader.start()
        idle.mark("turn end")
        idle.finish()
        assert out.wait(60), "the marker waited for a slot"  # hang guard only
        assert got == [Marker("turn end")]
        stats = model.scheduler.stats()
        assert (stats.active, stats.waiting) == (1, 1)  # the hog still speaks, "Hi." still waits
        quiet.mark("after hi")  # behind queued text: keeps its order
        quiet.finish()
        hog.cancel()
        items = [i for i in quiet_items if isinstance(i, Marker) or i.is_last_in_utterance]
        assert layout(items) == [("u", 0), "after hi"]
    finally:
        for session in (hog, quiet):
            session.cancel()
        model.scheduler.close()
