"""The stage interface every backend implements, and the per-sequence state types.

The synthesizer drives these stages and never asks which backend runs:

    text ids ─▶ embed_text ─▶ prefill (voice, then text) ─▶ step ─▶ sample ─▶ decode ─▶ 1920 samples

Weights live in the backend and are shared by every session; all per-sequence state lives in
``FlowState`` / ``MimiState`` objects, so many sessions run on one loaded model and a voice
state is copied cheaply for every chunk. Shapes are given per call, without a batch axis,
except in the batched stages (``step_batch``, ``sample_batch``, ``decode_batch``,
``decode_frames``): one call for B independent sequences (``decode_frames``: K frames of each),
which a backend may run on stacked inputs (each weight read once for the batch). Their
defaults loop over the single-sequence stages, so every backend has them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ..errors import VoiceFileError

if TYPE_CHECKING:
    from ..model.config import ModelConfig
    from ..model.options import LoadOptions
    from ..model.packs import PackFiles, PackRequest


class FlowState(Protocol):
    """FlowLM KV caches and the position (number of filled slots) of one sequence."""

    @property
    def position(self) -> int: ...

    @property
    def capacity(self) -> int: ...

    def copy(self) -> FlowState: ...


class MimiState(Protocol):
    """Mimi decoder streaming state: conv histories, transposed-conv partials, attention cache."""

    def copy(self) -> MimiState: ...


@dataclass(frozen=True)
class StepOutput:
    """One autoregressive FlowLM step."""

    #: Float32 [head_input_dim]: the input of the sampler and EOS heads.
    hidden: np.ndarray
    eos_logit: float
    #: Logits [probe heads, probe positions], if probed.
    attention: np.ndarray | None = None


@dataclass(frozen=True)
class AttentionProbe:
    """Which attention logits a step should also return (for word timestamps).

    ``heads``: (layer, query head) pairs, 0-based; positions ``[start, end)`` of the sequence
    (a chunk's text tokens). The step returns, per pair, q·k/√head_dim of its query at the new
    position against those keys: [len(heads), end - start] float32, before any softmax.
    """

    heads: tuple[tuple[int, int], ...]
    start: int
    end: int


@dataclass
class VoiceKV:
    """A voice state in upstream's exported layout: per layer, K and V of the prefilled prompt.

    ``keys[i]`` and ``values[i]`` are [T, kv_heads, head_dim] float32 for layer i; T is the
    number of prefilled positions (bos_before_voice + voice frames).
    """

    keys: list[np.ndarray]
    values: list[np.ndarray]

    @property
    def length(self) -> int:
        return int(self.keys[0].shape[0]) if self.keys else 0


@dataclass(frozen=True)
class BackendCapabilities:
    """What a loaded backend can do; every backend declares it (``Backend.capabilities``).

    ``cloning_unavailable_reason``: None when ``encode`` works, else the message (saying what
    to do) that ``CloningUnavailableError`` carries. ``max_voice_frames``: the longest cloned
    prompt the backend's encoder takes (None: bounded only by the FlowLM capacity).
    ``sampler_steps``: LSD steps each ``sample`` runs. ``attention_probe``: whether ``step``
    takes ``probe=AttentionProbe(...)`` and returns those attention logits (word timestamps
    from the model; without it they are estimated). ``frame_blocks``: whether
    ``decode_frames`` runs a block of frames in one pass with the same samples, bit for bit,
    as frame by frame (the scheduler then decodes streams far ahead in blocks).
    """

    cloning_unavailable_reason: str | None
    max_voice_frames: int | None
    sampler_steps: int
    attention_probe: bool = False
    frame_blocks: bool = False

    @property
    def voice_cloning(self) -> bool:
        return self.cloning_unavailable_reason is None


def check_token_ids(token_ids: np.ndarray, rows: int) -> np.ndarray:
    """Token ids [n] as an integer array, each in [0, rows) (the embedding table's rows).

    Raises ``ValueError`` saying so otherwise (ids from another pack's tokenizer).
    """
    ids = np.asarray(token_ids)
    if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"token ids must be a 1-D integer array, got {ids.dtype} {ids.shape}")
    if ids.size and (ids.min() < 0 or ids.max() >= rows):
        raise ValueError(
            f"token ids must lie in [0, {rows}); got values in [{ids.min()}, {ids.max()}]. "
            "Use the tokenizer shipped with this pack."
        )
    return ids


def check_voice_kv(voice: VoiceKV, *, num_layers: int, kv_heads: int, head_dim: int) -> int:
    """The number of positions of a voice whose K/V fit this model; ``VoiceFileError`` naming
    the first layer or array that does not (a voice made for another model)."""
    if len(voice.keys) != num_layers or len(voice.values) != num_layers:
        raise VoiceFileError(
            f"the voice has {len(voice.keys)} layers of keys and {len(voice.values)} of "
            f"values, this model has {num_layers}: it was made for another model"
        )
    length = voice.length
    for i, (k, v) in enumerate(zip(voice.keys, voice.values, strict=True)):
        for label, array in (("keys", k), ("values", v)):
            if np.shape(array) != (length, kv_heads, head_dim):
                raise VoiceFileError(
                    f"voice {label} of layer {i} have shape {tuple(np.shape(array))}, expected "
                    f"[{length}, {kv_heads}, {head_dim}]: the voice was made for another model"
                )
    return length


class Backend(ABC):
    """The stages of one loaded model. Thread-safe: every call takes its state explicitly.

    A backend also owns its pack layout (``find_pack_files``, in its ``files.py``) and how it is
    built from a resolved pack (``from_pack``), and declares its ``capabilities``.
    """

    name: str
    config: ModelConfig
    #: The weights' precision as loaded ("fp32", "int8"…); None if there is only one.
    precision: str | None = None

    # -- building -----------------------------------------------------------------------
    # Every backend of ``backends.BACKEND_CLASSES`` overrides both (a test checks it);
    # backends built in memory (test doubles, wrappers) are not loaded from packs.
    @classmethod
    def find_pack_files(cls, request: PackRequest) -> PackFiles:
        """The files of the requested pack in this backend's layout (local or the hub)."""
        raise NotImplementedError(f"{cls.__name__} has no pack layout")

    @classmethod
    def from_pack(cls, pack: PackFiles, options: LoadOptions) -> Backend:
        """Load a pack ``find_pack_files`` returned, with the backend's ``options``."""
        raise NotImplementedError(f"{cls.__name__} is not loaded from packs")

    @property
    @abstractmethod
    def capabilities(self) -> BackendCapabilities:
        """What this loaded backend can do (cloning and why not, voice limits, sampler steps)."""

    @property
    def kernels(self) -> dict[str, str]:
        """Which kernels run each part of the model, as the load log says them (NumPy:
        "flow_lm", "mimi"); empty for a backend that does not say."""
        return {}

    @property
    def has_voice_cloning(self) -> bool:
        """Whether ``encode`` works (``capabilities.voice_cloning``)."""
        return self.capabilities.voice_cloning

    @property
    def cloning_unavailable_reason(self) -> str | None:
        return self.capabilities.cloning_unavailable_reason

    @property
    def max_voice_frames(self) -> int | None:
        return self.capabilities.max_voice_frames

    @property
    def sampler_steps(self) -> int:
        return self.capabilities.sampler_steps

    # -- FlowLM -------------------------------------------------------------------------
    @abstractmethod
    def embed_text(self, token_ids: np.ndarray) -> np.ndarray:
        """Token ids [n] int → conditioning embeddings [n, d_model] float32."""

    @abstractmethod
    def new_flow_state(self) -> FlowState:
        """An empty KV cache (position 0) preallocated to the model's capacity."""

    @abstractmethod
    def prefill(self, state: FlowState, embeddings: np.ndarray) -> None:
        """Append conditioning embeddings [n, d_model] to the state's KV cache.

        Raises ``ContextOverflowError`` when position + n exceeds the capacity.
        """

    @abstractmethod
    def step(self, state: FlowState, latent: np.ndarray | None) -> StepOutput:
        """One autoregressive step from the previous latent [latent_dim] (None means BOS)."""

    @abstractmethod
    def sample(self, hidden: np.ndarray, noise: np.ndarray) -> np.ndarray:
        """Sampler head: hidden [head_input_dim] + noise [latent_dim] → latent [latent_dim].

        ``noise`` is already scaled: N(0, 1) · √temperature.
        """

    def step_batch(
        self,
        states: Sequence[FlowState],
        latents: Sequence[np.ndarray | None],
        probes: Sequence[AttentionProbe | None] | None = None,
    ) -> list[StepOutput]:
        """``step`` for B sequences (distinct states, each at its own position) at once.

        ``probes[b]`` (on a backend whose ``capabilities.attention_probe``): ``step``'s probe
        for sequence b (None: not probed).
        """
        if len(states) != len(latents):
            raise ValueError(f"{len(states)} states but {len(latents)} latents")
        if probes is None:
            return [self.step(s, latent) for s, latent in zip(states, latents, strict=True)]
        if len(probes) != len(states):
            raise ValueError(f"{len(states)} states but {len(probes)} probes")
        return [
            self.step(s, latent) if probe is None else self.step(s, latent, probe=probe)  # type: ignore[call-arg]
            for s, latent, probe in zip(states, latents, probes, strict=True)
        ]

    def sample_batch(self, hidden: np.ndarray, noise: np.ndarray) -> np.ndarray:
        """``sample`` for B rows: hidden [B, head_input_dim], noise [B, latent] → [B, latent]."""
        if len(hidden) != len(noise):
            raise ValueError(f"{len(hidden)} hidden rows but {len(noise)} noise rows")
        return _stacked([self.sample(h, n) for h, n in zip(hidden, noise, strict=True)])

    # -- Voices -------------------------------------------------------------------------
    @abstractmethod
    def bos_before_voice(self) -> np.ndarray | None:
        """The embedding [d_model] put before voice frames, or None if the model has none."""

    @abstractmethod
    def flow_state_from_voice(self, voice: VoiceKV) -> FlowState:
        """A fresh FlowState holding a voice's prefilled K/V (positions 0..T-1)."""

    @abstractmethod
    def voice_from_flow_state(self, state: FlowState) -> VoiceKV:
        """The filled part of a FlowState as a VoiceKV (for saving a voice)."""

    # -- Mimi ---------------------------------------------------------------------------
    @abstractmethod
    def new_mimi_state(self) -> MimiState:
        """A fresh streaming state for the Mimi decoder."""

    @abstractmethod
    def decode(self, state: MimiState, latent: np.ndarray) -> np.ndarray:
        """Latent [latent_dim] (normalized space, as sampled) → samples [frame_size] float32.

        Denormalization (latent·emb_std + emb_mean) is part of this stage.
        """

    def decode_batch(self, states: Sequence[MimiState], latents: np.ndarray) -> np.ndarray:
        """``decode`` for B streams: latents [B, latent_dim] → samples [B, frame_size]."""
        if len(states) != len(latents):
            raise ValueError(f"{len(states)} states but {len(latents)} latents")
        return _stacked([self.decode(s, latent) for s, latent in zip(states, latents, strict=True)])

    def decode_frames(self, states: Sequence[MimiState], latents: np.ndarray) -> np.ndarray:
        """K frames of each of B streams (a frame block): latents [B, K, latent_dim] → samples
        [B, K, frame_size], as K ``decode_batch`` calls in order (this default makes them; a
        backend may run the block in one pass: the same samples up to float rounding)."""
        latents = np.asarray(latents, dtype=np.float32)
        if latents.ndim != 3 or len(latents) != len(states):
            raise ValueError(f"{len(states)} states but latents of shape {latents.shape}")
        frames = [self.decode_batch(states, latents[:, k]) for k in range(latents.shape[1])]
        if not frames:
            return np.zeros((len(states), 0, 0), dtype=np.float32)
        return np.stack(frames, axis=1)

    @abstractmethod
    def encode(self, audio: np.ndarray) -> np.ndarray:
        """24 kHz mono audio [n] (n a multiple of frame_size) → voice conditioning [T, d_model].

        Mimi encoder + speaker projection. Raises ``CloningUnavailableError`` when the
        loaded weights have no encoder or projection.
        """


def _stacked(rows: list[np.ndarray]) -> np.ndarray:
    """Per-sequence outputs → one float32 array [B, ...] (B may be 0)."""
    if not rows:
        return np.zeros((0, 0), dtype=np.float32)
    return np.stack([np.asarray(row, dtype=np.float32) for row in rows])
