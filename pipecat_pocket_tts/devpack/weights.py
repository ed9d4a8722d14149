"""Random but well-scaled weights for a config, the decoder calibrated, written as safetensors."""

from __future__ import annotations

import math
import os
import re
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import numpy as np
import safetensors
import safetensors.numpy

from ..engine.atomic_files import atomic_path
from ..engine.backends.base import Backend
from ..engine.backends.numpy.weights.checkpoint import expected_shapes, is_cloning_key
from ..engine.model.config import ModelConfig

#: Loudness of the random decoder's output (RMS of float samples in [-1, 1]).
TARGET_RMS = 0.1


def random_weights(
    config: ModelConfig,
    *,
    seed: int = 0,
    eos_logit: float = 0.0,
    with_cloning: bool = True,
    prefix: str = "",
) -> dict[str, np.ndarray]:
    """Random float32 weights for every key of ``expected_shapes(config)``.

    Scaled so activations keep unit-ish variance: linear and conv weights ~ N(0, 1/fan_in),
    residual-branch outputs shrunk by depth, norms near identity, positive ``emb_std``.
    Each tensor has its own generator (seeded by ``seed`` and the key), so adding keys never
    changes the others. ``with_cloning=False`` leaves out the encoder-side weights, like the
    ungated hub checkpoints.

    Args:
        config: The model config whose keys to fill.
        seed: Seeds every tensor's generator.
        eos_logit: The constant the EOS head outputs.
        with_cloning: Include the encoder-side weights voice cloning needs.
        prefix: Only the keys that start with it (e.g. "mimi.").

    Returns:
        The tensors by key.
    """
    flow_layers = config.flow_lm.transformer.num_layers
    out: dict[str, np.ndarray] = {}
    for key, shape in expected_shapes(config).items():
        if (not with_cloning and is_cloning_key(key)) or not key.startswith(prefix):
            continue
        rng = np.random.default_rng([seed, zlib.crc32(key.encode())])
        out[key] = _init_tensor(key, shape, rng, flow_layers=flow_layers, eos_logit=eos_logit)
    return out


def _init_tensor(
    key: str,
    shape: tuple[int, ...],
    rng: np.random.Generator,
    *,
    flow_layers: int,
    eos_logit: float,
) -> np.ndarray:
    def normal(std: float) -> np.ndarray:
        return (rng.standard_normal(shape) * std).astype(np.float32)

    name = key.rsplit(".", 1)[-1]
    if key.endswith("time_embed.0.freqs") or key.endswith(".freqs"):
        half = shape[0]
        return np.exp(-math.log(10_000.0) * np.arange(half) / half).astype(np.float32)
    if key == "flow_lm.emb_std":
        return rng.uniform(0.5, 1.5, shape).astype(np.float32)
    if key == "flow_lm.emb_mean":
        return normal(0.1)
    if key in ("flow_lm.bos_emb", "flow_lm.bos_before_voice"):
        return normal(1.0)
    if key == "flow_lm.conditioner.embed.weight":
        return normal(1.0)
    if key.startswith("flow_lm.out_eos."):
        if name == "bias":
            return np.full(shape, eos_logit, dtype=np.float32)
        return np.zeros(shape, dtype=np.float32)
    if name == "alpha" or "layer_scale" in key:
        value = 1.0 if name == "alpha" else 0.1
        return np.full(shape, value, dtype=np.float32)
    if "norm" in key or "in_ln" in key:
        return (1.0 + normal(0.05)) if name == "weight" else normal(0.02)
    if name == "bias":
        return normal(0.02)
    if "adaLN_modulation" in key:
        # Gentle modulation around the identity.
        return normal(0.1 / math.sqrt(shape[1]))
    if key.startswith("mimi.upsample.") or key.startswith("mimi.downsample."):
        return normal(1.0 / math.sqrt(shape[1] * shape[2] / 2))
    # Transposed conv [in, out, kernel] with stride kernel/2: 2 taps per output.
    if ".convtr." in key:
        return normal(math.sqrt(2.0) / math.sqrt(shape[0] * 2))
    # Conv [out, in, kernel]; ELU comes before most convs, hence a gain above 1.
    if len(shape) == 3:
        return normal(math.sqrt(2.0) / math.sqrt(shape[1] * shape[2]))
    # Linear [out, in].
    if len(shape) == 2:
        std = 1.0 / math.sqrt(shape[1])
        if key.startswith("flow_lm.transformer.") and ("out_proj" in key or "linear2" in key):
            std /= math.sqrt(2 * flow_layers)
        return normal(std)
    return normal(0.1)


def calibrated_output_layer(
    backend: Backend,
    weights: Mapping[str, np.ndarray],
    *,
    seed: int = 0,
    target_rms: float = TARGET_RMS,
    frames: int = 6,
) -> dict[str, np.ndarray]:
    """The last Mimi decoder conv rescaled so decoded audio has about ``target_rms``.

    Decodes a few random latents with ``backend``; the last conv is linear, so scaling its
    weight and bias scales the audio exactly.

    Args:
        backend: A backend built from ``weights``.
        weights: The pack's weights.
        seed: Seeds the random latents.
        target_rms: The audio's RMS to aim at.
        frames: How many latent frames to decode.

    Returns:
        The last conv's weight and bias, rescaled, by key.
    """
    config = backend.config
    state = backend.new_mimi_state()
    rng = np.random.default_rng([seed, 1920])
    latents = rng.standard_normal((frames, config.flow_lm.latent_dim)).astype(np.float32)
    audio = np.concatenate([backend.decode(state, latent) for latent in latents])
    rms = float(np.sqrt(np.mean(np.square(audio[audio.size // 3 :], dtype=np.float64))))
    if not np.isfinite(rms) or rms == 0.0:
        raise RuntimeError(f"random decoder output is not usable (rms={rms}); try another seed")
    prefix = _last_decoder_conv(weights)
    gain = np.float32(target_rms / rms)
    return {
        f"{prefix}.weight": weights[f"{prefix}.weight"] * gain,
        f"{prefix}.bias": weights[f"{prefix}.bias"] * gain,
    }


def _last_decoder_conv(weights: Mapping[str, np.ndarray]) -> str:
    """Key prefix of the Mimi decoder's final conv (the one writing audio samples)."""
    pattern = re.compile(r"^mimi\.decoder\.model\.(\d+)\.conv\.weight$")
    indices = [int(m.group(1)) for key in weights if (m := pattern.match(key))]
    return f"mimi.decoder.model.{max(indices)}.conv"


def write_safetensors(
    path: str | os.PathLike[str],
    tensors: Mapping[str, np.ndarray],
    *,
    dtype: Literal["float32", "bfloat16"] = "float32",
    metadata: Mapping[str, str] | None = None,
) -> Path:
    """Write a safetensors file (float tensors as fp32 or bf16, ints as int64); atomic.

    Written by the ``safetensors`` library: its NumPy API for fp32, and for bf16 (which NumPy
    has no dtype for) its raw writer given the rounded bit patterns.

    Args:
        path: The file to write.
        tensors: The tensors by key.
        dtype: How float tensors are stored.
        metadata: The header's string metadata.

    Returns:
        The path written.
    """
    stored: dict[str, np.ndarray] = {}
    for key, value in tensors.items():
        array = np.asarray(value)
        if np.issubdtype(array.dtype, np.floating):
            wanted = "<u2" if dtype == "bfloat16" else "<f4"
            array = _bfloat16_bits(array) if dtype == "bfloat16" else array
        elif np.issubdtype(array.dtype, np.integer):
            wanted = "<i8"
        else:
            raise TypeError(f"{key}: unsupported dtype {array.dtype}")
        stored[key] = np.ascontiguousarray(array, dtype=wanted)
    header = dict(metadata) if metadata else None
    with atomic_path(path) as tmp:
        if dtype == "float32":
            safetensors.numpy.save_file(stored, tmp, metadata=header)
        else:
            specs = {
                key: safetensors.TensorSpec(
                    dtype="bfloat16" if array.dtype == np.uint16 else "int64",
                    shape=array.shape,
                    data_ptr=array.ctypes.data,
                    data_len=array.nbytes,
                )
                for key, array in stored.items()
            }
            # The arrays in `stored` keep the data the specs point at alive.
            safetensors.serialize_file(specs, tmp, metadata=header)
    return Path(path)


def _bfloat16_bits(array: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even float32 → bfloat16 bit patterns (uint16)."""
    bits = np.ascontiguousarray(array, dtype="<f4").view("<u4").astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")


def round_to_bfloat16(array: np.ndarray) -> np.ndarray:
    """float32 values exactly representable in bfloat16 (what a bf16 file gives back)."""
    widened = _bfloat16_bits(array).astype("<u4") << 16
    return widened.view("<f4").reshape(np.shape(array))
