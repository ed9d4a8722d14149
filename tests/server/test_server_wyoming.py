"""Home Assistant's Wyoming protocol against a real server process (``serve --wyoming-port``),
through the ``wyoming`` library's own client (``AsyncTcpClient``).

The pack has two voices, temperature 0 (deterministic audio) and an EOS head that never fires
(each chunk runs to its frame limit: long enough replies to disconnect in the middle of).
Describe; one-shot synthesis (the format, the chosen voice's audio against the default's and
against OpenAI's route for that voice); streamed synthesis in several chunks; a disconnect
mid-reply frees the stream; an unknown voice is an error event and the connection goes on.
"""

from __future__ import annotations

import asyncio
import copy
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from polling import poll_until
from server_process import ServerProcess, free_port
from wyoming.audio import AudioChunk, AudioStart
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event, async_read_event
from wyoming.info import Describe, Info
from wyoming.ping import Ping, Pong
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
    SynthesizeVoice,
)

TEXT = "Hello there. How are you today?"
MAX_EVENTS = 5000  # events a read takes before it fails (a count, not a time budget)


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two voices (alba, the default, and marius), temperature 0, EOS never."""
    from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict

    config = copy.deepcopy(tiny_config_dict("standard"))
    config["default_temperature"] = 0.0
    folder = tmp_path_factory.mktemp("wyoming_pack") / "english"
    return build_pack(folder, config, voices=("alba", "marius"), eos_logit=-30.0)


@pytest.fixture(scope="module")
def server(pack: Path) -> Iterator[WyomingServerProcess]:
    process = WyomingServerProcess(pack).start()
    yield process
    process.stop()


class WyomingServerProcess(ServerProcess):
    """A server with a Wyoming port beside its HTTP one."""

    ready_logs = (*ServerProcess.ready_logs, r"Wyoming listening on")

    def __init__(self, pack_dir: Path, *args: str) -> None:
        self.wyoming_port = free_port()
        super().__init__(pack_dir, "--wyoming-port", str(self.wyoming_port), *args)

    def client(self) -> AsyncTcpClient:
        return AsyncTcpClient("127.0.0.1", self.wyoming_port)


async def read_until(client: AsyncTcpClient, *types: str) -> list[Event]:
    """Events up to and including the first of one of ``types``."""
    events = []
    for _ in range(MAX_EVENTS):
        event = await client.read_event()
        assert event is not None, f"the server closed before {types}: {events[-3:]}"
        events.append(event)
        if event.type in types:
            return events
    raise AssertionError(f"no {types} in {MAX_EVENTS} events")


def pcm_of(events: list[Event]) -> bytes:
    chunks = [AudioChunk.from_event(e) for e in events if AudioChunk.is_type(e.type)]
    assert {(c.rate, c.width, c.channels) for c in chunks} <= {(24000, 2, 1)}
    return b"".join(c.audio for c in chunks)


async def synthesize(server: WyomingServerProcess, voice: SynthesizeVoice | None) -> bytes:
    async with server.client() as client:
        await client.write_event(Synthesize(text=TEXT, voice=voice).event())
        events = await read_until(client, "audio-stop")
    start = AudioStart.from_event(events[0])
    assert (start.rate, start.width, start.channels) == (24000, 2, 1)
    return pcm_of(events)


async def test_describe_lists_every_voice_and_streaming(server: WyomingServerProcess) -> None:
    async with server.client() as client:
        await client.write_event(Ping(text="hi").event())
        assert Pong.from_event((await read_until(client, "pong"))[-1]).text == "hi"
        await client.write_event(Describe().event())
        info = Info.from_event((await read_until(client, "info"))[-1])
    (program,) = info.tts
    assert program.supports_synthesize_streaming and program.installed
    assert [v.name for v in program.voices] == ["alba", "marius"]
    assert all(v.languages == ["en"] for v in program.voices)


async def test_one_shot_synthesis_speaks_the_chosen_voice(server: WyomingServerProcess) -> None:
    default = await synthesize(server, None)
    alba = await synthesize(server, SynthesizeVoice(name="alba"))
    marius = await synthesize(server, SynthesizeVoice(name="marius"))
    by_language = await synthesize(server, SynthesizeVoice(language="en_US"))
    assert len(default) % 2 == 0 and len(default) >= 2 * 1920 * 4  # whole 16-bit samples
    assert default == alba == by_language  # temperature 0: the same voice, the same audio
    assert marius != alba and len(marius) % 2 == 0
    async with httpx.AsyncClient(base_url=server.http_url, timeout=120) as http:
        body = {"model": "tts-1", "input": TEXT, "voice": "marius", "response_format": "pcm"}
        openai = await http.post("/v1/audio/speech", json=body)
    assert openai.status_code == 200 and openai.content == marius


async def test_streamed_synthesis_in_chunks(server: WyomingServerProcess) -> None:
    whole = await synthesize(server, SynthesizeVoice(name="marius"))
    async with server.client() as client:
        await client.write_event(SynthesizeStart(voice=SynthesizeVoice(name="marius")).event())
        for piece in ("Hello ", "there. How ", "are you ", "today?"):
            await client.write_event(SynthesizeChunk(text=piece).event())
        await client.write_event(Synthesize(text=TEXT).event())  # the copy for older servers
        first = await read_until(client, "audio-chunk")  # the first sentence, before the stop
        await client.write_event(SynthesizeStop().event())
        events = first + await read_until(client, "synthesize-stopped")
        kinds = [e.type for e in events]
        assert kinds[0] == "audio-start" and kinds[-2:] == ["audio-stop", "synthesize-stopped"]
        assert kinds.count("audio-start") == 1 and SynthesizeStopped.is_type(kinds[-1])
        streamed = pcm_of(events)
        assert len(streamed) % 2 == 0 and len(streamed) >= len(whole) // 2
        # The connection takes the next request.
        await client.write_event(Synthesize(text="Again.").event())
        assert pcm_of(await read_until(client, "audio-stop"))


async def test_unknown_voice_is_an_error_and_the_connection_goes_on(
    server: WyomingServerProcess,
) -> None:
    async with server.client() as client:
        await client.write_event(Synthesize(text="Hi.", voice=SynthesizeVoice("nobody")).event())
        error = Error.from_event((await read_until(client, "error"))[-1])
        assert error.code == "unknown_voice" and "nobody" in error.text and "marius" in error.text
        await client.write_event(SynthesizeStart(voice=SynthesizeVoice(language="de")).event())
        error = Error.from_event((await read_until(client, "error"))[-1])
        assert "no voice for language 'de'" in error.text
        await client.write_event(Event("synthesize", {"voice": {"name": "alba"}}))
        error = Error.from_event((await read_until(client, "error"))[-1])
        assert "string 'text'" in error.text
        await client.write_event(Synthesize(text="Still here.").event())
        assert pcm_of(await read_until(client, "audio-stop"))


async def test_one_request_at_a_time_and_a_broken_event_closes(
    server: WyomingServerProcess,
) -> None:
    async with server.client() as client:
        await client.write_event(Synthesize(text=TEXT).event())
        await client.write_event(Synthesize(text="And this too.").event())
        events = await read_until(client, "audio-stop")
        errors = [Error.from_event(e) for e in events if Error.is_type(e.type)]
        assert [e.text for e in errors] == ["one synthesis at a time: wait for its end"]
    reader, writer = await asyncio.open_connection("127.0.0.1", server.wyoming_port)
    writer.write(b"not an event\n")
    error = Error.from_event(await async_read_event(reader))
    assert error.text.startswith("not a Wyoming event")
    assert await reader.read() == b""  # then the server closes
    writer.close()


async def test_a_disconnect_mid_reply_frees_the_stream(server: WyomingServerProcess) -> None:
    frames_before = server.metric("pocket_tts_frames_total")
    client = server.client()
    await client.connect()
    await client.write_event(Synthesize(text=" ".join([TEXT] * 20)).event())
    await read_until(client, "audio-chunk")
    assert server.metric("pocket_tts_streams") == 1
    assert server.metric("pocket_tts_connections") == 1
    await client.disconnect()
    await poll_until(lambda: server.metric("pocket_tts_streams") == 0, what="the stream freed")
    await poll_until(lambda: server.metric("pocket_tts_connections") == 0, what="the connection")
    sent = server.metric("pocket_tts_frames_total") - frames_before
    whole = len(await synthesize(server, None)) // (2 * 1920)  # a fraction of the long text's
    assert sent < 10 * whole


def test_refused_options_exit_at_start(pack: Path) -> None:
    def serve(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "pipecat_pocket_tts", "serve", "--model-dir", str(pack)]
        return subprocess.run([*command, *args], capture_output=True, text=True, timeout=120)

    keyed = serve("--api-key", "k", "--wyoming-port", str(free_port()))
    assert keyed.returncode == 2 and "--wyoming-no-auth" in keyed.stderr
    alone = serve("--zeroconf")
    assert alone.returncode == 2 and "give --wyoming-port" in alone.stderr


async def test_drain_refuses_new_wyoming_clients_and_finishes_the_reply(pack: Path) -> None:
    process = WyomingServerProcess(pack, "--drain-timeout", "60").start()
    try:
        async with process.client() as speaking:
            await speaking.write_event(Synthesize(text=TEXT).event())
            await read_until(speaking, "audio-chunk")
            process.process.terminate()  # SIGTERM: drain
            process.wait_for_logs(r"draining")
            async with process.client() as late:
                error = Error.from_event((await read_until(late, "error"))[-1])
            assert "shutting down" in error.text
            assert pcm_of(await read_until(speaking, "audio-stop"))  # the reply finishes
            assert await speaking.read_event() is None  # then the server closes
        assert process.process.wait(timeout=60) == 0
    finally:
        process.kill()


async def test_zeroconf_announces_the_port_and_connections_are_counted(pack: Path) -> None:
    """On loopback only (the server binds 127.0.0.1): heard by an mDNS browser there that
    listens before the server starts. With ``--max-connections 1`` a Wyoming client holds the
    one slot."""
    pytest.importorskip("zeroconf")
    from zeroconf.asyncio import AsyncServiceBrowser, AsyncZeroconf

    from pipecat_pocket_tts.server.wyoming_listener import SERVICE_TYPE

    listener = AsyncZeroconf(interfaces=["127.0.0.1"])
    heard: list[str] = []
    browser = AsyncServiceBrowser(
        listener.zeroconf, SERVICE_TYPE, handlers=[lambda name, **_: heard.append(name)]
    )
    process = WyomingServerProcess(pack, "--zeroconf", "--max-connections", "1")
    try:
        await asyncio.to_thread(process.start)
        name = f"pocket-tts-{socket.gethostname()}-{process.wyoming_port}.{SERVICE_TYPE}"
        await poll_until(lambda: name in heard, what="the announcement")
        info = await listener.async_get_service_info(SERVICE_TYPE, name)
        assert info is not None and info.port == process.wyoming_port
        assert info.parsed_addresses() == ["127.0.0.1"]
        async with process.client() as holder:
            await holder.write_event(Describe().event())
            await read_until(holder, "info")
            async with process.client() as refused:
                error = Error.from_event((await read_until(refused, "error"))[-1])
            assert "holds 1 connections" in error.text
            await holder.write_event(Synthesize(text="Hi.").event())
            assert pcm_of(await read_until(holder, "audio-stop"))
    finally:
        process.stop()
        await browser.async_cancel()
        await listener.async_close()


def test_the_home_assistant_example_serves_wyoming_to_its_network_only() -> None:
    import yaml
    from paths import REPO_ROOT

    folder = REPO_ROOT / "examples" / "server" / "home-assistant"
    compose = yaml.safe_load((folder / "docker-compose.yml").read_text())
    tts = compose["services"]["tts"]
    command = tts["command"]
    port = command[command.index("--wyoming-port") + 1]
    assert "--wyoming-no-auth" in command and "ports" not in tts and tts["expose"] == [port]
    assert compose["services"]["homeassistant"]["depends_on"]["tts"]["condition"]
    assert f"port = `{port}`" in (folder / "README.md").read_text()
