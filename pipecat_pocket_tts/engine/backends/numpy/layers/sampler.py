"""The sampler head: upstream's flow net (SimpleMLPAdaLN) and its four decoders, in NumPy.

``Sampler.sample(hidden, noise)`` turns the FlowLM head input [head_input_dim] and already
scaled noise [latent_dim] into the next latent [latent_dim]:

- ``lsd``: N steps, x += net(c, s=i/N, t=(i+1)/N, x) / N (two timestep embedders, averaged)
- ``flow_matching``: N Euler steps, x += net(c, t=i/N, x) / N (one timestep embedder)
- ``drifting``: net(c, x) (no timestep embedder)
- ``pointwise``: x + net(c, x)

The net: y = cond_embed(c) (+ mean of timestep embeddings); x = input_proj(x); residual blocks
x += gate · MLP(LN(x)·(1 + scale) + shift) with (shift, scale, gate) = Linear(SiLU(y)); then a
final non-affine LN modulated the same way and a linear to the latent. Timestep embeddings only
depend on the step index, so they are computed once per model, not per frame.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ....model.config import ModelConfig
from ..weights.checkpoint import num_time_conds
from .blocks import layer_norm, silu
from .linears import Linear, packed_linear

#: LayerNorm eps of the flow net's blocks and final layer.
FLOW_LAYER_NORM_EPS = 1e-6
#: eps of the timestep embedders' norm (x·α / √(unbiased var(x) + eps)).
TIME_NORM_EPS = 1e-5


class Sampler:
    """Flow net + decoder of one loaded model; read-only after construction, thread-safe."""

    def __init__(
        self, config: ModelConfig, weights: Mapping[str, np.ndarray], *, steps: int = 1
    ) -> None:
        if steps < 1:
            raise ValueError(f"sampler steps must be at least 1, got {steps}")
        self.type = config.flow_lm.sampler.type
        self.steps = steps if self.type in ("lsd", "flow_matching") else 1
        self.latent_dim = config.flow_lm.latent_dim
        self.head_input_dim = config.flow_lm.head_input_dim

        def w(name: str) -> np.ndarray:
            return weights[f"flow_lm.flow_net.{name}"]

        def affine(name: str) -> _Affine:
            return _Affine(packed_linear(w(f"{name}.weight")), w(f"{name}.bias"))

        self.cond = affine("cond_embed")
        self.input = affine("input_proj")
        self.blocks = [
            _Block(
                w(f"res_blocks.{i}.in_ln.weight"),
                w(f"res_blocks.{i}.in_ln.bias"),
                affine(f"res_blocks.{i}.mlp.0"),
                affine(f"res_blocks.{i}.mlp.2"),
                affine(f"res_blocks.{i}.adaLN_modulation.1"),
            )
            for i in range(config.flow_lm.sampler.depth)
        ]
        self.final_mod = affine("final_layer.adaLN_modulation.1")
        self.final = affine("final_layer.linear")
        time_embedders = [
            _TimestepEmbedder(w, f"time_embed.{i}.") for i in range(num_time_conds(self.type))
        ]
        # The time part of the conditioning of every decode step: [steps, width] (or zeros).
        self._time_conditioning = self._time_table(time_embedders)

    def _time_table(self, embedders: list[_TimestepEmbedder]) -> np.ndarray | None:
        n = self.steps
        if self.type == "lsd":
            s, t = embedders
            rows = [(s(i / n) + t((i + 1) / n)) / np.float32(2) for i in range(n)]
        elif self.type == "flow_matching":
            (t,) = embedders
            rows = [t(i / n) for i in range(n)]
        else:
            return None
        return np.stack(rows).astype(np.float32)

    def sample(self, hidden: np.ndarray, noise: np.ndarray) -> np.ndarray:
        """hidden [head_input_dim] + noise [latent_dim] (already scaled) → latent [latent_dim]."""
        c = np.asarray(hidden, dtype=np.float32)
        x = np.asarray(noise, dtype=np.float32)
        if c.shape != (self.head_input_dim,):
            raise ValueError(f"hidden must be [{self.head_input_dim}], got {c.shape}")
        if x.shape != (self.latent_dim,):
            raise ValueError(f"noise must be [{self.latent_dim}], got {x.shape}")
        return self.sample_batch(c[None], x[None])[0]

    def sample_batch(self, hidden: np.ndarray, noise: np.ndarray) -> np.ndarray:
        """``sample`` for B rows at once: hidden [B, head_input_dim] + noise [B, latent_dim]
        → latents [B, latent_dim] (each weight read once for the whole batch)."""
        c = np.asarray(hidden, dtype=np.float32)
        x = np.asarray(noise, dtype=np.float32)
        if c.ndim != 2 or c.shape[1] != self.head_input_dim:
            raise ValueError(f"hidden must be [B, {self.head_input_dim}], got {c.shape}")
        if x.shape != (c.shape[0], self.latent_dim):
            raise ValueError(f"noise must be [{c.shape[0]}, {self.latent_dim}], got {x.shape}")
        # The condition is [B, width].
        return self._decode(self.cond(c), x)

    def _decode(self, cond: np.ndarray, x: np.ndarray) -> np.ndarray:
        """The decoder of this sampler type around the net (rows of [B, ...])."""
        if self.type == "drifting":
            return self._net(cond, x)
        if self.type == "pointwise":
            return x + self._net(cond, x)
        n = np.float32(self.steps)
        for i in range(self.steps):
            x = x + self._net(cond + self._time_conditioning[i], x) / n
        return x

    def _net(self, y: np.ndarray, x: np.ndarray) -> np.ndarray:
        """The flow net on conditioning y [B, width] and input x [B, latent] → [B, latent]."""
        width = y.shape[1]
        act = silu(y)
        # Shape [B, width].
        h = self.input(x)
        for block in self.blocks:
            # Shape [B, 3 · width]: shift, scale, gate.
            mod = block.modulation(act)
            shift, scale, gate = mod[:, :width], mod[:, width : 2 * width], mod[:, 2 * width :]
            z = layer_norm(h, block.norm_w, block.norm_b, FLOW_LAYER_NORM_EPS)
            z = z * (1 + scale) + shift
            z = block.mlp_out(silu(block.mlp_in(z)))
            h = h + gate * z
        # Shape [B, 2 · width]: shift, scale.
        mod = self.final_mod(act)
        z = layer_norm(h, None, None, FLOW_LAYER_NORM_EPS)
        z = z * (1 + mod[:, width:]) + mod[:, :width]
        return self.final(z)


class _Affine:
    """x [n, in] → x · Wᵀ + b [n, out], the product by the fp32 linear (``linears.py``)."""

    def __init__(self, linear: Linear, bias: np.ndarray) -> None:
        self.linear, self.bias = linear, bias

    def __call__(self, x: np.ndarray) -> np.ndarray:
        out = self.linear(x)
        out += self.bias
        return out


@dataclass(frozen=True)
class _Block:
    """One residual block of the flow net: its norm, its MLP and its adaLN modulation."""

    norm_w: np.ndarray
    norm_b: np.ndarray
    mlp_in: _Affine
    mlp_out: _Affine
    modulation: _Affine


class _TimestepEmbedder:
    """t → [cos(t·f), sin(t·f)] → Linear → SiLU → Linear → x·α/√(unbiased var + eps)."""

    def __init__(self, w, prefix: str) -> None:
        self.freqs = w(prefix + "freqs")
        self.w0, self.b0 = w(prefix + "mlp.0.weight"), w(prefix + "mlp.0.bias")
        self.w2, self.b2 = w(prefix + "mlp.2.weight"), w(prefix + "mlp.2.bias")
        self.alpha = w(prefix + "mlp.3.alpha")

    def __call__(self, t: float) -> np.ndarray:
        args = np.float32(t) * self.freqs.astype(np.float32)
        # Shape [2 · freqs].
        emb = np.concatenate([np.cos(args), np.sin(args)])
        # Shape [width].
        h = self.w2 @ silu(self.w0 @ emb + self.b0) + self.b2
        var = h.var(ddof=1) + np.float32(TIME_NORM_EPS)
        return h * (self.alpha / np.sqrt(var))
