"""The CoreML backend: the stages of ``base.Backend`` on FluidInference's v2.1 CoreML packs.

    embed_text   host: rows of ``text_embed_table.bin``
    prefill      cond_prefill, 256 rows per call (zero-padded, ``valid_len``), windows beyond
    step         flowlm_step (fp16) / flowlm_stepv2 (int8): NaN ``sequence`` = BOS + ``bos_emb``
    sample       flow_decoder_fused: ``latent_init`` = noise·√temperature, 8 LSD steps inside
    decode       mimi_decoder: raw latent (denormalization and quantizer are in the graph) + 24
                 state tensors fed back every frame
    voices       KV snapshots copied into zeroed 512-slot caches
    encode       mimi_encoderv3 (the pack's) or mimi_encoderv2 (shared) + reprojection: 10 s
                 window, ≤ 125 frames (``encoder``); loaded, and for hub packs downloaded, on
                 the first clone

Caches, positions and Mimi states live in the per-sequence state objects and are replaced by
the model outputs after every call (matched as ``io_specs`` says). Models come in through the
``CoreMLModel`` protocol: ``from_pack`` loads the real ``.mlmodelc`` files with coremltools;
tests hand in stand-ins with the same I/O.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...errors import CloningUnavailableError, ContextOverflowError, LoadOptionError
from ...model.compute_units import resolve_compute_units
from ...model.config import MAX_TOKENS_PER_CHUNK, ModelConfig
from ...model.options import LoadOptions
from ...model.packs import PackFiles, PackRequest
from ..base import (
    Backend,
    BackendCapabilities,
    StepOutput,
    VoiceKV,
    check_token_ids,
    check_voice_kv,
)
from .compiled_models import CompiledModel, CoreMLModel
from .constants import PackConstants
from .encoder import MAX_VOICE_FRAMES, Reprojection, VoiceEncoder
from .files import CoreMLPackFiles, find_coreml_pack_files
from .io_specs import (
    BOS_EMB,
    CONDITIONING,
    FLOW_HIDDEN,
    LATENT_INIT,
    MIMI_LATENT,
    SEQUENCE,
    VALID_LEN,
    FlowDecoderSpecs,
    KVBinding,
    MimiSpecs,
    PackSpecs,
    PrefillSpecs,
    StepSpecs,
)
from .states import CoreMLFlowState, CoreMLMimiState

logger = logging.getLogger(__name__)

#: LSD steps baked into ``flow_decoder_fused`` (NumPy equivalent: ``sampler_steps=8``).
FUSED_FLOW_STEPS = 8
PRECISIONS = ("fp16", "int8")
PLACEMENTS = ("gpu",)

ModelLoader = Callable[[Path, str], CoreMLModel]
"""(``.mlmodelc`` path, compute-unit name) → a loaded model."""

EncoderSource = VoiceEncoder | Callable[[], VoiceEncoder]
"""A loaded voice encoder, or a function that loads it (called once, on the first clone)."""

_NO_ENCODER = (
    "this CoreML backend was built without a voice-cloning encoder: load the pack with "
    "CoreMLBackend.from_pack, or clone with backend='numpy'"
)


@dataclass(frozen=True, eq=False)
class StageModels:
    """The four loaded models of a ``gpu``-placement pack."""

    cond_prefill: CoreMLModel
    flowlm: CoreMLModel
    flow_decoder: CoreMLModel
    mimi_decoder: CoreMLModel


class CoreMLBackend(Backend):
    """PocketTTS stages on CoreML models (Apple GPU / Neural Engine / CPU)."""

    name = "coreml"

    def __init__(
        self,
        config: ModelConfig,
        models: StageModels,
        constants: PackConstants,
        *,
        precision: str = "fp16",
        compute_units: Mapping[str, str] | None = None,
        voice_encoder: EncoderSource | None = None,
        cloning_unavailable_reason: str | None = None,
    ) -> None:
        """Bind loaded models to ``config``; ``WeightsMismatchError`` if their I/O does not fit.

        ``voice_encoder`` (a ``VoiceEncoder`` or a loader for it) enables ``encode``;
        ``cloning_unavailable_reason`` says why cloning cannot work (it wins over the encoder).
        """
        self.config = config
        self.models = models
        self.constants = constants
        self.precision = precision
        self.compute_units = dict(compute_units or {})
        self.io_specs = PackSpecs(
            prefill=PrefillSpecs.from_io(models.cond_prefill.inputs, models.cond_prefill.outputs),
            step=StepSpecs.from_io(models.flowlm.inputs, models.flowlm.outputs),
            flow=FlowDecoderSpecs.from_io(models.flow_decoder.inputs, models.flow_decoder.outputs),
            mimi=MimiSpecs.from_io(models.mimi_decoder.inputs, models.mimi_decoder.outputs),
        )
        self.io_specs.check(config)
        self._kv = self.io_specs.step.kv
        self._mimi_init = constants.initial_mimi_state(self.io_specs.mimi.state_inputs)
        if isinstance(voice_encoder, VoiceEncoder):
            voice_encoder.io_specs.check(config)
        self._voice_encoder = voice_encoder
        self._encoder_lock = threading.Lock()
        reason = cloning_unavailable_reason
        if reason is None and voice_encoder is None:
            reason = _NO_ENCODER
        needs_bos = config.flow_lm.insert_bos_before_voice
        if reason is None and needs_bos and constants.bos_before_voice is None:
            reason = (
                "voice cloning on CoreML needs constants_bin/bos_before_voice.bin, which this "
                "pack lacks: re-download the pack, or clone with backend='numpy'"
            )
        #: The longest cloned prompt is the encoder's 10 s window: ``cloning`` trims to it.
        self._capabilities = BackendCapabilities(
            cloning_unavailable_reason=reason,
            max_voice_frames=MAX_VOICE_FRAMES,
            sampler_steps=FUSED_FLOW_STEPS,
            # The CoreML models do not output attention, so word times are estimated.
            attention_probe=False,
        )

    @property
    def capabilities(self) -> BackendCapabilities:
        return self._capabilities

    @classmethod
    def find_pack_files(cls, request: PackRequest) -> CoreMLPackFiles:
        return find_coreml_pack_files(request)

    @classmethod
    def from_pack(
        cls,
        pack: PackFiles,
        options: LoadOptions | None = None,
        *,
        model_loader: ModelLoader | None = None,
    ) -> CoreMLBackend:
        """Load a resolved CoreML pack (``files.CoreMLPackFiles``) with coremltools.

        ``options.precision``: "fp16" (flowlm_step, the default) or "int8" (flowlm_stepv2);
        only the FlowLM differs. ``options.compute_units``: a preset name or per-stage
        overrides (see ``runtime``). ``options.sampler_steps`` is not used: the fused flow
        decoder always runs 8 LSD steps. ``model_loader`` replaces coremltools (tests).
        """
        options = options or LoadOptions(backend="coreml")
        precision = options.precision or "fp16"
        sampler_steps = options.sampler_steps
        if precision not in PRECISIONS:
            raise LoadOptionError(
                f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}"
            )
        if options.placement not in PLACEMENTS:
            raise LoadOptionError(
                f"placement {options.placement!r} is not supported; choose one of: "
                f"{', '.join(PLACEMENTS)}"
            )
        if not isinstance(pack, CoreMLPackFiles):
            raise TypeError(
                "the CoreML backend needs a CoreML pack: "
                "find_pack_files(..., backend_kind='coreml')"
            )
        if sampler_steps not in (1, FUSED_FLOW_STEPS):
            logger.info(
                "sampler_steps=%s ignored: the CoreML flow decoder runs %d LSD steps",
                sampler_steps,
                FUSED_FLOW_STEPS,
            )
        config = pack.config
        units = resolve_compute_units(options.compute_units)
        paths = pack.model_paths(precision)
        load = model_loader or (lambda path, unit: CompiledModel(path, unit))

        def load_encoder() -> VoiceEncoder:
            files = pack.encoder_files()
            reprojection = None
            if not files.pack_local and files.reprojected:
                assert files.recover_pinv is not None and files.speaker_proj is not None
                reprojection = Reprojection.load(
                    files.recover_pinv,
                    files.speaker_proj,
                    d_model=config.flow_lm.transformer.d_model,
                    latent_dim=config.mimi.inner_dim or config.mimi.seanet.dimension,
                )
            return VoiceEncoder(
                load(files.model, units["mimi_encoder"]),
                config,
                reprojection=reprojection,
                label=files.model.stem,
            )

        models = StageModels(
            cond_prefill=load(paths["cond_prefill"], units["cond_prefill"]),
            flowlm=load(paths["flowlm"], units["flowlm"]),
            flow_decoder=load(paths["flow_decoder"], units["flow_decoder"]),
            mimi_decoder=load(paths["mimi_decoder"], units["mimi_decoder"]),
        )
        constants = PackConstants.load(
            pack.constants_dir,
            d_model=config.flow_lm.transformer.d_model,
            latent_dim=config.flow_lm.latent_dim,
        )
        return cls(
            config,
            models,
            constants,
            precision=precision,
            compute_units=units,
            voice_encoder=load_encoder,
            cloning_unavailable_reason=pack.cloning_unavailable_reason,
        )

    # -- FlowLM -------------------------------------------------------------------------
    def embed_text(self, token_ids: np.ndarray) -> np.ndarray:
        """Token ids [n] → rows of the text embedding table [n, d_model]."""
        ids = check_token_ids(token_ids, self.constants.text_embed_table.shape[0])
        return np.array(self.constants.text_embed_table[ids], dtype=np.float32)

    def new_flow_state(self) -> CoreMLFlowState:
        return CoreMLFlowState.empty(self._kv.num_layers, self._kv.cache_shape)

    def prefill(self, state: CoreMLFlowState, embeddings: np.ndarray) -> None:
        """Append conditioning [n, d_model] through cond_prefill, 256 rows per call."""
        x = np.asarray(embeddings, dtype=np.float32)
        specs = self.io_specs.prefill
        if x.ndim != 2 or x.shape[1] != specs.d_model:
            raise ValueError(f"embeddings must be [n, {specs.d_model}], got {x.shape}")
        self._reserve(state, x.shape[0])
        model = self.models.cond_prefill
        for start in range(0, x.shape[0], specs.window):
            rows = x[start : start + specs.window]
            conditioning = np.zeros((1, specs.window, specs.d_model), dtype=np.float32)
            conditioning[0, : rows.shape[0]] = rows
            feeds = {
                CONDITIONING: conditioning,
                VALID_LEN: np.array([rows.shape[0]], dtype=np.float32),
                **self._kv_feeds(specs.kv, state),
            }
            self._take_kv(specs.kv, state, model.predict(feeds))

    def step(self, state: CoreMLFlowState, latent: np.ndarray | None) -> StepOutput:
        """One flowlm call; None sends the all-NaN BOS sequence (the graph uses ``bos_emb``)."""
        specs = self.io_specs.step
        if latent is None:
            sequence = np.full((1, 1, specs.latent_dim), np.nan, dtype=np.float32)
        else:
            vec = np.asarray(latent, dtype=np.float32)
            if vec.size != specs.latent_dim:
                raise ValueError(f"latent must be [{specs.latent_dim}], got {vec.shape}")
            sequence = vec.reshape(1, 1, specs.latent_dim)
        self._reserve(state, 1)
        feeds = {
            SEQUENCE: sequence,
            BOS_EMB: np.asarray(self.constants.bos_emb, dtype=np.float32),
            **self._kv_feeds(specs.kv, state),
        }
        out = self.models.flowlm.predict(feeds)
        self._take_kv(specs.kv, state, out)
        hidden = np.asarray(out[specs.hidden_output], dtype=np.float32).reshape(-1)
        return StepOutput(hidden=hidden, eos_logit=float(np.asarray(out[specs.eos_output]).flat[0]))

    def sample(self, hidden: np.ndarray, noise: np.ndarray) -> np.ndarray:
        """flow_decoder_fused: ``latent_init`` = noise (already ·√temperature) → latent [32]."""
        specs = self.io_specs.flow
        c = np.asarray(hidden, dtype=np.float32).reshape(1, -1)
        z = np.asarray(noise, dtype=np.float32).reshape(1, -1)
        if c.shape[1] != specs.hidden_dim or z.shape[1] != specs.latent_dim:
            raise ValueError(
                f"sample takes hidden [{specs.hidden_dim}] and noise [{specs.latent_dim}], "
                f"got {np.shape(hidden)} and {np.shape(noise)}"
            )
        out = self.models.flow_decoder.predict({FLOW_HIDDEN: c, LATENT_INIT: z})
        return np.asarray(out[specs.latent_output], dtype=np.float32).reshape(-1)

    def _reserve(self, state: CoreMLFlowState, n: int) -> None:
        if state.position + n > state.capacity:
            raise ContextOverflowError(
                f"the CoreML FlowLM cache is full: {state.position} of its {state.capacity} "
                f"positions are filled and {n} more do not fit. Split the text into shorter "
                f"chunks (at most {MAX_TOKENS_PER_CHUNK} tokens) or use a shorter voice prompt "
                "(the NumPy backend has a larger cache)."
            )

    @staticmethod
    def _kv_feeds(kv: KVBinding, state: CoreMLFlowState) -> dict[str, np.ndarray]:
        feeds = dict(zip(kv.cache_inputs, state.caches, strict=True))
        feeds.update(zip(kv.position_inputs, state.positions, strict=True))
        return feeds

    @staticmethod
    def _take_kv(kv: KVBinding, state: CoreMLFlowState, out: Mapping[str, np.ndarray]) -> None:
        """Replace the state's caches and positions by the model's outputs (layer order)."""
        state.caches = [
            np.asarray(out[name], dtype=np.float32).reshape(kv.cache_shape)
            for name in kv.cache_outputs
        ]
        state.positions = [
            np.asarray(out[name], dtype=np.float32).reshape(1) for name in kv.position_outputs
        ]

    # -- Voices -------------------------------------------------------------------------
    def bos_before_voice(self) -> np.ndarray | None:
        bos = self.constants.bos_before_voice
        return None if bos is None else np.asarray(bos, dtype=np.float32)

    def flow_state_from_voice(self, voice: VoiceKV) -> CoreMLFlowState:
        """A fresh state with the voice's K/V in slots 0…T-1 of zeroed 512-slot caches."""
        kv = self._kv
        _, _, capacity, kv_heads, head_dim = kv.cache_shape
        length = check_voice_kv(
            voice, num_layers=kv.num_layers, kv_heads=kv_heads, head_dim=head_dim
        )
        if length > capacity:
            raise ContextOverflowError(
                f"the voice fills {length} positions but the CoreML FlowLM cache holds "
                f"{capacity}: use a shorter voice prompt (or backend='numpy')"
            )
        state = self.new_flow_state()
        for i, (k, v) in enumerate(zip(voice.keys, voice.values, strict=True)):
            state.caches[i][0, 0, :length] = k
            state.caches[i][1, 0, :length] = v
            state.positions[i][0] = length
        return state

    def voice_from_flow_state(self, state: CoreMLFlowState) -> VoiceKV:
        filled = state.position
        return VoiceKV(
            keys=[np.ascontiguousarray(c[0, 0, :filled]) for c in state.caches],
            values=[np.ascontiguousarray(c[1, 0, :filled]) for c in state.caches],
        )

    # -- Mimi ---------------------------------------------------------------------------
    def new_mimi_state(self) -> CoreMLMimiState:
        return CoreMLMimiState({name: value.copy() for name, value in self._mimi_init.items()})

    def decode(self, state: CoreMLMimiState, latent: np.ndarray) -> np.ndarray:
        """Raw latent [32] → [1920] samples; all state tensors go in and come back."""
        specs = self.io_specs.mimi
        z = np.asarray(latent, dtype=np.float32)
        if z.size != specs.latent_dim:
            raise ValueError(f"Mimi decode takes one latent [{specs.latent_dim}], got {z.shape}")
        feeds = {MIMI_LATENT: z.reshape(1, specs.latent_dim), **state.tensors}
        out = self.models.mimi_decoder.predict(feeds)
        shapes = {spec.name: spec.shape for spec in specs.state_inputs}
        for output, name in specs.feedback:
            state.tensors[name] = np.asarray(out[output], dtype=np.float32).reshape(shapes[name])
        return np.asarray(out[specs.audio_output], dtype=np.float32).reshape(-1)

    # -- Voice cloning ------------------------------------------------------------------
    def encode(self, audio: np.ndarray) -> np.ndarray:
        """24 kHz mono audio [n] → voice conditioning [P, d_model], P ≤ 125 (``encoder``).

        Audio beyond 10 s is ignored. Raises ``CloningUnavailableError`` (saying what is
        missing) when the pack has no usable encoder.
        """
        if self.cloning_unavailable_reason is not None:
            raise CloningUnavailableError(self.cloning_unavailable_reason)
        return self.voice_encoder().encode(audio)

    def voice_encoder(self) -> VoiceEncoder:
        """The voice encoder, loaded (and for hub packs downloaded) on the first call."""
        with self._encoder_lock:
            source = self._voice_encoder
            if source is None:
                raise CloningUnavailableError(_NO_ENCODER)
            if not isinstance(source, VoiceEncoder):
                source = source()
                self._voice_encoder = source
            return source
