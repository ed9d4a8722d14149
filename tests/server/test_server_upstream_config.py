"""``serve --language <upstream config>`` (issue 51): a real server process on 127.0.0.1
speaks a community model to an OpenAI call from the ``openai`` package, the config and its
files read from a local Hugging Face cache by hf://…@revision, and to a remote
``PocketTTSService`` naming the same config; a config and its files by http(s) URL are fetched
once (from a file server on 127.0.0.1)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import yaml
from community_config import MODEL, TEXT, VOICE, config_dict, publish, write_config
from file_server import FileServer
from huggingface_hub import constants
from openai import OpenAI
from pipecat.frames.frames import ErrorFrame, TTSAudioRawFrame, TTSSpeakFrame
from pipecat.tests.utils import run_test
from server_process import ServerProcess

from pipecat_pocket_tts import PocketTTSService
from pipecat_pocket_tts.engine import FRAME_SIZE, PocketTTS
from pipecat_pocket_tts.engine.backends import find_pack_files

MODEL_FILES = ("model.safetensors", "tokenizer.model")


@pytest.fixture(scope="module")
def config_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    cache = tmp_path_factory.mktemp("hf-cache")
    reference_url = publish(cache)
    saved = {k: os.environ.get(k) for k in ("HF_HUB_CACHE", "HF_HUB_OFFLINE")}
    os.environ.update(HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1")  # the child's environment
    empty = tmp_path_factory.mktemp("no-pack")  # --model-dir: an upstream config ignores it
    process = ServerProcess(empty, "--language", reference_url, "--default-voice", str(VOICE))
    try:
        process.start()
        yield process
    finally:
        process.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def test_an_openai_call_speaks_the_community_model(
    config_server: ServerProcess, tmp_path: Path
) -> None:
    client = OpenAI(api_key="x", base_url=f"{config_server.http_url}/v1")
    body = client.audio.speech.create(
        model="tts-1", voice="alloy", input=TEXT, response_format="pcm"
    ).content
    heard = np.frombuffer(body, dtype="<i2").astype(np.float32) / 32768
    with PocketTTS.load(str(write_config(tmp_path)), backend="numpy") as tts:  # the same files
        [chunk] = tts.text_preparer.split(TEXT)
    assert 0 < heard.size <= chunk.max_frames * FRAME_SIZE  # the chunk, within its frame budget
    assert float(np.sqrt(np.mean(np.square(heard)))) > 1e-4
    assert any("No text normalization for 'czech'" in line for line in config_server.log)


def test_a_config_and_its_files_by_url_are_fetched_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:

    monkeypatch.setattr(constants, "HF_HOME", str(tmp_path / "hf-home"))
    files = {f"/m/{name}": (MODEL / name).read_bytes() for name in MODEL_FILES}
    with FileServer(files) as server:
        raw = config_dict(weights_path=server.url("/m/model.safetensors"))
        raw["flow_lm"]["lookup_table"]["tokenizer_path"] = server.url("/m/tokenizer.model")
        files["/m/czech.yaml"] = yaml.safe_dump(raw, allow_unicode=True).encode()
        for _ in range(2):
            pack = find_pack_files(server.url("/m/czech.yaml"))
            assert pack.config.name == "czech" and pack.has_voice_cloning
        assert sorted(server.seen()) == sorted(files)  # each file once: then from the cache
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert find_pack_files(server.url("/m/czech.yaml")).weights == pack.weights


async def test_a_remote_service_speaks_the_servers_community_model(
    config_server: ServerProcess,
) -> None:
    tts = PocketTTSService(server_url=config_server.ws_url, language=config_server.args[1])
    down, up = await run_test(tts, frames_to_send=[TTSSpeakFrame(TEXT)], start_timeout=30.0)
    assert not [f for f in up if isinstance(f, ErrorFrame)]
    assert b"".join(f.audio for f in down if isinstance(f, TTSAudioRawFrame))
