"""``livekit-plugins-pocket``'s protocol against a real server process, through the real plugin
(``pocket.TTS(ws_url=...)``): synthesize, stream, a cancelled reply then the next one on the
same socket, a refused config, the key, and the server's count of open streams.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest
from livekit.agents import APIConnectionError, APIConnectOptions
from livekit.plugins import pocket
from polling import poll_until
from server_process import ServerProcess

from pipecat_pocket_tts.server.dialects.livekit import PATH

TIMEOUT_S = 60.0  # a failure bound only: the plugin waits on the server's frames
NO_RETRY = APIConnectOptions(max_retry=0, timeout=TIMEOUT_S)


def plugin(server: ServerProcess, **kwargs: object) -> pocket.TTS:
    return pocket.TTS(ws_url=server.ws_url + PATH, timeout=TIMEOUT_S, **kwargs)  # type: ignore[arg-type]


def samples_of(events: list) -> np.ndarray:
    return np.concatenate([np.frombuffer(e.frame.data, np.int16) for e in events])


async def test_synthesize_and_stream(server: ServerProcess) -> None:
    tts = plugin(server, sample_rate=16000)
    try:
        chunked = [e async for e in tts.synthesize("Hello there.", conn_options=NO_RETRY)]
        assert chunked and {e.frame.sample_rate for e in chunked} == {16000}
        assert np.abs(samples_of(chunked)).max() > 0
        stream = tts.stream(conn_options=NO_RETRY)
        for token in ("How ", "are ", "you? ", "Fine, ", "thanks."):
            stream.push_text(token)
        stream.end_input()
        streamed = [e async for e in stream]
        assert streamed and samples_of(streamed).size > 0
    finally:
        await tts.aclose()
    assert server.metric("pocket_tts_streams") == 0


async def test_a_cancelled_reply_then_the_next(endless_server: ServerProcess) -> None:
    """Closing a stream mid-reply sends ``cancel``: the server stops that reply's compute; the
    next reply on the same socket speaks (the never-EOS pack: the first would go on)."""
    tts = plugin(endless_server)
    try:
        stream = tts.stream(conn_options=NO_RETRY)
        stream.push_text("On and on it goes. " * 20)
        stream.end_input()
        first = await anext(aiter(stream))
        assert first.frame.samples_per_channel > 0
        assert endless_server.metric("pocket_tts_streams") == 1
        await stream.aclose()
        await poll_until(
            lambda: endless_server.metric("pocket_tts_streams") == 0, what="the reply stopped"
        )
        reused = tts._socket.ws  # the plugin keeps its socket after a cancel
        after = [e async for e in tts.synthesize("Next.", conn_options=NO_RETRY)]
        assert after and tts._socket.ws is reused
    finally:
        await tts.aclose()


async def test_a_refused_config_is_an_error(server: ServerProcess) -> None:
    tts = plugin(server, voice="nobody")
    try:
        with pytest.raises(APIConnectionError, match="unknown_voice"):
            await asyncio.wait_for(
                tts.synthesize("Hi.", conn_options=NO_RETRY).collect(), TIMEOUT_S
            )
    finally:
        await tts.aclose()
    tts = plugin(server, pauses=True)
    try:
        with pytest.raises(APIConnectionError, match="pauses"):
            await tts.synthesize("Hi.", conn_options=NO_RETRY).collect()
    finally:
        await tts.aclose()


async def test_the_key(engine_pack_dir: Path) -> None:
    keyed = ServerProcess(engine_pack_dir, "--api-key", "s3cret").start()
    try:
        good = plugin(keyed, api_key="s3cret")
        bad = plugin(keyed, api_key="wrong")
        try:
            assert await good.synthesize("Keyed.", conn_options=NO_RETRY).collect()
            with pytest.raises(APIConnectionError):
                await bad.synthesize("Keyed.", conn_options=NO_RETRY).collect()
        finally:
            await good.aclose()
            await bad.aclose()
    finally:
        keyed.stop()
