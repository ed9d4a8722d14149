"""Development packs: random-weight language packs in the real file layout.

Tests, examples and benchmarks need a pack without Hugging Face access. ``build_pack`` writes a
folder that ``PocketTTS.load(model_dir=...)`` reads like a downloaded pack:

    config.json                 (for custom configs) upstream schema, replaces the registry config
    model.safetensors           every key of ``expected_shapes(config)``, random but well scaled
    tokenizer.model | .json     a SentencePiece unigram model trained here on a generated corpus
    embeddings/<voice>.safetensors   voice states prefilled through the NumPy backend

The weights are random: the audio is noise-like, finite and not silent. The EOS head is a
constant (``eos_logit``, 0 by default), so generation stops at the first frame where EOS is
allowed under the default thresholds (-4 and -1); pass an ``eos_threshold`` above ``eos_logit``
to generate up to ``max_frames``. Everything is deterministic for a given seed.

Command line (e.g. a full-size random English pack for benchmarks, ~440 MB):

    python -m pipecat_pocket_tts.engine.devpack OUT --config english
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import math
import os
import random
import re
import struct
import sys
import tempfile
import zlib
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ._atomic import atomic_path, atomic_write_bytes
from .backends.base import Backend
from .config import ModelConfig, get_config

TokenizerFormat = Literal["model", "json"]

#: Voices written by default: the English default voice.
DEFAULT_VOICES = ("alba",)
#: Loudness of the random decoder's output (RMS of float samples in [-1, 1]).
TARGET_RMS = 0.1

# -- tiny configs --------------------------------------------------------------------------


def tiny_config_dict(kind: Literal["standard", "small"] = "standard") -> dict[str, Any]:
    """A tiny model config in upstream's schema (what ``config.json`` of a pack holds).

    ``standard`` has the structure of the 6-layer packs (LSD sampler, BOS before voice, one
    SEANet/transformer for both Mimi sides) with small widths. ``small`` has the structure of
    the 2026-10 small English models: grouped-query attention with a separate attention width,
    a low-rank token table, ``z_dim``, the drifting sampler and a separate, narrower Mimi
    decoder. Both keep Mimi's real framing: SEANet ratios 6·5·4 and an upsample stride of 16,
    so one latent frame is 1920 samples at 24 kHz.
    """
    seanet = {
        "channels": 1,
        "compress": 2,
        "dilation_base": 2,
        "dimension": 32,
        "kernel_size": 7,
        "last_kernel_size": 3,
        "n_filters": 4,
        "n_residual_layers": 1,
        "pad_mode": "constant",
        "ratios": [6, 5, 4],
        "residual_kernel_size": 3,
    }
    mimi_transformer = {
        "context": 250,
        "d_model": 32,
        "dim_feedforward": 64,
        "input_dimension": 32,
        "layer_scale": 0.01,
        "num_heads": 2,
        "num_layers": 1,
        "output_dimensions": [32],
    }
    mimi: dict[str, Any] = {
        "channels": 1,
        "dtype": "float32",
        "frame_rate": 12.5,
        "inner_dim": 32,
        "outer_dim": 32,
        "quantizer": {"dimension": 32, "output_dimension": 32},
        "sample_rate": 24000,
        "seanet": seanet,
        "transformer": mimi_transformer,
    }
    if kind == "standard":
        return {
            "default_temperature": 0.3,
            "flow_lm": {
                "dtype": "float32",
                "flow": {"depth": 2, "dim": 64},
                "insert_bos_before_voice": True,
                "lookup_table": {"dim": 64, "n_bins": 512, "tokenizer": "sentencepiece"},
                "transformer": {
                    "d_model": 64,
                    "hidden_scale": 2,
                    "max_period": 10000,
                    "num_heads": 4,
                    "num_layers": 2,
                },
            },
            "mimi": mimi,
            "replace_characters": {"\u2018": "'", "\u2019": "'"},
        }
    if kind == "small":
        mimi["outer_dim"] = 16
        mimi["quantizer"] = {"dimension": 32, "output_dimension": 16}
        mimi["decoder_seanet"] = {**seanet, "dimension": 16, "kernel_size": 3}
        mimi["decoder_transformer"] = {
            **mimi_transformer,
            "context": 50,
            "d_model": 16,
            "dim_feedforward": 48,
            "input_dimension": 16,
            "num_heads": 2,
            "num_layers": 2,
            "output_dimensions": [16],
        }
        return {
            "default_eos_threshold": -1.0,
            "default_temperature": 0.3,
            "flow_lm": {
                "dtype": "float32",
                "flow": {"depth": 2, "dim": 32, "type": "drifting"},
                "insert_bos_before_voice": True,
                "lookup_table": {
                    "dim": 48,
                    "n_bins": 512,
                    "rank": 16,
                    "tokenizer": "sentencepiece",
                },
                "transformer": {
                    "attn_dim": 64,
                    "d_model": 48,
                    "dim_feedforward": 96,
                    "hidden_scale": 1,
                    "max_period": 10000,
                    "num_heads": 4,
                    "num_kv_heads": 2,
                    "num_layers": 2,
                },
                "z_dim": 24,
            },
            "mimi": mimi,
            "replace_characters": {"\u2013": ",", "\u2014": ",", "\u2018": "'", "\u2019": "'"},
        }
    raise ValueError(f"unknown tiny config kind {kind!r}: use 'standard' or 'small'")


# -- tokenizer -----------------------------------------------------------------------------


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_COMMON_WORDS = _words(
    "the of and to a in is you that it he was for on are as with his they I at be this have "
    "from or one had by word but not what all were we when your can said there use an each "
    "which she do how their if will up other about out many then them these so some her would "
    "make like him into time has look two more write go see number no way could people my "
    "than first water been call who its now find long down day did get come made may part "
    "hello world voice speech sound model test yes okay thanks please good morning evening"
)
_ONSETS = ("", *_words("b c d f g h j k l m n p r s t v w z ch sh th st br tr pl gr qu"))
_VOWELS = _words("a e i o u ai ea ou ie oo é è à ü ö ä ñ ç ô í ó ú")
_CODAS = ("", "", "n", "r", "s", "t", "l", "m", "nd", "st", "ng", "x")
_ENDINGS = (".", ".", ".", "!", "?", ",", ";", ":", "...")


def _corpus(num_lines: int, seed: int) -> list[str]:
    """Deterministic pseudo-text: common words, syllable words, numbers, punctuation."""
    rng = random.Random(seed)

    def word() -> str:
        if rng.random() < 0.4:
            return rng.choice(_COMMON_WORDS)
        syllables = rng.randint(1, 3)
        return "".join(
            rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(syllables)
        )

    lines = []
    for _ in range(num_lines):
        words = []
        for _ in range(rng.randint(3, 14)):
            if rng.random() < 0.05:
                words.append(str(rng.randint(0, 99_999)))
            else:
                w = word()
                words.append(w.capitalize() if rng.random() < 0.1 else w)
        lines.append(" ".join(words) + rng.choice(_ENDINGS))
    return lines


def train_sentencepiece(
    folder: str | os.PathLike[str],
    vocab_size: int,
    *,
    seed: int = 0,
    num_lines: int = 2000,
    model_name: str = "tokenizer",
) -> Path:
    """Train a SentencePiece unigram model on a generated corpus; write ``<model_name>.model``.

    Byte fallback, split digits and identity normalization, like the real packs' tokenizers
    (every character stays representable). Deterministic for a given seed and vocab size.
    """
    if vocab_size < 300:
        raise ValueError(f"vocab_size={vocab_size}: needs ≥ 300 (256 byte pieces + text pieces)")
    path = Path(folder) / f"{model_name}.model"
    atomic_write_bytes(path, _trained_model(vocab_size, seed, num_lines))
    return path


@lru_cache(maxsize=8)
def _trained_model(vocab_size: int, seed: int, num_lines: int) -> bytes:
    """The serialized SentencePiece model (cached: tests build many packs per process)."""
    return sentencepiece_model(_corpus(num_lines, seed), vocab_size, seed_sentencepiece_size=20_000)


def sentencepiece_model(
    sentences: Iterable[str],
    vocab_size: int,
    *,
    normalization: str = "identity",
    byte_fallback: bool = True,
    **options: Any,
) -> bytes:
    """A SentencePiece unigram model trained on ``sentences``, serialized (the one trainer).

    Set up like the real packs' tokenizers: digits split, every character covered, byte
    fallback and identity normalization unless asked otherwise. One thread and no shuffling:
    the same sentences and settings give the same bytes. ``options`` are further
    ``SentencePieceTrainer`` settings, e.g. ``remove_extra_whitespaces=False``.
    """
    import sentencepiece as spm

    proto = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences),
        model_writer=proto,
        vocab_size=vocab_size,
        model_type="unigram",
        byte_fallback=byte_fallback,
        split_digits=True,
        normalization_rule_name=normalization,
        character_coverage=1.0,
        shuffle_input_sentence=False,
        num_threads=1,
        minloglevel=2,
        **options,
    )
    return proto.getvalue()


def sentencepiece_to_json(model_path: str | os.PathLike[str]) -> dict[str, Any]:
    """The Hugging Face ``tokenizers`` JSON (Unigram model) equivalent to a SentencePiece model.

    Same vocabulary, scores and ids; the normalizer mirrors SentencePiece's whitespace handling
    (strip spaces at both ends, collapse runs of spaces, prefix '▁', spaces become '▁').
    """
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(model_path))
    vocab = [[sp.id_to_piece(i), float(sp.get_score(i))] for i in range(sp.vocab_size())]
    specials = [i for i in range(sp.vocab_size()) if sp.is_control(i) or sp.is_unknown(i)]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": i,
                "content": sp.id_to_piece(i),
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for i in specials
        ],
        "normalizer": {
            "type": "Sequence",
            "normalizers": [
                {
                    # spaces at both ends; lookarounds because Python re lacks \z
                    "type": "Replace",
                    "pattern": {"Regex": "(?<![\\s\\S]) +| +(?![\\s\\S])"},
                    "content": "",
                },
                {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
                {"type": "Prepend", "prepend": "\u2581"},
                {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
            ],
        },
        "pre_tokenizer": None,
        "post_processor": None,
        "decoder": {
            "type": "Sequence",
            "decoders": [
                {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                {"type": "ByteFallback"},
                {"type": "Fuse"},
                {"type": "Strip", "content": " ", "start": 1, "stop": 0},
            ],
        },
        "model": {
            "type": "Unigram",
            "unk_id": sp.unk_id(),
            "vocab": vocab,
            "byte_fallback": True,
        },
    }


# -- random weights ------------------------------------------------------------------------


def random_weights(
    config: ModelConfig,
    *,
    seed: int = 0,
    eos_logit: float = 0.0,
    with_cloning: bool = True,
) -> dict[str, np.ndarray]:
    """Random float32 weights for every key of ``expected_shapes(config)``.

    Scaled so activations keep unit-ish variance: linear and conv weights ~ N(0, 1/fan_in),
    residual-branch outputs shrunk by depth, norms near identity, positive ``emb_std``.
    Each tensor has its own generator (seeded by ``seed`` and the key), so adding keys never
    changes the others. ``with_cloning=False`` leaves out the encoder-side weights, like the
    ungated hub checkpoints.
    """
    from .backends.numpy.weights import expected_shapes, is_cloning_key

    flow_layers = config.flow_lm.transformer.num_layers
    out: dict[str, np.ndarray] = {}
    for key, shape in expected_shapes(config).items():
        if not with_cloning and is_cloning_key(key):
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
        return normal(0.1 / math.sqrt(shape[1]))  # gentle modulation around identity
    if key.startswith("mimi.upsample.") or key.startswith("mimi.downsample."):
        return normal(1.0 / math.sqrt(shape[1] * shape[2] / 2))
    if ".convtr." in key:  # [in, out, kernel] with stride kernel/2: 2 taps per output
        return normal(math.sqrt(2.0) / math.sqrt(shape[0] * 2))
    if len(shape) == 3:  # conv [out, in, kernel]; ELU before most convs: a gain above 1
        return normal(math.sqrt(2.0) / math.sqrt(shape[1] * shape[2]))
    if len(shape) == 2:  # linear [out, in]
        std = 1.0 / math.sqrt(shape[1])
        if key.startswith("flow_lm.transformer.") and ("out_proj" in key or "linear2" in key):
            std /= math.sqrt(2 * flow_layers)
        return normal(std)
    return normal(0.1)


def write_safetensors(
    path: str | os.PathLike[str],
    tensors: Mapping[str, np.ndarray],
    *,
    dtype: Literal["float32", "bfloat16"] = "float32",
    metadata: Mapping[str, str] | None = None,
) -> Path:
    """Write a safetensors file (float tensors as fp32 or bf16, ints as they are); atomic.

    Tensors are converted and written one at a time (no second copy of the whole model).
    """
    header: dict[str, Any] = {}
    if metadata:
        header["__metadata__"] = dict(metadata)
    keys = sorted(tensors)
    offset = 0
    for key in keys:
        array = np.asarray(tensors[key])
        tag = _safetensors_dtype(array, dtype, key)
        size = array.size * _TAG_BYTES[tag]
        header[key] = {
            "dtype": tag,
            "shape": list(array.shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(encoded)))
        f.write(encoded)
        for key in keys:
            array = np.asarray(tensors[key])
            tag = header[key]["dtype"]
            if tag == "BF16":
                f.write(_to_bfloat16_bytes(array))
            else:
                f.write(np.ascontiguousarray(array, dtype=_TAG_NUMPY[tag]).tobytes())
    return Path(path)


_TAG_BYTES = {"F32": 4, "BF16": 2, "I64": 8}
_TAG_NUMPY = {"F32": "<f4", "I64": "<i8"}


def _safetensors_dtype(array: np.ndarray, dtype: str, key: str) -> str:
    if np.issubdtype(array.dtype, np.floating):
        return "BF16" if dtype == "bfloat16" else "F32"
    if np.issubdtype(array.dtype, np.integer):
        return "I64"
    raise TypeError(f"{key}: unsupported dtype {array.dtype}")


def _bfloat16_bits(array: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even float32 → bfloat16 bit patterns (uint16)."""
    bits = np.ascontiguousarray(array, dtype="<f4").view("<u4").astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")


def _to_bfloat16_bytes(array: np.ndarray) -> bytes:
    return _bfloat16_bits(array).tobytes()


def _round_to_bfloat16(array: np.ndarray) -> np.ndarray:
    """float32 values exactly representable in bfloat16 (what a bf16 file gives back)."""
    widened = _bfloat16_bits(array).astype("<u4") << 16
    return widened.view("<f4").reshape(np.shape(array))


# -- packs ---------------------------------------------------------------------------------


def build_pack(
    folder: str | os.PathLike[str],
    config: str | Mapping[str, Any],
    *,
    seed: int = 0,
    voices: Sequence[str] = DEFAULT_VOICES,
    tokenizer_format: TokenizerFormat | None = None,
    dtype: Literal["float32", "bfloat16"] = "float32",
    with_cloning: bool = True,
    language: str | None = None,
    eos_logit: float = 0.0,
    voice_frames: int = 12,
) -> Path:
    """Write a random-weight pack into ``folder`` and return the folder.

    ``config``: a registry name (e.g. "english": no config.json is written, the pack stands for
    that config) or an upstream-schema dict (e.g. ``tiny_config_dict()``; written as
    config.json). ``tokenizer_format``: "model" (SentencePiece) or "json" (HF tokenizers);
    default: what the config's ``lookup_table.tokenizer`` says. ``language`` is the config name
    the voices are stamped with (default: the registry name, or "english" for dicts): load the
    pack under that name. Voices are ``voice_frames`` random conditioning frames prefilled
    through the NumPy backend.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if isinstance(config, str):
        model_config = get_config(config)
        raw: dict[str, Any] | None = None
        name = language or config
    else:
        raw = copy.deepcopy(dict(config))
        name = language or "english"
        model_config = ModelConfig.from_dict(name, raw)
    kind = model_config.flow_lm.lookup_table.tokenizer
    fmt: TokenizerFormat = tokenizer_format or ("json" if kind == "tokenizers" else "model")
    if fmt not in ("model", "json"):
        raise ValueError(f"tokenizer_format={fmt!r}: use 'model' or 'json'")

    if raw is not None:
        raw["flow_lm"]["lookup_table"]["tokenizer"] = (
            "tokenizers" if fmt == "json" else "sentencepiece"
        )
        raw["flow_lm"]["lookup_table"].pop("tokenizer_path", None)
        raw["flow_lm"]["dtype"] = raw["mimi"]["dtype"] = dtype
        atomic_write_bytes(folder / "config.json", json.dumps(raw, indent=2).encode())
        model_config = ModelConfig.from_dict(name, copy.deepcopy(raw))

    _write_tokenizer(folder, model_config.flow_lm.lookup_table.n_bins, fmt, seed)
    for stale in ("tokenizer.json", "tokenizer.model"):
        if not stale.endswith(fmt):
            (folder / stale).unlink(missing_ok=True)

    from .backends.numpy.backend import NumpyBackend

    weights = random_weights(
        model_config, seed=seed, eos_logit=eos_logit, with_cloning=with_cloning
    )
    if dtype == "bfloat16":  # compute voices and the calibration with what the file holds
        weights = {k: _round_to_bfloat16(v) for k, v in weights.items()}
    backend = NumpyBackend(model_config, weights)
    weights.update(calibrated_output_layer(backend, weights, seed=seed))
    write_safetensors(folder / "model.safetensors", weights, dtype=dtype)
    if voices:
        # Voices only use the FlowLM, which calibration leaves untouched.
        write_random_voices(folder, backend, voices, seed=seed, frames=voice_frames)
    return folder


def calibrated_output_layer(
    backend: Backend,
    weights: Mapping[str, np.ndarray],
    *,
    seed: int = 0,
    target_rms: float = TARGET_RMS,
    frames: int = 6,
) -> dict[str, np.ndarray]:
    """The last Mimi decoder conv rescaled so decoded audio has about ``target_rms``.

    Decodes a few random latents with ``backend`` (built from ``weights``); the last conv is
    linear, so scaling its weight and bias scales the audio exactly. Returns the two tensors.
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


def _write_tokenizer(folder: Path, vocab_size: int, fmt: TokenizerFormat, seed: int) -> None:
    if fmt == "model":
        train_sentencepiece(folder, vocab_size, seed=seed)
        return
    with tempfile.TemporaryDirectory() as tmp:
        model = train_sentencepiece(tmp, vocab_size, seed=seed)
        data = json.dumps(sentencepiece_to_json(model), ensure_ascii=False, indent=1)
    atomic_write_bytes(folder / "tokenizer.json", data.encode())


def write_random_voices(
    folder: str | os.PathLike[str],
    backend: Backend,
    names: Iterable[str],
    *,
    seed: int = 0,
    frames: int = 12,
) -> list[Path]:
    """Prefill random voice conditioning [frames, d_model] through ``backend``; save each
    as ``embeddings/<name>.safetensors`` (stamped with the backend's config name)."""
    from .voices import Voice

    config = backend.config
    d_model = config.flow_lm.transformer.d_model
    paths = []
    for voice_name in names:
        rng = np.random.default_rng([seed, zlib.crc32(voice_name.encode())])
        conditioning = rng.standard_normal((frames, d_model)).astype(np.float32)
        bos = backend.bos_before_voice()
        if bos is not None:
            conditioning = np.concatenate([np.reshape(bos, (1, d_model)), conditioning])
        state = backend.new_flow_state()
        backend.prefill(state, conditioning)
        voice = Voice(
            kv=backend.voice_from_flow_state(state),
            config_name=config.name,
            source=f"devpack random voice {voice_name!r} (seed {seed})",
        )
        paths.append(voice.save(Path(folder) / "embeddings" / f"{voice_name}.safetensors"))
    return paths


# -- command line --------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pipecat_pocket_tts.engine.devpack",
        description="Write a random-weight PocketTTS pack (for tests, examples and benchmarks).",
    )
    parser.add_argument("out", type=Path, help="output folder")
    parser.add_argument(
        "--config",
        default="tiny",
        help="a registry config name (e.g. english; full size) or tiny / tiny-small (default tiny)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--voices", default=",".join(DEFAULT_VOICES), help="comma-separated names")
    parser.add_argument("--tokenizer-format", choices=("model", "json"), default=None)
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    parser.add_argument("--without-cloning", action="store_true", help="omit encoder weights")
    parser.add_argument(
        "--voice-frames",
        type=int,
        default=None,
        help="voice prompt length in 80 ms frames (default: 12 for tiny, 63 ≈ 5 s otherwise)",
    )
    args = parser.parse_args(argv)

    tiny = {"tiny": "standard", "tiny-standard": "standard", "tiny-small": "small"}
    config: str | dict[str, Any] = (
        tiny_config_dict(tiny[args.config]) if args.config in tiny else args.config  # type: ignore[arg-type]
    )
    from .errors import PocketTTSError

    try:
        folder = build_pack(
            args.out,
            config,
            seed=args.seed,
            voices=[v for v in args.voices.split(",") if v],
            tokenizer_format=args.tokenizer_format,
            dtype=args.dtype,
            with_cloning=not args.without_cloning,
            voice_frames=args.voice_frames or (12 if args.config in tiny else 63),
        )
    except PocketTTSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    print(f"wrote {folder} ({size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
