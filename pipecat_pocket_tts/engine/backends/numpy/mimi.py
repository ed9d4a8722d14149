"""Mimi codec in NumPy: a streaming decoder (latent → 1920 samples) and the cloning encoder.

Decoder, per 80 ms frame (shapes for the full-size English model):

    latent [32] ─ quantizer.output_proj (1x1 conv) ─▶ [512]
      ─ upsample: depthwise ConvTranspose1d k32 s16 ─▶ [16, 512] at 200 Hz
      ─ decoder transformer (sliding-window causal attention, RoPE, layer scale) ─▶ [16, 512]
      ─ SEANet decoder (convs + transposed convs, strides 6·5·4) ─▶ [1920] at 24 kHz

Encoder (voice cloning), on whole clips, run internally in chunks with the same streaming
machinery: SEANet encoder (strides 4·5·6) → encoder transformer → downsample Conv1d k32 s16
(replicate left pad) → latents [T, inner_dim] at 12.5 Hz.

Everything is time-major ``[T, C]`` float32. Weights are shared and read-only; all
per-sequence data lives in ``MimiDecoderState`` (plain arrays, cheap to copy). The encoder
(``MimiEncoder``) is built on the first ``encode``: a model that never clones does not hold
its converted weights.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ...errors import CloneAudioError, CloningUnavailableError, WeightsMismatchError
from ...model.config import MimiConfig, MimiTransformerConfig
from .layers import apply_rope, gelu_tanh, layer_norm, rope_tables
from .linears import DotLinear, Linear, make_linear
from .seanet import SEANet, ShapeRecorder, fetch_weight
from .streaming_conv import StreamingConv1d, StreamingConvTranspose1d

LAYER_NORM_EPS = 1e-5
DECODE_GROUP = 4
"""Streams a batched decode runs together through the last SEANet layers (cache-sized)."""
ENCODE_CHUNK_FRAMES = 8  # latent frames per encoder chunk: bounds memory on long clips
#: Names (no ``mimi.`` prefix) of the weights only the cloning encoder reads.
ENCODER_PREFIXES = ("encoder.", "encoder_transformer.", "downsample.")


# -- transformer ------------------------------------------------------------------------------


@dataclass
class AttentionCache:
    """Keys/values of the last positions of every layer, in a ring of ``slots`` entries.

    ``keys``/``values`` [L, H, slots, Dh] hold RoPE-rotated keys and values; ``slot_positions``
    [slots] the absolute position stored in each slot (-1: empty); ``position`` is the next
    absolute position (also the RoPE offset).
    """

    keys: np.ndarray
    values: np.ndarray
    slot_positions: np.ndarray
    position: int = 0

    def copy(self) -> AttentionCache:
        return AttentionCache(
            self.keys.copy(), self.values.copy(), self.slot_positions.copy(), self.position
        )


@dataclass(frozen=True)
class _TransformerLayer:
    """One layer's weights; the linears are fp32 ``linears.Linear``s ([n, in] → [n, out]): one
    stream's 16 positions a frame run the compiled kernel when numba is installed (2 layers'
    linears in ~0.85× of BLAS's time), more rows BLAS."""

    norm1: tuple[np.ndarray, np.ndarray]
    norm2: tuple[np.ndarray, np.ndarray]
    in_proj: Linear  # D → 3D
    out_proj: Linear  # D → D, layer_scale_1 folded into its rows
    linear1: Linear  # D → F
    linear2: Linear  # F → D, layer_scale_2 folded into its rows


class MimiTransformer:
    """Mimi's ProjectedTransformer: causal attention over the last ``context`` positions."""

    def __init__(
        self, config: MimiTransformerConfig, weights: Mapping[str, np.ndarray], prefix: str
    ) -> None:
        d, ff = config.d_model, config.dim_feedforward
        if len(config.output_dimensions) != 1:
            raise NotImplementedError(f"{prefix}: more than one output projection")
        self.d_model = d
        self.num_heads = config.num_heads
        self.head_dim = config.head_dim
        self.context = config.context
        self.max_period = config.max_period
        self.input_dim = config.input_dimension
        self.output_dim = config.output_dimensions[0]
        self.input_proj = (
            None
            if d == self.input_dim
            else fetch_weight(weights, f"{prefix}.input_proj.weight", (d, self.input_dim))
        )
        self.output_proj = (
            None
            if d == self.output_dim
            else fetch_weight(weights, f"{prefix}.output_projs.0.weight", (self.output_dim, d))
        )
        self.layers: list[_TransformerLayer] = []
        for i in range(config.num_layers):
            name = f"{prefix}.transformer.layers.{i}"

            def get(key: str, shape: tuple[int, ...], name: str = name) -> np.ndarray:
                return fetch_weight(weights, f"{name}.{key}", shape)

            scale_1 = get("layer_scale_1.scale", (d,))
            scale_2 = get("layer_scale_2.scale", (d,))
            self.layers.append(
                _TransformerLayer(
                    norm1=(get("norm1.weight", (d,)), get("norm1.bias", (d,))),
                    norm2=(get("norm2.weight", (d,)), get("norm2.bias", (d,))),
                    in_proj=make_linear(get("self_attn.in_proj.weight", (3 * d, d))),
                    out_proj=make_linear(
                        get("self_attn.out_proj.weight", (d, d)) * scale_1[:, None]
                    ),
                    linear1=make_linear(get("linear1.weight", (ff, d))),
                    linear2=make_linear(get("linear2.weight", (d, ff)) * scale_2[:, None]),
                )
            )

    def new_cache(self, max_steps: int) -> AttentionCache:
        """An empty cache for calls of at most ``max_steps`` positions each."""
        slots = self.context - 1 + max_steps
        shape = (len(self.layers), self.num_heads, slots, self.head_dim)
        return AttentionCache(
            keys=np.zeros(shape, dtype=np.float32),
            values=np.zeros(shape, dtype=np.float32),
            slot_positions=np.full(slots, -1, dtype=np.int64),
        )

    def __call__(self, x: np.ndarray, cache: AttentionCache) -> np.ndarray:
        """x [T, input_dim] at positions cache.position … +T-1 → [T, output_dim]; fills cache."""
        return self.call_batch(x[None], [cache])[0]

    def call_batch(
        self, x: np.ndarray, caches: Sequence[AttentionCache], chunk: int | None = None
    ) -> np.ndarray:
        """``__call__`` for B streams: x [B, T, input_dim], one cache each → [B, T, output_dim].

        The linears, RoPE and softmax run on all B·T rows at once; each stream's keys and
        values go into its own ring and its queries attend over them (two matmuls a stream).
        ``chunk`` (a divisor of T: a frame's positions, for a block of frames): the attention
        runs a chunk at a time, each chunk's keys written and its queries answered before the
        next's, on the same ring and shapes as calls of one chunk each (the same sums).
        """
        batch, t = x.shape[0], x.shape[1]
        chunk = t if chunk is None else chunk
        if t % chunk:
            raise ValueError(f"{t} positions are not whole chunks of {chunk}")
        d, h, dh = self.d_model, self.num_heads, self.head_dim
        pieces = range(0, t, chunk)
        views = [[self._positions(cache, chunk, start) for start in pieces] for cache in caches]
        cos = np.concatenate([view[1] for stream in views for view in stream])  # [B·T, Dh/2]
        sin = np.concatenate([view[2] for stream in views for view in stream])
        masks = [  # per chunk: [B, 1, chunk, slots]
            np.stack([stream[i][3] for stream in views])[:, None] for i in range(len(pieces))
        ]
        slots = masks[0].shape[-1]
        rows = x.reshape(batch * t, x.shape[2])
        if self.input_proj is not None:
            rows = rows @ self.input_proj.T
        scale = np.float32(1.0 / np.sqrt(dh))
        scores = np.empty((batch, h, chunk, slots), dtype=np.float32)
        # keys · queries as BLAS takes it quickest (both operands as stored), then turned
        key_scores = np.empty((h, slots, chunk), dtype=np.float32)
        attended = np.empty((batch, t, h, dh), dtype=np.float32)
        for index, layer in enumerate(self.layers):
            qkv = layer.in_proj(layer_norm(rows, *layer.norm1, LAYER_NORM_EPS))  # [B·T, 3D]
            qk = apply_rope(qkv[:, : 2 * d].reshape(batch * t, 2 * h, dh), cos, sin)  # one pass
            q = qk[:, :h] * scale
            q = q.reshape(batch, t, h, dh).transpose(0, 2, 1, 3)  # [B, H, T, Dh]
            k = qk[:, h:].reshape(batch, t, h, dh).transpose(0, 2, 1, 3)
            v = qkv[:, 2 * d :].reshape(batch, t, h, dh).transpose(0, 2, 1, 3)
            for i, start in enumerate(pieces):
                span = slice(start, start + chunk)
                for b, (cache, stream) in enumerate(zip(caches, views, strict=True)):
                    keys, values, ring = cache.keys[index], cache.values[index], stream[i][0]
                    keys[:, ring] = k[b, :, span]  # [H, slots, Dh]
                    values[:, ring] = v[b, :, span]
                    np.matmul(keys, q[b, :, span].transpose(0, 2, 1), out=key_scores)
                    scores[b] = key_scores.transpose(0, 2, 1)
                scores += masks[i]
                scores -= scores.max(axis=-1, keepdims=True)
                np.exp(scores, out=scores)
                scores /= scores.sum(axis=-1, keepdims=True)
                for b, cache in enumerate(caches):
                    out = attended[b, span].transpose(1, 0, 2)
                    np.matmul(scores[b], cache.values[index], out=out)
            rows = rows + layer.out_proj(attended.reshape(batch * t, d))
            hidden = gelu_tanh(layer.linear1(layer_norm(rows, *layer.norm2, LAYER_NORM_EPS)))
            rows += layer.linear2(hidden)
        for cache in caches:
            cache.position += t
        if self.output_proj is not None:
            rows = rows @ self.output_proj.T
        return rows.reshape(batch, t, -1)

    def _positions(
        self, cache: AttentionCache, t: int, offset: int = 0
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Ring slots [T], RoPE cos/sin [T, Dh/2] and mask [T, slots] of the T positions from
        ``offset`` past the cache's next one (marks the slots as holding them)."""
        slots = cache.slot_positions.shape[0]
        if t > slots - (self.context - 1):
            raise ValueError(f"{t} steps in one call exceed the attention cache")
        positions = cache.position + offset + np.arange(t)
        cos, sin = rope_tables(positions, self.head_dim, self.max_period)
        ring = positions % slots
        cache.slot_positions[ring] = positions
        delta = positions[:, None] - cache.slot_positions[None, :]  # [T, slots]
        visible = (cache.slot_positions[None, :] >= 0) & (delta >= 0) & (delta < self.context)
        return ring, cos, sin, np.where(visible, np.float32(0.0), np.float32(-np.inf))


# -- codec ------------------------------------------------------------------------------------


@dataclass
class MimiDecoderState:
    """Streaming state of one decoded sequence: every array is owned by this state."""

    upsample_partial: np.ndarray  # [K - stride, outer_dim]
    attention: AttentionCache
    seanet: list[np.ndarray]  # conv left contexts / transposed-conv partials, in layer order

    def copy(self) -> MimiDecoderState:
        """A deep, independent copy (about 2 MB for the full-size model)."""
        return MimiDecoderState(
            self.upsample_partial.copy(),
            self.attention.copy(),
            [array.copy() for array in self.seanet],
        )


class Mimi:
    """Mimi decoder (streaming, one latent frame per call) and encoder (whole clips)."""

    def __init__(
        self, config: MimiConfig, weights: dict[str, np.ndarray], units: str = "fp32"
    ) -> None:
        """``weights``: Mimi tensors in upstream names without the ``mimi.`` prefix;
        ``units``: what the decoder runs on, one of ``wide_units.MIMI_UNITS`` but "auto"
        (check it with ``choose_units`` first)."""
        self.config = config
        self.frame_size = config.frame_size
        encoder_seanet, decoder_seanet = config.seanet, config.decoder_seanet
        if encoder_seanet.hop_length != decoder_seanet.hop_length:
            raise NotImplementedError("encoder and decoder SEANet with different hop lengths")
        self.hop_length = decoder_seanet.hop_length
        self.resample_stride, rest = divmod(self.frame_size, self.hop_length)
        if rest:
            raise NotImplementedError(
                f"frame size {self.frame_size} is not a multiple of the SEANet hop length"
            )

        # Decoder side.
        latent_dim = config.quantizer_dimension
        outer_dim = config.outer_dim or decoder_seanet.dimension
        if config.quantizer_output_dimension != outer_dim:
            raise WeightsMismatchError(
                f"quantizer output dimension {config.quantizer_output_dimension} differs from "
                f"outer_dim {outer_dim}: the config is inconsistent"
            )
        self.latent_dim = latent_dim
        self.latent_projection = fetch_weight(
            weights, "quantizer.output_proj.weight", (outer_dim, latent_dim, 1)
        )[:, :, 0]  # [outer_dim, latent_dim]
        self.upsample: StreamingConvTranspose1d | None = None
        if self.resample_stride > 1:
            if outer_dim != decoder_seanet.dimension:
                raise NotImplementedError("non-depthwise Mimi upsampling (outer_dim ≠ dimension)")
            kernel = 2 * self.resample_stride
            self.upsample = StreamingConvTranspose1d(
                fetch_weight(weights, "upsample.convtr.convtr.weight", (outer_dim, 1, kernel)),
                None,
                stride=self.resample_stride,
                groups=outer_dim,
            )
        self.decoder_transformer = MimiTransformer(
            config.decoder_transformer, weights, "decoder_transformer"
        )
        self.decoder = SEANet(decoder_seanet, weights, "decoder", decoder=True)
        self.units = units
        if units == "bf16":
            use_bf16(self.decoder_transformer, self.decoder)
        elif units == "int16":
            use_int16(self.decoder_transformer, self.decoder)
        #: whether ``decode_frames`` gives the same samples bit for bit as frame by frame
        self.blocks_exact = blocks_exact(self.decoder_transformer, self.decoder)

        # Encoder side (voice cloning); absent or zeroed in packs without cloning. Built here
        # to check it, then dropped: its converted arrays (~24 MB at full size) are built again
        # on the first ``encode``, so a model that never clones does not keep them resident.
        self.has_encoder = False
        self._encoder: MimiEncoder | None = None
        self._encoder_lock = threading.Lock()
        self._encoder_weights = {k: v for k, v in weights.items() if k.startswith(ENCODER_PREFIXES)}
        try:
            encoder = MimiEncoder(config, weights, self.resample_stride)
        except WeightsMismatchError:
            if self._encoder_weights:
                raise
        else:
            self.has_encoder = not encoder.is_zeroed()
        if not self.has_encoder:
            self._encoder_weights = {}

    # -- decoder ------------------------------------------------------------------------------

    def new_state(self) -> MimiDecoderState:
        """A fresh decoder state (silence before the first frame)."""
        partial = (
            self.upsample.initial_partial()
            if self.upsample is not None
            else np.zeros((0, self.latent_projection.shape[0]), dtype=np.float32)
        )
        return MimiDecoderState(
            upsample_partial=partial,
            attention=self.decoder_transformer.new_cache(self.resample_stride),
            seanet=self.decoder.initial_state(),
        )

    def decode(self, state: MimiDecoderState, latent: np.ndarray) -> np.ndarray:
        """Denormalized latent [latent_dim] → audio [frame_size] float32; advances ``state``."""
        latent = np.asarray(latent, dtype=np.float32)
        if latent.shape != (self.latent_dim,):
            raise ValueError(
                f"Mimi decode takes one latent [{self.latent_dim}], got {latent.shape}"
            )
        x = (self.latent_projection @ latent)[None, :]  # [1, outer_dim]
        if self.upsample is not None:
            x, state.upsample_partial = self.upsample(x, state.upsample_partial)  # [16, D]
        x = self.decoder_transformer(x, state.attention)  # [16, D]
        audio = self.decoder(x, state.seanet)  # [frame_size, 1]
        return audio.reshape(-1)

    def decode_batch(self, states: Sequence[MimiDecoderState], latents: np.ndarray) -> np.ndarray:
        """``decode`` for B streams: denormalized latents [B, latent_dim] → audio [B,
        frame_size]; every stage runs once on the stacked streams."""
        latents = np.asarray(latents, dtype=np.float32)
        if latents.ndim != 2:
            raise ValueError(
                f"Mimi decode_batch takes latents [B, latent_dim], got {latents.shape}"
            )
        return self.decode_frames(states, latents[:, None])[:, 0]

    def decode_frames(self, states: Sequence[MimiDecoderState], latents: np.ndarray) -> np.ndarray:
        """K frames of each of B streams in one call: denormalized latents [B, K, latent_dim] →
        audio [B, K, frame_size], each stream's frames in order. The same samples as K calls of
        ``decode_batch`` up to float rounding: the same windows and taps, the attention a frame
        at a time on the same ring; only BLAS's sums over taller matrices may round
        differently (``blocks_exact``: none on this model's units)."""
        latents = np.asarray(latents, dtype=np.float32)
        batch = len(states)
        if latents.ndim != 3 or latents.shape[0] != batch or latents.shape[2] != self.latent_dim:
            raise ValueError(
                f"Mimi decode_frames takes latents [{batch}, K, {self.latent_dim}], "
                f"got {latents.shape}"
            )
        frames = latents.shape[1]
        # one product per frame, as a frame alone runs it (the same sums in a block)
        x = (latents[:, :, None, :] @ self.latent_projection.T)[:, :, 0]  # [B, K, outer_dim]
        if self.upsample is not None:
            x, partials = self.upsample.call_batch(x, [s.upsample_partial for s in states])
            for state, partial in zip(states, partials, strict=True):
                state.upsample_partial = partial
        x = self.decoder_transformer.call_batch(
            x, [s.attention for s in states], chunk=self.resample_stride
        )
        seanet = [s.seanet for s in states]
        audio = self.decoder.call_batch(x, seanet, DECODE_GROUP)  # [B, K·frame_size, 1]
        return audio.reshape(batch, frames, self.frame_size)

    # -- encoder ------------------------------------------------------------------------------

    def encode(self, audio: np.ndarray) -> np.ndarray:
        """24 kHz mono audio [n] → latents [ceil(n / frame_size), inner_dim] at 12.5 Hz.

        Audio whose length is not a multiple of the frame size is right-padded with zeros
        (as upstream does). Raises ``CloningUnavailableError`` when the weights have no
        encoder and ``CloneAudioError`` for empty or non-finite audio.
        """
        if not self.has_encoder:
            raise CloningUnavailableError(
                "these Mimi weights have no voice-cloning encoder: use a predefined voice, or "
                "load the pack with voice cloning (accept the model terms on Hugging Face and "
                "set HF_TOKEN)"
            )
        audio = np.asarray(audio, dtype=np.float32)
        if audio.ndim != 1 or audio.size == 0:
            raise CloneAudioError(
                f"clone audio must be non-empty 1-D mono samples, got shape {audio.shape}"
            )
        if not np.all(np.isfinite(audio)):
            raise CloneAudioError("clone audio contains NaN or infinite samples: clean it first")
        frames = -(-audio.size // self.frame_size)
        padded = np.zeros(frames * self.frame_size, dtype=np.float32)
        padded[: audio.size] = audio

        return self._built_encoder().encode(padded, self.frame_size)

    def _built_encoder(self) -> MimiEncoder:
        """The cloning encoder, built on first use (once, whichever thread asks first)."""
        with self._encoder_lock:
            if self._encoder is None:
                self._encoder = MimiEncoder(
                    self.config, self._encoder_weights, self.resample_stride
                )
            return self._encoder


class MimiEncoder:
    """The cloning side of Mimi: SEANet encoder → encoder transformer → downsample, on whole
    clips run in chunks (read-only weights; each ``encode`` has its own streaming state)."""

    def __init__(
        self, config: MimiConfig, weights: Mapping[str, np.ndarray], resample_stride: int
    ) -> None:
        """``WeightsMismatchError`` when an encoder weight is missing or mis-shaped."""
        self.resample_stride = resample_stride
        self.seanet = SEANet(config.seanet, weights, "encoder", decoder=False)
        self.transformer = MimiTransformer(config.transformer, weights, "encoder_transformer")
        dimension = config.seanet.dimension
        self.encoded_dim = config.inner_dim or dimension
        self.downsample: StreamingConv1d | None = None
        if resample_stride > 1:
            kernel = 2 * resample_stride
            self.downsample = StreamingConv1d(
                fetch_weight(
                    weights, "downsample.conv.conv.weight", (self.encoded_dim, dimension, kernel)
                ),
                None,
                stride=resample_stride,
                pad_mode="replicate",
            )

    def is_zeroed(self) -> bool:
        """True when any weight matrix is all zeros (a pack without cloning)."""
        matrices = [layer.in_proj.dense() for layer in self.transformer.layers]
        matrices += [conv.matrix for conv in self.seanet.convs()]  # the encoder: no transposed
        if self.downsample is not None:
            matrices.append(self.downsample.matrix)
        return any(not np.any(matrix) for matrix in matrices)

    def encode(self, padded: np.ndarray, frame_size: int) -> np.ndarray:
        """Audio [frames · frame_size] f32 → latents [frames, encoded_dim]."""
        seanet_state = self.seanet.initial_state()
        cache = self.transformer.new_cache(ENCODE_CHUNK_FRAMES * self.resample_stride)
        history = self.downsample.initial_history() if self.downsample is not None else None
        chunk = ENCODE_CHUNK_FRAMES * frame_size
        outputs = []
        for start in range(0, padded.size, chunk):
            x = self.seanet(padded[start : start + chunk, None], seanet_state)  # [steps, 512]
            x = self.transformer(x, cache)
            if self.downsample is not None:
                x, history = self.downsample(x, history, first=start == 0)  # [frames, inner]
            outputs.append(x)
        return np.concatenate(outputs, axis=0)


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
    the bfloat16 transformer with these convs 60.0 / 48.1 (``test_int16_units.py``)."""
    _dot_linears(transformer, "int16")
    dense = _dense_transposed(decoder)
    for conv in decoder.convs():
        if not conv.use_int16() and conv in dense:
            conv.use_windows()


def _dot_linears(transformer: MimiTransformer, units: str) -> None:
    """The transformer's linears that pack for ``units`` on its dot products (``DotLinear``)."""
    for layer in transformer.layers:
        for name in ("in_proj", "out_proj", "linear1", "linear2"):
            linear = getattr(layer, name)
            if DotLinear.fits(units, linear.shape):
                object.__setattr__(layer, name, DotLinear(linear.dense(), units))


def _dense_transposed(decoder: SEANet) -> list[StreamingConvTranspose1d]:
    return [
        conv
        for conv in decoder.convs()
        if isinstance(conv, StreamingConvTranspose1d) and not conv.depthwise
    ]


def blocks_exact(transformer: MimiTransformer, decoder: SEANet) -> bool:
    """Whether a block of frames decodes bit for bit as its frames one by one: every
    transformer linear on a wide units' kernel and every dense transposed conv on a window
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


def mimi_weight_shapes(config: MimiConfig) -> dict[str, tuple[int, ...]]:
    """Every Mimi weight name (upstream names, no ``mimi.`` prefix) → shape, for ``config``."""
    recorder = ShapeRecorder()
    Mimi(config, recorder)
    return dict(recorder)
