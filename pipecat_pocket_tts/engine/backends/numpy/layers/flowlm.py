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
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ....model.config import ModelConfig
from ...base import AttentionProbe, StepOutput, check_token_ids
from .blocks import apply_rope, gelu_tanh, layer_norm, linear_rows, rope_tables
from .kv_cache import DEFAULT_CAPACITY, KVCache
from .linears import Linear, make_linear

LAYER_NORM_EPS = 1e-5


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
                attended[b] = state.store_and_attend(
                    index, start, q[row], k[row], v[row], self.scale
                )[0]
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
            attended = state.store_and_attend(index, start, q, k, v, self.scale)
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
