"""I/O specs of the PocketTTS v2.1 CoreML models, and how their outputs feed back.

The four models of a ``gpu``-placement pack (shapes for the full-size models; N = 6 or 24
layers, C = 512 cache slots, W = 256 conditioning rows; every tensor is float32):

    cond_prefill        conditioning [1,W,d] (zero-padded), valid_len [1],
                        cache{i} [2,1,C,kv,hd], position{i} [1]   →  N caches, N positions
    flowlm_step(v2)     sequence [1,1,32] (all NaN = BOS), bos_emb [32], cache{i}, position{i}
                        →  transformer_out [1,1,d], EOS logit [1,1,1], N caches, N positions
    flow_decoder_fused  transformer_out [1,d], latent_init [1,32]  →  latent_final [1,32]
    mimi_decoder        latent [1,32] + 24 state tensors  →  audio [1,1,1920] + 24 states
    mimi_encoderv2/v3   audio [1,1,240000] (10 s)  →  conditioning [1,125,d] (may be fp16 or
                        strided; voice cloning only, loaded on the first clone)

The converter names most outputs itself (``var_2582``, ``new_cache_7_internal_tensor_assign_2``)
and those names carry no order, so FlowLM outputs are matched by **shape, in spec order**: the
k-th output shaped like a cache is layer k's cache, the k-th [1] output layer k's position.
Mimi outputs that keep an input's name (or ``<input>_out``) map to that input; the audio is the
[1,1,frame] output; the rest pair with the remaining inputs of the same shape in spec order.

Everything here is pure Python over ``TensorSpec`` lists, so the same checks run on the real
models (descriptions from ``.mlmodelc/metadata.json``) and on the Linux stand-ins.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ...errors import WeightsMismatchError
from ...model.config import ModelConfig

#: Names of the FlowLM inputs (fixed by the conversion scripts).
CONDITIONING = "conditioning"
VALID_LEN = "valid_len"
SEQUENCE = "sequence"
BOS_EMB = "bos_emb"
FLOW_HIDDEN = "transformer_out"
LATENT_INIT = "latent_init"
MIMI_LATENT = "latent"
ENCODER_AUDIO = "audio"

_CACHE_INPUT = re.compile(r"^cache(\d+)$")
_POSITION_INPUT = re.compile(r"^position(\d+)$")


@dataclass(frozen=True)
class TensorSpec:
    """One model input or output: its name, shape and element type (a NumPy dtype name)."""

    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"

    @property
    def size(self) -> int:
        return math.prod(self.shape)


def _mismatch(model: str, problem: str) -> WeightsMismatchError:
    return WeightsMismatchError(
        f"CoreML model {model!r} does not follow the PocketTTS v2.1 I/O specs: {problem}. "
        "Use the v2.1 packs of FluidInference/pocket-tts-coreml (re-download the pack if its "
        "files were changed)."
    )


def _by_name(model: str, specs: Sequence[TensorSpec], name: str) -> TensorSpec:
    for spec in specs:
        if spec.name == name:
            return spec
    raise _mismatch(model, f"it has no input {name!r} (inputs: {[s.name for s in specs]})")


# -- FlowLM KV cache (cond_prefill and flowlm_step) -------------------------------------------


@dataclass(frozen=True)
class KVBinding:
    """Where each layer's cache and position go in and come out of a FlowLM model."""

    #: Shape [2, 1, C, kv_heads, head_dim].
    cache_shape: tuple[int, ...]
    #: In layer order.
    cache_inputs: tuple[str, ...]
    position_inputs: tuple[str, ...]
    #: In layer order, matched by shape and spec order.
    cache_outputs: tuple[str, ...]
    position_outputs: tuple[str, ...]

    @property
    def num_layers(self) -> int:
        return len(self.cache_inputs)

    @property
    def capacity(self) -> int:
        return self.cache_shape[2]


def _kv_binding(
    model: str, inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec]
) -> tuple[KVBinding, list[TensorSpec]]:
    """The KV binding of a FlowLM model and its outputs that are neither caches nor positions."""
    caches: dict[int, TensorSpec] = {}
    positions: dict[int, TensorSpec] = {}
    for spec in inputs:
        if match := _CACHE_INPUT.match(spec.name):
            caches[int(match.group(1))] = spec
        elif match := _POSITION_INPUT.match(spec.name):
            positions[int(match.group(1))] = spec
    n = len(caches)
    if n == 0 or sorted(caches) != list(range(n)) or sorted(positions) != list(range(n)):
        raise _mismatch(
            model,
            f"expected inputs cache0…cacheN-1 and position0…positionN-1, found caches "
            f"{sorted(caches)} and positions {sorted(positions)}",
        )
    cache_shape = caches[0].shape
    if len(cache_shape) != 5 or cache_shape[:2] != (2, 1):
        raise _mismatch(model, f"cache0 has shape {list(cache_shape)}, expected [2,1,C,kv,hd]")
    for i in range(n):
        if caches[i].shape != cache_shape:
            raise _mismatch(model, f"cache{i} has shape {list(caches[i].shape)}, not cache0's")
        if positions[i].shape != (1,):
            raise _mismatch(model, f"position{i} has shape {list(positions[i].shape)}, not [1]")

    cache_outs = [s.name for s in outputs if s.shape == cache_shape]
    position_outs = [s.name for s in outputs if s.shape == (1,)]
    if len(cache_outs) != n or len(position_outs) != n:
        raise _mismatch(
            model,
            f"{n} layers need {n} cache outputs {list(cache_shape)} and {n} position outputs "
            f"[1]; the model has {len(cache_outs)} and {len(position_outs)}",
        )
    others = [s for s in outputs if s.shape not in (cache_shape, (1,))]
    binding = KVBinding(
        cache_shape=cache_shape,
        cache_inputs=tuple(f"cache{i}" for i in range(n)),
        position_inputs=tuple(f"position{i}" for i in range(n)),
        cache_outputs=tuple(cache_outs),
        position_outputs=tuple(position_outs),
    )
    return binding, others


@dataclass(frozen=True)
class PrefillSpecs:
    """cond_prefill: W conditioning rows per call (zero-padded, ``valid_len`` of them real)."""

    kv: KVBinding
    window: int
    d_model: int

    @classmethod
    def from_io(
        cls,
        inputs: Sequence[TensorSpec],
        outputs: Sequence[TensorSpec],
        model: str = "cond_prefill",
    ) -> PrefillSpecs:
        conditioning = _by_name(model, inputs, CONDITIONING)
        valid_len = _by_name(model, inputs, VALID_LEN)
        if len(conditioning.shape) != 3 or conditioning.shape[0] != 1:
            raise _mismatch(model, f"conditioning has shape {list(conditioning.shape)}")
        if valid_len.shape != (1,):
            raise _mismatch(model, f"valid_len has shape {list(valid_len.shape)}, not [1]")
        kv, others = _kv_binding(model, inputs, outputs)
        if others:
            raise _mismatch(model, f"unexpected outputs {[(s.name, s.shape) for s in others]}")
        return cls(kv=kv, window=conditioning.shape[1], d_model=conditioning.shape[2])


@dataclass(frozen=True)
class StepSpecs:
    """flowlm_step / flowlm_stepv2: one latent in, head input and EOS logit out."""

    kv: KVBinding
    latent_dim: int
    hidden_dim: int
    #: Shape [1, 1, hidden_dim].
    hidden_output: str
    #: Shape [1, 1, 1].
    eos_output: str

    @classmethod
    def from_io(
        cls, inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec], model: str = "flowlm_step"
    ) -> StepSpecs:
        sequence = _by_name(model, inputs, SEQUENCE)
        bos = _by_name(model, inputs, BOS_EMB)
        if len(sequence.shape) != 3 or sequence.shape[:2] != (1, 1):
            raise _mismatch(model, f"sequence has shape {list(sequence.shape)}, not [1,1,latent]")
        latent_dim = sequence.shape[2]
        if bos.shape != (latent_dim,):
            raise _mismatch(model, f"bos_emb has shape {list(bos.shape)}, not [{latent_dim}]")
        kv, others = _kv_binding(model, inputs, outputs)
        # [1,1,1] and [1,1,d] in the v2.1 packs; [1,1] / [1,d] accepted as well.
        eos = [s for s in others if s.size == 1 and len(s.shape) >= 2]
        hidden = [s for s in others if s.size > 1 and s.size == s.shape[-1]]
        if len(eos) != 1 or len(hidden) != 1 or len(others) != 2:
            raise _mismatch(
                model,
                "expected one transformer_out [1,1,d] and one EOS logit [1,1,1] besides the "
                f"caches and positions, found {[(s.name, list(s.shape)) for s in others]}",
            )
        return cls(
            kv=kv,
            latent_dim=latent_dim,
            hidden_dim=hidden[0].shape[-1],
            hidden_output=hidden[0].name,
            eos_output=eos[0].name,
        )


@dataclass(frozen=True)
class FlowDecoderSpecs:
    """flow_decoder_fused: head input + initial noise → latent (8 LSD steps inside)."""

    hidden_dim: int
    latent_dim: int
    latent_output: str

    @classmethod
    def from_io(
        cls,
        inputs: Sequence[TensorSpec],
        outputs: Sequence[TensorSpec],
        model: str = "flow_decoder_fused",
    ) -> FlowDecoderSpecs:
        hidden = _by_name(model, inputs, FLOW_HIDDEN)
        latent = _by_name(model, inputs, LATENT_INIT)
        if len(hidden.shape) != 2 or hidden.shape[0] != 1:
            raise _mismatch(model, f"transformer_out has shape {list(hidden.shape)}, not [1,d]")
        if len(latent.shape) != 2 or latent.shape[0] != 1:
            raise _mismatch(model, f"latent_init has shape {list(latent.shape)}, not [1,32]")
        if len(inputs) != 2 or len(outputs) != 1 or outputs[0].shape != latent.shape:
            raise _mismatch(
                model,
                "expected inputs transformer_out, latent_init and one output "
                f"{list(latent.shape)}; "
                f"found inputs {[s.name for s in inputs]}, outputs "
                f"{[(s.name, list(s.shape)) for s in outputs]}",
            )
        return cls(
            hidden_dim=hidden.shape[1], latent_dim=latent.shape[1], latent_output=outputs[0].name
        )


# -- Mimi decoder -----------------------------------------------------------------------------


def _is_passthrough(spec: TensorSpec) -> bool:
    """State inputs the graph returns unchanged (first-call flags, zero-length histories)."""
    return spec.name.endswith("_first") or spec.size == 0


@dataclass(frozen=True)
class MimiSpecs:
    """mimi_decoder: one latent per call; every state input is fed back from an output."""

    latent_dim: int
    frame_size: int
    audio_output: str
    #: In spec order.
    state_inputs: tuple[TensorSpec, ...]
    #: (output name, input name) pairs.
    feedback: tuple[tuple[str, str], ...]

    @classmethod
    def from_io(
        cls,
        inputs: Sequence[TensorSpec],
        outputs: Sequence[TensorSpec],
        model: str = "mimi_decoder",
    ) -> MimiSpecs:
        latent = _by_name(model, inputs, MIMI_LATENT)
        if len(latent.shape) != 2 or latent.shape[0] != 1:
            raise _mismatch(model, f"latent has shape {list(latent.shape)}, not [1,32]")
        states = [s for s in inputs if s.name != MIMI_LATENT]
        by_name = {s.name: s for s in states}
        feedback: list[tuple[str, str]] = []
        matched_inputs: set[str] = set()
        rest: list[TensorSpec] = []
        # First, the outputs named after their input.
        for out in outputs:
            target = out.name if out.name in by_name else out.name.removesuffix("_out")
            if (
                target in by_name
                and target not in matched_inputs
                and out.shape == by_name[target].shape
            ):
                feedback.append((out.name, target))
                matched_inputs.add(target)
            else:
                rest.append(out)
        audio = [s for s in rest if len(s.shape) == 3 and s.shape[:2] == (1, 1) and s.shape[2] > 1]
        audio = [s for s in audio if all(s.shape != x.shape for x in states)]
        if len(audio) != 1:
            raise _mismatch(
                model,
                "expected one audio output [1,1,frame], found "
                f"{[(s.name, list(s.shape)) for s in audio]}",
            )
        rest = [s for s in rest if s.name != audio[0].name]
        waiting = [s for s in states if s.name not in matched_inputs]
        # Then the rest by shape, in spec order.
        for out in rest:
            candidates = [s for s in waiting if s.shape == out.shape]
            if not candidates:
                raise _mismatch(
                    model, f"output {out.name!r} {list(out.shape)} matches no state input"
                )
            feedback.append((out.name, candidates[0].name))
            waiting.remove(candidates[0])
        unfed = [s.name for s in waiting if not _is_passthrough(s)]
        if unfed:
            raise _mismatch(model, f"no output feeds state input(s) {unfed}")
        return cls(
            latent_dim=latent.shape[1],
            frame_size=audio[0].shape[2],
            audio_output=audio[0].name,
            state_inputs=tuple(states),
            feedback=tuple(feedback),
        )


def mimi_state_layout(config: ModelConfig, cache_slots: int | None = None) -> list[TensorSpec]:
    """The Mimi decoder state tensors of the v2.1 conversion for ``config``, in spec order.

    For the full-size models these are the 24 tensors FluidAudio feeds (``upsample_partial``,
    ``attn{j}_cache`` [2,1,256,8,64] and ``attn{j}_offset``, then per SEANet conv its left
    context ``*_prev`` [1,C,history] and ``*_first`` flag, per transposed conv its overlap
    ``convtr{i}_partial`` [1,C,K-stride]). ``cache_slots`` defaults to the attention context
    rounded up to a power of two (256 for a context of 250).
    """
    mimi = config.mimi
    seanet = mimi.decoder_seanet
    tr = mimi.decoder_transformer
    frame = mimi.frame_size
    stride = frame // seanet.hop_length
    outer = mimi.outer_dim or seanet.dimension
    slots = cache_slots or 1 << max(0, math.ceil(math.log2(tr.context)))
    specs: list[TensorSpec] = []
    if stride > 1:
        specs.append(TensorSpec("upsample_partial", (1, outer, stride)))
    for j in range(tr.num_layers):
        specs.append(TensorSpec(f"attn{j}_cache", (2, 1, slots, tr.num_heads, tr.head_dim)))
        specs.append(TensorSpec(f"attn{j}_offset", (1,)))

    def conv(name: str, channels: int, kernel: int, dilation: int = 1) -> None:
        specs.append(TensorSpec(f"{name}_prev", (1, channels, (kernel - 1) * dilation)))
        specs.append(TensorSpec(f"{name}_first", (1,)))

    mult = 2 ** len(seanet.ratios)
    nf = seanet.n_filters
    conv("conv0", seanet.dimension, seanet.kernel_size)
    for i, ratio in enumerate(seanet.ratios):
        c_out = mult * nf // 2
        specs.append(TensorSpec(f"convtr{i}_partial", (1, c_out, ratio)))
        for r in range(seanet.n_residual_layers):
            block = f"res{i}" if seanet.n_residual_layers == 1 else f"res{i}_{r}"
            hidden = c_out // seanet.compress
            conv(f"{block}_conv0", c_out, seanet.residual_kernel_size, seanet.dilation_base**r)
            conv(f"{block}_conv1", hidden, 1)
        mult //= 2
    conv("conv_final", nf, seanet.last_kernel_size)
    return specs


# -- Mimi encoder (voice cloning) -------------------------------------------------------------


@dataclass(frozen=True)
class EncoderSpecs:
    """mimi_encoderv2 / mimi_encoderv3: a fixed audio window in, voice conditioning out."""

    #: The audio input is [1, 1, window_samples].
    window_samples: int
    #: Output rows.
    frames: int
    #: Output width.
    d_model: int
    #: The conditioning output [1, frames, d_model].
    output: str

    @classmethod
    def from_io(
        cls,
        inputs: Sequence[TensorSpec],
        outputs: Sequence[TensorSpec],
        model: str = "mimi_encoder",
    ) -> EncoderSpecs:
        audio = _by_name(model, inputs, ENCODER_AUDIO)
        if len(inputs) != 1 or len(audio.shape) != 3 or audio.shape[:2] != (1, 1):
            raise _mismatch(
                model,
                f"expected one input audio [1,1,samples], found "
                f"{[(s.name, list(s.shape)) for s in inputs]}",
            )
        named = [s for s in outputs if s.name == CONDITIONING]
        candidates = named or list(outputs)
        if len(candidates) != 1 or len(candidates[0].shape) != 3 or candidates[0].shape[0] != 1:
            raise _mismatch(
                model,
                "expected one output conditioning [1,frames,d], found "
                f"{[(s.name, list(s.shape)) for s in outputs]}",
            )
        out = candidates[0]
        window, frames, d_model = audio.shape[2], out.shape[1], out.shape[2]
        return cls(window_samples=window, frames=frames, d_model=d_model, output=out.name)

    def check(self, config: ModelConfig) -> None:
        """Raise ``WeightsMismatchError`` unless the encoder feeds ``config``'s FlowLM."""
        d_model = config.flow_lm.transformer.d_model
        if self.d_model != d_model:
            raise WeightsMismatchError(
                f"the CoreML Mimi encoder outputs {self.d_model}-wide conditioning, config "
                f"{config.name!r} needs {d_model}: the encoder belongs to another model"
            )
        if self.frames < 1 or self.window_samples < config.mimi.frame_size:
            raise WeightsMismatchError(
                f"the CoreML Mimi encoder takes {self.window_samples} samples and gives "
                f"{self.frames} frames: not a voice-cloning encoder"
            )


# -- checks against the model config ----------------------------------------------------------


@dataclass(frozen=True)
class PackSpecs:
    """The I/O specs of the four models of one pack, checked against each other and a config."""

    prefill: PrefillSpecs
    step: StepSpecs
    flow: FlowDecoderSpecs
    mimi: MimiSpecs

    def check(self, config: ModelConfig) -> None:
        """Raise ``WeightsMismatchError`` unless the models fit ``config`` and each other."""
        tr = config.flow_lm.transformer
        expected_cache = (tr.kv_heads, tr.head_dim)
        for label, kv in (("cond_prefill", self.prefill.kv), ("flowlm", self.step.kv)):
            if kv.num_layers != tr.num_layers or kv.cache_shape[3:] != expected_cache:
                raise WeightsMismatchError(
                    f"the CoreML {label} model has {kv.num_layers} layers of "
                    f"{kv.cache_shape[3]}×{kv.cache_shape[4]} KV heads, config {config.name!r} "
                    f"needs {tr.num_layers} layers of {expected_cache[0]}×{expected_cache[1]}: the "
                    "pack is for another model. Load the pack of this language (e.g. "
                    "'french_24l' for the 24-layer French pack)."
                )
        if self.prefill.kv.cache_shape != self.step.kv.cache_shape:
            raise WeightsMismatchError(
                f"cond_prefill caches {list(self.prefill.kv.cache_shape)} differ from flowlm "
                f"caches {list(self.step.kv.cache_shape)}: the pack mixes two conversions"
            )
        latent = config.flow_lm.latent_dim
        head = config.flow_lm.head_input_dim
        facts = {
            "cond_prefill conditioning width": (self.prefill.d_model, tr.d_model),
            "flowlm latent width": (self.step.latent_dim, latent),
            "flowlm transformer_out width": (self.step.hidden_dim, head),
            "flow decoder input width": (self.flow.hidden_dim, head),
            "flow decoder latent width": (self.flow.latent_dim, latent),
            "mimi latent width": (self.mimi.latent_dim, latent),
            "mimi frame size": (self.mimi.frame_size, config.mimi.frame_size),
        }
        for what, (found, needed) in facts.items():
            if found != needed:
                raise WeightsMismatchError(
                    f"{what} is {found} in the CoreML pack but {needed} in config "
                    f"{config.name!r}: the pack is for another model"
                )
