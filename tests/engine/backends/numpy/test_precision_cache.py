"""The cached narrow copy: later loads map it, never re-quantize, and speak identically."""

from __future__ import annotations

import logging
import mmap
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from pipecat_pocket_tts.engine import PocketTTS
from pipecat_pocket_tts.engine.backends.numpy.layers import linears
from pipecat_pocket_tts.engine.backends.numpy.weights import narrow_cache
from pipecat_pocket_tts.engine.backends.numpy.weights.checkpoint import is_narrow_key
from pipecat_pocket_tts.engine.backends.numpy.weights.safetensors_file import (
    map_tensors,
    read_header,
)

TEXT = "Cached weights speak the same."
NARROW = ("bf16", "int8")


@pytest.fixture
def cache_root(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv(narrow_cache.CACHE_ENV, str(root))
    return root


@pytest.fixture
def pack(engine_pack_dir, tmp_path) -> Path:
    """A private copy of the tiny standard pack (tests here rewrite its weights)."""
    return Path(shutil.copytree(engine_pack_dir, tmp_path / "english"))


@pytest.fixture
def narrowings(monkeypatch) -> list[str]:
    """Records each weight narrowed from fp32 (int8 quantization or bf16 rounding)."""
    calls: list[str] = []
    for name in ("quantize_int8", "to_bfloat16_bits"):
        original = getattr(linears, name)

        def counted(*args, _original=original, _name=name):
            calls.append(_name)
            return _original(*args)

        monkeypatch.setattr(linears, name, counted)
    return calls


def speak(pack: Path, precision: str) -> tuple[PocketTTS, np.ndarray]:
    tts = PocketTTS.load(backend="numpy", model_dir=pack, precision=precision)
    return tts, tts.synthesize(TEXT, voice="alba", temperature=0.0)


def cache_files(root: Path) -> list[Path]:
    return sorted((root / "narrow").glob("*")) if (root / "narrow").exists() else []


def _mapped(array: np.ndarray) -> bool:
    """True when ``array`` is a view of a memory map (here: of the cached copy)."""
    base = array
    while isinstance(base, np.ndarray | memoryview):
        base = base.obj if isinstance(base, memoryview) else base.base
    return isinstance(base, mmap.mmap)


@pytest.mark.parametrize("precision", NARROW)
def test_later_loads_map_the_copy_and_speak_identically(pack, cache_root, narrowings, precision):
    tts, first = speak(pack, precision)
    linear = tts.backend.flow_lm.layers[0].linear1
    assert all(_mapped(array) for array in linear.arrays().values())  # swapped for the copy
    layers = len(PocketTTS.load(backend="numpy", model_dir=pack).backend.flow_lm.layers)
    assert len(narrowings) == 4 * layers  # the first load narrowed every linear once
    (copy,) = cache_files(cache_root)
    assert copy.name.endswith(f".{precision}.safetensors")
    metadata, arrays = map_tensors(copy)
    assert metadata["precision"] == precision and metadata["format"] == narrow_cache.FORMAT_VERSION
    assert all(is_narrow_key(key.rsplit(".", 1)[0]) for key in arrays)

    narrowings.clear()
    tts, second = speak(pack, precision)
    assert narrowings == []  # nothing quantized: the copy was read
    np.testing.assert_array_equal(first, second)
    linear = tts.backend.flow_lm.layers[0].linear1
    assert all(_mapped(array) for array in linear.arrays().values())


def test_a_cached_load_never_reads_the_fp32_bytes_of_narrow_tensors(pack, cache_root):
    _, first = speak(pack, "int8")
    weights = pack / "model.safetensors"
    before = weights.stat()
    with open(weights, "r+b") as f:  # scribble over every narrow tensor, keep size and mtime
        header, _metadata, start = read_header(f, before.st_size, weights)
        for key, info in header.items():
            if is_narrow_key(key):
                begin, end = info["data_offsets"]
                f.seek(start + begin)
                f.write(np.full(end - begin, 0x7F, np.uint8).tobytes())
    os.utime(weights, ns=(before.st_atime_ns, before.st_mtime_ns))
    _, second = speak(pack, "int8")
    np.testing.assert_array_equal(first, second)


def test_a_copy_of_other_weights_is_rebuilt(pack, cache_root, narrowings, caplog):
    _, first = speak(pack, "int8")
    weights = pack / "model.safetensors"
    stat = weights.stat()
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # "new" weights
    narrowings.clear()
    with caplog.at_level(logging.INFO, logger=narrow_cache.__name__):
        _, second = speak(pack, "int8")
    assert narrowings and "mtime_ns differ" in caplog.text
    np.testing.assert_array_equal(first, second)
    (copy,) = cache_files(cache_root)
    assert map_tensors(copy)[0]["mtime_ns"] == str(stat.st_mtime_ns + 10**9)
    narrowings.clear()
    speak(pack, "int8")
    assert narrowings == []  # the rewritten copy serves the next load


@pytest.mark.parametrize("damage", ("truncate", "garbage", "wrong_shape"))
def test_a_damaged_copy_is_rebuilt(pack, cache_root, narrowings, caplog, damage):
    _, first = speak(pack, "int8")
    (copy,) = cache_files(cache_root)
    if damage == "truncate":
        copy.write_bytes(copy.read_bytes()[: copy.stat().st_size // 2])
    elif damage == "garbage":
        copy.write_bytes(b"\xff" * 64)
    else:  # a well-formed file whose tensors do not fit the checkpoint
        metadata, arrays = map_tensors(copy)
        key = next(iter(arrays))
        arrays = {**arrays, key: np.zeros((1, 1), arrays[key].dtype)}
        from safetensors.numpy import save_file

        save_file({k: np.ascontiguousarray(v) for k, v in arrays.items()}, copy, metadata=metadata)
    narrowings.clear()
    with caplog.at_level(logging.WARNING, logger=narrow_cache.__name__):
        _, second = speak(pack, "int8")
    assert narrowings and "rebuilding" in caplog.text
    np.testing.assert_array_equal(first, second)
    narrowings.clear()
    speak(pack, "int8")
    assert narrowings == []


def test_an_unwritable_cache_quantizes_in_memory_and_says_so_once(
    pack, tmp_path, monkeypatch, narrowings, caplog
):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(narrow_cache.CACHE_ENV, str(blocker / "cache"))  # mkdir fails, even as root
    with caplog.at_level(logging.INFO, logger=narrow_cache.__name__):
        _, first = speak(pack, "int8")
        quantized = len(narrowings)
        _, second = speak(pack, "int8")
    assert quantized and len(narrowings) == 2 * quantized  # quantized at each load
    assert caplog.text.count("not writable") == 1
    assert all(r.levelno == logging.INFO for r in caplog.records if "not writable" in r.message)
    np.testing.assert_array_equal(first, second)


def test_the_copy_is_written_whole_and_leaves_no_temporary_file(pack, cache_root):
    speak(pack, "int8")
    speak(pack, "bf16")
    names = [p.name for p in cache_files(cache_root)]
    assert len(names) == 2 and not any(name.startswith(".") for name in names)


def test_the_cache_root_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(narrow_cache.CACHE_ENV, str(tmp_path / "x"))
    assert narrow_cache.cache_root() == tmp_path / "x"
    monkeypatch.delenv(narrow_cache.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert narrow_cache.cache_root() == tmp_path / "xdg" / "pipecat_pocket_tts"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert narrow_cache.cache_root() == Path.home() / ".cache" / "pipecat_pocket_tts"


def test_processes_writing_the_same_copy_at_once_leave_one_whole_copy(pack, cache_root):
    tts, first = speak(pack, "int8")
    linears = {
        f"flow_lm.transformer.layers.{i}.{name}": getattr(layer, attr)
        for i, layer in enumerate(tts.backend.flow_lm.layers)
        for name, attr in (
            ("self_attn.in_proj.weight", "in_proj"),
            ("self_attn.out_proj.weight", "out_proj"),
            ("linear1.weight", "linear1"),
            ("linear2.weight", "linear2"),
        )
    }
    shapes = {key: linear.shape for key, linear in linears.items()}
    writers = [
        narrow_cache.NarrowCache(pack / "model.safetensors", "int8", shapes) for _ in range(4)
    ]
    with ThreadPoolExecutor(len(writers)) as pool:  # each write: own temporary file, one rename
        assert all(pool.map(lambda cache: cache.store(linears), writers))
    assert len(cache_files(cache_root)) == 1
    assert writers[0].load() is not None
    np.testing.assert_array_equal(first, speak(pack, "int8")[1])


def test_fp32_writes_no_copy(pack, cache_root):
    speak(pack, "fp32")
    assert cache_files(cache_root) == []
