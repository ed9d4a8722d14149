"""The NumPy backend: every stage of ``base.Backend`` on float32 NumPy arrays, anywhere.

Wires the FlowLM (``flowlm.py``), the sampler head (``sampler.py``) and the Mimi codec
(``mimi.py``) over one shared set of weights (``weights.py``; fp32 checkpoints stay memory
mapped). All per-sequence data lives in the states the caller passes in, so one backend
serves many sessions from many threads.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence

import numpy as np

from ...errors import CloningUnavailableError, LoadOptionError
from ...model.config import ModelConfig
from ...model.options import LoadOptions
from ...model.packs import GATED_REPO_URL, PackFiles, PackRequest
from ..base import (
    AttentionProbe,
    Backend,
    BackendCapabilities,
    StepOutput,
    VoiceKV,
    check_voice_kv,
)
from .kernels import compiled
from .kernels.arithmetic import (
    choose_arithmetic,
    choose_sampler_arithmetic,
    describe_arithmetic,
    describe_sampler,
)
from .layers.flowlm import FlowLM
from .layers.kv_cache import CHUNK_POSITIONS, DEFAULT_CAPACITY, KVCache
from .layers.linears import Linear, check_precision, how_linears_run
from .layers.mimi import Mimi, MimiDecoderState
from .layers.sampler import Sampler
from .weights.checkpoint import check_weights, has_voice_cloning, load_checkpoint
from .weights.pack_files import find_numpy_pack_files
from .weights.safetensors_file import drop_resident_pages

logger = logging.getLogger(__name__)


class NumpyBackend(Backend):
    """PocketTTS stages in NumPy (float32 math, as upstream pocket-tts; FlowLM transformer
    linears optionally stored narrow: ``precision`` "bf16" or "int8", see ``linears.py``)."""

    name = "numpy"

    def __init__(
        self,
        config: ModelConfig,
        weights: Mapping[str, np.ndarray | Linear],
        *,
        sampler_steps: int = 1,
        precision: str = "fp32",
        mimi_arithmetic: str | None = None,
    ) -> None:
        """``weights``: upstream state-dict keys → arrays (checked against ``config``).

        ``precision``: "fp32", "bf16" or "int8" for the FlowLM attention and feed-forward
        linears (the rest stays fp32, but the sampler's linears, which a narrow ``precision``
        runs in int16 where the CPU can: ``choose_sampler_arithmetic``); narrow ones need
        numba (``PrecisionUnavailableError``).
        ``mimi_arithmetic``: what Mimi's decoder multiplies in, "auto" (None: the
        environment's ``POCKET_TTS_MIMI_ARITHMETIC``, else "auto": with a narrow
        ``precision``, "int16" on a CPU with AVX2 (on AVX512_VNNI, AVX-VNNI or AVX2 dot
        products, ``POCKET_TTS_INT16_KERNEL``), else "bf16" on one with AVX512_BF16), "fp32",
        "bf16" or "int16" (``kernels/arithmetic.py``).
        """
        check_precision(precision)
        # The kernels are imported and compiled (or read from the cache) here.
        compiled.optional()
        arithmetic = choose_arithmetic(mimi_arithmetic, precision)
        sampler_arithmetic = choose_sampler_arithmetic(precision)
        check_weights(weights, config)
        # float32 arrays pass through uncopied (memory-mapped weights stay mapped)
        weights = {
            key: array if isinstance(array, Linear) else np.asarray(array, np.float32)
            for key, array in weights.items()
        }
        self.config = config
        self.precision = precision
        self.flow_lm = FlowLM(config, weights, precision=precision)
        self._kernels = {
            "flow_lm": f"{precision}: {how_linears_run(precision)}; "
            + describe_sampler(sampler_arithmetic),
            "mimi": describe_arithmetic(arithmetic),
        }
        logger.info(
            "numpy backend for %s: FlowLM transformer linears in %s; %s",
            config.name,
            self._kernels["flow_lm"],
            self._kernels["mimi"],
        )
        self.sampler = Sampler(config, weights, steps=sampler_steps, arithmetic=sampler_arithmetic)
        mimi_weights = {k[len("mimi.") :]: v for k, v in weights.items() if k.startswith("mimi.")}
        self.mimi = Mimi(config.mimi, mimi_weights, arithmetic=arithmetic)
        self._emb_std = np.asarray(weights["flow_lm.emb_std"], np.float32)
        self._emb_mean = np.asarray(weights["flow_lm.emb_mean"], np.float32)
        speaker_proj = weights.get("flow_lm.speaker_proj_weight")
        self._speaker_proj = None if speaker_proj is None else np.asarray(speaker_proj, np.float32)
        bos = weights.get("flow_lm.bos_before_voice")
        self._bos_before_voice = None if bos is None else np.asarray(bos, np.float32).reshape(-1)
        can_clone = has_voice_cloning(weights, config) and self.mimi.has_encoder
        self._capabilities = BackendCapabilities(
            cloning_unavailable_reason=None if can_clone else _no_cloning_reason(config.name),
            max_voice_frames=None,
            sampler_steps=sampler_steps,
            attention_probe=True,
            # bit for bit where every layer sums each row alone (bf16, int16); fp32's BLAS
            # linears sum a block in another order (~123 dB)
            frame_blocks=self.mimi.blocks_exact,
        )

    @classmethod
    def from_files(
        cls,
        config: ModelConfig,
        weights_path: str | os.PathLike[str],
        *,
        sampler_steps: int = 1,
        precision: str = "fp32",
        mimi_arithmetic: str | None = None,
    ) -> NumpyBackend:
        """Load ``model.safetensors`` (fp32 memory-mapped, bf16 widened) for ``config``; with
        a narrow ``precision`` the FlowLM linears are narrowed as they are read."""
        # First, so that a first compile says so before the weights are read.
        compiled.optional()
        weights = load_checkpoint(weights_path, config, precision=precision)
        backend = cls(
            config,
            weights,
            sampler_steps=sampler_steps,
            precision=precision,
            mimi_arithmetic=mimi_arithmetic,
        )
        # What the model reads again comes back.
        drop_resident_pages(weights.values())
        return backend

    def __repr__(self) -> str:
        return f"NumpyBackend(config={self.config.name!r}, precision={self.precision!r})"

    @classmethod
    def find_pack_files(cls, request: PackRequest) -> PackFiles:
        return find_numpy_pack_files(request)

    @classmethod
    def from_pack(cls, pack: PackFiles, options: LoadOptions) -> NumpyBackend:
        """Load a NumPy-layout pack; CoreML-only options are refused with what to do."""
        # LoadOptionError for a precision NumPy lacks.
        options = options.for_backend("numpy")
        coreml_only = [
            name
            for name, given in (
                ("compute_units", options.compute_units is not None),
                ("placement", options.placement != "gpu"),
            )
            if given
        ]
        if coreml_only:
            raise LoadOptionError(
                f"{', '.join(coreml_only)}: options of the CoreML backend, which the numpy "
                "backend does not take; drop them or use backend='coreml' (Apple) or 'auto'"
            )
        if pack.backend_kind != "numpy":
            raise TypeError(
                f"the numpy backend needs a NumPy-layout pack, got a {pack.backend_kind} pack"
            )
        return cls.from_files(
            pack.config,
            pack.weights,
            sampler_steps=options.sampler_steps,
            precision=options.precision or "fp32",
        )

    @property
    def capabilities(self) -> BackendCapabilities:
        return self._capabilities

    @property
    def kernels(self) -> dict[str, str]:
        return dict(self._kernels)

    # -- FlowLM -------------------------------------------------------------------------
    def embed_text(self, token_ids: np.ndarray) -> np.ndarray:
        return self.flow_lm.embed(token_ids)

    def new_flow_state(self, capacity: int | None = None) -> KVCache:
        """An empty KV cache; default capacity: the longest voice prompt plus one chunk."""
        return self.flow_lm.new_state(DEFAULT_CAPACITY if capacity is None else capacity)

    def prefill(self, state: KVCache, embeddings: np.ndarray) -> None:
        self.flow_lm.prefill(state, embeddings)

    def step(
        self, state: KVCache, latent: np.ndarray | None, probe: AttentionProbe | None = None
    ) -> StepOutput:
        return self.flow_lm.step(state, latent, probe)

    def sample(self, hidden: np.ndarray, noise: np.ndarray) -> np.ndarray:
        return self.sampler.sample(hidden, noise)

    def step_batch(
        self,
        states: Sequence[KVCache],
        latents: Sequence[np.ndarray | None],
        probes: Sequence[AttentionProbe | None] | None = None,
    ) -> list[StepOutput]:
        return self.flow_lm.step_batch(states, latents, probes)

    def sample_batch(self, hidden: np.ndarray, noise: np.ndarray) -> np.ndarray:
        return self.sampler.sample_batch(hidden, noise)

    # -- Voices -------------------------------------------------------------------------
    def bos_before_voice(self) -> np.ndarray | None:
        return self._bos_before_voice

    def flow_state_from_voice(self, voice: VoiceKV) -> KVCache:
        """A fresh state holding the voice's K/V, with room for one full chunk after it."""
        flow = self.flow_lm
        length = check_voice_kv(
            voice, num_layers=flow.num_layers, kv_heads=flow.kv_heads, head_dim=flow.head_dim
        )
        state = flow.new_state(max(DEFAULT_CAPACITY, length + CHUNK_POSITIONS))
        for i, (k, v) in enumerate(zip(voice.keys, voice.values, strict=True)):
            state.write(i, 0, np.asarray(k, np.float32), np.asarray(v, np.float32))
        state.advance(length)
        return state

    def voice_from_flow_state(self, state: KVCache) -> VoiceKV:
        filled = state.position
        keys = [
            np.ascontiguousarray(state.keys_f32(i, 0, filled).transpose(1, 0, 2))
            for i in range(state.num_layers)
        ]
        values = [
            np.ascontiguousarray(state.values_f32(i, 0, filled).transpose(1, 0, 2))
            for i in range(state.num_layers)
        ]
        return VoiceKV(keys=keys, values=values)

    # -- Mimi ---------------------------------------------------------------------------
    def new_mimi_state(self) -> MimiDecoderState:
        return self.mimi.new_state()

    def decode(self, state: MimiDecoderState, latent: np.ndarray) -> np.ndarray:
        """Normalized latent [latent_dim] → [frame_size] samples (denormalized here)."""
        latent = np.asarray(latent, dtype=np.float32)
        return self.mimi.decode(state, latent * self._emb_std + self._emb_mean)

    def decode_batch(self, states: Sequence[MimiDecoderState], latents: np.ndarray) -> np.ndarray:
        """Normalized latents [B, latent_dim] → [B, frame_size] samples."""
        latents = np.asarray(latents, dtype=np.float32)
        return self.mimi.decode_batch(states, latents * self._emb_std + self._emb_mean)

    def decode_frames(self, states: Sequence[MimiDecoderState], latents: np.ndarray) -> np.ndarray:
        """Normalized latents [B, K, latent_dim] → [B, K, frame_size] samples, one call."""
        latents = np.asarray(latents, dtype=np.float32)
        return self.mimi.decode_frames(states, latents * self._emb_std + self._emb_mean)

    def encode(self, audio: np.ndarray) -> np.ndarray:
        """24 kHz mono audio [n] → voice conditioning [T, d_model] (encoder + speaker proj)."""
        reason = self.capabilities.cloning_unavailable_reason
        if reason is not None or self._speaker_proj is None:
            raise CloningUnavailableError(reason or _no_cloning_reason(self.config.name))
        # Shape [T, inner_dim].
        latents = self.mimi.encode(audio)
        return latents @ self._speaker_proj.T


def _no_cloning_reason(config_name: str) -> str:
    """Why weights without the voice-cloning part cannot clone, and how to get them."""
    return (
        f"pack {config_name!r} was loaded without the voice-cloning weights (the ungated "
        "'pocket-tts-without-voice-cloning' files), so it cannot clone a voice from audio. "
        f"To clone: accept the model terms at {GATED_REPO_URL} with your Hugging Face account, "
        "create an access token, set HF_TOKEN=<token> (or pass token=...) and load the pack "
        "again. Without access, use one of the pack's voices or a saved voice .safetensors file."
    )
