"""The FlowLM's KV cache: one sequence's keys and values, their writes and the attention over
them.

A chunk's positions are ``[bos_before_voice?, voice frames…, text tokens…, generated frames…]``;
the capacity constants below size a fresh sequence for the longest voice prompt and one chunk.
"""

from __future__ import annotations

import math
import mmap

import numpy as np

from ....errors import ContextOverflowError
from ....model.config import MAX_TOKENS_PER_CHUNK
from ..kernels import compiled
from .linears import from_bfloat16_bits, to_bfloat16_bits

# The ``fast`` extra: one step's KV write and attention in one compiled pass. Imported and
# compiled at model load (``NumpyBackend``), never at import; a test sets None to run NumPy alone.
_kernels = compiled.AT_FIRST_USE

#: Longest voice prompt upstream builds: 30 s of audio at 12.5 frames/s, plus bos_before_voice.
MAX_VOICE_POSITIONS = 1 + 375
#: Most frames upstream generates for one chunk: ceil((tokens / 3 + 2 s) · 12.5) at 50 tokens.
# This works out to 234 frames.
MAX_FRAMES_PER_CHUNK = math.ceil((MAX_TOKENS_PER_CHUNK / 3.0 + 2.0) * 12.5)
#: Positions one text chunk needs on top of the voice: its tokens and its frames.
# This works out to 284 positions.
CHUNK_POSITIONS = MAX_TOKENS_PER_CHUNK + MAX_FRAMES_PER_CHUNK
#: Default KV capacity of a fresh sequence: the longest voice prompt plus one full chunk (660).
DEFAULT_CAPACITY = MAX_VOICE_POSITIONS + CHUNK_POSITIONS


class KVCache:
    """Keys and values of one sequence, preallocated; implements ``base.FlowState``.

    ``keys`` and ``values`` are [layers, kv_heads, capacity, head_dim] (head-major, so each
    head's filled prefix is one contiguous block for attention): float32, or with ``bfloat16``
    the bfloat16 bit patterns (uint16), which the narrow precisions keep: half the memory of a
    sequence and of the bytes every step's attention reads. Slots ``[0, position)`` are filled;
    the rest is zero pages the OS maps only when written. Entries go in through ``write`` and
    come out as float32 through ``keys_f32`` / ``values_f32``; a step writes its entry and
    attends over the cache in one call (``store_and_attend``).
    """

    def __init__(
        self,
        num_layers: int,
        kv_heads: int,
        head_dim: int,
        capacity: int = DEFAULT_CAPACITY,
        *,
        bfloat16: bool = False,
    ) -> None:
        if capacity < 1:
            raise ValueError(f"KV capacity must be positive, got {capacity}")
        shape = (num_layers, kv_heads, capacity, head_dim)
        dtype = np.dtype(np.uint16 if bfloat16 else np.float32)
        self.keys = _lazy_zeros(shape, dtype)
        self.values = _lazy_zeros(shape, dtype)
        self._position = 0

    @property
    def position(self) -> int:
        """Number of filled positions (the absolute position of the next entry)."""
        return self._position

    @property
    def capacity(self) -> int:
        return self.keys.shape[2]

    @property
    def num_layers(self) -> int:
        return self.keys.shape[0]

    @property
    def bfloat16(self) -> bool:
        """Whether entries are stored as bfloat16 (else float32)."""
        return self.keys.dtype == np.uint16

    def copy(self, capacity: int | None = None) -> KVCache:
        """An independent cache with the same filled part (only that part is copied)."""
        capacity = self.capacity if capacity is None else capacity
        if capacity < self._position:
            raise ValueError(f"capacity {capacity} is below the filled length {self._position}")
        _, kv_heads, _, head_dim = self.keys.shape
        out = KVCache(self.num_layers, kv_heads, head_dim, capacity, bfloat16=self.bfloat16)
        filled = self._position
        out.keys[:, :, :filled] = self.keys[:, :, :filled]
        out.values[:, :, :filled] = self.values[:, :, :filled]
        out._position = filled
        return out

    def write(self, layer: int, start: int, keys: np.ndarray, values: np.ndarray) -> None:
        """Store keys and values [n, kv_heads, head_dim] f32 of positions start … start + n - 1
        of ``layer`` (rounded to nearest even bfloat16 when the cache holds bfloat16)."""
        kernels = compiled.resolve(_kernels)
        # Round and store in one compiled pass.
        if self.bfloat16 and kernels is not None:
            kernels.store_bfloat16(np.ascontiguousarray(keys), self.keys[layer], start)
            kernels.store_bfloat16(np.ascontiguousarray(values), self.values[layer], start)
            return
        if self.bfloat16:
            keys, values = to_bfloat16_bits(keys), to_bfloat16_bits(values)
        end = start + keys.shape[0]
        self.keys[layer, :, start:end] = keys.transpose(1, 0, 2)
        self.values[layer, :, start:end] = values.transpose(1, 0, 2)

    def keys_f32(self, layer: int, start: int, stop: int) -> np.ndarray:
        """Keys of positions [start, stop) of ``layer`` as float32 [kv_heads, stop - start,
        head_dim]: a view of a float32 cache, a widened copy of a bfloat16 one."""
        return _as_float32(self.keys[layer, :, start:stop])

    def values_f32(self, layer: int, start: int, stop: int) -> np.ndarray:
        """Values of positions [start, stop) of ``layer``, as ``keys_f32``."""
        return _as_float32(self.values[layer, :, start:stop])

    def reserve(self, n: int) -> tuple[int, int]:
        """The slot range [start, end) of n new positions; raises ContextOverflowError if full."""
        start = self._position
        end = start + n
        if end > self.capacity:
            raise ContextOverflowError(
                f"the FlowLM context is full: {start} positions are filled and {n} more do not "
                f"fit in its capacity of {self.capacity}. Split the text into shorter chunks "
                f"(at most {MAX_TOKENS_PER_CHUNK} tokens), use a shorter voice prompt, or "
                "create the state with a larger capacity."
            )
        return start, end

    def advance(self, n: int) -> None:
        """Mark n more positions as filled (after they were written)."""
        self._position += n

    def store_and_attend(
        self,
        layer: int,
        start: int,
        q: np.ndarray,
        k: np.ndarray,
        v: np.ndarray,
        scale: np.float32,
    ) -> np.ndarray:
        """Store keys k and values v [n, kv_heads, Dh] at positions start… of ``layer``, then
        attend with queries q [n, H, Dh] at those positions over every filled one before them
        (causal; query head h reads kv head h // (H / kv_heads); logits times ``scale``).

        Returns:
            The attention output [n, H·Dh]. One position with numba: one call of
            ``kernels.store_and_attend`` on the cache as stored (float32 or bfloat16);
            otherwise ``write`` then NumPy on the cache widened to float32.
        """
        kernels = compiled.resolve(_kernels)
        if q.shape[0] != 1 or kernels is None:
            self.write(layer, start, k, v)
            return self._attend(q, layer, start, scale)
        heads, head_dim = q.shape[1:]
        out = np.empty((1, heads * head_dim), np.float32)
        kernels.store_and_attend(
            np.ascontiguousarray(q[0]),
            np.ascontiguousarray(k[0]),
            np.ascontiguousarray(v[0]),
            self.keys[layer],
            self.values[layer],
            start,
            scale,
            np.empty(start + 1, np.float32),
            out.reshape(heads, head_dim),
        )
        return out

    def _attend(self, q: np.ndarray, layer: int, start: int, scale: np.float32) -> np.ndarray:
        """Causal attention of queries q [n, H, Dh] at positions start… over the first
        P = start + n positions of ``layer`` → [n, H·Dh] (NumPy, on the cache widened to
        float32). Query head h reads kv head h // group."""
        n = q.shape[0]
        length = start + n
        # Shape [kv_heads, P, Dh].
        keys = self.keys_f32(layer, 0, length)
        values = self.values_f32(layer, 0, length)
        kv_heads, _, head_dim = keys.shape
        heads = q.shape[1]
        group = heads // kv_heads
        if n == 1:
            queries = q.reshape(kv_heads, group, head_dim)
        else:
            # Rows ordered by (head in group, query).
            queries = q.transpose(1, 0, 2).reshape(kv_heads, group * n, head_dim)
        # Shape [kv_heads, group·n, P].
        scores = queries @ keys.transpose(0, 2, 1)
        scores *= scale
        if n > 1:
            future = np.arange(length)[None, :] > (start + np.arange(n))[:, None]
            scores.reshape(kv_heads, group, n, length)[:, :, future] = -np.inf
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        out = scores @ values
        if n == 1:
            return out.reshape(1, kv_heads * group * head_dim)
        out = out.reshape(kv_heads, group, n, head_dim).transpose(2, 0, 1, 3)
        return out.reshape(n, heads * head_dim)


def _lazy_zeros(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """An array of zeros in its own anonymous memory map, backed by 4 KiB pages.

    Pages are mapped on first write and returned to the OS when the array is freed. NumPy's
    own large allocations ask for transparent huge pages, whose first touch can stall for
    tens of milliseconds (zeroing or compacting 2 MiB pages) — a stall a fresh copy of a
    voice state must not pay at the start of every chunk.
    """
    count = math.prod(shape)
    buffer = mmap.mmap(-1, max(dtype.itemsize * count, 1))
    return np.frombuffer(buffer, dtype, count=count).reshape(shape)


def _as_float32(entries: np.ndarray) -> np.ndarray:
    """KV entries as float32: float32 ones as they are, bfloat16 bits (uint16) widened."""
    return entries if entries.dtype == np.float32 else from_bfloat16_bits(entries)
