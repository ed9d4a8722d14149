"""Checkpoint keys and shapes, and loading ``model.safetensors`` into NumPy arrays.

``expected_shapes`` derives every upstream state-dict key (``flow_lm.*`` and ``mimi.*``) and its
shape from a ``ModelConfig`` alone. ``load_checkpoint`` reads a safetensors file (fp32 or bf16
on disk; ``safetensors_file.py``): fp32 tensors are memory-mapped read-only views of the file
(no copy; the page cache is shared between processes), bf16 tensors are widened to fp32 one
tensor at a time. With a narrow precision (bf16 / int8), the FlowLM transformer linears come
from the cached narrow copy (``narrow_cache.py``) or, without one, are read into memory one at
a time and narrowed on the spot (``linears.make_linear``), never mapped. Keys and shapes are
checked against the config.

Voice-cloning weights (Mimi encoder side and the speaker projection) may be missing or all
zero in the ungated "without voice cloning" checkpoints; that is accepted and reported by
``has_voice_cloning``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np

from ....errors import WeightsMismatchError
from ....model.config import FlowLMTransformerConfig, ModelConfig
from ..layers.linears import Linear, check_precision, make_linear
from ..layers.mimi import ENCODER_PREFIXES, mimi_weight_shapes
from .finite import check_finite_weights
from .narrow_cache import NarrowCache
from .safetensors_file import iter_safetensors, tensor_shapes

Shape = tuple[int, ...]

#: Key prefixes of the weights only voice cloning uses (absent or zero in ungated files): the
#: Mimi encoder's and FlowLM's speaker projection.
CLONING_PREFIXES = (
    *(f"mimi.{prefix}" for prefix in ENCODER_PREFIXES),
    "flow_lm.speaker_proj_weight",
)

#: Frequencies of upstream's timestep embedders (the ``freqs`` buffer is 128 wide).
TIME_EMBED_FREQUENCIES = 128

_TIME_CONDS = {"lsd": 2, "flow_matching": 1, "drifting": 0, "pointwise": 0}


#: Suffixes of the FlowLM transformer weights a narrow precision stores narrow.
NARROW_SUFFIXES = (
    ".self_attn.in_proj.weight",
    ".self_attn.out_proj.weight",
    ".linear1.weight",
    ".linear2.weight",
)


def is_narrow_key(key: str) -> bool:
    """True for the FlowLM attention and feed-forward linears (what bf16 / int8 narrow)."""
    return key.startswith("flow_lm.transformer.layers.") and key.endswith(NARROW_SUFFIXES)


def is_cloning_key(key: str) -> bool:
    """True for weights only the voice-cloning path (Mimi encoder, speaker projection) uses."""
    return key.startswith(CLONING_PREFIXES)


def num_time_conds(sampler_type: str) -> int:
    """How many timestep embedders the flow net of a sampler type has."""
    return _TIME_CONDS[sampler_type]


# -- expected keys and shapes --------------------------------------------------------------


def expected_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every key of upstream's ``TTSModel.state_dict()`` for ``config``, with its shape."""
    shapes: dict[str, Shape] = {}
    shapes.update(_flow_lm_shapes(config))
    shapes.update({f"mimi.{k}": v for k, v in mimi_weight_shapes(config.mimi).items()})
    return shapes


def _flow_lm_shapes(config: ModelConfig) -> dict[str, Shape]:
    flow = config.flow_lm
    tr = flow.transformer
    d = tr.d_model
    latent = flow.latent_dim
    lut = flow.lookup_table
    sampler = flow.sampler
    width = sampler.dim
    out: dict[str, Shape] = {"bos_emb": (latent,)}
    if flow.insert_bos_before_voice:
        out["bos_before_voice"] = (1, 1, d)
    out["speaker_proj_weight"] = (d, config.mimi.inner_dim or config.mimi.seanet.dimension)
    out["emb_std"] = (latent,)
    out["emb_mean"] = (latent,)
    out["conditioner.embed.weight"] = (lut.n_bins + 1, lut.rank or lut.dim)
    if lut.rank is not None:
        out["conditioner.proj.weight"] = (lut.dim, lut.rank)

    net = "flow_net."
    for i in range(num_time_conds(sampler.type)):
        te = f"{net}time_embed.{i}."
        out[te + "freqs"] = (TIME_EMBED_FREQUENCIES,)
        out.update(_linear(te + "mlp.0", 2 * TIME_EMBED_FREQUENCIES, width, bias=True))
        out.update(_linear(te + "mlp.2", width, width, bias=True))
        out[te + "mlp.3.alpha"] = (width,)
    out.update(_linear(net + "cond_embed", flow.head_input_dim, width, bias=True))
    out.update(_linear(net + "input_proj", latent, width, bias=True))
    for i in range(sampler.depth):
        block = f"{net}res_blocks.{i}."
        out[block + "in_ln.weight"] = (width,)
        out[block + "in_ln.bias"] = (width,)
        out.update(_linear(block + "mlp.0", width, width, bias=True))
        out.update(_linear(block + "mlp.2", width, width, bias=True))
        out.update(_linear(block + "adaLN_modulation.1", width, 3 * width, bias=True))
    out.update(_linear(net + "final_layer.linear", width, latent, bias=True))
    out.update(_linear(net + "final_layer.adaLN_modulation.1", width, 2 * width, bias=True))

    out["input_linear.weight"] = (d, latent)
    out.update(_flow_transformer_shapes("transformer.", tr))
    out["out_norm.weight"] = (d,)
    out["out_norm.bias"] = (d,)
    if flow.z_dim is not None:
        out["z_proj.weight"] = (flow.z_dim, d)
    out.update(_linear("out_eos", flow.head_input_dim, 1, bias=True))
    return {f"flow_lm.{k}": v for k, v in out.items()}


def _flow_transformer_shapes(prefix: str, tr: FlowLMTransformerConfig) -> dict[str, Shape]:
    d = tr.d_model
    kv_dim = tr.kv_heads * tr.head_dim
    out: dict[str, Shape] = {}
    for i in range(tr.num_layers):
        layer = f"{prefix}layers.{i}."
        out[layer + "self_attn.in_proj.weight"] = (tr.query_dim + 2 * kv_dim, d)
        out[layer + "self_attn.out_proj.weight"] = (d, tr.query_dim)
        out.update(_norm(layer + "norm1", d))
        out.update(_norm(layer + "norm2", d))
        out[layer + "linear1.weight"] = (tr.ffn_dim, d)
        out[layer + "linear2.weight"] = (d, tr.ffn_dim)
    return out


# -- loading ----------------------------------------------------------------------------


def load_checkpoint(
    path: str | os.PathLike[str], config: ModelConfig, *, precision: str = "fp32"
) -> dict[str, np.ndarray | Linear]:
    """Read ``model.safetensors`` → {upstream key: float32 array}, checked against ``config``.

    fp32 tensors are read-only views of a memory map of the file; bf16 (and fp16) tensors are
    widened to fp32. With ``precision`` "bf16" or "int8", the FlowLM transformer linears
    (``is_narrow_key``) are read into memory one at a time and narrowed at once (they map to
    ``linears.Linear`` objects; their fp32 bytes are neither kept nor left mapped). Voice-cloning
    keys may be missing. Raises ``WeightsMismatchError`` naming missing, unexpected and
    misshapen keys and tensors holding NaN or inf, ``FileNotFoundError`` for a missing file, and
    ``PrecisionUnavailableError`` for a narrow precision without its kernels.
    """
    check_precision(precision)
    if precision == "fp32":
        weights: dict[str, np.ndarray | Linear] = dict(iter_safetensors(path))
    else:
        weights = _load_narrow(path, precision)
    check_weights(weights, config, source=str(path))
    check_finite_weights(
        {k: a for k, a in weights.items() if isinstance(a, np.ndarray)}, source=str(path)
    )
    return weights


def _load_narrow(path: str | os.PathLike[str], precision: str) -> dict[str, np.ndarray | Linear]:
    """The checkpoint with its narrow keys as ``Linear`` objects: mapped from the cached copy
    when one matches (their fp32 bytes are then never read), else narrowed one at a time,
    cached, and mapped back from the copy just written (``narrow_cache.py``)."""
    shapes = {k: shape for k, shape in tensor_shapes(path).items() if is_narrow_key(k)}
    cache = NarrowCache(path, precision, shapes) if _all_matrices(shapes) else None
    cached = None if cache is None else cache.load()
    if cached is not None:
        weights: dict[str, np.ndarray | Linear] = dict(iter_safetensors(path, skip=is_narrow_key))
        weights.update(cached)
        return weights
    weights = {}
    for key, array in iter_safetensors(path, unmapped=is_narrow_key):
        # Checked while its fp32 values exist (the copy holds no NaN).
        if is_narrow_key(key):
            check_finite_weights({key: array}, source=str(path))
            weights[key] = make_linear(array, precision)
        else:
            weights[key] = array
    if cache is not None and cache.store(
        {k: v for k, v in weights.items() if isinstance(v, Linear)}
    ):
        # The mapped copy, shared with later processes.
        weights.update(cache.load() or {})
    return weights


def _all_matrices(shapes: Mapping[str, tuple[int, ...]]) -> bool:
    return bool(shapes) and all(len(shape) == 2 and min(shape) > 0 for shape in shapes.values())


def check_weights(
    weights: Mapping[str, np.ndarray | Linear], config: ModelConfig, *, source: str = "weights"
) -> None:
    """Raise ``WeightsMismatchError`` unless keys and shapes match ``config`` (cloning optional)."""
    expected = expected_shapes(config)
    missing = sorted(k for k in expected if k not in weights and not is_cloning_key(k))
    unexpected = sorted(k for k in weights if k not in expected)
    misshapen = sorted(
        f"{k} {tuple(weights[k].shape)} (expected {expected[k]})"
        for k in weights
        if k in expected and tuple(weights[k].shape) != expected[k]
    )
    if missing or unexpected or misshapen:
        problems = []
        for label, keys in (
            ("missing", missing),
            ("unexpected", unexpected),
            ("misshapen", misshapen),
        ):
            if keys:
                shown = ", ".join(keys[:8]) + (f", … ({len(keys)} in all)" if len(keys) > 8 else "")
                problems.append(f"{label}: {shown}")
        raise WeightsMismatchError(
            f"{source} does not match model config {config.name!r} — "
            + "; ".join(problems)
            + ". Use the weights made for this config (or the config.json shipped with them)."
        )


def has_voice_cloning(weights: Mapping[str, np.ndarray], config: ModelConfig) -> bool:
    """True when the voice-cloning weights are all present and not zeroed out.

    The ungated checkpoints ship the speaker projection and Mimi encoder side zeroed (or not at
    all); a nonzero projection and a nonzero encoder tensor mean cloning can work.
    """
    keys = [k for k in expected_shapes(config) if is_cloning_key(k)]
    if any(k not in weights for k in keys):
        return False
    if not np.any(weights["flow_lm.speaker_proj_weight"]):
        return False
    return any(np.any(weights[k]) for k in keys if k.startswith("mimi.encoder."))


def _linear(name: str, n_in: int, n_out: int, *, bias: bool) -> dict[str, Shape]:
    out: dict[str, Shape] = {f"{name}.weight": (n_out, n_in)}
    if bias:
        out[f"{name}.bias"] = (n_out,)
    return out


def _norm(name: str, dim: int) -> dict[str, Shape]:
    return {f"{name}.weight": (dim,), f"{name}.bias": (dim,)}
