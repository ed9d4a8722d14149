"""Streaming causal convs: the packed window kernel (numba) and the BLAS paths give one conv.

Each conv is checked against a plain reference (a loop over taps on the whole zero-padded
signal), called chunk by chunk, as a batch of streams and stream by stream.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pipecat_pocket_tts.engine.backends.numpy.kernels import dispatch
from pipecat_pocket_tts.engine.backends.numpy.kernels.dispatch import elu_numpy
from pipecat_pocket_tts.engine.backends.numpy.layers.streaming_conv import StreamingConv1d

# (C_in, C_out, kernel, stride): Mimi's decoder and encoder shapes, shrunk, and odd ones.
SHAPES = [
    (24, 32, 7, 1),  # the decoder's first conv
    (16, 16, 3, 1),  # a residual block's first conv
    (16, 32, 1, 1),  # a residual block's 1x1 conv
    (8, 16, 8, 4),  # the encoder's strided convs (kernel 2·stride)
    (8, 48, 10, 5),
    (5, 16, 3, 1),  # channels that are no multiple of anything
]


def reference_conv(signal: np.ndarray, conv: StreamingConv1d, activate: bool) -> np.ndarray:
    """signal [T, C_in] (the whole stream) → [T / stride, C_out], float64 taps loop."""
    x = elu_numpy(signal) if activate else signal
    x = np.concatenate([np.zeros((conv.history, conv.in_channels)), x]).astype(np.float64)
    weight = conv.matrix.astype(np.float64).reshape(conv.kernel_size, conv.in_channels, -1)
    n_out = signal.shape[0] // conv.stride
    out = np.zeros((n_out, conv.out_channels))
    for tap in range(conv.kernel_size):
        start = tap * conv.dilation
        out += x[start : start + conv.stride * (n_out - 1) + 1 : conv.stride] @ weight[tap]
    return out + (0.0 if conv.bias is None else conv.bias)


def make_conv(shape, seed: int = 0, dilation: int = 1) -> StreamingConv1d:
    c_in, c_out, kernel, stride = shape
    rng = np.random.default_rng(seed)
    weight = (rng.standard_normal((c_out, c_in, kernel)) / np.sqrt(c_in * kernel)).astype(
        np.float32
    )
    bias = (0.1 * rng.standard_normal(c_out)).astype(np.float32)
    return StreamingConv1d(weight, bias, stride=stride, dilation=dilation)


def run_batch(conv, signals: np.ndarray, chunks: list[int], activate: bool) -> np.ndarray:
    """signals [B, T, C_in] fed in chunks of the given frame counts → [B, T / stride, C_out]."""
    histories = [conv.initial_history() for _ in signals]
    outputs, start = [], 0
    for size in chunks:
        y, histories = conv.call_batch(signals[:, start : start + size], histories, activate)
        outputs.append(y)
        start += size
    return np.concatenate(outputs, axis=1)


def run_solo(conv, signal: np.ndarray, chunks: list[int], activate: bool) -> np.ndarray:
    history, outputs, start = conv.initial_history(), [], 0
    for size in chunks:
        y, history = conv(signal[start : start + size], history, activate=activate)
        outputs.append(y)
        start += size
    return np.concatenate(outputs)


def test_mimi_shaped_convs_run_the_packed_kernel_here() -> None:
    """numba (the dev extra) is installed here: convs with 16·n output channels are packed;
    dilated ones, and ones whose outputs no column block covers, keep BLAS."""
    assert dispatch._kernels is not None
    assert make_conv((16, 32, 3, 1))._packed is not None
    assert make_conv((16, 32, 3, 1), dilation=2)._packed is None
    assert make_conv((16, 1, 3, 1))._packed is None
    assert make_conv((16, 24, 3, 1))._packed is None


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("activate", [False, True])
def test_chunked_batches_equal_the_whole_signal_conv(shape, activate) -> None:
    conv = make_conv(shape)
    stride = conv.stride
    # Chunks of 1, 3, 6, 17 and 2 outputs: row counts that are and are not multiples of 4.
    chunks = [stride * n for n in (1, 3, 6, 17, 2)]
    rng = np.random.default_rng(1)
    signals = rng.standard_normal((3, sum(chunks), conv.in_channels)).astype(np.float32)
    got = run_batch(conv, signals, chunks, activate)
    for signal, stream in zip(signals, got, strict=True):
        np.testing.assert_allclose(stream, reference_conv(signal, conv, activate), atol=2e-5)


@pytest.mark.parametrize("shape", SHAPES)
def test_a_stream_in_a_batch_equals_the_stream_alone_bit_for_bit(shape) -> None:
    conv = make_conv(shape, seed=2)
    chunks = [conv.stride * n for n in (5, 4, 9)]
    rng = np.random.default_rng(3)
    signals = rng.standard_normal((4, sum(chunks), conv.in_channels)).astype(np.float32)
    batched = run_batch(conv, signals, chunks, activate=True)
    for signal, stream in zip(signals, batched, strict=True):
        np.testing.assert_array_equal(stream, run_solo(conv, signal, chunks, activate=True))


@pytest.mark.parametrize("shape", SHAPES)
def test_the_packed_kernel_and_blas_give_the_same_conv(shape, monkeypatch) -> None:
    conv = make_conv(shape, seed=4)
    chunks = [conv.stride * n for n in (7, 16, 1)]
    rng = np.random.default_rng(5)
    signals = (4 * rng.standard_normal((2, sum(chunks), conv.in_channels))).astype(np.float32)
    kernel = run_batch(conv, signals, chunks, activate=True)
    monkeypatch.setattr(conv, "_packed", None)
    blas = run_batch(conv, signals, chunks, activate=True)
    np.testing.assert_allclose(kernel, blas, rtol=1e-5, atol=1e-5)


def test_replicate_padding_on_the_packed_path() -> None:
    """The encoder's downsample: the first call's left context is its first frame repeated."""
    rng = np.random.default_rng(6)
    weight = rng.standard_normal((16, 8, 8)).astype(np.float32)
    conv = StreamingConv1d(weight, None, stride=4, pad_mode="replicate")
    assert conv._packed is not None
    signal = rng.standard_normal((40, 8)).astype(np.float32)
    got, _ = conv(signal, conv.initial_history(), first=True)
    padded = np.concatenate([np.repeat(signal[:1], conv.history, axis=0), signal])
    expected = np.stack(
        [padded[r * 4 : r * 4 + 8].reshape(-1) @ conv.matrix for r in range(signal.shape[0] // 4)]
    )
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_window_matmul_accumulates_into_out_over_overlapping_windows() -> None:
    from pipecat_pocket_tts.engine.backends.numpy.kernels import catalog as kernels

    rng = np.random.default_rng(7)
    padded = rng.standard_normal((2, 23, 8)).astype(np.float32)
    width, step, rows = 3 * 8, 2, 8  # windows of 3 frames, 2 frames apart: they overlap
    windows = np.lib.stride_tricks.as_strided(
        padded, (2, rows, width), (padded.strides[0], step * padded.strides[1], 4)
    )
    matrix = rng.standard_normal((width, 32)).astype(np.float32)
    out = np.full((2, rows, 32), 0.5, np.float32)
    kernels.window_matmul(windows, kernels.pack_columns(matrix), out)
    expected = 0.5 + np.einsum("brk,kn->brn", windows.astype(np.float64), matrix)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="multiple of 16"):
        kernels.pack_columns(matrix[:, :20])


def test_the_warm_up_compiled_every_window_product_a_conv_runs() -> None:
    """Overlapping windows and a 1x1 conv's (C-contiguous) windows: both compiled at load,
    none on a stream's first frame. In a fresh interpreter: this one's kernels have run."""
    script = """
import numpy as np
from pipecat_pocket_tts.engine.backends.numpy.kernels import compiled
from test_streaming_conv import SHAPES, make_conv, run_batch, run_solo
kernels = compiled.optional()
at_load = set(kernels.window_matmul.signatures)
for shape in SHAPES:
    conv = make_conv(shape)
    frames = 8 * conv.stride
    run_batch(conv, np.ones((2, frames, conv.in_channels), np.float32), [frames], True)
    run_solo(conv, np.ones((frames, conv.in_channels), np.float32), [frames], True)
added = set(kernels.window_matmul.signatures) - at_load
assert not added, added
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=Path(__file__).parent,  # the subprocess imports this module
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
