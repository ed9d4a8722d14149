"""Mimi's streaming transformer (the decoder's, and the encoder's for cloning): pre-norm
layers with RoPE attention over a ring of the last ``context`` positions per layer
(``AttentionCache``), layer scales folded into the output linears."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ....model.config import MimiTransformerConfig
from .blocks import apply_rope, gelu_tanh, layer_norm, rope_tables
from .linears import Linear, make_linear
from .seanet import fetch_weight

LAYER_NORM_EPS = 1e-5


@dataclass
class AttentionCache:
    """Keys/values of the last positions of every layer, in a ring of ``slots`` entries.

    ``keys``/``values`` [L, H, slots, Dh] hold RoPE-rotated keys and values; ``slot_positions``
    [slots] the absolute position stored in each slot (-1: empty); ``position`` is the next
    absolute position (also the RoPE offset).
    """

    keys: np.ndarray
    values: np.ndarray
    slot_positions: np.ndarray
    position: int = 0

    def copy(self) -> AttentionCache:
        return AttentionCache(
            self.keys.copy(), self.values.copy(), self.slot_positions.copy(), self.position
        )


@dataclass(frozen=True)
class _TransformerLayer:
    """One layer's weights; the linears are fp32 ``linears.Linear``s ([n, in] → [n, out]): one
    stream's 16 positions a frame run the compiled kernel when numba is installed (2 layers'
    linears in ~0.85× of BLAS's time), more rows BLAS."""

    norm1: tuple[np.ndarray, np.ndarray]
    norm2: tuple[np.ndarray, np.ndarray]
    #: D → 3D.
    in_proj: Linear
    #: D → D, layer_scale_1 folded into its rows.
    out_proj: Linear
    #: D → F.
    linear1: Linear
    #: F → D, layer_scale_2 folded into its rows.
    linear2: Linear


class MimiTransformer:
    """Mimi's ProjectedTransformer: causal attention over the last ``context`` positions."""

    def __init__(
        self, config: MimiTransformerConfig, weights: Mapping[str, np.ndarray], prefix: str
    ) -> None:
        d, ff = config.d_model, config.dim_feedforward
        if len(config.output_dimensions) != 1:
            raise NotImplementedError(f"{prefix}: more than one output projection")
        self.d_model = d
        self.num_heads = config.num_heads
        self.head_dim = config.head_dim
        self.context = config.context
        self.max_period = config.max_period
        self.input_dim = config.input_dimension
        self.output_dim = config.output_dimensions[0]
        self.input_proj = (
            None
            if d == self.input_dim
            else fetch_weight(weights, f"{prefix}.input_proj.weight", (d, self.input_dim))
        )
        self.output_proj = (
            None
            if d == self.output_dim
            else fetch_weight(weights, f"{prefix}.output_projs.0.weight", (self.output_dim, d))
        )
        self.layers: list[_TransformerLayer] = []
        for i in range(config.num_layers):
            name = f"{prefix}.transformer.layers.{i}"

            def get(key: str, shape: tuple[int, ...], name: str = name) -> np.ndarray:
                return fetch_weight(weights, f"{name}.{key}", shape)

            scale_1 = get("layer_scale_1.scale", (d,))
            scale_2 = get("layer_scale_2.scale", (d,))
            self.layers.append(
                _TransformerLayer(
                    norm1=(get("norm1.weight", (d,)), get("norm1.bias", (d,))),
                    norm2=(get("norm2.weight", (d,)), get("norm2.bias", (d,))),
                    in_proj=make_linear(get("self_attn.in_proj.weight", (3 * d, d))),
                    out_proj=make_linear(
                        get("self_attn.out_proj.weight", (d, d)) * scale_1[:, None]
                    ),
                    linear1=make_linear(get("linear1.weight", (ff, d))),
                    linear2=make_linear(get("linear2.weight", (d, ff)) * scale_2[:, None]),
                )
            )

    def new_cache(self, max_steps: int) -> AttentionCache:
        """An empty cache for calls of at most ``max_steps`` positions each."""
        slots = self.context - 1 + max_steps
        shape = (len(self.layers), self.num_heads, slots, self.head_dim)
        return AttentionCache(
            keys=np.zeros(shape, dtype=np.float32),
            values=np.zeros(shape, dtype=np.float32),
            slot_positions=np.full(slots, -1, dtype=np.int64),
        )

    def __call__(self, x: np.ndarray, cache: AttentionCache) -> np.ndarray:
        """x [T, input_dim] at positions cache.position … +T-1 → [T, output_dim]; fills cache."""
        return self.call_batch(x[None], [cache])[0]

    def call_batch(
        self, x: np.ndarray, caches: Sequence[AttentionCache], chunk: int | None = None
    ) -> np.ndarray:
        """``__call__`` for B streams: x [B, T, input_dim], one cache each → [B, T, output_dim].

        The linears, RoPE and softmax run on all B·T rows at once; each stream's keys and
        values go into its own ring and its queries attend over them (two matmuls a stream).
        ``chunk`` (a divisor of T: a frame's positions, for a block of frames): the attention
        runs a chunk at a time, each chunk's keys written and its queries answered before the
        next's, on the same ring and shapes as calls of one chunk each (the same sums).
        """
        batch, t = x.shape[0], x.shape[1]
        chunk = t if chunk is None else chunk
        if t % chunk:
            raise ValueError(f"{t} positions are not whole chunks of {chunk}")
        d, h, dh = self.d_model, self.num_heads, self.head_dim
        pieces = range(0, t, chunk)
        views = [[self._positions(cache, chunk, start) for start in pieces] for cache in caches]
        # Shape [B·T, Dh/2].
        cos = np.concatenate([view[1] for stream in views for view in stream])
        sin = np.concatenate([view[2] for stream in views for view in stream])
        # One mask per chunk, of shape [B, 1, chunk, slots].
        masks = [np.stack([stream[i][3] for stream in views])[:, None] for i in range(len(pieces))]
        slots = masks[0].shape[-1]
        rows = x.reshape(batch * t, x.shape[2])
        if self.input_proj is not None:
            rows = rows @ self.input_proj.T
        scale = np.float32(1.0 / np.sqrt(dh))
        scores = np.empty((batch, h, chunk, slots), dtype=np.float32)
        # keys · queries as BLAS takes it quickest (both operands as stored), then turned
        key_scores = np.empty((h, slots, chunk), dtype=np.float32)
        attended = np.empty((batch, t, h, dh), dtype=np.float32)
        for index, layer in enumerate(self.layers):
            # Shape [B·T, 3D].
            qkv = layer.in_proj(layer_norm(rows, *layer.norm1, LAYER_NORM_EPS))
            # Rotate q and k in one pass.
            qk = apply_rope(qkv[:, : 2 * d].reshape(batch * t, 2 * h, dh), cos, sin)
            q = qk[:, :h] * scale
            # Shape [B, H, T, Dh].
            q = q.reshape(batch, t, h, dh).transpose(0, 2, 1, 3)
            k = qk[:, h:].reshape(batch, t, h, dh).transpose(0, 2, 1, 3)
            v = qkv[:, 2 * d :].reshape(batch, t, h, dh).transpose(0, 2, 1, 3)
            for i, start in enumerate(pieces):
                span = slice(start, start + chunk)
                for b, (cache, stream) in enumerate(zip(caches, views, strict=True)):
                    keys, values, ring = cache.keys[index], cache.values[index], stream[i][0]
                    # Shape [H, slots, Dh].
                    keys[:, ring] = k[b, :, span]
                    values[:, ring] = v[b, :, span]
                    np.matmul(keys, q[b, :, span].transpose(0, 2, 1), out=key_scores)
                    scores[b] = key_scores.transpose(0, 2, 1)
                scores += masks[i]
                scores -= scores.max(axis=-1, keepdims=True)
                np.exp(scores, out=scores)
                scores /= scores.sum(axis=-1, keepdims=True)
                for b, cache in enumerate(caches):
                    out = attended[b, span].transpose(1, 0, 2)
                    np.matmul(scores[b], cache.values[index], out=out)
            rows = rows + layer.out_proj(attended.reshape(batch * t, d))
            hidden = gelu_tanh(layer.linear1(layer_norm(rows, *layer.norm2, LAYER_NORM_EPS)))
            rows += layer.linear2(hidden)
        for cache in caches:
            cache.position += t
        if self.output_proj is not None:
            rows = rows @ self.output_proj.T
        return rows.reshape(batch, t, -1)

    def _positions(
        self, cache: AttentionCache, t: int, offset: int = 0
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Ring slots [T], RoPE cos/sin [T, Dh/2] and mask [T, slots] of the T positions from
        ``offset`` past the cache's next one (marks the slots as holding them)."""
        slots = cache.slot_positions.shape[0]
        if t > slots - (self.context - 1):
            raise ValueError(f"{t} steps in one call exceed the attention cache")
        positions = cache.position + offset + np.arange(t)
        cos, sin = rope_tables(positions, self.head_dim, self.max_period)
        ring = positions % slots
        cache.slot_positions[ring] = positions
        # Shape [T, slots].
        delta = positions[:, None] - cache.slot_positions[None, :]
        visible = (cache.slot_positions[None, :] >= 0) & (delta >= 0) & (delta < self.context)
        return ring, cos, sin, np.where(visible, np.float32(0.0), np.float32(-np.inf))


# -- codec ------------------------------------------------------------------------------------
