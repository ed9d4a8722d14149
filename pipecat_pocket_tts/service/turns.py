"""The open turns of ``PocketTTSService``: each audio context's turn, the main speech stream
that interruptible turns share, and the private streams of uninterruptible ones
(``speech_stream.py``: what a stream does with a turn's text and audio).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..engine import SAMPLE_RATE
from .admission import admission_reporter
from .resampler import OutputResampler
from .speech_stream import SpeechStream, Turn

if TYPE_CHECKING:
    from ..engine.contract import SpeechEngine
    from .context_output import ContextOutput


class Turns:
    """The open turns of a service by context id, the main stream and every stream alive."""

    def __init__(
        self, output: ContextOutput, sample_rate: Callable[[], int], resampler_quality: str
    ) -> None:
        """``sample_rate``: the pipeline's output rate (known once the pipeline started)."""
        self._output = output
        self._sample_rate = sample_rate
        self._quality = resampler_quality
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
            waits = admission_reporter(self._output.service, engine.pack_name)  # max_streams
            session = await asyncio.to_thread(
                engine.session, **session_options, on_admission_wait=waits
            )
            stream = SpeechStream(
                session,
                OutputResampler(SAMPLE_RATE, self._sample_rate(), quality=self._quality),
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


__all__ = ["Turns"]
