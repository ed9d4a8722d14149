"""A session's end of its model's scheduler: utterances in as chunk jobs, frames and markers
out through the session's frame channel."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .channel import FrameChannel
from .streams import ChunkJob, Notice

if TYPE_CHECKING:
    from ..text.planner import TimedText
    from ..text.prepare import PreparedChunk
    from ..timing.heads import Heads
    from ..timing.word_timing import SessionWords
    from ..utterance import UtteranceRun
    from .scheduler import Scheduler
    from .slots import AdmissionWait

#: The notice that closes the channel after every frame queued before it.
_FINISH: Any = object()


class SessionLink:
    """A session's end of its model's scheduler: utterances in, frames and markers out.

    Frames and notices go into the session's frame channel in order (``finish`` closes it
    after the last frame); ``on_failure`` gets the error that stopped the stream, which then
    also ends the channel. The random generator (``seed``) belongs to the stream, as it
    belongs to a session. ``done``: utterances whose last frame is out.
    """

    def __init__(
        self,
        scheduler: Scheduler,
        seed: int | None,
        channel: FrameChannel[Any],
        on_failure: Callable[[BaseException], None],
        name: str | None = None,
        words: SessionWords | None = None,
        on_wait: Callable[[AdmissionWait], None] | None = None,
    ) -> None:
        self._scheduler = scheduler
        self._channel = channel
        self._on_failure = on_failure
        self.done = 0
        self._stream = scheduler.open_stream(
            self._output, self._failed, seed=seed, name=name, words=words, on_wait=on_wait
        )

    def speak(
        self,
        utterance_index: int,
        chunks: list[PreparedChunk],
        run: UtteranceRun,
        timed: TimedText | None = None,
        heads: Heads | None = None,
    ) -> None:
        """Queue an utterance's prepared chunks, all started from ``run`` (its restart seed
        with the first); ``timed``: its caller words, timed from ``heads`` or estimated."""
        last = len(chunks) - 1
        for i, chunk in enumerate(chunks):
            job = ChunkJob(
                chunk=chunk,
                run=run,
                utterance_index=utterance_index,
                chunk_index=i,
                is_last_chunk=i == last,
                restart_seed=run.restart_seed if i == 0 else None,
                timed=timed,
                heads=heads,
            )
            self._scheduler.submit(self._stream, job)

    def notice(self, item: Any) -> None:
        """Put ``item`` (a marker) in the channel after every frame queued before it."""
        self._scheduler.submit(self._stream, Notice(item))

    def finish(self) -> None:
        """Close the channel after every frame queued so far."""
        self._scheduler.submit(self._stream, Notice(_FINISH))

    def cancel(self) -> None:
        """Drop everything; return once no computation of this stream runs."""
        self._scheduler.cancel(self._stream)

    def stop(self) -> int:
        """Drop everything now, without waiting (``cancel`` waits); the ticks so far."""
        return self._scheduler.stop(self._stream)

    @property
    def ticks(self) -> int:
        """Ticks that computed for this stream, counted as each ends."""
        return self._stream.ticks

    def abandon(self) -> None:
        """Its session was dropped without finish() or cancel(): drop its stream.

        Called by a finalizer, possibly while this thread holds the scheduler's lock (a
        garbage collection anywhere): the cancel runs on a thread of its own.
        """
        threading.Thread(target=self.cancel, name="pocket-tts-abandon", daemon=True).start()

    def _output(self, item: Any) -> None:
        if item is _FINISH:
            self._channel.close()
        elif self._channel.put(item) and getattr(item, "is_last_in_utterance", False):
            self.done += 1

    def _failed(self, error: BaseException) -> None:
        self._on_failure(error)
        self._channel.close(error)


__all__ = ["SessionLink"]
