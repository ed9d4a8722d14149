"""Transport settings of the example bots, one factory per Pipecat runner transport (``-t``).

Each factory imports its transport only when called, so a bot started with ``-t webrtc`` does
not need the Daily or telephony packages.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

TELEPHONY = ("twilio", "telnyx", "plivo", "exotel")
#: Output rate of phone lines; everything else gets the model's 24 kHz.
PHONE_RATE = 8000
MODEL_RATE = 24000


def transport_params() -> dict[str, Callable[[], Any]]:
    """Factories of the transport parameters, by runner transport name."""

    def webrtc() -> Any:
        from pipecat.transports.base_transport import TransportParams

        return TransportParams(audio_in_enabled=True, audio_out_enabled=True)

    def daily() -> Any:
        from pipecat.transports.daily.transport import DailyParams

        return DailyParams(audio_in_enabled=True, audio_out_enabled=True)

    def phone() -> Any:
        from pipecat.transports.websocket.fastapi import FastAPIWebsocketParams

        return FastAPIWebsocketParams(audio_in_enabled=True, audio_out_enabled=True)

    params: dict[str, Callable[[], Any]] = {"webrtc": webrtc, "daily": daily}
    params.update({name: phone for name in TELEPHONY})
    return params


def is_phone_call(runner_args: Any) -> bool:
    """Whether the runner connected a phone call (its websocket carries call data)."""
    return getattr(runner_args, "call_data", None) is not None


def output_rate(runner_args: Any) -> int:
    """8 kHz for a phone line, else the model's own rate."""
    return PHONE_RATE if is_phone_call(runner_args) else MODEL_RATE


async def run_until_client_leaves(
    transport: Any, worker: Any, runner_args: Any, on_connected: Callable[[], Awaitable[None]]
) -> None:
    """Run ``worker``: ``on_connected()`` once the client is there, cancelled when it leaves."""
    from loguru import logger
    from pipecat.workers.runner import WorkerRunner

    @transport.event_handler("on_client_connected")
    async def on_client_connected(transport, client):
        logger.info("client connected")
        await on_connected()

    @transport.event_handler("on_client_disconnected")
    async def on_client_disconnected(transport, client):
        logger.info("client disconnected")
        await worker.cancel()

    runner = WorkerRunner(handle_sigint=runner_args.handle_sigint)
    await runner.add_workers(worker)
    await runner.run()
