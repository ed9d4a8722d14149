"""Upstream ``pocket-tts serve`` drop-in (issue 40): ``--default-voice`` (a name, a voice file,
a recording), ``POST /tts`` with both voice fields refused, uploads in the formats libsndfile
reads, no server path in any message, and the page at ``/``; against real server processes."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import numpy as np
import pytest
import soundfile
from openai import OpenAI
from server_process import ServerProcess
from websockets.sync.client import connect

from pipecat_pocket_tts import wire
from pipecat_pocket_tts.wire import handshake


def recording(audio_format: str, seconds: float = 2.0) -> bytes:
    """A noise recording (what the tiny pack clones) in ``audio_format``, by libsndfile."""
    rng = np.random.default_rng(0)
    samples = (0.1 * rng.standard_normal(int(24000 * seconds))).astype(np.float32)
    data = io.BytesIO()
    soundfile.write(data, samples, 24000, format=audio_format)
    return data.getvalue()


def served_voices(server: ServerProcess) -> dict:
    status, voices = server.json("/v1/voices")
    assert status == 200
    return voices


def speaks(server: ServerProcess, **fields: str) -> None:
    """``/tts`` and OpenAI's call (with voice ``alloy``) both speak."""
    with httpx.Client(base_url=server.http_url, timeout=60) as client:
        form = client.post("/tts", data={"text": "Hello there.", **fields})
    assert form.status_code == 200 and len(form.content) > 44 + 3840
    client = OpenAI(api_key="x", base_url=f"{server.http_url}/v1")
    body = client.audio.speech.create(
        model="tts-1", voice="alloy", input="Hi.", response_format="pcm"
    )
    assert len(body.content) >= 3840


def test_default_voice_by_name(engine_pack_dir: Path) -> None:
    server = ServerProcess(engine_pack_dir, "--default-voice", "marius").start()
    try:
        voices = served_voices(server)
        assert voices["default"] == "marius" and voices["aliases"]["alloy"] == "marius"
        speaks(server)
    finally:
        server.stop()


@pytest.mark.parametrize("kind", ["safetensors", "flac"])
def test_default_voice_from_a_file(engine_pack_dir: Path, tmp_path: Path, kind: str) -> None:
    path = tmp_path / f"narrator.{kind}"
    if kind == "safetensors":
        shutil.copy(engine_pack_dir / "embeddings" / "marius.safetensors", path)
    else:
        path.write_bytes(recording("FLAC"))
    server = ServerProcess(engine_pack_dir, "--default-voice", str(path)).start()
    try:
        voices = served_voices(server)
        assert voices["default"] == "narrator" and "narrator" in voices["voices"]
        assert voices["aliases"]["alloy"] == "narrator"
        assert str(tmp_path) not in str(voices)
        speaks(server)
        speaks(server, voice_url="narrator")
    finally:
        server.stop()


def test_a_missing_default_voice_file_stops_the_start(engine_pack_dir: Path) -> None:
    command = [sys.executable, "-m", "pipecat_pocket_tts", "serve", "--model-dir",
               str(engine_pack_dir), "--default-voice", "/nowhere/narrator.wav"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "no such file" in done.stderr


@pytest.mark.parametrize("audio_format", ["WAV", "FLAC", "OGG", "MP3"])
def test_uploads_in_the_formats_libsndfile_reads(server: ServerProcess, audio_format: str) -> None:
    files = {"voice_wav": (f"me.{audio_format.lower()}", recording(audio_format), "audio/x")}
    with httpx.Client(base_url=server.http_url, timeout=60) as client:
        cloned = client.post("/tts", data={"text": "Cloned."}, files=files)
    assert cloned.status_code == 200, cloned.text
    assert cloned.content[:4] == b"RIFF" and len(cloned.content) > 44


def test_refusals_name_the_field_and_no_server_path(server: ServerProcess) -> None:
    with httpx.Client(base_url=server.http_url, timeout=60) as client:
        both = client.post(
            "/tts",
            data={"text": "Hi.", "voice_url": "marius"},
            files={"voice_wav": ("me.wav", recording("WAV"), "audio/wav")},
        )
        assert both.status_code == 400
        assert both.json()["error"]["message"] == "give voice_url or voice_wav, not both"
        for junk in (b"RIFF\x00\x00\x00\x00WAVEjunk", b"not audio at all"):
            files = {"voice_wav": ("me.wav", junk, "audio/wav")}
            refused = client.post("/tts", data={"text": "Hi."}, files=files)
            assert refused.status_code == 400
            error = refused.json()["error"]
            assert error["param"] == "voice_wav" and "voice_wav" in error["message"]
            assert (
                tempfile.gettempdir() not in error["message"]
                and "voice.wav" not in error["message"]
            )


def test_a_broken_voice_file_is_refused_without_its_path(
    engine_pack_dir: Path, tmp_path: Path
) -> None:
    (tmp_path / "broken.safetensors").write_text("not a voice state")
    server = ServerProcess(engine_pack_dir, "--voices-dir", str(tmp_path)).start()
    try:
        with httpx.Client(base_url=server.http_url, timeout=60) as client:
            body = {"model": "tts-1", "voice": "broken", "input": "Hi.", "response_format": "pcm"}
            speech = client.post("/v1/audio/speech", json=body)
            form = client.post("/tts", data={"text": "Hi.", "voice_url": "broken"})
        for refused in (speech, form):
            assert refused.status_code == 400  # VoiceFileError, a ValueError
            message = refused.json()["error"]["message"]
            assert "broken.safetensors" in message and str(tmp_path) not in message
        with connect(server.ws_url + handshake.PATH) as websocket:  # our protocol's errors too
            assert wire.decode_server(websocket.recv()).type == "ready"
            websocket.send(wire.encode(wire.CheckVoice(1, "broken")))
            checked = wire.decode_server(websocket.recv())
            websocket.send(wire.encode(wire.Start("c", voice="broken")))
            error = wire.decode_server(websocket.recv())
        for message in (checked.message, error.message):
            assert "broken.safetensors" in message and str(tmp_path) not in message
    finally:
        server.stop()


def test_the_page_speaks_through_tts(server: ServerProcess) -> None:
    status, body = server.get("/")
    page = body.decode()
    assert status == 200 and "<textarea" in page and 'fetch("/tts"' in page


@pytest.mark.parametrize("route", ["/tts", "/v1/audio/speech"])
def test_an_oversized_upload_gets_a_readable_413(server: ServerProcess, route: str) -> None:
    """An 11 MB upload (over the 10 MB of /tts, the 256 KB of a JSON body) is answered 413 in
    the one error shape once its body is read, not with a reset while the client sends."""
    big = b"\0" * (11 * 1024 * 1024)
    with httpx.Client(base_url=server.http_url, timeout=60) as client:
        if route == "/tts":
            files = {"voice_wav": ("me.wav", big, "audio/wav")}
            response = client.post(route, data={"text": "Hi."}, files=files)
        else:
            response = client.post(route, content=big, headers={"content-type": "text/plain"})
        assert response.status_code == 413
        assert "request body over" in response.json()["error"]["message"]
        assert client.get("/health").status_code == 200  # the same client goes on
