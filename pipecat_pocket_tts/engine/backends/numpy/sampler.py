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

from collections.abc import Callable, Mapping

import numpy as np

from ...config import ModelConfig
from .layers import layer_norm, silu
from .weights import num_time_conds

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

        self.cond_w, self.cond_b = w("cond_embed.weight"), w("cond_embed.bias")
        self.input_w, self.input_b = w("input_proj.weight"), w("input_proj.bias")
        self.blocks = [
            (
                w(f"res_blocks.{i}.in_ln.weight"),
                w(f"res_blocks.{i}.in_ln.bias"),
                w(f"res_blocks.{i}.mlp.0.weight"),
                w(f"res_blocks.{i}.mlp.0.bias"),
                w(f"res_blocks.{i}.mlp.2.weight"),
                w(f"res_blocks.{i}.mlp.2.bias"),
                w(f"res_blocks.{i}.adaLN_modulation.1.weight"),
                w(f"res_blocks.{i}.adaLN_modulation.1.bias"),
            )
            for i in range(config.flow_lm.sampler.depth)
        ]
        self.final_mod_w = w("final_layer.adaLN_modulation.1.weight")
        self.final_mod_b = w("final_layer.adaLN_modulation.1.bias")
        self.final_w, self.final_b = w("final_layer.linear.weight"), w("final_layer.linear.bias")
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
        return self._decode(self.cond_w @ c + self.cond_b, x, self._net)  # cond [width]

    def sample_batch(self, hidden: np.ndarray, noise: np.ndarray) -> np.ndarray:
        """``sample`` for B rows at once: hidden [B, head_input_dim] + noise [B, latent_dim]
        → latents [B, latent_dim] (each weight read once for the whole batch)."""
        c = np.asarray(hidden, dtype=np.float32)
        x = np.asarray(noise, dtype=np.float32)
        if c.ndim != 2 or c.shape[1] != self.head_input_dim:
            raise ValueError(f"hidden must be [B, {self.head_input_dim}], got {c.shape}")
        if x.shape != (c.shape[0], self.latent_dim):
            raise ValueError(f"noise must be [{c.shape[0]}, {self.latent_dim}], got {x.shape}")
        return self._decode(c @ self.cond_w.T + self.cond_b, x, self._net_batch)  # [B, width]

    def _decode(
        self, cond: np.ndarray, x: np.ndarray, net: Callable[[np.ndarray, np.ndarray], np.ndarray]
    ) -> np.ndarray:
        """The decoder of this sampler type around ``net`` (one row or rows of [B, ...])."""
        if self.type == "drifting":
            return net(cond, x)
        if self.type == "pointwise":
            return x + net(cond, x)
        n = np.float32(self.steps)
        for i in range(self.steps):
            x = x + net(cond + self._time_conditioning[i], x) / n
        return x

    def _net_batch(self, y: np.ndarray, x: np.ndarray) -> np.ndarray:
        """``_net`` on rows: conditioning y [B, width] and input x [B, latent] → [B, latent]."""
        width = y.shape[1]
        act = silu(y)
        h = x @ self.input_w.T + self.input_b  # [B, width]
        for ln_w, ln_b, w0, b0, w2, b2, mod_w, mod_b in self.blocks:
            mod = act @ mod_w.T + mod_b  # [B, 3 · width]: shift, scale, gate
            shift, scale, gate = mod[:, :width], mod[:, width : 2 * width], mod[:, 2 * width :]
            z = layer_norm(h, ln_w, ln_b, FLOW_LAYER_NORM_EPS)
            z = z * (1 + scale) + shift
            z = silu(z @ w0.T + b0) @ w2.T + b2
            h = h + gate * z
        mod = act @ self.final_mod_w.T + self.final_mod_b  # [B, 2 · width]: shift, scale
        z = layer_norm(h, None, None, FLOW_LAYER_NORM_EPS)
        z = z * (1 + mod[:, width:]) + mod[:, :width]
        return z @ self.final_w.T + self.final_b

    def _net(self, y: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Flow net on conditioning y [width] and input x [latent] → [latent]."""
        width = y.shape[0]
        act = silu(y)
        h = self.input_w @ x + self.input_b  # [width]
        for ln_w, ln_b, w0, b0, w2, b2, mod_w, mod_b in self.blocks:
            mod = mod_w @ act + mod_b  # [3 · width]: shift, scale, gate
            shift, scale, gate = mod[:width], mod[width : 2 * width], mod[2 * width :]
            z = layer_norm(h, ln_w, ln_b, FLOW_LAYER_NORM_EPS)
            z = z * (1 + scale) + shift
            z = w2 @ silu(w0 @ z + b0) + b2
            h = h + gate * z
        mod = self.final_mod_w @ act + self.final_mod_b  # [2 · width]: shift, scale
        z = layer_norm(h, None, None, FLOW_LAYER_NORM_EPS)
        z = z * (1 + mod[width:]) + mod[:width]
        return self.final_w @ z + self.final_b


class _TimestepEmbedder:
    """t → [cos(t·f), sin(t·f)] → Linear → SiLU → Linear → x·α/√(unbiased var + eps)."""

    def __init__(self, w, prefix: str) -> None:
        self.freqs = w(prefix + "freqs")
        self.w0, self.b0 = w(prefix + "mlp.0.weight"), w(prefix + "mlp.0.bias")
        self.w2, self.b2 = w(prefix + "mlp.2.weight"), w(prefix + "mlp.2.bias")
        self.alpha = w(prefix + "mlp.3.alpha")

    def __call__(self, t: float) -> np.ndarray:
        args = np.float32(t) * self.freqs.astype(np.float32)
        emb = np.concatenate([np.cos(args), np.sin(args)])  # [2 · freqs]
        h = self.w2 @ silu(self.w0 @ emb + self.b0) + self.b2  # [width]
        var = h.var(ddof=1) + np.float32(TIME_NORM_EPS)
        return h * (self.alpha / np.sqrt(var))
