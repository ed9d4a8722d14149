"""The stage interface every backend implements, and the per-sequence state types.

The synthesizer drives these stages and never asks which backend runs:

    text ids ─▶ embed_text ─▶ prefill (voice, then text) ─▶ step ─▶ sample ─▶ decode ─▶ 1920 samples

Weights live in the backend and are shared by every session; all per-sequence state lives in
``FlowState`` / ``MimiState`` objects, so many sessions run on one loaded model and a voice
state is copied cheaply for every chunk. Shapes are given per call, without a batch axis.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from ..config import ModelConfig


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

    hidden: np.ndarray  # [head_input_dim] float32: input of the sampler and EOS heads
    eos_logit: float
    attention: np.ndarray | None = None  # [probe heads, probe positions] logits, if probed


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


class Backend(ABC):
    """The stages of one loaded model. Thread-safe: every call takes its state explicitly."""

    name: str
    config: ModelConfig

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

    #: Whether ``step`` takes ``probe=AttentionProbe(...)`` (else timestamps are estimated).
    supports_attention_probe: bool = False

    @abstractmethod
    def step(self, state: FlowState, latent: np.ndarray | None) -> StepOutput:
        """One autoregressive step from the previous latent [latent_dim] (None means BOS)."""

    @abstractmethod
    def sample(self, hidden: np.ndarray, noise: np.ndarray) -> np.ndarray:
        """Sampler head: hidden [head_input_dim] + noise [latent_dim] → latent [latent_dim].

        ``noise`` is already scaled: N(0, 1) · √temperature.
        """

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

    @abstractmethod
    def encode(self, audio: np.ndarray) -> np.ndarray:
        """24 kHz mono audio [n] (n a multiple of frame_size) → voice conditioning [T, d_model].

        Mimi encoder + speaker projection. Raises ``CloningUnavailableError`` when the
        loaded weights have no encoder or projection.
        """
