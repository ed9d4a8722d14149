"""Shared test fixtures (kept minimal)."""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from pathlib import Path

import pytest
from huggingface_hub import constants as hf_constants

sys.path.insert(0, str(Path(__file__).parent))  # lets tests import helpers such as sp_model

from sp_model import train_sentencepiece, write_tokenizer_json

# Quantized copies (narrow weights) go to a cache of this run, never the user's ~/.cache; set
# before any test loads a pack, inherited by the CLI subprocesses.
os.environ.setdefault("PIPECAT_POCKET_TTS_CACHE", tempfile.mkdtemp(prefix="pocket-tts-cache-"))


@pytest.fixture(scope="session", autouse=True)
def kernels_compiled() -> None:
    """The numba kernels compiled (or read from this checkout's cache) before any test, so no
    CLI subprocess prints the first-compile line in the middle of output a test compares."""
    from pipecat_pocket_tts.engine.backends.numpy.kernels import compiled

    compiled.optional()


@pytest.fixture(scope="session", autouse=True)
def collector_left_alone() -> None:
    """No service freezes this process's heap: ``gc.freeze()`` after a model load would keep
    the cyclic garbage of whatever was alive then (earlier tests' models and pipelines) for
    good. ``tests/service/test_collector.py`` checks the freeze in child processes."""
    if importlib.util.find_spec("pipecat") is None:
        return  # the engine alone, without Pipecat (.ci/aarch64): no service to freeze it
    from pipecat_pocket_tts.service.engine_load import leave_collector_alone

    leave_collector_alone()


@pytest.fixture(scope="session")
def sp_model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 4000-piece SentencePiece unigram model (byte fallback, digits split, identity)."""
    return train_sentencepiece(tmp_path_factory.mktemp("sp") / "tokenizer.model")


@pytest.fixture(scope="session")
def tokenizer_json_path(sp_model_path: Path) -> Path:
    """The same vocabulary as an HF tokenizer.json."""
    return write_tokenizer_json(sp_model_path, sp_model_path.with_name("tokenizer.json"))


@pytest.fixture
def hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty HF cache and offline mode (env for subprocesses, constants for this one).

    Fill it with ``hub_cache.cache_put``.
    """
    cache = tmp_path / "hf-cache"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)
    return cache


@pytest.fixture
def no_numba(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process without numba: ``import numba`` fails, and the kernel modules (imported
    from the start of the run) and the warmed-up module ``compiled`` holds are forgotten, so
    the next use of the kernels tries the import again; all put back after the test."""
    from pipecat_pocket_tts.engine.backends.numpy.kernels import catalog as kernels
    from pipecat_pocket_tts.engine.backends.numpy.kernels import compiled

    monkeypatch.setitem(sys.modules, "numba", None)  # import numba → ImportError
    for name in kernels.MODULES:
        monkeypatch.delitem(sys.modules, f"{kernels.__package__}.{name}", raising=False)
    # compiled.py keeps the module it warmed up: a fresh state in its place imports again
    monkeypatch.setattr(compiled, "_kernels", compiled._Kernels())


# ======================================================================================
# Engine tests (test_session.py, test_synthesis.py, test_tts_api.py): tiny packs, each
# built once per test run. Owner: the engine engineer. Append-only block.
# ======================================================================================


@pytest.fixture(scope="session")
def engine_pack_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny standard English pack with voices alba and marius (EOS as soon as allowed)."""
    from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict

    folder = tmp_path_factory.mktemp("engine_pack") / "english"
    return build_pack(folder, tiny_config_dict("standard"), voices=("alba", "marius"))


@pytest.fixture(scope="session")
def engine_endless_pack_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Like ``engine_pack_dir`` but the EOS head never fires: chunks run to their limit."""
    from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict

    folder = tmp_path_factory.mktemp("engine_endless_pack") / "english"
    return build_pack(folder, tiny_config_dict("standard"), voices=("alba",), eos_logit=-30.0)


@pytest.fixture(scope="session")
def engine_small_pack_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny pack of the other structure (small models): its voices fit no standard pack."""
    from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict

    folder = tmp_path_factory.mktemp("engine_small_pack") / "english"
    return build_pack(folder, tiny_config_dict("small"), voices=("alba",))


@pytest.fixture(scope="session")
def engine_tts(engine_pack_dir: Path):
    """The tiny standard pack loaded once on the NumPy backend."""
    from pipecat_pocket_tts.engine import PocketTTS

    return PocketTTS.load("english", backend="numpy", model_dir=engine_pack_dir)


@pytest.fixture(scope="session")
def engine_endless_tts(engine_endless_pack_dir: Path):
    """The never-EOS tiny pack loaded once on the NumPy backend."""
    from pipecat_pocket_tts.engine import PocketTTS

    return PocketTTS.load("english", backend="numpy", model_dir=engine_endless_pack_dir)


@pytest.fixture
def tts(engine_tts):
    """The tiny model with a scheduler of its own, closed after the test."""
    from pipecat_pocket_tts.engine import PocketTTS
    from pipecat_pocket_tts.engine.model.options import LoadOptions

    clone = PocketTTS(
        config=engine_tts.config,
        backend=engine_tts.backend,
        tokenizer=engine_tts.tokenizer,
        pack=engine_tts.pack,
        options=LoadOptions(backend="numpy"),
    )
    yield clone
    clone.scheduler.close()
