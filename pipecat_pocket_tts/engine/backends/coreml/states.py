"""Per-sequence states of the CoreML backend: plain arrays in the models' own layouts.

``CoreMLFlowState``: per layer a cache [2, 1, C, kv_heads, head_dim] (K then V, C = 512 slots)
and a position [1] float32, exactly what ``cond_prefill`` / ``flowlm_step`` take and return.
``CoreMLMimiState``: the Mimi decoder's state tensors by input name.
"""

from __future__ import annotations

import numpy as np


class CoreMLFlowState:
    """FlowLM KV caches + positions of one sequence; implements ``base.FlowState``."""

    def __init__(self, caches: list[np.ndarray], positions: list[np.ndarray]) -> None:
        # N float32 caches of shape [2, 1, C, kv, hd].
        self.caches = caches
        # N float32 positions of shape [1].
        self.positions = positions

    @classmethod
    def empty(cls, num_layers: int, cache_shape: tuple[int, ...]) -> CoreMLFlowState:
        """Zero-filled caches, every position 0."""
        return cls(
            [np.zeros(cache_shape, dtype=np.float32) for _ in range(num_layers)],
            [np.zeros(1, dtype=np.float32) for _ in range(num_layers)],
        )

    @property
    def position(self) -> int:
        """Filled positions (the models keep one per layer; they move together)."""
        return round(float(self.positions[0][0])) if self.positions else 0

    @property
    def capacity(self) -> int:
        return int(self.caches[0].shape[2]) if self.caches else 0

    def copy(self) -> CoreMLFlowState:
        """An independent deep copy (24 MiB for 6 full-size layers, 96 MiB for 24)."""
        return CoreMLFlowState([c.copy() for c in self.caches], [p.copy() for p in self.positions])


class CoreMLMimiState:
    """The Mimi decoder's streaming state: every state input of the model, by name."""

    def __init__(self, tensors: dict[str, np.ndarray]) -> None:
        self.tensors = tensors

    def copy(self) -> CoreMLMimiState:
        return CoreMLMimiState({name: value.copy() for name, value in self.tensors.items()})
