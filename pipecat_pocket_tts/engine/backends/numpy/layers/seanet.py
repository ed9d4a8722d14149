"""SEANet encoder and decoder of Mimi as streaming stacks of causal convolutions.

Layout (upstream module indices ``model.N``; ELU with alpha 1 before every conv but the first):

- decoder: conv(dimension → 2^R·F, kernel_size); per ratio r: ELU, convT(k 2r, stride r, halves
  the channels), residual blocks; ELU, conv(F → channels, last_kernel_size)
- encoder: conv(channels → F, kernel_size); per ratio r (reversed): residual blocks, ELU,
  conv(k 2r, stride r, doubles the channels); ELU, conv(→ dimension, last_kernel_size)
- residual block: x + conv1x1(ELU(conv_k(ELU(x)))) with hidden width dim / compress.

Signals are time-major ``[T, C]``. The streaming state of a stack is a list of plain arrays,
one per conv (left context) or transposed conv (overlap partial), in layer order.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ....errors import WeightsMismatchError
from ....model.config import SEANetConfig
from ..kernels.dispatch import elu
from .streaming_conv import StreamingConv1d, StreamingConvTranspose1d

GROUP_FROM_WEIGHTS = 2_000_000
"""Weights (floats) of the last layers below which ``call_batch`` may run streams in groups."""


class ShapeRecorder(dict):
    """Stand-in for a weights mapping: records each requested name → shape, hands out zeros."""


def fetch_weight(
    weights: Mapping[str, np.ndarray], name: str, shape: tuple[int, ...]
) -> np.ndarray:
    """The float32 array ``weights[name]``, checked against ``shape``."""
    if isinstance(weights, ShapeRecorder):
        weights[name] = tuple(shape)
        return np.zeros(shape, dtype=np.float32)
    if name not in weights:
        raise WeightsMismatchError(
            f"Mimi weight {name!r} is missing: the checkpoint does not match the model config "
            "(load the weights published for this language pack)"
        )
    array = np.asarray(weights[name], dtype=np.float32)
    if tuple(array.shape) != tuple(shape):
        raise WeightsMismatchError(
            f"Mimi weight {name!r} has shape {tuple(array.shape)}, the config expects "
            f"{tuple(shape)}: load the weights published for this language pack"
        )
    return array


def _conv(
    weights: Mapping[str, np.ndarray],
    name: str,
    c_in: int,
    c_out: int,
    kernel: int,
    stride: int = 1,
    dilation: int = 1,
) -> StreamingConv1d:
    return StreamingConv1d(
        fetch_weight(weights, f"{name}.conv.weight", (c_out, c_in, kernel)),
        fetch_weight(weights, f"{name}.conv.bias", (c_out,)),
        stride=stride,
        dilation=dilation,
    )


class ResidualBlock:
    """x [T, C] → x + conv1x1(ELU(conv_k(ELU(x)))) with streaming left context."""

    def __init__(
        self,
        weights: Mapping[str, np.ndarray],
        name: str,
        dim: int,
        kernel: int,
        dilation: int,
        compress: int,
    ) -> None:
        hidden = dim // compress
        self.conv_in = _conv(weights, f"{name}.block.1", dim, hidden, kernel, dilation=dilation)
        self.conv_out = _conv(weights, f"{name}.block.3", hidden, dim, 1)


def _step_convs(layer: object) -> list:
    """The convs of one step, in state order: a residual block's two, else the layer itself."""
    return [layer.conv_in, layer.conv_out] if isinstance(layer, ResidualBlock) else [layer]


class SEANet:
    """A SEANet encoder or decoder: ``__call__(x [T, C_in], state) → [T·up/down, C_out]``."""

    def __init__(
        self,
        config: SEANetConfig,
        weights: Mapping[str, np.ndarray],
        prefix: str,
        decoder: bool,
    ) -> None:
        # Each step: whether an ELU comes before it, and the layer.
        self.steps: list[tuple[bool, object]] = []
        nf, res_kernel = config.n_filters, config.residual_kernel_size
        index = 0

        def name() -> str:
            return f"{prefix}.model.{index}"

        def add_residuals(dim: int) -> None:
            nonlocal index
            for j in range(config.n_residual_layers):
                block = ResidualBlock(
                    weights, name(), dim, res_kernel, config.dilation_base**j, config.compress
                )
                self.steps.append((False, block))
                index += 1

        if decoder:
            mult = 2 ** len(config.ratios)
            self.steps.append(
                (False, _conv(weights, name(), config.dimension, mult * nf, config.kernel_size))
            )
            index += 1
            for ratio in config.ratios:
                # The ELU has an index of its own among the checkpoint's layers.
                index += 1
                c_in, c_out = mult * nf, mult * nf // 2
                kernel = 2 * ratio
                convtr = StreamingConvTranspose1d(
                    fetch_weight(weights, f"{name()}.convtr.weight", (c_in, c_out, kernel)),
                    fetch_weight(weights, f"{name()}.convtr.bias", (c_out,)),
                    stride=ratio,
                )
                self.steps.append((True, convtr))
                index += 1
                add_residuals(c_out)
                mult //= 2
            index += 1
            self.steps.append(
                (True, _conv(weights, name(), nf, config.channels, config.last_kernel_size))
            )
            self.in_channels, self.out_channels = config.dimension, config.channels
        else:
            mult = 1
            self.steps.append(
                (False, _conv(weights, name(), config.channels, nf, config.kernel_size))
            )
            index += 1
            for ratio in reversed(config.ratios):
                add_residuals(mult * nf)
                # The ELU has an index of its own among the checkpoint's layers.
                index += 1
                conv = _conv(weights, name(), mult * nf, mult * nf * 2, 2 * ratio, stride=ratio)
                self.steps.append((True, conv))
                index += 1
                mult *= 2
            index += 1
            self.steps.append(
                (True, _conv(weights, name(), mult * nf, config.dimension, config.last_kernel_size))
            )
            self.in_channels, self.out_channels = config.channels, config.dimension
        # State slot of each step's first conv, and the first step from which the remaining
        # weights are small.
        self._slots = [0]
        sizes = []
        for _, layer in self.steps:
            convs = _step_convs(layer)
            self._slots.append(self._slots[-1] + len(convs))
            sizes.append(sum(conv.weight_size for conv in convs))
        self._group_from = next(
            (i for i in range(len(sizes)) if sum(sizes[i:]) <= GROUP_FROM_WEIGHTS), len(sizes)
        )

    def convs(self) -> list[StreamingConv1d | StreamingConvTranspose1d]:
        """Every conv and transposed conv in layer order (the order of the state)."""
        return [conv for _, layer in self.steps for conv in _step_convs(layer)]

    def initial_state(self) -> list[np.ndarray]:
        """Zero left contexts and partials, one array per conv in layer order."""
        return [
            conv.initial_history() if isinstance(conv, StreamingConv1d) else conv.initial_partial()
            for conv in self.convs()
        ]

    def __call__(self, x: np.ndarray, state: list[np.ndarray]) -> np.ndarray:
        """x [T, C_in] → y [T', C_out]; replaces the entries of ``state`` with the next ones."""
        slot = 0
        for elu_first, layer in self.steps:
            if isinstance(layer, ResidualBlock):
                h, state[slot] = layer.conv_in(x, state[slot], activate=True)
                h, state[slot + 1] = layer.conv_out(h, state[slot + 1], activate=True)
                h += x
                x = h
                slot += 2
            elif isinstance(layer, StreamingConv1d):
                x, state[slot] = layer(x, state[slot], activate=elu_first)
                slot += 1
            else:
                x, state[slot] = layer(elu(x) if elu_first else x, state[slot])
                slot += 1
        return x

    def call_batch(
        self, x: np.ndarray, states: list[list[np.ndarray]], group: int | None = None
    ) -> np.ndarray:
        """``__call__`` for B streams: x [B, T, C_in] → y [B, T', C_out]; updates each state.

        ``group``: from the first layer whose weights are small (``GROUP_FROM_WEIGHTS``
        floats or fewer from there on), run ``group`` streams at a time, so each group's
        activations (the widest arrays: [T', C] at up to 24 kHz) stay in the core's cache
        while the layers that need batching (large weights, few frames) ran on all B.
        """
        split = self._group_from if group is not None and group < len(states) else len(self.steps)
        x = self._run_batch(x, states, 0, split)
        if split == len(self.steps):
            return x
        return np.concatenate(
            [
                self._run_batch(x[i : i + group], states[i : i + group], split, len(self.steps))
                for i in range(0, len(states), group)
            ]
        )

    def _run_batch(
        self, x: np.ndarray, states: list[list[np.ndarray]], first: int, end: int
    ) -> np.ndarray:
        """Steps ``first``…``end - 1`` on x [B, T, C] for B streams (their state slots)."""
        slot = self._slots[first]

        def run(layer, x: np.ndarray, activate: bool) -> np.ndarray:
            nonlocal slot
            y, nexts = layer.call_batch(x, [state[slot] for state in states], activate)
            for state, array in zip(states, nexts, strict=True):
                state[slot] = array
            slot += 1
            return y

        for elu_first, layer in self.steps[first:end]:
            if isinstance(layer, ResidualBlock):
                h = run(layer.conv_in, x, True)
                h = run(layer.conv_out, h, True)
                h += x
                x = h
            else:
                x = run(layer, x, elu_first)
        return x
