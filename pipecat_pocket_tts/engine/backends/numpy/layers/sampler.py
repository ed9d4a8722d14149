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

Its linears run in the ``arithmetic`` chosen at load (``kernels/arithmetic.py``): "fp32", the
float32 window kernel (upstream's numbers), or "int16": ``Int16Linear`` in two passes (inputs
to ~26 bits, 16-bit weights) for the conditioning, the blocks' MLPs and every modulation (the
blocks' and the final layer's: they read only the conditioning) as one product over their
stacked weights, while the two small linears at the ends (input_proj 32 → 512 and the final
512 → 32, which carried most of the error in 13 bits) stay float32: latents ≥ 95 dB from
fp32 frame by frame on the full-size random pack, 3.1x quicker than fp32 at one row, 1.5x at 16.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ....model.config import ModelConfig
from ..weights.checkpoint import num_time_conds
from .blocks import layer_norm, silu
from .linears import Int16Linear, Linear, packed_linear

#: LayerNorm eps of the flow net's blocks and final layer.
FLOW_LAYER_NORM_EPS = 1e-6
#: eps of the timestep embedders' norm (x·α / √(unbiased var(x) + eps)).
TIME_NORM_EPS = 1e-5
#: Passes of an int16 linear's input (``Int16Linear``): two hold it to ~26 bits, the 16-bit
#: weights' error then dominating (one pass, 13 bits: the latents ~69 dB from fp32's, which cost
#: the int8 path's audio 0.2-0.5 dB).
INT16_PASSES = 2


class Sampler:
    """Flow net + decoder of one loaded model; read-only after construction, thread-safe."""

    def __init__(
        self,
        config: ModelConfig,
        weights: Mapping[str, np.ndarray],
        *,
        steps: int = 1,
        arithmetic: str = "fp32",
    ) -> None:
        """``weights``: upstream state-dict keys → arrays; ``steps``: LSD or Euler steps;
        ``arithmetic``: "fp32" or "int16", what the linears multiply in (the module
        docstring)."""
        if steps < 1:
            raise ValueError(f"sampler steps must be at least 1, got {steps}")
        if arithmetic not in ("fp32", "int16"):
            raise ValueError(f"sampler arithmetic must be fp32 or int16, got {arithmetic!r}")
        self.type = config.flow_lm.sampler.type
        self.steps = steps if self.type in ("lsd", "flow_matching") else 1
        self.latent_dim = config.flow_lm.latent_dim
        self.head_input_dim = config.flow_lm.head_input_dim

        def w(name: str) -> np.ndarray:
            return weights[f"flow_lm.flow_net.{name}"]

        def product(*names: str) -> Linear | None:
            weights_ = [w(f"{name}.weight") for name in names]
            return Int16Linear.stacked(weights_, passes=INT16_PASSES)

        def affine(name: str, *, narrow: bool = True) -> _Affine:
            linear = product(name) if narrow and arithmetic == "int16" else None
            return _Affine(linear or packed_linear(w(f"{name}.weight")), w(f"{name}.bias"))

        self.arithmetic = arithmetic
        self.cond = affine("cond_embed")
        self.input = affine("input_proj", narrow=False)
        depth = config.flow_lm.sampler.depth
        self.blocks = [
            _Block(
                w(f"res_blocks.{i}.in_ln.weight"),
                w(f"res_blocks.{i}.in_ln.bias"),
                affine(f"res_blocks.{i}.mlp.0"),
                affine(f"res_blocks.{i}.mlp.2"),
            )
            for i in range(depth)
        ]
        modulations = [f"res_blocks.{i}.adaLN_modulation.1" for i in range(depth)]
        modulations.append("final_layer.adaLN_modulation.1")
        stacked = product(*modulations) if arithmetic == "int16" else None
        biases = [w(f"{name}.bias") for name in modulations]
        self.modulations = _Modulations(
            [_Affine(stacked, np.concatenate(biases))]
            if stacked is not None
            else [affine(name) for name in modulations],
            [bias.shape[0] for bias in biases],
        )
        self.final = affine("final_layer.linear", narrow=False)
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

    def multiply_adds(self) -> int:
        """Multiply-adds of one row through the linears of one ``sample_batch``."""
        net = [self.input, self.final, *self.modulations.affines]
        net += [affine for block in self.blocks for affine in (block.mlp_in, block.mlp_out)]
        return self.cond.multiply_adds() + self.steps * sum(a.multiply_adds() for a in net)

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
        # Each block's [B, 3 · width] (shift, scale, gate), then the final [B, 2 · width].
        *block_mods, final_mod = self.modulations(silu(y))
        # Shape [B, width].
        h = self.input(x)
        for block, mod in zip(self.blocks, block_mods, strict=True):
            shift, scale, gate = mod[:, :width], mod[:, width : 2 * width], mod[:, 2 * width :]
            z = layer_norm(h, block.norm_w, block.norm_b, FLOW_LAYER_NORM_EPS)
            z = z * (1 + scale) + shift
            z = block.mlp_out(silu(block.mlp_in(z)))
            h = h + gate * z
        z = layer_norm(h, None, None, FLOW_LAYER_NORM_EPS)
        z = z * (1 + final_mod[:, width:]) + final_mod[:, :width]
        return self.final(z)


class _Affine:
    """x [n, in] → x · Wᵀ + b [n, out], the product by a linear of ``linears.py``."""

    def __init__(self, linear: Linear, bias: np.ndarray) -> None:
        self.linear, self.bias = linear, bias

    def __call__(self, x: np.ndarray) -> np.ndarray:
        out = self.linear(x)
        out += self.bias
        return out

    def multiply_adds(self) -> int:
        out, width = self.linear.shape
        return out * width


class _Modulations:
    """SiLU(conditioning) [B, width] → every modulation of the net, [B, w_i] each (the
    blocks' then the final layer's), from one product over their stacked weights or one
    product each (``affines``); the same numbers either way."""

    def __init__(self, affines: list[_Affine], widths: list[int]) -> None:
        self.affines = affines
        # Where each modulation ends in the stacked output.
        self.bounds = list(np.cumsum(widths)[:-1])

    def __call__(self, act: np.ndarray) -> list[np.ndarray]:
        if len(self.affines) == 1:
            return np.split(self.affines[0](act), self.bounds, axis=1)
        return [affine(act) for affine in self.affines]


@dataclass(frozen=True)
class _Block:
    """One residual block of the flow net: its norm and its MLP (its adaLN modulation is one of
    the net's ``_Modulations``)."""

    norm_w: np.ndarray
    norm_b: np.ndarray
    mlp_in: _Affine
    mlp_out: _Affine


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
