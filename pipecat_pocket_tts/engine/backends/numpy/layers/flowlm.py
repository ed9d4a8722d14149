"""FlowLM in NumPy: text embedding, the causal transformer with its KV cache, and the heads.

Sequence layout of one chunk (every entry is one cache position):

    [bos_before_voice?, voice frames…, text tokens…, generated frames…]

``prefill`` appends conditioning embeddings [n, d_model]; ``step`` appends one latent (or BOS)
and returns the head input (out_norm, then z_proj when the config has it) and the EOS logit.
All math is float32 and follows upstream pocket-tts: pre-LayerNorm blocks (eps 1e-5), fused
bias-free ``in_proj`` laid out [q | k | v], grouped-query attention, interleaved RoPE at
absolute cache positions, full causal attention, gelu-tanh feed-forward.
"""

from __future__ import annotations

import math
import mmap
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ....errors import ContextOverflowError
from ....model.config import MAX_TOKENS_PER_CHUNK, ModelConfig
from ...base import AttentionProbe, StepOutput, check_token_ids
from ..kernels import compiled
from .blocks import apply_rope, gelu_tanh, layer_norm, linear_rows, rope_tables
from .linears import Linear, from_bfloat16_bits, make_linear, to_bfloat16_bits

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

LAYER_NORM_EPS = 1e-5


class KVCache:
    """Keys and values of one sequence, preallocated; implements ``base.FlowState``.

    ``keys`` and ``values`` are [layers, kv_heads, capacity, head_dim] (head-major, so each
    head's filled prefix is one contiguous block for attention): float32, or with ``bfloat16``
    the bfloat16 bit patterns (uint16), which the narrow precisions keep: half the memory of a
    sequence and of the bytes every step's attention reads. Slots ``[0, position)`` are filled;
    the rest is zero pages the OS maps only when written. Entries go in through ``write`` and
    come out as float32 through ``keys_f32`` / ``values_f32``.
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


class FlowLM:
    """The FlowLM networks of one loaded model; shared, read-only, thread-safe."""

    def __init__(
        self,
        config: ModelConfig,
        weights: Mapping[str, np.ndarray | Linear],
        *,
        precision: str = "fp32",
    ) -> None:
        """``precision`` ("fp32" | "bf16" | "int8") of the transformer's four linears."""
        flow = config.flow_lm
        tr = flow.transformer
        self.config = config
        self.d_model = tr.d_model
        self.num_heads = tr.num_heads
        self.kv_heads = tr.kv_heads
        self.head_dim = tr.head_dim
        self.query_dim = tr.query_dim
        self.num_layers = tr.num_layers
        self.max_period = float(tr.max_period)
        self.latent_dim = flow.latent_dim
        self.scale = np.float32(1.0 / math.sqrt(self.head_dim))
        self.precision = precision

        def w(name: str) -> np.ndarray:
            # Float32 weights are not copied.
            return np.asarray(weights[f"flow_lm.{name}"], np.float32)

        def lin(name: str) -> Linear:
            return make_linear(weights[f"flow_lm.{name}"], precision)

        # Shape [n_bins + 1, rank or d].
        self.embed_table = w("conditioner.embed.weight")
        # Shape [d, rank].
        self.embed_proj = (
            w("conditioner.proj.weight") if flow.lookup_table.rank is not None else None
        )
        self.bos_emb = w("bos_emb")
        # Shape [d, latent].
        self.input_linear = w("input_linear.weight")
        self.layers = [
            _Layer(
                norm1_w=w(f"transformer.layers.{i}.norm1.weight"),
                norm1_b=w(f"transformer.layers.{i}.norm1.bias"),
                in_proj=lin(f"transformer.layers.{i}.self_attn.in_proj.weight"),
                out_proj=lin(f"transformer.layers.{i}.self_attn.out_proj.weight"),
                norm2_w=w(f"transformer.layers.{i}.norm2.weight"),
                norm2_b=w(f"transformer.layers.{i}.norm2.bias"),
                linear1=lin(f"transformer.layers.{i}.linear1.weight"),
                linear2=lin(f"transformer.layers.{i}.linear2.weight"),
            )
            for i in range(self.num_layers)
        ]
        self.out_norm_w = w("out_norm.weight")
        self.out_norm_b = w("out_norm.bias")
        # Shape [z, d].
        self.z_proj = w("z_proj.weight") if flow.z_dim is not None else None
        # Shape [head_input_dim].
        self.out_eos_w = w("out_eos.weight")[0]
        self.out_eos_b = float(w("out_eos.bias")[0])
        self._rope_lock = threading.Lock()
        self._rope_cos, self._rope_sin = rope_tables(
            np.arange(DEFAULT_CAPACITY), self.head_dim, self.max_period
        )

    # -- states ---------------------------------------------------------------------------
    def new_state(self, capacity: int = DEFAULT_CAPACITY) -> KVCache:
        """An empty sequence with room for ``capacity`` positions (bfloat16 entries at the
        narrow precisions, float32 at fp32)."""
        return KVCache(
            self.num_layers,
            self.kv_heads,
            self.head_dim,
            capacity,
            bfloat16=self.precision != "fp32",
        )

    # -- text -----------------------------------------------------------------------------
    def embed(self, token_ids: np.ndarray) -> np.ndarray:
        """Token ids [n] → embeddings [n, d_model] (low-rank table + projection when set)."""
        ids = check_token_ids(token_ids, self.embed_table.shape[0])
        table = self.embed_table[ids]
        return table if self.embed_proj is None else table @ self.embed_proj.T

    # -- transformer ----------------------------------------------------------------------
    def prefill(self, state: KVCache, embeddings: np.ndarray) -> None:
        """Append conditioning embeddings [n, d_model] to the sequence."""
        x = np.asarray(embeddings, dtype=np.float32)
        if x.ndim != 2 or x.shape[1] != self.d_model:
            raise ValueError(f"embeddings must be [n, {self.d_model}], got {x.shape}")
        if x.shape[0]:
            self._transformer(state, x.copy())

    def step(
        self, state: KVCache, latent: np.ndarray | None, probe: AttentionProbe | None = None
    ) -> StepOutput:
        """Append one latent [latent_dim] (None or NaN means BOS) → head input and EOS logit
        (and the probed heads' attention logits, see ``AttentionProbe``)."""
        if latent is None:
            vec = self.bos_emb
        else:
            vec = np.asarray(latent, dtype=np.float32).reshape(-1)
            if vec.shape[0] != self.latent_dim:
                raise ValueError(f"latent must be [{self.latent_dim}], got {np.shape(latent)}")
            nan = np.isnan(vec)
            if nan.any():
                vec = np.where(nan, self.bos_emb, vec)
        x = (self.input_linear @ vec)[None, :]
        probed = None if probe is None else self._probe_rows(probe)
        x = self._transformer(state, x, probe, probed)[0]
        hidden = layer_norm(x, self.out_norm_w, self.out_norm_b, LAYER_NORM_EPS)
        if self.z_proj is not None:
            hidden = self.z_proj @ hidden
        eos = float(self.out_eos_w @ hidden) + self.out_eos_b
        return StepOutput(hidden=hidden, eos_logit=eos, attention=probed)

    def step_batch(
        self,
        states: Sequence[KVCache],
        latents: Sequence[np.ndarray | None],
        probes: Sequence[AttentionProbe | None] | None = None,
    ) -> list[StepOutput]:
        """``step`` for B sequences at once: their linears run on one stacked [B, d] input.

        Each sequence appends one position at its own position and attends over its own
        filled cache; ``probes[b]`` (optional) as ``step``'s probe for sequence b. Outputs
        match B solo ``step`` calls (up to float32 rounding).
        """
        if len(states) != len(latents):
            raise ValueError(f"{len(states)} states but {len(latents)} latents")
        probes = [None] * len(states) if probes is None else list(probes)
        if len(probes) != len(states):
            raise ValueError(f"{len(states)} states but {len(probes)} probes")
        if not states:
            return []
        probed = [None if p is None else self._probe_rows(p) for p in probes]
        vecs = np.stack([self._input_vector(latent) for latent in latents])
        x = linear_rows(vecs, self.input_linear)
        x = self._transformer_batch(states, x, probes, probed)
        hidden = layer_norm(x, self.out_norm_w, self.out_norm_b, LAYER_NORM_EPS)
        if self.z_proj is not None:
            hidden = hidden @ self.z_proj.T
        # Shape [B].
        eos = hidden @ self.out_eos_w + self.out_eos_b
        return [
            StepOutput(hidden=hidden[b], eos_logit=float(eos[b]), attention=probed[b])
            for b in range(len(states))
        ]

    def _input_vector(self, latent: np.ndarray | None) -> np.ndarray:
        """A step's input [latent_dim]: the latent, BOS for None, BOS where it is NaN."""
        if latent is None:
            return self.bos_emb
        vec = np.asarray(latent, dtype=np.float32).reshape(-1)
        if vec.shape[0] != self.latent_dim:
            raise ValueError(f"latent must be [{self.latent_dim}], got {np.shape(latent)}")
        nan = np.isnan(vec)
        return np.where(nan, self.bos_emb, vec) if nan.any() else vec

    def _transformer_batch(
        self,
        states: Sequence[KVCache],
        x: np.ndarray,
        probes: Sequence[AttentionProbe | None],
        probed: Sequence[np.ndarray | None],
    ) -> np.ndarray:
        """The layers on x [B, d] (modified in place): row b is the next position of states[b];
        where probes[b] is given, fill probed[b] with its heads' logits (as ``_transformer``)."""
        starts = [state.reserve(1)[0] for state in states]
        cos, sin = self._rope(0, max(starts) + 1)
        cos, sin = cos[starts], sin[starts]
        batch = x.shape[0]
        q_dim, kv_dim = self.query_dim, self.kv_heads * self.head_dim
        attended = np.empty((batch, q_dim), dtype=np.float32)
        for index, layer in enumerate(self.layers):
            h = layer_norm(x, layer.norm1_w, layer.norm1_b, LAYER_NORM_EPS)
            # Shape [B, q + 2·kv].
            qkv = layer.in_proj(h)
            q, k = self._rotated_qk(qkv, cos, sin)
            v = qkv[:, q_dim + kv_dim :].reshape(batch, self.kv_heads, self.head_dim)
            for b, (state, start) in enumerate(zip(states, starts, strict=True)):
                row = slice(b, b + 1)
                attended[b] = self._store_and_attend(q[row], k[row], v[row], state, index, start)[0]
                probe, rows = probes[b], probed[b]
                if probe is not None and rows is not None:
                    self._probe(index, q[b], state, probe, rows)
            x += layer.out_proj(attended)
            h = layer_norm(x, layer.norm2_w, layer.norm2_b, LAYER_NORM_EPS)
            x += layer.linear2(gelu_tanh(layer.linear1(h)))
        for state in states:
            state.advance(1)
        return x

    def _transformer(
        self,
        state: KVCache,
        x: np.ndarray,
        probe: AttentionProbe | None = None,
        probed: np.ndarray | None = None,
    ) -> np.ndarray:
        """Run the layers on x [n, d] (modified in place) at the next n positions of state;
        with a probe, fill probed [len(probe.heads), positions] with its heads' logits."""
        n = x.shape[0]
        start, end = state.reserve(n)
        cos, sin = self._rope(start, end)
        q_dim, kv_dim = self.query_dim, self.kv_heads * self.head_dim
        for index, layer in enumerate(self.layers):
            h = layer_norm(x, layer.norm1_w, layer.norm1_b, LAYER_NORM_EPS)
            qkv = layer.in_proj(h)
            q, k = self._rotated_qk(qkv, cos, sin)
            v = qkv[:, q_dim + kv_dim :].reshape(n, self.kv_heads, self.head_dim)
            attended = self._store_and_attend(q, k, v, state, index, start)
            if probe is not None:
                self._probe(index, q[-1], state, probe, probed)
            x += layer.out_proj(attended)
            h = layer_norm(x, layer.norm2_w, layer.norm2_b, LAYER_NORM_EPS)
            x += layer.linear2(gelu_tanh(layer.linear1(h)))
        state.advance(n)
        return x

    def _rotated_qk(
        self, qkv: np.ndarray, cos: np.ndarray, sin: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Queries [n, H, Dh] and keys [n, kv_heads, Dh] of qkv [n, q + 2·kv], RoPE applied
        to both in one pass (tables [n, Dh/2])."""
        n, heads = qkv.shape[0], self.num_heads
        width = self.query_dim + self.kv_heads * self.head_dim
        pairs = qkv[:, :width].reshape(n, heads + self.kv_heads, self.head_dim)
        rotated = apply_rope(pairs, cos, sin)
        return rotated[:, :heads], rotated[:, heads:]

    def _store_and_attend(
        self,
        q: np.ndarray,
        k: np.ndarray,
        v: np.ndarray,
        state: KVCache,
        layer: int,
        start: int,
    ) -> np.ndarray:
        """Store keys k and values v [n, kv_heads, Dh] at positions start… of ``layer`` in
        ``state``, then attend with queries q [n, H, Dh] (``_attend``) → [n, H·Dh]. One
        position with numba: one call of ``kernels.store_and_attend`` (on the cache as stored,
        float32 or bfloat16)."""
        kernels = compiled.resolve(_kernels)
        if q.shape[0] != 1 or kernels is None:
            state.write(layer, start, k, v)
            return self._attend(q, state, layer, start)
        out = np.empty((1, self.num_heads * self.head_dim), np.float32)
        kernels.store_and_attend(
            np.ascontiguousarray(q[0]),
            np.ascontiguousarray(k[0]),
            np.ascontiguousarray(v[0]),
            state.keys[layer],
            state.values[layer],
            start,
            self.scale,
            np.empty(start + 1, np.float32),
            out.reshape(self.num_heads, self.head_dim),
        )
        return out

    def _attend(self, q: np.ndarray, state: KVCache, layer: int, start: int) -> np.ndarray:
        """Causal attention of queries q [n, H, Dh] at positions start… over the first
        P = start + n positions of ``layer`` in ``state`` → [n, H·Dh] (NumPy, on the cache
        widened to float32). Query head h reads kv head h // group."""
        n = q.shape[0]
        length = start + n
        # Shape [kv_heads, P, Dh].
        keys = state.keys_f32(layer, 0, length)
        values = state.values_f32(layer, 0, length)
        kv_heads, _, head_dim = keys.shape
        group = self.num_heads // kv_heads
        if n == 1:
            queries = q.reshape(kv_heads, group, head_dim)
        else:
            # Rows ordered by (head in group, query).
            queries = q.transpose(1, 0, 2).reshape(kv_heads, group * n, head_dim)
        # Shape [kv_heads, group·n, P].
        scores = queries @ keys.transpose(0, 2, 1)
        scores *= self.scale
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
        return out.reshape(n, self.num_heads * head_dim)

    def _probe_rows(self, probe: AttentionProbe) -> np.ndarray:
        """The array a probe's logits go in; raises ValueError for heads the model lacks."""
        for layer, head in probe.heads:
            if not (0 <= layer < self.num_layers and 0 <= head < self.num_heads):
                raise ValueError(
                    f"attention probe ({layer}, {head}) is outside this model "
                    f"({self.num_layers} layers × {self.num_heads} heads)"
                )
        return np.empty((len(probe.heads), probe.end - probe.start), np.float32)

    def _probe(
        self, layer: int, q: np.ndarray, state: KVCache, probe: AttentionProbe, out: np.ndarray
    ) -> None:
        """Logits of query q [H, Dh] (heads of probe in ``layer``) on the probed positions of
        ``layer`` in ``state``."""
        group = self.num_heads // self.kv_heads
        keys = None
        for row, (probe_layer, head) in enumerate(probe.heads):
            if probe_layer == layer:
                if keys is None:
                    keys = state.keys_f32(layer, probe.start, probe.end)
                out[row] = keys[head // group] @ q[head]
                out[row] *= self.scale

    def _rope(self, start: int, end: int) -> tuple[np.ndarray, np.ndarray]:
        """cos, sin [end - start, Dh/2] for absolute positions start…end-1 (tables grow)."""
        cos, sin = self._rope_cos, self._rope_sin
        if end > cos.shape[0]:
            with self._rope_lock:
                if end > self._rope_cos.shape[0]:
                    size = max(end, 2 * self._rope_cos.shape[0])
                    self._rope_cos, self._rope_sin = rope_tables(
                        np.arange(size), self.head_dim, self.max_period
                    )
                cos, sin = self._rope_cos, self._rope_sin
        return cos[start:end], sin[start:end]


@dataclass(frozen=True, slots=True)
class _Layer:
    """The weights of one transformer layer; linears map [n, in] → [n, out] (``linears.py``).

    The norms' weights and biases are [d]; ``in_proj`` maps d → q + 2·kv, ``out_proj`` q → d,
    ``linear1`` d → ffn and ``linear2`` ffn → d.
    """

    norm1_w: np.ndarray
    norm1_b: np.ndarray
    in_proj: Linear
    out_proj: Linear
    norm2_w: np.ndarray
    norm2_b: np.ndarray
    linear1: Linear
    linear2: Linear


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
