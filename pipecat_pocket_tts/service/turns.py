"""Turns: each audio context's turn, the main speech stream that interruptible turns share,
and the private streams of uninterruptible ones (``speech_stream.py``: what a stream does with
a turn's text and audio).

Opening a stream opens an engine session, which may wait for a slot of the model's scheduler:
beyond its limit (``max_streams``: by default ``"auto"``, what the measured cost of a frame
keeps in real time) a session waits, and when it gets one the service pushes a
``MetricsFrame`` holding an ``AdmissionWaitMetricsData`` (seconds waited, streams speaking
then), so a deployment's observers see what the limit costs a call. Sent only when the
pipeline enables metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pipecat.frames.frames import MetricsFrame
from pipecat.metrics.metrics import MetricsData
from pipecat.processors.frame_processor import FrameProcessor

from ..engine import AdmissionWait
from .speech_stream import SpeechStream, Turn

if TYPE_CHECKING:
    from ..engine.contract import SpeechEngine
    from .output import ContextOutput


class Turns:
    """The open turns of a service by context id, the main stream and every stream alive."""

    def __init__(self, output: ContextOutput) -> None:
        self._output = output
        self._turns: dict[str, Turn] = {}
        self._streams: set[SpeechStream] = set()
        self._main: SpeechStream | None = None

    def get(self, context_id: str | None) -> Turn | None:
        return self._turns.get(context_id) if context_id else None

    async def open(
        self,
        context_id: str,
        engine: SpeechEngine,
        *,
        private: bool,
        streamed: bool,
        session_options: dict[str, Any],
        seed_version: int,
    ) -> Turn:
        """Bind a new audio context to the main stream, or to a new (private) one."""
        stream = self._main
        if private or stream is None or stream.retired or stream.closed:
            # Opening a session prefills the voice (cached by the engine): off the loop.
            # The reporter of waits for a slot under max_streams.
            waits = admission_reporter(self._output.service, engine.pack_name)
            session = await asyncio.to_thread(
                engine.session, **session_options, on_admission_wait=waits
            )
            stream = SpeechStream(
                session,
                self._output.encoder(),
                self._output,
                private=private,
                seed_version=seed_version,
                on_closed=self.on_closed,
            )
            self._streams.add(stream)
            if not private:
                self._main = stream
        turn = Turn(context_id=context_id, stream=stream, streamed=streamed)
        stream.add(turn)
        self._turns[context_id] = turn
        return turn

    def on_closed(self, stream: SpeechStream, turns: list[Turn]) -> None:
        """A stream closed turns (or itself): forget them."""
        for turn in turns:
            if self._turns.get(turn.context_id) is turn:
                del self._turns[turn.context_id]
        if stream.closed:
            self._streams.discard(stream)
            if self._main is stream:
                self._main = None

    def retire_main(self) -> None:
        """New turns get a new session; the current one finishes the turns it has."""
        main, self._main = self._main, None
        if main is not None:
            main.retire()

    async def interrupt(self) -> None:
        """Cancel the main stream if it still speaks (every turn on it is interruptible)."""
        main = self._main
        if main is not None and main.busy:
            await main.close()

    async def close_all(self) -> None:
        for stream in list(self._streams):
            await stream.close()
        self._turns.clear()
        self._main = None


# -- the wait for a slot, as a metric --------------------------------------------------
class AdmissionWaitMetricsData(MetricsData):
    """Seconds a session of ``processor`` waited for a slot of its model's scheduler."""

    value: float
    # Streams holding a slot when this one got one.
    streams_speaking: int


def admission_reporter(processor: FrameProcessor, model: str) -> Callable[[AdmissionWait], None]:
    """The ``on_admission_wait`` of a session of ``processor`` on pack ``model``, opened now
    (call it on the event loop): each admission after a wait becomes a ``MetricsFrame``."""
    loop = asyncio.get_running_loop()

    # Runs on the event loop.
    def admitted(waited: float, speaking: int) -> None:
        if not processor.metrics_enabled:
            return
        data = AdmissionWaitMetricsData(
            processor=processor.name, model=model, value=waited, streams_speaking=speaking
        )
        frame = MetricsFrame(data=[data])
        processor.create_task(processor.push_frame(frame), name=f"{processor}::admission-metrics")

    # Runs on the scheduler's thread, under its lock.
    def report(event: AdmissionWait) -> None:
        if event.waited is not None:
            # The loop is closed, so there is nobody to tell.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(admitted, event.waited, event.active)

    return report


__all__ = ["AdmissionWaitMetricsData", "Turns", "admission_reporter"]
