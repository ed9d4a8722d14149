"""The library without a network: one probe per process, then the cache only, one clear error.

The hub is a closed local port (connections refused at once) and the HF cache starts empty.
huggingface_hub's HTTP layer is wrapped: entering it at all (where its retries live) fails the
test at once, so a regression shows as a failure, not as 45 s of retries.
"""

from __future__ import annotations

import importlib
import sys
import threading
from pathlib import Path

import pytest
from hub_cache import cache_put
from huggingface_hub import constants as hf_constants
from huggingface_hub.utils import _http as hf_http
from pipecat.frames.frames import DataFrame, ErrorFrame, TTSAudioRawFrame, TTSSpeakFrame
from pipecat.tests.utils import run_test
from test_first_hour import closed_port, run_cli

from pipecat_pocket_tts import PocketTTSService
from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict
from pipecat_pocket_tts.engine import (
    HubUnreachableError,
    PackFilesMissingError,
    PocketTTS,
)
from pipecat_pocket_tts.engine.backends.numpy.weights import pack_files as numpy_files
from pipecat_pocket_tts.engine.model import hub_reachability
from pipecat_pocket_tts.engine.model.config import get_config

PACK = "english_2m_2026-10"  # the smallest registry config: its pack is built in ~3 s
PROXIES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


class HttpEntered(RuntimeError):
    """huggingface_hub was about to make an HTTP request."""


@pytest.fixture
def http_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every entry into huggingface_hub's HTTP layer (its session and its retry loop)."""
    calls: list[str] = []

    def refuse(name: str):
        def entered(*args, **kwargs):
            calls.append(name)
            raise HttpEntered(f"huggingface_hub.{name} was called")

        return entered

    # huggingface_hub >= 2.4 looks up an "agent harness" list for its user agent once per
    # process (one request, 3 s timeout, no retries, any failure ignored): not a download.
    try:
        telemetry = importlib.import_module("huggingface_hub.utils._detect_agent")
    except ImportError:  # older huggingface_hub: no such lookup
        telemetry = None
    if telemetry is not None and hasattr(telemetry, "_EMPTY_REGISTRY"):
        monkeypatch.setattr(telemetry, "_registry", telemetry._EMPTY_REGISTRY)
    monkeypatch.setattr(hf_http, "_http_backoff_base", refuse("_http_backoff_base"))
    original = hf_http.get_session
    for module in [m for n, m in sys.modules.items() if n.startswith("huggingface_hub")]:
        if getattr(module, "get_session", None) is original:
            monkeypatch.setattr(module, "get_session", refuse("get_session"))
    return calls


@pytest.fixture
def probe(monkeypatch: pytest.MonkeyPatch) -> hub_reachability._ProcessProbe:
    """A fresh process probe (as in a new process); its ``probes`` count the probes run."""
    fresh = hub_reachability._ProcessProbe()
    monkeypatch.setattr(hub_reachability, "_PROBE", fresh)
    return fresh


@pytest.fixture
def hub_down(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    http_calls: list[str],
    probe: hub_reachability._ProcessProbe,
) -> Path:
    """HF_ENDPOINT on a closed local port, HF_HUB_OFFLINE unset, no proxy, an empty cache."""
    endpoint = f"http://127.0.0.1:{closed_port()}"
    cache = tmp_path / "hf-home" / "hub"
    cache.mkdir(parents=True)
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setenv("HF_HOME", str(cache.parent))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    for name in PROXIES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(hf_constants, "ENDPOINT", endpoint)
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)
    return cache


@pytest.fixture(scope="module")
def registry_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Random weights for the registry config ``PACK`` (voice alba), in the NumPy layout."""
    return build_pack(tmp_path_factory.mktemp("registry") / PACK, PACK, voices=("alba",))


def publish_pack(cache: Path, pack: Path) -> None:
    """Put ``pack``'s files in the HF cache where the hub has them, at their pinned commits."""
    config = get_config(PACK)
    voice = numpy_files.voice_hub_file(config, "alba")
    for hub, local in [
        (config.weights, pack / "model.safetensors"),
        (config.flow_lm.lookup_table.tokenizer_file, pack / "tokenizer.model"),
        (voice, pack / "embeddings" / "alba.safetensors"),
    ]:
        cache_put(cache, hub.repo, hub.revision, hub.path, local.read_bytes())


# -- an empty cache ----------------------------------------------------------------------------


def test_load_fails_at_once_with_one_clear_error(hub_down: Path, http_calls, probe) -> None:
    with pytest.raises(HubUnreachableError) as info:
        PocketTTS.load("english", backend="numpy")
    message = str(info.value)
    assert "\n" not in message
    assert "not in the Hugging Face cache and the hub is unreachable" in message
    assert "127.0.0.1" in message and "refused" in message.lower()
    assert "kyutai/pocket-tts/" in message  # tried the gated weights, then the ungated ones
    assert "kyutai/pocket-tts-without-voice-cloning/" in message
    assert "connect" in message and "HF_TOKEN" in message
    assert "model_dir=" in message and "devpack" in message
    assert info.value.reason.startswith("127.0.0.1:")
    assert isinstance(info.value, PackFilesMissingError)  # older handlers still catch it
    assert http_calls == []
    assert probe.probes == 1  # two files tried, one probe


def test_load_shared_fails_the_same_and_the_probe_is_not_repeated(
    hub_down: Path, http_calls, probe
) -> None:
    for _ in range(2):
        with pytest.raises(HubUnreachableError):
            PocketTTS.load_shared("english", backend="numpy")
    assert http_calls == [] and probe.probes == 1


def test_concurrent_first_loads_share_one_probe(hub_down: Path, http_calls, probe) -> None:
    failures: list[BaseException] = []
    start = threading.Barrier(4)

    def load() -> None:
        start.wait()
        try:
            PocketTTS.load("english", backend="numpy")
        except BaseException as exc:  # collected for the assertions below
            failures.append(exc)

    threads = [threading.Thread(target=load) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(failures) == 4 and all(isinstance(f, HubUnreachableError) for f in failures)
    assert probe.probes == 1 and http_calls == []


def test_a_coreml_pack_fails_the_same_way(hub_down: Path, http_calls, probe) -> None:
    from pipecat_pocket_tts.engine.backends.coreml.files import resolve_hub_coreml_pack

    with pytest.raises(HubUnreachableError, match=r"CoreML constants .* hub is unreachable"):
        resolve_hub_coreml_pack("english")
    assert http_calls == [] and probe.probes == 1


def test_hf_hub_offline_is_respected_and_never_probes(
    hub_down: Path, monkeypatch: pytest.MonkeyPatch, http_calls, probe
) -> None:
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(PackFilesMissingError) as info:
        PocketTTS.load("english", backend="numpy")
    assert not isinstance(info.value, HubUnreachableError)
    assert "HF_HUB_OFFLINE" in str(info.value)  # offline by choice: says how to go online
    assert probe.probes == 0 and http_calls == []


# -- a cache built by the test -------------------------------------------------------------


def test_a_cached_pack_loads_with_the_hub_unreachable(
    hub_down: Path, registry_pack: Path, http_calls, probe
) -> None:
    publish_pack(hub_down, registry_pack)
    tts = PocketTTS.load(PACK, backend="numpy")
    assert tts.pack.has_voice_cloning  # the gated weights, found in the cache
    assert tts.synthesize("Hi.", voice="alba", max_frames=2).size > 0
    assert http_calls == []
    assert probe.probes == 0  # pinned files in the cache need no request at all


def test_a_cached_hub_voice_at_main_is_used_when_the_hub_is_unreachable(
    hub_down: Path, registry_pack: Path, http_calls, probe
) -> None:
    from hub_cache import HUB_REPO, publish_voice

    state = (registry_pack / "embeddings" / "alba.safetensors").read_bytes()
    url = publish_voice(hub_down, "alba/voice.safetensors", state)  # at main, not a commit
    tts = PocketTTS.load(PACK, backend="numpy", model_dir=registry_pack)
    assert probe.probes == 0  # a local pack: nothing probed
    assert tts.check_voice(url).kind == "hub"
    tts.voice_state(url)  # main must be resolved: probed, unreachable, read from the cache
    assert probe.probes == 1 and http_calls == []
    with pytest.raises(HubUnreachableError, match=f"hf://{HUB_REPO}/alba/other"):
        tts.voice_state(f"hf://{HUB_REPO}/alba/other.safetensors")
    assert probe.probes == 1 and http_calls == []


def test_a_devpack_never_touches_the_network(
    hub_down: Path, registry_pack: Path, monkeypatch: pytest.MonkeyPatch, http_calls, probe
) -> None:
    def no_probe(*args, **kwargs):
        raise AssertionError("probed while loading a local pack")

    monkeypatch.setattr(hub_reachability, "unreachable_reason", no_probe)
    tts = PocketTTS.load(PACK, backend="numpy", model_dir=registry_pack)
    tts.synthesize("Hi.", voice="alba", max_frames=2)
    assert probe.probes == 0 and http_calls == []


# -- the service ---------------------------------------------------------------------------


class AfterTheError(DataFrame):
    """A frame sent after the failed turn: it passes through while the pipeline runs."""


async def test_the_service_reports_one_error_line_and_keeps_running(
    hub_down: Path, http_calls, probe
) -> None:
    tts = PocketTTSService(backend="numpy")  # the hub's english pack: not cached
    down, up = await run_test(
        tts,
        frames_to_send=[TTSSpeakFrame("Nobody hears this."), AfterTheError()],
        start_timeout=30.0,
    )
    errors = [f.error for f in up if isinstance(f, ErrorFrame)]
    assert errors, "no ErrorFrame for the failed load"
    assert "could not load pack 'english'" in errors[0] and "hub is unreachable" in errors[0]
    assert all("\n" not in e and "Traceback" not in e for e in errors)
    assert any(isinstance(f, AfterTheError) for f in down)
    assert not any(isinstance(f, TTSAudioRawFrame) for f in down)
    assert http_calls == [] and probe.probes == 1


# -- the command line ----------------------------------------------------------------------


def test_cli_download_and_hub_voices_fail_in_one_line_when_unreachable(tmp_path: Path) -> None:
    env = {
        "HF_ENDPOINT": f"http://127.0.0.1:{closed_port()}",
        "HF_HUB_CACHE": str(tmp_path / "empty-cache"),
        "HF_HUB_OFFLINE": "",
        **dict.fromkeys(PROXIES, ""),
    }
    result = run_cli("download", "english", env=env)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "the hub is unreachable" in lines[0] and "refused" in lines[0].lower()
    assert "download english`" not in lines[0]  # download does not suggest itself

    pack = build_pack(tmp_path / "pack", tiny_config_dict("standard"))
    out = tmp_path / "x.wav"
    voice = "hf://kyutai/tts-voices/alba-mackenna/casual.wav"
    result = run_cli(
        "say", "Hi.", "--model-dir", str(pack), "--voice", voice, "-o", str(out), env=env
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "the hub is unreachable" in lines[0], result.stderr
    assert "--model-dir" in lines[0] and not out.exists()
