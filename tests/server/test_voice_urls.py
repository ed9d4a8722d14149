"""Voice URLs (issue 32): the server fetches no URL a client sends unless its operator allows
that origin (``--voice-url-host``). Against a real server process and a real file server, both
on 127.0.0.1: an allowed URL is fetched and cloned; any other is refused before anything is
sent (the file server sees no request); redirects lead only to allowed origins."""

from __future__ import annotations

from pathlib import Path

import httpx
import numpy as np
import pytest
from file_server import FileServer, Redirect
from server_process import ServerProcess

from pipecat_pocket_tts.engine.audio.wav import write_wav
from pipecat_pocket_tts.engine.errors import ServerConfigError
from pipecat_pocket_tts.server.core.errors import RequestError
from pipecat_pocket_tts.server.core.voice_urls import VoiceUrls, resolve_voice_url_hosts

HF_URL = "hf://kyutai/tts-voices/alba-mackenna/casual.wav"


def recording(tmp_path: Path, seconds: float = 2.0) -> bytes:
    path = tmp_path / "voice.wav"
    rng = np.random.default_rng(0)
    write_wav(path, (0.1 * rng.standard_normal(int(24000 * seconds))).astype(np.float32), 24000)
    return path.read_bytes()


def riff_rate(data: bytes) -> int:
    assert data[:4] == b"RIFF" and data[8:12] == b"WAVE"
    return int.from_bytes(data[24:28], "little")


async def test_only_allowed_origins_are_fetched(
    server: ServerProcess, engine_pack_dir: Path, tmp_path: Path
) -> None:
    wav = recording(tmp_path)
    routes: dict[str, bytes | Redirect] = {"/voice.wav": wav}
    with FileServer(routes) as files:
        routes["/elsewhere"] = Redirect(files.url("/voice.wav", host="localhost"))
        routes["/here"] = Redirect("/voice.wav")
        voice_url = files.url("/voice.wav")
        # The module's server allows no origin: refused, and nothing is fetched.
        async with httpx.AsyncClient(base_url=server.http_url, timeout=60) as client:
            refused = await client.post("/tts", data={"text": "Hi.", "voice_url": voice_url})
        assert refused.status_code == 403
        assert "fetches no voice URL" in refused.json()["error"]["message"]
        assert files.seen() == []

        allowing = ServerProcess(engine_pack_dir, "--voice-url-host", "http://127.0.0.1").start()
        try:
            async with httpx.AsyncClient(base_url=allowing.http_url, timeout=60) as client:
                fetched = await client.post("/tts", data={"text": "Hi.", "voice_url": voice_url})
                assert fetched.status_code == 200, fetched.text
                assert riff_rate(fetched.content) == 24000 and len(fetched.content) > 44 + 3840
                assert files.seen() == ["/voice.wav"]
                # A redirect within the allowed origin is followed...
                here = files.url("/here")
                hop = await client.post("/tts", data={"text": "Hi.", "voice_url": here})
                assert hop.status_code == 200
                assert files.seen()[1:] == ["/here", "/voice.wav"]
                # ...one to another host is not: the target is never asked for.
                off = files.url("/elsewhere")
                away = await client.post("/tts", data={"text": "Hi.", "voice_url": off})
                assert away.status_code == 403
                assert "http://localhost" in away.json()["error"]["message"]
                assert files.seen()[3:] == ["/elsewhere"]
                # Another host, an https URL of the same host, a file URL, hf://: refused.
                for url, status, words in [
                    (files.url("/voice.wav", host="localhost"), 403, "not among the origins"),
                    (f"https://127.0.0.1:{files.port}/voice.wav", 403, "not among the origins"),
                    ("file:///etc/passwd", 400, "http(s) URL"),
                    (HF_URL, 400, "hf:// voice URLs are not fetched"),
                    (f"http://user:pw@127.0.0.1:{files.port}/voice.wav", 400, "credentials"),
                ]:
                    answer = await client.post("/tts", data={"text": "Hi.", "voice_url": url})
                    assert answer.status_code == status, url
                    message = answer.json()["error"]["message"]
                    assert words in message and "\n" not in message
                assert files.seen()[4:] == []
                missing = files.url("/missing.wav")
                lost = await client.post("/tts", data={"text": "Hi.", "voice_url": missing})
                assert lost.status_code == 502 and "HTTP 404" in lost.json()["error"]["message"]
        finally:
            allowing.stop()


def test_the_allow_list_rules() -> None:
    urls = VoiceUrls(["voices.example", "http://127.0.0.1", "https://cdn.example:8443"])
    assert urls.check("https://voices.example/a.wav").hostname == "voices.example"
    assert urls.check("https://VOICES.example:444/a.wav").port == 444  # no port: any port
    assert urls.check("http://127.0.0.1:9/a.wav").port == 9
    assert urls.check("https://cdn.example:8443/a.wav")
    for url in (
        "http://voices.example/a.wav",  # a bare host allows https only
        "https://127.0.0.1/a.wav",  # http:// allows plain http only
        "https://cdn.example/a.wav",  # a port, when listed, must match
        "https://voices.example.evil/a.wav",
        "https://evil.example/voices.example",
    ):
        with pytest.raises(RequestError) as refused:
            urls.check(url)
        assert refused.value.status == 403, url
    for entry in ("ftp://host", "https://host/path", "https://user@host", "", "host:port"):
        with pytest.raises(ServerConfigError, match="--voice-url-host"):
            VoiceUrls([entry])


def test_the_environment_names_hosts_when_no_option_does() -> None:
    environ = {"POCKET_TTS_VOICE_URL_HOSTS": "a.example, http://b.example:8080,"}
    assert resolve_voice_url_hosts(None, environ) == ("a.example", "http://b.example:8080")
    assert resolve_voice_url_hosts(["c.example"], environ) == ("c.example",)
    assert resolve_voice_url_hosts(None, {}) == ()


def test_a_fetch_stops_at_the_size_limit(tmp_path: Path) -> None:
    wav = recording(tmp_path, seconds=1.0)
    with FileServer({"/voice.wav": wav}) as files:
        urls = VoiceUrls(["http://127.0.0.1"])
        assert urls.fetch(files.url("/voice.wav"), limit=len(wav)) == wav
        with pytest.raises(RequestError, match="over 1000 bytes") as refused:
            urls.fetch(files.url("/voice.wav"), limit=1000)
        assert refused.value.status == 413


def test_redirect_loops_end() -> None:
    routes: dict[str, bytes | Redirect] = {"/a": Redirect("/b"), "/b": Redirect("/a")}
    with FileServer(routes) as files:
        with pytest.raises(RequestError, match="redirected more than 3 times"):
            VoiceUrls(["http://127.0.0.1"]).fetch(files.url("/a"), limit=1 << 20)
        assert len(files.seen()) == 4
