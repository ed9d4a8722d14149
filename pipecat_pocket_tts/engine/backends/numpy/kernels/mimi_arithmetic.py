"""A Mimi decoder put on the arithmetic chosen at load (``arithmetic.py``): which of its layers
run which kernel (``use_bf16``, ``use_int16``), and whether a block of frames then decodes bit for
bit as its frames one by one (``blocks_exact``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..layers.linears import DotLinear
from ..layers.streaming_conv import StreamingConvTranspose1d

if TYPE_CHECKING:
    from ..layers.mimi_transformer import MimiTransformer
    from ..layers.seanet import SEANet


def use_bf16(transformer: MimiTransformer, decoder: SEANet) -> None:
    """Put a Mimi decoder's transformer linears (those whose weights pack for it) and its dense
    transposed convs but the first on bfloat16 dot products; the first transposed conv runs the
    float32 window kernel (as every conv does), so each row of every layer sums alone
    (``blocks_exact``).

    Measured on the full-size random pack against fp32 frame by frame (a stretch of zero
    latents after loud ones, the quietest these weights give; random latents in brackets):
    the transformer alone 48.2 dB (63.6), with these two transposed convs 46.2 (~50), with all
    three 45.3 (48.0), with the first conv too 44.5 (46.6), every conv 44.3 (random): the
    residual, first and last convs stay float32.
    """
    _dot_linears(transformer, "bf16")
    for index, conv in enumerate(_dense_transposed(decoder)):
        if index == 0 or not conv.use_bf16():
            conv.use_windows()


def use_int16(transformer: MimiTransformer, decoder: SEANet) -> None:
    """Put a Mimi decoder's transformer linears and every SEANet conv and dense transposed conv
    whose weight packs for it (all but the last conv, one channel wide, at full size) on int16
    dot products. A dense transposed conv that does not pack runs the float32 window kernel
    (each row summed alone: ``blocks_exact``).

    Measured on the full-size random pack against fp32 frame by frame: 63.0 dB (random
    latents) and 62.1 dB (the quiet stretch of ``use_bf16``); the convs alone 63.2 / 63.6,
    the bfloat16 transformer with these convs 60.0 / 48.1 (``test_int16_arithmetic.py``).
    Every int16 instruction path gives the same bits."""
    _dot_linears(transformer, "int16")
    dense = _dense_transposed(decoder)
    for conv in decoder.convs():
        if not conv.use_int16() and conv in dense:
            conv.use_windows()


def _dot_linears(transformer: MimiTransformer, arithmetic: str) -> None:
    """The transformer's linears that pack for ``arithmetic`` on its dot products
    (``DotLinear``)."""
    for layer in transformer.layers:
        for name in ("in_proj", "out_proj", "linear1", "linear2"):
            linear = getattr(layer, name)
            if DotLinear.fits(arithmetic, linear.shape):
                object.__setattr__(layer, name, DotLinear(linear.dense(), arithmetic))


def _dense_transposed(decoder: SEANet) -> list[StreamingConvTranspose1d]:
    return [
        conv
        for conv in decoder.convs()
        if isinstance(conv, StreamingConvTranspose1d) and not conv.depthwise
    ]


def blocks_exact(transformer: MimiTransformer, decoder: SEANet) -> bool:
    """Whether a block of frames decodes bit for bit as its frames one by one: every
    transformer linear on a wider arithmetic's kernel and every dense transposed conv on a window
    kernel (int16, bfloat16 or float32: each row summed alone; BLAS's sums may follow the
    matrix's height). The attention runs frame by frame in a block
    (``MimiTransformer.call_batch``)."""
    linears = [
        getattr(layer, name)
        for layer in transformer.layers
        for name in ("in_proj", "out_proj", "linear1", "linear2")
    ]
    return (
        transformer.input_proj is None
        and transformer.output_proj is None
        and all(isinstance(linear, DotLinear) for linear in linears)
        and all(
            conv.int16 is not None or conv.bf16 is not None or conv.packed is not None
            for conv in _dense_transposed(decoder)
        )
    )
