"""Causal streaming 1-D convolutions on time-major arrays, one matmul per call.

Signals are ``[T, C]`` float32 (time first, channels last), so a convolution is a product of
the input's sliding windows with weights reshaped once at construction. With numba (the
``fast`` extra) a conv of dilation 1 and a multiple of 16 output channels (all of Mimi's but
the last) runs a window kernel on a weight packed once (``kernels/dispatch.py``); otherwise an
im2col of the call's frames and one BLAS matmul (per-tap matmuls on long inputs). The
transposed convs keep one BLAS matmul: with their wide outputs the kernel lost to it on
batches (``benchmarks.micro.batch_stages --layers``). On wider arithmetic
(``kernels/arithmetic.py``) both run the bfloat16 or int16 window kernels instead (``use_bf16``,
``use_int16``).
Streaming state lives outside the layer objects (plain arrays handed in and returned), so one
set of weights serves any number of sequences:

- ``StreamingConv1d``: left context of ``(K-1)·dilation + 1 - stride`` input frames, zeros at
  the start (or the first frame repeated, ``pad_mode="replicate"``). Calling it chunk by chunk
  equals calling it once on the concatenation.
- ``StreamingConvTranspose1d``: overlap-add; the ``K - stride`` output frames that the next
  input still adds to are carried as a bias-free "partial" buffer.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..kernels.arithmetic import Int16Weight, pack_int16
from ..kernels.dispatch import compiled_kernels, elu, pack_fp32, window_product

#: From this many output frames, per-tap matmuls beat im2col.
TAPS_MIN_FRAMES = 64


class StreamingConv1d:
    """Causal Conv1d: input [T, C_in] (T a multiple of stride) → output [T/stride, C_out]."""

    def __init__(
        self,
        weight: np.ndarray,
        bias: np.ndarray | None,
        stride: int = 1,
        dilation: int = 1,
        pad_mode: str = "constant",
    ) -> None:
        """``weight`` [C_out, C_in, K] and ``bias`` [C_out] in PyTorch's Conv1d layout."""
        if pad_mode not in ("constant", "replicate"):
            raise NotImplementedError(f"conv pad_mode {pad_mode!r} (only constant or replicate)")
        c_out, c_in, kernel = weight.shape
        self.in_channels = c_in
        self.out_channels = c_out
        self.kernel_size = kernel
        self.stride = stride
        self.dilation = dilation
        self.pad_mode = pad_mode
        # The input frames of left context carried from one call to the next.
        self.history = (kernel - 1) * dilation + 1 - stride
        if self.history < 0:
            raise NotImplementedError("conv with stride larger than its receptive field")
        # [K·C_in, C_out]; row k·C_in + c multiplies input channel c at tap k.
        self.matrix = np.ascontiguousarray(
            weight.astype(np.float32).transpose(2, 1, 0).reshape(kernel * c_in, c_out)
        )
        self.bias = None if bias is None else bias.astype(np.float32)
        #: The weight packed for int16 dot products, once ``use_int16`` puts the conv on them.
        self.int16: Int16Weight | None = None

    @cached_property
    def _packed(self) -> np.ndarray | None:
        """The matrix packed for ``window_matmul`` at the first call (a model built only for
        its shapes compiles nothing), or None: BLAS. A window of a dilated conv is not one run
        of memory: those keep the BLAS paths."""
        return pack_fp32(self.matrix) if self.dilation == 1 else None

    @property
    def weight_size(self) -> int:
        """Floats of weights this conv multiplies by."""
        return int(self.matrix.size)

    def use_int16(self) -> bool:
        """Run this conv on int16 dot products if its windows are one run of memory and its
        weight packs for them (``kernels/arithmetic.py``); whether it does."""
        self.int16 = pack_int16(self.matrix, self.in_channels) if self.dilation == 1 else None
        return self.int16 is not None

    @property
    def _runs_packed(self) -> bool:
        """Whether calls go to a window kernel (int16, or packed with kernels present)."""
        return self.int16 is not None or (
            self._packed is not None and compiled_kernels() is not None
        )

    def _packed_product(self, padded: np.ndarray, n_out: int) -> np.ndarray:
        """padded [B, L, C_in] (C-contiguous, L ≥ history + n_out·stride) → [B, n_out, C_out]
        by a window kernel (``window_product``)."""
        if self.int16 is not None:
            return window_product(
                padded, n_out, self.stride, self.kernel_size, self.int16, self.bias, "int16"
            )
        return window_product(padded, n_out, self.stride, self.kernel_size, self._packed, self.bias)

    def initial_history(self) -> np.ndarray:
        """Zero left context [history, C_in] for a fresh stream."""
        return np.zeros((self.history, self.in_channels), dtype=np.float32)

    def __call__(
        self, x: np.ndarray, history: np.ndarray, first: bool = False, activate: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """x [T, C_in], history [history, C_in] → (y [T/stride, C_out], next history).

        ``activate`` convolves ELU(x) instead of x (the ELU is written straight into the
        padded input). ``first`` marks the first call of a stream: with
        ``pad_mode="replicate"`` the left context is then the first input frame repeated.
        """
        t, hist = x.shape[0], self.history
        if t % self.stride:
            raise ValueError(f"conv input length {t} is not a multiple of stride {self.stride}")
        if hist == 0:
            padded = elu(x) if activate else np.ascontiguousarray(x)
            next_history = history
        else:
            padded = np.empty((hist + t, self.in_channels), dtype=np.float32)
            if activate:
                elu(x, out=padded[hist:])
            else:
                padded[hist:] = x
            if first and self.pad_mode == "replicate":
                padded[:hist] = padded[hist]
            else:
                padded[:hist] = history
            next_history = padded[t:].copy()
        return self._apply(padded, t // self.stride), next_history

    def call_batch(
        self, x: np.ndarray, histories: list[np.ndarray], activate: bool = False
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """``__call__`` for B streams: x [B, T, C_in], one history each → (y [B, T/stride,
        C_out], next histories). Short inputs share one matmul (each weight read once)."""
        batch, t = x.shape[0], x.shape[1]
        hist = self.history
        if t % self.stride:
            raise ValueError(f"conv input length {t} is not a multiple of stride {self.stride}")
        padded = np.empty((batch, hist + t, self.in_channels), dtype=np.float32)
        if activate:
            elu(x, out=padded[:, hist:])
        else:
            padded[:, hist:] = x
        if hist:
            padded[:, :hist] = np.stack(histories)
            # One copy for all streams; each stream's history is a view of it.
            next_histories = list(padded[:, t:].copy())
        else:
            next_histories = histories
        n_out = t // self.stride
        if self._runs_packed:
            return self._packed_product(padded, n_out), next_histories
        if n_out >= TAPS_MIN_FRAMES:
            # Long inputs share little: each stream runs its per-tap matmuls.
            return np.stack([self._apply(padded[b], n_out) for b in range(batch)]), next_histories
        if self.kernel_size == 1 and self.stride == 1:
            out = padded.reshape(batch * n_out, self.in_channels) @ self.matrix
        else:
            seq, row, item = padded.strides
            windows = as_strided(
                padded,
                shape=(batch, n_out, self.kernel_size, self.in_channels),
                strides=(seq, row * self.stride, row * self.dilation, item),
                writeable=False,
            )
            out = windows.reshape(batch * n_out, self.kernel_size * self.in_channels) @ self.matrix
        if self.bias is not None:
            out += self.bias
        return out.reshape(batch, n_out, self.out_channels), next_histories

    def _apply(self, padded: np.ndarray, n_out: int) -> np.ndarray:
        """padded [n_out·stride + history, C_in] (C-contiguous) → [n_out, C_out]."""
        if self._runs_packed:
            return self._packed_product(padded[None], n_out)[0]
        c_in, kernel, stride, dilation = (
            self.in_channels,
            self.kernel_size,
            self.stride,
            self.dilation,
        )
        if kernel == 1 and stride == 1:
            out = padded @ self.matrix
        elif n_out >= TAPS_MIN_FRAMES:
            # Long inputs: one matmul per tap on strided views (no im2col copy).
            span = stride * (n_out - 1) + 1
            out = padded[0:span:stride] @ self.matrix[:c_in]
            for k in range(1, kernel):
                start = k * dilation
                out += (
                    padded[start : start + span : stride] @ self.matrix[k * c_in : (k + 1) * c_in]
                )
        else:
            # Short inputs (a frame at 200 Hz): im2col, then one larger matmul.
            row, item = padded.strides
            windows = as_strided(
                padded,
                shape=(n_out, kernel, c_in),
                strides=(row * stride, row * dilation, item),
                writeable=False,
            )
            out = windows.reshape(n_out, kernel * c_in) @ self.matrix
        if self.bias is not None:
            out += self.bias
        return out


class StreamingConvTranspose1d:
    """Streaming ConvTranspose1d: input [T, C_in] → output [T·stride, C_out].

    Dense (groups=1) or depthwise (groups = C_in = C_out) weights are supported.
    """

    def __init__(self, weight: np.ndarray, bias: np.ndarray | None, stride: int, groups: int = 1):
        """``weight`` [C_in, C_out/groups, K] and ``bias`` [C_out] in PyTorch's layout."""
        c_in, c_out_per_group, kernel = weight.shape
        self.stride = stride
        self.kernel_size = kernel
        self.depthwise = groups > 1
        if self.depthwise and not (groups == c_in and c_out_per_group == 1):
            raise NotImplementedError("grouped ConvTranspose1d other than depthwise")
        self.in_channels = c_in
        self.out_channels = c_in if self.depthwise else c_out_per_group
        # The output frames that overlap the next call's.
        self.carried = kernel - stride
        if self.carried < 0:
            raise NotImplementedError("ConvTranspose1d with kernel smaller than stride")
        # Taps padded up to a multiple of the stride and cut in blocks of `stride` taps: block j
        # of input frame i lands on output frames (i + j)·stride … (i + j)·stride + stride - 1.
        self.blocks = -(-kernel // stride)
        padded_kernel = self.blocks * stride
        w = np.zeros((c_in, c_out_per_group, padded_kernel), dtype=np.float32)
        w[:, :, :kernel] = weight
        blocks = w.reshape(c_in, c_out_per_group, self.blocks, stride).transpose(2, 0, 3, 1)
        if self.depthwise:
            # [blocks, stride, C]: multiplied with x [T, 1, C].
            self.block_weights = [np.ascontiguousarray(b[:, :, 0].T) for b in blocks]
        else:
            # [blocks·C_in, stride·C_out]: row j·C_in + c holds block (blocks - 1 - j) of input
            # channel c, column s·C_out + o; so a window of `blocks` consecutive input frames
            # x[i - blocks + 1 … i] times it is output block i (one matmul, no overlap-add).
            self.stacked_blocks = np.ascontiguousarray(
                blocks[::-1].reshape(self.blocks * c_in, stride * self.out_channels)
            )
        self.bias = None if bias is None else bias.astype(np.float32)
        # The bias of a whole output block [stride · C_out]: a dense matmul row's columns.
        self._block_bias = None if bias is None else np.tile(self.bias, stride)
        # The weight packed for the kernel that runs it, if one does: bfloat16 (``use_bf16``),
        # int16 (``use_int16``) or float32 windows (``use_windows``).
        self.bf16: np.ndarray | None = None
        self.int16: Int16Weight | None = None
        self.packed: np.ndarray | None = None
        #: Dense: carry the overlapping output frames [K - stride, C_out] (the layout of
        #: CoreML's exported Mimi state) instead of the last input frames; a block of frames
        #: then sums its overlaps in another order than frame by frame.
        self.carry_outputs = False

    def use_windows(self) -> bool:
        """Run this dense transposed conv on the float32 window kernel instead of BLAS (each
        output row summed alone: a block of frames sums as its frames one by one) if the
        kernels are there and its stacked blocks pack for them; whether it does."""
        if self.depthwise or self.bf16 is not None:
            return self.bf16 is not None
        self.packed = pack_fp32(self.stacked_blocks)
        return self.packed is not None

    def use_bf16(self) -> bool:
        """Run this transposed conv on bfloat16 dot products if it is dense and its stacked
        blocks pack for them (``kernels/arithmetic.py``); whether it does."""
        from ..kernels.arithmetic import fits_bf16
        from ..kernels.bf16 import pack_bf16_columns

        if self.depthwise or not fits_bf16(*self.stacked_blocks.shape):
            return False

        self.bf16 = pack_bf16_columns(self.stacked_blocks)
        return True

    def use_int16(self) -> bool:
        """Run this transposed conv on int16 dot products if it is dense and its stacked blocks
        pack for them (``kernels/arithmetic.py``); whether it does."""
        if not self.depthwise:
            self.int16 = pack_int16(self.stacked_blocks, self.in_channels)
        if self.int16 is not None:
            # int16 runs it, so no other copy is kept.
            self.bf16 = self.packed = None
        return self.int16 is not None

    @property
    def weight_size(self) -> int:
        """Floats of weights this transposed conv multiplies by."""
        if self.depthwise:
            return sum(int(block.size) for block in self.block_weights)
        return int(self.stacked_blocks.size)

    def initial_partial(self) -> np.ndarray:
        """The carried state of a fresh stream, zeros: dense, the last ``blocks - 1`` input
        frames [blocks - 1, C_in]; depthwise, the overlap [K - stride, C_out]."""
        if not (self.depthwise or self.carry_outputs):
            return np.zeros((self.blocks - 1, self.in_channels), dtype=np.float32)
        return np.zeros((self.carried, self.out_channels), dtype=np.float32)

    def __call__(self, x: np.ndarray, partial: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """x [T, C_in], carried state (``initial_partial``) → (y [T·stride, C_out], next)."""
        y, (next_partial,) = self.call_batch(x[None], [partial])
        return y[0], next_partial

    def call_batch(
        self, x: np.ndarray, partials: list[np.ndarray], activate: bool = False
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """``__call__`` for B streams: x [B, T, C_in], one carried state each → (y [B,
        T·stride, C_out], next states). ``activate`` transposes ELU(x) instead of x.

        Dense weights: one matmul over all streams. The carried state is the last
        ``blocks - 1`` input frames (not the overlapping outputs): window i of ``blocks``
        frames, the state before this call's frames, gives output block i whole, so a block of
        frames sums every output as the frames one by one do (the same rounding).
        Depthwise: the ``K - stride`` overlapping output frames (elementwise, exact either way).
        """
        batch, t = x.shape[0], x.shape[1]
        s, c_out, blocks, carried = self.stride, self.out_channels, self.blocks, self.carried
        if (self.depthwise or self.carry_outputs) and t * s < carried:
            raise ValueError(f"ConvTranspose1d needs at least {carried} output frames")
        if self.depthwise:
            return self._depthwise_batch(elu(x) if activate else x, partials)
        if self.carry_outputs:
            return self._overlap_batch(elu(x) if activate else x, partials)
        c_in, pad = self.in_channels, blocks - 1
        padded = np.empty((batch, t + pad, c_in), dtype=np.float32)
        if pad:
            padded[:, :pad] = np.stack(partials)
        if activate:
            elu(x, out=padded[:, pad:])
        else:
            padded[:, pad:] = x
        # One copy for all streams; each stream's history is a view of it.
        next_histories = list(padded[:, t:].copy())
        if self.int16 is not None:
            out = window_product(padded, t, 1, blocks, self.int16, self._block_bias, "int16")
        elif self.bf16 is not None:
            out = window_product(padded, t, 1, blocks, self.bf16, self._block_bias, "bf16")
        elif self.packed is not None and compiled_kernels() is not None:
            out = window_product(padded, t, 1, blocks, self.packed, self._block_bias)
        else:
            seq, row, item = padded.strides
            columns = as_strided(
                padded, shape=(batch, t, blocks * c_in), strides=(seq, row, item), writeable=False
            )
            out = columns.reshape(batch * t, blocks * c_in) @ self.stacked_blocks
            if self._block_bias is not None:
                out += self._block_bias
        return out.reshape(batch, t * s, c_out), next_histories

    def _overlap_batch(
        self, x: np.ndarray, partials: list[np.ndarray]
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """Dense weights carrying the overlapping outputs (``carry_outputs``): each stream's
        input padded with ``blocks - 1`` zero frames on both sides, window i gives output block
        i (i < T, before the partial is added) or a block of the next partial (i ≥ T)."""
        batch, t = x.shape[0], x.shape[1]
        s, c_out, blocks, carried = self.stride, self.out_channels, self.blocks, self.carried
        c_in, pad = self.in_channels, blocks - 1
        padded = np.zeros((batch, t + 2 * pad, c_in), dtype=np.float32)
        padded[:, pad : t + pad] = x
        windows = t + pad
        seq, row, item = padded.strides
        columns = as_strided(
            padded, shape=(batch, windows, blocks * c_in), strides=(seq, row, item), writeable=False
        )
        out = (columns.reshape(batch * windows, blocks * c_in) @ self.stacked_blocks).reshape(
            batch, windows * s, c_out
        )
        y = out[:, : t * s]
        next_partials = list(out[:, t * s : t * s + carried].copy())
        if carried:
            y[:, :carried] += np.stack(partials)
        if self.bias is not None:
            y += self.bias
        return y, next_partials

    def _depthwise_batch(
        self, x: np.ndarray, partials: list[np.ndarray]
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """Depthwise weights: per-block products and overlap-add (elementwise, small)."""
        batch, t = x.shape[0], x.shape[1]
        s, c_out, blocks = self.stride, self.out_channels, self.blocks
        # Shape [B, T, stride, C].
        y = x[:, :, None, :] * self.block_weights[0][None, None]
        tail = np.zeros((batch, blocks - 1, s, c_out), dtype=np.float32)
        for j in range(1, blocks):
            contribution = x[:, :, None, :] * self.block_weights[j][None, None]
            y[:, j:] += contribution[:, : t - j]
            tail[:, :j] += contribution[:, t - j :]
        y = y.reshape(batch, t * s, c_out)
        carried = self.carried
        tail = tail.reshape(batch, -1, c_out)
        next_partials = list(tail[:, :carried].copy())
        if carried:
            y[:, :carried] += np.stack(partials)
        if self.bias is not None:
            y += self.bias
        return y, next_partials
