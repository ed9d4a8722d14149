"""OpenAI's speech API as the ``openai`` package calls it (issue 40), against a real server
process on 127.0.0.1: its defaults (mp3), every format decoded back to audio, streaming, SSE,
the JS SDK's CORS preflight, and every refusal in OpenAI's error shape."""

from __future__ import annotations

import base64
import http.client
import io
import json
import os
from collections.abc import Iterator
from pathlib import Path

import av
import httpx
import numpy as np
import openai
import pytest
from openai import AsyncOpenAI, OpenAI
from openai._streaming import SSEDecoder
from polling import poll_until
from server_process import ServerProcess

FORMATS = ("mp3", "opus", "aac", "flac", "wav", "pcm")
SAMPLE_RATE = 24000
TEXT = "One two three, four five six."
ORIGIN = "http://app.example"
JS_SDK_HEADERS = (
    "authorization", "content-type", "x-stainless-arch", "x-stainless-lang", "x-stainless-os",
    "x-stainless-package-version", "x-stainless-retry-count", "x-stainless-runtime",
    "x-stainless-runtime-version", "x-stainless-timeout",
)  # fmt: skip
"""What the official JS SDK (``openai`` on npm) sends beside CORS-safelisted headers."""


@pytest.fixture(scope="module")
def cors_server(engine_pack_dir: Path) -> Iterator[ServerProcess]:
    process = ServerProcess(engine_pack_dir, "--cors-origin", ORIGIN).start()
    yield process
    process.stop()


def decode(data: bytes, response_format: str) -> np.ndarray:
    """The samples (float, 24 kHz mono) of a response body, decoded by FFmpeg (PyAV); Opus
    decodes at 48 kHz (as every Opus decoder does), resampled here."""
    if response_format == "pcm":
        return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768
    resampler = av.AudioResampler(format="flt", layout="mono", rate=SAMPLE_RATE)
    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.audio[0]
        assert stream.codec_context.channels == 1
        assert stream.sample_rate == (48000 if response_format == "opus" else SAMPLE_RATE)
        frames = [out for f in container.decode(stream) for out in resampler.resample(f)]
    frames += resampler.resample(None)
    return np.concatenate([f.to_ndarray().reshape(-1) for f in frames] or [np.zeros(0, "f4")])


def level(samples: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(samples, dtype=np.float64))))


def speech_pcm(server: ServerProcess, text: str = TEXT) -> np.ndarray:
    client = OpenAI(api_key="x", base_url=f"{server.http_url}/v1")
    body = client.audio.speech.create(
        model="tts-1", voice="alloy", input=text, response_format="pcm"
    ).content
    return decode(body, "pcm")


def assert_same_audio(decoded: np.ndarray, reference: np.ndarray) -> None:
    """As long as the reference (give or take a coder's priming and last frame: 100 ms) and
    as loud (within a factor 1.5)."""
    assert abs(decoded.size - reference.size) <= SAMPLE_RATE // 10, (decoded.size, reference.size)
    assert 1 / 1.5 < level(decoded) / level(reference) < 1.5


def test_sdk_defaults_get_mp3(server: ServerProcess) -> None:
    client = OpenAI(api_key="x", base_url=f"{server.http_url}/v1")
    response = client.audio.speech.create(model="tts-1", voice="alloy", input=TEXT)
    assert response.response.headers["content-type"] == "audio/mpeg"
    decoded = decode(response.content, "mp3")
    assert_same_audio(decoded, speech_pcm(server))


@pytest.mark.parametrize("response_format", FORMATS)
async def test_every_format_streams_and_decodes_back(
    server: ServerProcess, response_format: str
) -> None:
    reference = speech_pcm(server)
    client = AsyncOpenAI(api_key="x", base_url=f"{server.http_url}/v1")
    async with client.audio.speech.with_streaming_response.create(
        model="tts-1", voice="alloy", input=TEXT, response_format=response_format
    ) as response:
        body = b"".join([chunk async for chunk in response.iter_bytes()])
    await client.close()
    assert_same_audio(decode(body, response_format), reference)


@pytest.mark.parametrize("response_format", ["mp3", "opus", "flac"])
async def test_first_bytes_come_while_it_still_speaks(
    endless_server: ServerProcess, response_format: str
) -> None:
    """The first bytes arrive while the stream is speaking (a long reply from a pack whose
    chunks run to their limit); leaving early ends it. A FLAC reply is sent whole at its
    end: its status and headers come while it speaks."""
    client = AsyncOpenAI(api_key="x", base_url=f"{endless_server.http_url}/v1")
    async with client.audio.speech.with_streaming_response.create(
        model="tts-1", voice="alloy", input="On and on. " * 40, response_format=response_format
    ) as response:
        assert response.status_code == 200
        if response_format != "flac":
            first = await anext(response.iter_bytes())
            assert first
        assert endless_server.metric("pocket_tts_streams") == 1
    await client.close()
    await poll_until(
        lambda: endless_server.metric("pocket_tts_streams") == 0, what="the stream to end"
    )


def test_flac_is_a_whole_file_soundfile_reads(server: ServerProcess) -> None:
    """libsndfile (``soundfile``) reads a FLAC reply at its full length, the WAV reply's;
    FFmpeg (PyAV) decodes it too; WAV stays streamed (its sizes say "unknown")."""
    import soundfile

    client = OpenAI(api_key="x", base_url=f"{server.http_url}/v1")

    def reply(response_format: str) -> bytes:
        return client.audio.speech.create(
            model="tts-1", voice="alloy", input=TEXT, response_format=response_format
        ).content

    wav, flac = reply("wav"), reply("flac")
    assert wav[4:8] == b"\xff\xff\xff\xff"  # streamed: no size known at the start
    wav_samples = (len(wav) - 44) // 2
    samples, rate = soundfile.read(io.BytesIO(flac), dtype="float32")
    print(f"FLAC {samples.shape[0]} samples, WAV {wav_samples}, FLAC {len(flac)} bytes")
    assert rate == SAMPLE_RATE and samples.shape[0] == wav_samples
    assert decode(flac, "flac").size == wav_samples


async def test_clients_leaving_mid_encode_leave_the_server_serving(
    endless_server: ServerProcess,
) -> None:
    """A client that leaves while a frame is being encoded on a worker thread: the encoder is
    closed after that call returns, never beside it (which crashed the process)."""
    async with httpx.AsyncClient(base_url=endless_server.http_url, timeout=60) as client:
        for i in range(16):
            response_format = ("mp3", "opus", "aac", "flac")[i % 4]
            body = {"model": "tts-1", "voice": "alloy", "input": "On and on. " * 40}
            body["response_format"] = response_format
            async with client.stream("POST", "/v1/audio/speech", json=body) as response:
                # A FLAC reply's bytes come at its end: its client leaves mid-encode unread.
                assert response.status_code == 200
                if response_format != "flac":
                    assert await anext(response.aiter_bytes())
        assert (await client.get("/health")).status_code == 200
    await poll_until(
        lambda: endless_server.metric("pocket_tts_streams") == 0, what="the streams to end"
    )


def test_sse_events_carry_the_audio(server: ServerProcess) -> None:
    client = OpenAI(api_key="x", base_url=f"{server.http_url}/v1")
    with client.audio.speech.with_streaming_response.create(
        model="gpt-4o-mini-tts", voice="alloy", input=TEXT, response_format="pcm",
        stream_format="sse",
    ) as response:  # fmt: skip
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [e.json() for e in SSEDecoder().iter_bytes(response.iter_bytes())]
    *deltas, done = events
    assert deltas and {e["type"] for e in deltas} == {"speech.audio.delta"}
    audio = b"".join(base64.b64decode(e["audio"]) for e in deltas)
    assert_same_audio(decode(audio, "pcm"), speech_pcm(server))
    assert done["type"] == "speech.audio.done"
    frames = len(audio) // (1920 * 2)
    assert done["usage"] == {"input_tokens": 0, "output_tokens": frames, "total_tokens": frames}


def test_models_and_kokoro_voices(server: ServerProcess) -> None:
    client = OpenAI(api_key="x", base_url=f"{server.http_url}/v1")
    assert {"tts-1", "pocket-tts"} <= {m.id for m in client.models.list()}
    assert server.json("/v1/audio/voices") == (200, {"voices": ["alba", "marius"]})


def test_models_retrieve_each_advertised_model(server: ServerProcess) -> None:
    client = OpenAI(api_key="x", base_url=f"{server.http_url}/v1")
    for listed in client.models.list():
        assert client.models.retrieve(listed.id).id == listed.id
    with pytest.raises(openai.NotFoundError, match="no model 'whisper-1'"):
        client.models.retrieve("whisper-1")


def test_js_sdk_preflight_and_call_from_an_allowed_origin(cors_server: ServerProcess) -> None:
    """What a browser sends before the JS SDK's POST, then the POST itself."""
    preflight = {
        "Origin": ORIGIN,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": ",".join(JS_SDK_HEADERS),
    }
    with httpx.Client(base_url=cors_server.http_url) as client:
        answer = client.options("/v1/audio/speech", headers=preflight)
        assert answer.status_code == 200
        assert answer.headers["access-control-allow-origin"] == ORIGIN
        allowed = {
            h.strip().lower() for h in answer.headers["access-control-allow-headers"].split(",")
        }
        assert set(JS_SDK_HEADERS) <= allowed
        elsewhere = client.options(
            "/v1/audio/speech", headers={**preflight, "Origin": "http://evil.example"}
        )
        assert "access-control-allow-origin" not in elsewhere.headers
        odd = client.options(
            "/v1/audio/speech", headers={**preflight, "Access-Control-Request-Headers": "x-other"}
        )
        assert odd.status_code == 400
        body = {"model": "tts-1", "voice": "alloy", "input": "Hi.", "response_format": "pcm"}
        sdk = {"Origin": ORIGIN, "x-stainless-lang": "js", "x-stainless-os": "Unknown"}
        call = client.post("/v1/audio/speech", json=body, headers=sdk)
        assert call.status_code == 200 and call.content
        assert call.headers["access-control-allow-origin"] == ORIGIN


def openai_error(response: httpx.Response) -> dict:
    """The error of a response in OpenAI's shape (checked)."""
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert isinstance(error["message"], str) and error["message"]
    return error


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"voice": ["alloy"]}, "voice"),
        ({"voice": {"name": "alloy"}}, "voice"),
        ({"voice": {"id": 3}}, "voice"),
        ({"voice": "nobody"}, "voice"),
        ({"response_format": ["mp3"]}, "response_format"),
        ({"response_format": {"mp3": 1}}, "response_format"),
        ({"response_format": "ogg"}, "response_format"),
        ({"input": ["Hi."]}, "input"),
        ({"input": {"text": "Hi."}}, "input"),
        ({"input": 3}, "input"),
        ({"model": {"id": "tts-1"}}, "model"),
        ({"stream_format": ["sse"]}, "stream_format"),
        ({"instructions": "Speak cheerfully."}, "instructions"),
        ({"instructions": ["x"]}, "instructions"),
    ],
)
def test_wrong_fields_are_400_naming_the_field(
    server: ServerProcess, fields: dict, param: str
) -> None:
    body = {"model": "tts-1", "voice": "alloy", "input": "Hi.", **fields}
    with httpx.Client(base_url=server.http_url) as client:
        response = client.post("/v1/audio/speech", json=body)
        assert response.status_code == 400, response.text
        error = openai_error(response)
        assert error["param"] == param and error["type"] == "invalid_request_error"
        assert client.get("/health").status_code == 200  # the connection still serves


def test_the_sdk_reads_our_errors(server: ServerProcess) -> None:
    client = OpenAI(api_key="x", base_url=f"{server.http_url}/v1", max_retries=0)
    with pytest.raises(openai.BadRequestError) as refused:
        client.audio.speech.create(
            model="tts-1", voice="alloy", input="Hi.", instructions="Whisper."
        )
    assert refused.value.param == "instructions"
    assert "instructions are not supported" in refused.value.message
    with pytest.raises(openai.NotFoundError):
        client.get("/no/such/route", cast_to=object)


def test_voice_as_an_object(server: ServerProcess) -> None:
    client = OpenAI(api_key="x", base_url=f"{server.http_url}/v1")
    response = client.audio.speech.create(
        model="tts-1", voice={"id": "marius"}, input=TEXT, response_format="wav"
    )
    assert_same_audio(decode(response.content, "wav"), speech_pcm(server))


def test_404_405_and_deep_json_in_openai_shape(server: ServerProcess) -> None:
    with httpx.Client(base_url=server.http_url) as client:
        missing = client.get("/v1/audio/speeches")
        assert missing.status_code == 404 and openai_error(missing)["code"] == "not_found"
        wrong = client.get("/v1/audio/speech")
        assert wrong.status_code == 405 and "POST" in wrong.headers["allow"]
        assert openai_error(wrong)["code"] == "method_not_allowed"
        deep = "[" * 100_000 + "]" * 100_000
        nested = client.post(
            "/v1/audio/speech", content=deep, headers={"content-type": "application/json"}
        )
        assert nested.status_code == 400 and "JSON object" in openai_error(nested)["message"]


EMPTY_SAMPLES = {"mp3": None, "aac": None, "pcm": None, "wav": 0, "flac": 0, "opus": None}


@pytest.mark.parametrize("response_format", FORMATS)
@pytest.mark.parametrize("text", ["👋", "..."])
def test_nothing_to_say_is_an_empty_stream_on_a_kept_connection(
    server: ServerProcess, response_format: str, text: str
) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:
        body = {"model": "tts-1", "voice": "alloy", "input": text}
        body["response_format"] = response_format
        connection.request("POST", "/v1/audio/speech", json.dumps(body))
        response = connection.getresponse()
        data = response.read()
        assert response.status == 200 and not response.will_close
        if response_format in ("mp3", "aac", "pcm"):
            assert data == b""  # a stream of no frames
        elif response_format == "opus":
            assert data.startswith(b"OggS") and b"OpusHead" in data and b"OpusTags" in data
        else:
            assert decode(data, response_format).size == 0
        sock = connection.sock
        body["input"] = "Hello."
        connection.request("POST", "/v1/audio/speech", json.dumps(body))
        again = connection.getresponse()
        assert again.status == 200 and decode(again.read(), response_format).size > 0
        assert connection.sock is sock  # the same connection served both
    finally:
        connection.close()


class HeldServer(ServerProcess):
    """A server whose model load waits for a line on a named pipe."""

    ready_logs = (r"Uvicorn running on",)

    def __init__(self, pack_dir: Path, fifo: Path) -> None:
        super().__init__(pack_dir)
        self.launcher = (str(Path(__file__).with_name("held_load.py")), str(fifo))


def test_503_with_retry_after_while_the_model_loads(engine_pack_dir: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "load"
    os.mkfifo(fifo)
    held = HeldServer(engine_pack_dir, fifo).start()
    try:
        with httpx.Client(base_url=held.http_url) as client:
            body = {"model": "tts-1", "voice": "alloy", "input": "Hi."}
            for response in (
                client.post("/v1/audio/speech", json=body),
                client.get("/v1/audio/voices"),
                client.post("/tts", data={"text": "Hi."}),
            ):
                assert response.status_code == 503, response.text
                assert int(response.headers["retry-after"]) > 0
                error = openai_error(response)
                assert error["code"] == "service_unavailable" and "loading" in error["message"]
            assert client.get("/v1/models").status_code == 200
            with open(fifo, "w") as pipe:
                pipe.write("go\n")
            held.wait_for_logs(r"model loaded")
            assert client.post("/v1/audio/speech", json=body).status_code == 200
    finally:
        held.stop()
