"""Reading safetensors files without torch: the header, memory-mapped views, widened arrays.

``iter_safetensors`` yields a checkpoint's tensors as float32 (F32 mapped read-only from the
file, BF16 / F16 widened one tensor at a time); ``map_tensors`` gives mapped views of every
tensor at its stored dtype (the cached narrow copies, ``narrow_cache.py``). Both check offsets
against the file size, so a file cut short is a ``WeightsMismatchError`` naming the fix.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np

from ....errors import WeightsMismatchError

#: Dtypes a checkpoint may store (widened to float32 on load).
_DTYPES = {"F32": np.dtype("<f4"), "BF16": np.dtype("<u2"), "F16": np.dtype("<f2")}
#: Dtypes ``map_tensors`` maps as they are.
RAW_DTYPES = {"F32": np.dtype("<f4"), "U16": np.dtype("<u2"), "I8": np.dtype("i1")}
#: What to do about a weights file cut short (an interrupted download or pack build).
TRUNCATED_FIX = (
    "the download or build was cut short. Delete the file and load again to download it anew "
    "(from the Hugging Face cache: `download <language>` once online), or rebuild the pack "
    "(`python -m pipecat_pocket_tts devpack DIR`)"
)


def iter_safetensors(
    path: str | os.PathLike[str],
    *,
    unmapped: Callable[[str], bool] | None = None,
    skip: Callable[[str], bool] | None = None,
) -> Iterator[tuple[str, np.ndarray]]:
    """Yield (key, float32 array) for every tensor of a safetensors file (no torch needed).

    F32 tensors are read-only views of one memory map of the file (copied only if misaligned),
    except those whose key ``unmapped`` accepts: those are read into fresh memory (for callers
    that convert and drop them). Keys ``skip`` accepts are checked but neither read nor
    yielded. BF16 / F16 tensors are read one at a time and widened, so the peak stays near
    the fp32 size.
    """
    path = Path(path)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        header, _metadata, data_start = read_header(f, size, path)
        mapped: mmap.mmap | None = None
        for key, info in header.items():
            dtype_name, shape, begin, count = _locate(path, key, info, _DTYPES, data_start, size)
            dtype = _DTYPES[dtype_name]
            if skip is not None and skip(key):
                continue
            if count == 0:
                yield key, np.zeros(shape, np.float32)
            elif dtype_name == "F32" and not (unmapped is not None and unmapped(key)):
                if mapped is None:
                    mapped = _map(f)
                raw = np.frombuffer(mapped, dtype=dtype, count=count, offset=begin)
                yield key, (raw if raw.flags.aligned else raw.copy()).reshape(shape)
            else:
                f.seek(begin)
                raw = np.fromfile(f, dtype=dtype, count=count)
                yield key, _widen(raw, dtype_name).reshape(shape)


def map_tensors(path: str | os.PathLike[str]) -> tuple[dict[str, str], dict[str, np.ndarray]]:
    """(metadata, {key: read-only mapped view at its stored dtype}) of a safetensors file.

    Only ``RAW_DTYPES`` are accepted; a misaligned tensor is copied. Raises
    ``WeightsMismatchError`` for a file that is not a well-formed safetensors file.
    """
    path = Path(path)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        header, metadata, data_start = read_header(f, size, path)
        located = [
            (key, _locate(path, key, info, RAW_DTYPES, data_start, size))
            for key, info in header.items()
        ]
        mapped = _map(f) if size > data_start else None
    arrays: dict[str, np.ndarray] = {}
    for key, (dtype_name, shape, begin, count) in located:
        dtype = RAW_DTYPES[dtype_name]
        if count == 0 or mapped is None:
            arrays[key] = np.zeros(shape, dtype)
            continue
        raw = np.frombuffer(mapped, dtype=dtype, count=count, offset=begin)
        arrays[key] = (raw if raw.flags.aligned else raw.copy()).reshape(shape)
    return metadata, arrays


def tensor_shapes(path: str | os.PathLike[str]) -> dict[str, tuple[int, ...]]:
    """{key: shape} of every tensor in a safetensors file (reads only the header)."""
    path = Path(path)
    with open(path, "rb") as f:
        header, _metadata, _start = read_header(f, os.fstat(f.fileno()).st_size, path)
    try:
        return {key: tuple(int(n) for n in info["shape"]) for key, info in header.items()}
    except (KeyError, TypeError, ValueError) as exc:
        raise WeightsMismatchError(f"{path}: a tensor has a malformed entry") from exc


def read_header(f, size: int, path: Path) -> tuple[dict, dict[str, str], int]:
    """Parse the JSON header of a safetensors file → (tensor infos, metadata, data offset)."""
    not_safetensors = f"{path} is not a safetensors file"
    if size < 8:
        raise WeightsMismatchError(f"{not_safetensors} (too short)")
    (header_len,) = struct.unpack("<Q", f.read(8))
    if header_len > size - 8:
        raise WeightsMismatchError(
            f"{not_safetensors} (bad header length; if truncated: {TRUNCATED_FIX})"
        )
    try:
        header = json.loads(f.read(header_len))
    except ValueError as exc:
        raise WeightsMismatchError(f"{not_safetensors} ({exc})") from exc
    if not isinstance(header, dict):
        raise WeightsMismatchError(f"{not_safetensors} (header is not a table)")
    metadata = header.pop("__metadata__", None)
    return header, metadata if isinstance(metadata, dict) else {}, 8 + header_len


def _locate(
    path: Path, key: str, info: object, dtypes: dict, data_start: int, size: int
) -> tuple[str, tuple[int, ...], int, int]:
    """(dtype name, shape, byte offset, element count) of one tensor, checked against the file."""
    dtype_name = info.get("dtype") if isinstance(info, dict) else None
    if dtype_name not in dtypes:
        raise WeightsMismatchError(
            f"{path}: tensor {key!r} has dtype {dtype_name}; only {', '.join(dtypes)} load"
        )
    try:
        shape = tuple(int(n) for n in info["shape"])
        begin, end = (data_start + int(o) for o in info["data_offsets"])
    except (KeyError, TypeError, ValueError) as exc:
        raise WeightsMismatchError(f"{path}: tensor {key!r} has a malformed entry") from exc
    count = int(np.prod(shape, dtype=np.int64))
    if end > size:
        raise WeightsMismatchError(
            f"{path} is truncated ({size} bytes, tensor {key!r} ends at byte {end}): "
            f"{TRUNCATED_FIX}"
        )
    if end - begin != count * dtypes[dtype_name].itemsize or begin < data_start:
        raise WeightsMismatchError(f"{path}: tensor {key!r} has inconsistent data offsets")
    return dtype_name, shape, begin, count


def _map(f) -> mmap.mmap:
    """A read-only map of the whole file, asked to be read ahead."""
    mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    if hasattr(mmap, "MADV_WILLNEED"):
        mapped.madvise(mmap.MADV_WILLNEED)
    return mapped


def drop_resident_pages(arrays: Iterable[object]) -> int:
    """Unmap the resident pages of every memory map behind the mapped views in ``arrays``.

    Loading reads more of a checkpoint than a model keeps reading: the finite check reads every
    tensor, tensors the model converts into its own arrays are read once, the cloning encoder
    and most embedding rows are never read again. Dropping the pages after the model is built
    leaves resident only what it reads afterwards, which comes back from the page cache on
    first touch (the file's bytes are unchanged). Returns how many maps were released (0 where
    the OS has no ``madvise``).
    """
    if not hasattr(mmap, "MADV_DONTNEED"):
        return 0
    maps: dict[int, mmap.mmap] = {}
    for array in arrays:
        base = array
        while isinstance(base, np.ndarray):
            base = base.base
        owner = base.obj if isinstance(base, memoryview) else base
        if isinstance(owner, mmap.mmap):
            maps[id(owner)] = owner
    for mapped in maps.values():
        mapped.madvise(mmap.MADV_DONTNEED)
    return len(maps)


def _widen(raw: np.ndarray, dtype_name: str) -> np.ndarray:
    """bf16 (as uint16 bits) or fp16 → a new float32 array (fp32 passes through)."""
    if dtype_name == "F32":
        return raw
    if dtype_name == "F16":
        return raw.astype(np.float32)
    widened = np.empty(raw.shape, np.uint32)
    widened[...] = raw
    widened <<= 16
    return widened.view(np.float32)
