"""Model configs: the facts of every PocketTTS model upstream pocket-tts 4.0.1 ships.

The registry is data (``configs.json``, written by ``tools/import_upstream_configs.py`` from
upstream's packaged YAML files) in upstream's own schema; this module turns one entry into
typed, frozen dataclasses. A config feature the engine does not implement raises
``NotImplementedError`` naming it, never wrong audio.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any

from ..errors import UnknownLanguageError
from .config_registry import raw_configs
from .languages import config_language

SAMPLE_RATE = 24_000
FRAME_RATE = 12.5
# Samples per latent frame at 24 kHz.
FRAME_SIZE = 1920
# The seconds of audio in one frame (0.08).
FRAME_SECONDS = FRAME_SIZE / SAMPLE_RATE
LATENT_DIM = 32
MAX_TOKENS_PER_CHUNK = 50
VOICES_REVISION = "a7056f505a4a8ca72d8b5fb1440071d6f1a35739"
VOICES_REPO = "kyutai/pocket-tts-without-voice-cloning"


@dataclass(frozen=True)
class HubFile:
    """One file on the Hugging Face hub, pinned to a revision."""

    repo: str
    path: str
    revision: str | None = None

    @classmethod
    def parse(cls, url: str) -> HubFile:
        """Parse ``hf://owner/repo/path/to/file@revision``."""
        if not url.startswith("hf://"):
            raise ValueError(f"not a hub url: {url!r}")
        body, _, revision = url[len("hf://") :].partition("@")
        owner, repo, path = body.split("/", 2)
        return cls(f"{owner}/{repo}", path, revision or None)

    @property
    def folder(self) -> str:
        """The folder of the file inside its repository ('' at the root)."""
        return self.path.rpartition("/")[0]

    @property
    def filename(self) -> str:
        return self.path.rpartition("/")[2]


@dataclass(frozen=True)
class FlowLMTransformerConfig:
    d_model: int
    num_heads: int
    num_layers: int
    hidden_scale: int
    max_period: float
    attn_dim: int | None = None
    num_kv_heads: int | None = None
    dim_feedforward: int | None = None

    @property
    def query_dim(self) -> int:
        """Width of queries and of the attention output."""
        return self.attn_dim or self.d_model

    @property
    def head_dim(self) -> int:
        return self.query_dim // self.num_heads

    @property
    def kv_heads(self) -> int:
        return self.num_kv_heads or self.num_heads

    @property
    def ffn_dim(self) -> int:
        return self.dim_feedforward or self.d_model * self.hidden_scale


@dataclass(frozen=True)
class SamplerConfig:
    # One of "lsd", "flow_matching", "drifting" or "pointwise".
    type: str
    dim: int
    depth: int


@dataclass(frozen=True)
class LookupTableConfig:
    # The vocabulary size; the table has n_bins + 1 rows, the last for padding.
    n_bins: int
    dim: int
    # "tokenizers" (tokenizer.json) or "sentencepiece" (tokenizer.model).
    tokenizer: str
    tokenizer_file: HubFile | None
    # When set, a low-rank table and a bias-free projection.
    rank: int | None = None


@dataclass(frozen=True)
class FlowLMConfig:
    transformer: FlowLMTransformerConfig
    sampler: SamplerConfig
    lookup_table: LookupTableConfig
    z_dim: int | None
    insert_bos_before_voice: bool
    latent_dim: int = LATENT_DIM

    @property
    def head_input_dim(self) -> int:
        """Width of the vector fed to the sampler and EOS heads."""
        return self.z_dim or self.transformer.d_model


@dataclass(frozen=True)
class SEANetConfig:
    dimension: int
    channels: int
    n_filters: int
    n_residual_layers: int
    ratios: tuple[int, ...]
    kernel_size: int
    residual_kernel_size: int
    last_kernel_size: int
    dilation_base: int
    pad_mode: str
    compress: int

    @property
    def hop_length(self) -> int:
        out = 1
        for r in self.ratios:
            out *= r
        return out


@dataclass(frozen=True)
class MimiTransformerConfig:
    d_model: int
    num_heads: int
    num_layers: int
    layer_scale: float
    context: int
    dim_feedforward: int
    input_dimension: int
    output_dimensions: tuple[int, ...]
    max_period: float = 10_000.0

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads


@dataclass(frozen=True)
class MimiConfig:
    sample_rate: int
    channels: int
    frame_rate: float
    # The encoder side, and the decoder side unless decoder_seanet is set.
    seanet: SEANetConfig
    transformer: MimiTransformerConfig
    quantizer_dimension: int
    quantizer_output_dimension: int
    inner_dim: int | None
    outer_dim: int | None
    decoder_seanet_override: SEANetConfig | None = None
    decoder_transformer_override: MimiTransformerConfig | None = None

    @property
    def decoder_seanet(self) -> SEANetConfig:
        return self.decoder_seanet_override or self.seanet

    @property
    def decoder_transformer(self) -> MimiTransformerConfig:
        return self.decoder_transformer_override or self.transformer

    @property
    def frame_size(self) -> int:
        return round(self.sample_rate / self.frame_rate)


@dataclass(frozen=True)
class TextOptions:
    """How upstream prepares a text prompt for this model."""

    replace_characters: dict[str, str] = field(default_factory=dict)
    pad_with_spaces_for_short_inputs: bool = False
    remove_semicolons: bool = False
    append_terminal_punctuation: bool = True
    capitalize_first_letter: bool = True


@dataclass(frozen=True)
class ModelConfig:
    """Everything the engine needs to know about one upstream model config."""

    name: str
    flow_lm: FlowLMConfig
    mimi: MimiConfig
    text: TextOptions
    default_temperature: float
    default_eos_threshold: float
    model_recommended_frames_after_eos: int | None
    weights: HubFile | None
    weights_without_voice_cloning: HubFile | None

    @property
    def language(self) -> str:
        """The spoken language's key: 'english' for every English variant, etc."""
        return config_language(self.name)

    @property
    def pack_folder(self) -> str:
        """The folder of this pack in the hub repositories (``languages/<name>``)."""
        source = self.weights_without_voice_cloning or self.weights
        return source.folder if source else f"languages/{self.name}"

    @property
    def num_layers(self) -> int:
        return self.flow_lm.transformer.num_layers

    @classmethod
    def from_dict(cls, name: str, raw: dict[str, Any]) -> ModelConfig:
        """Build from a dict in upstream's YAML schema (unknown keys raise NotImplementedError)."""
        raw = dict(raw)
        flow_raw = dict(raw.pop("flow_lm"))
        mimi_raw = dict(raw.pop("mimi"))
        _check_dtype(flow_raw.pop("dtype", "float32"), "flow_lm.dtype")
        _check_dtype(mimi_raw.pop("dtype", "float32"), "mimi.dtype")
        flow_raw.pop("weights_path", None)
        mimi_raw.pop("weights_path", None)

        lut = dict(flow_raw.pop("lookup_table"))
        tokenizer_path = lut.pop("tokenizer_path", None)
        lookup = LookupTableConfig(
            n_bins=lut.pop("n_bins"),
            dim=lut.pop("dim"),
            tokenizer=lut.pop("tokenizer"),
            tokenizer_file=_hub_or_none(tokenizer_path),
            rank=lut.pop("rank", None),
        )
        _no_leftovers(lut, "flow_lm.lookup_table")
        sampler_raw = dict(flow_raw.pop("flow"))
        sampler = SamplerConfig(
            type=sampler_raw.pop("type", "lsd"),
            dim=sampler_raw.pop("dim"),
            depth=sampler_raw.pop("depth"),
        )
        _no_leftovers(sampler_raw, "flow_lm.flow")
        if sampler.type not in SAMPLER_TYPES:
            raise NotImplementedError(f"{name}: sampler type {sampler.type!r} is not supported")
        flow_lm = FlowLMConfig(
            transformer=_build(FlowLMTransformerConfig, flow_raw.pop("transformer"), "flow_lm"),
            sampler=sampler,
            lookup_table=lookup,
            z_dim=flow_raw.pop("z_dim", None),
            insert_bos_before_voice=flow_raw.pop("insert_bos_before_voice", False),
        )
        _no_leftovers(flow_raw, "flow_lm")

        quantizer = dict(mimi_raw.pop("quantizer"))
        decoder_seanet = mimi_raw.pop("decoder_seanet", None)
        decoder_transformer = mimi_raw.pop("decoder_transformer", None)
        mimi = MimiConfig(
            sample_rate=mimi_raw.pop("sample_rate"),
            channels=mimi_raw.pop("channels"),
            frame_rate=mimi_raw.pop("frame_rate"),
            seanet=_build_seanet(mimi_raw.pop("seanet"), "mimi.seanet"),
            transformer=_build_mimi_transformer(mimi_raw.pop("transformer"), "mimi.transformer"),
            quantizer_dimension=quantizer.pop("dimension"),
            quantizer_output_dimension=quantizer.pop("output_dimension"),
            inner_dim=mimi_raw.pop("inner_dim", None),
            outer_dim=mimi_raw.pop("outer_dim", None),
            decoder_seanet_override=(
                _build_seanet(decoder_seanet, "mimi.decoder_seanet") if decoder_seanet else None
            ),
            decoder_transformer_override=(
                _build_mimi_transformer(decoder_transformer, "mimi.decoder_transformer")
                if decoder_transformer
                else None
            ),
        )
        _no_leftovers(quantizer, "mimi.quantizer")
        _no_leftovers(mimi_raw, "mimi")
        if mimi.channels != 1:
            raise NotImplementedError(f"{name}: mimi.channels={mimi.channels} (only mono)")

        text = TextOptions(
            replace_characters=dict(raw.pop("replace_characters", {}) or {}),
            pad_with_spaces_for_short_inputs=raw.pop("pad_with_spaces_for_short_inputs", False),
            remove_semicolons=raw.pop("remove_semicolons", False),
            append_terminal_punctuation=raw.pop("append_terminal_punctuation", True),
            capitalize_first_letter=raw.pop("capitalize_first_letter", True),
        )
        config = cls(
            name=name,
            flow_lm=flow_lm,
            mimi=mimi,
            text=text,
            default_temperature=float(raw.pop("default_temperature", 0.3)),
            default_eos_threshold=float(raw.pop("default_eos_threshold", -4.0)),
            model_recommended_frames_after_eos=raw.pop("model_recommended_frames_after_eos", None),
            weights=_hub_or_none(raw.pop("weights_path", None)),
            weights_without_voice_cloning=_hub_or_none(
                raw.pop("weights_path_without_voice_cloning", None)
            ),
        )
        _no_leftovers(raw, "config")
        return config


SAMPLER_TYPES = ("lsd", "flow_matching", "drifting", "pointwise")


def _check_dtype(dtype: str, where: str) -> None:
    if dtype not in ("float32", "bfloat16"):
        raise NotImplementedError(f"{where}={dtype!r} is not supported (float32 or bfloat16)")


def _hub_or_none(url: str | None) -> HubFile | None:
    return HubFile.parse(url) if url and url.startswith("hf://") else None


def _no_leftovers(raw: dict[str, Any], where: str) -> None:
    if raw:
        raise NotImplementedError(f"config feature(s) not supported in {where}: {sorted(raw)}")


def _build(kind: type, raw: dict[str, Any], where: str) -> Any:
    known = set(kind.__dataclass_fields__)
    unknown = set(raw) - known
    if unknown:
        raise NotImplementedError(f"config feature(s) not supported in {where}: {sorted(unknown)}")
    return kind(**raw)


def _build_seanet(raw: dict[str, Any], where: str) -> SEANetConfig:
    raw = {**raw, "ratios": tuple(raw["ratios"])}
    seanet = _build(SEANetConfig, raw, where)
    if seanet.pad_mode != "constant":
        raise NotImplementedError(f"{where}.pad_mode={seanet.pad_mode!r} (only 'constant')")
    return seanet


def _build_mimi_transformer(raw: dict[str, Any], where: str) -> MimiTransformerConfig:
    raw = {**raw, "output_dimensions": tuple(raw["output_dimensions"])}
    return _build(MimiTransformerConfig, raw, where)


@cache
def get_config(name: str) -> ModelConfig:
    """The config registered under ``name`` (e.g. 'english', 'french_24l')."""
    registry = raw_configs()
    if name not in registry:
        raise UnknownLanguageError(
            f"unknown language or model config {name!r}; "
            f"choose one of: {', '.join(sorted(registry))}"
        )
    return ModelConfig.from_dict(name, registry[name])
