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

from ....errors import CloneAudioError, CloningUnavailableError, WeightsMismatchError
from ....model.config import MimiConfig
from ..kernels.mimi_arithmetic import blocks_exact, use_bf16, use_int16
from .mimi_transformer import AttentionCache, MimiTransformer
from .seanet import SEANet, ShapeRecorder, fetch_weight
from .streaming_conv import StreamingConv1d, StreamingConvTranspose1d

DECODE_GROUP = 4
"""Streams a batched decode runs together through the last SEANet layers (cache-sized)."""
# Latent frames per encoder chunk, which bounds memory on long clips.
ENCODE_CHUNK_FRAMES = 8
#: Names (no ``mimi.`` prefix) of the weights only the cloning encoder reads.
ENCODER_PREFIXES = ("encoder.", "encoder_transformer.", "downsample.")


@dataclass
class MimiDecoderState:
    """Streaming state of one decoded sequence: every array is owned by this state."""

    #: Shape [K - stride, outer_dim].
    upsample_partial: np.ndarray
    attention: AttentionCache
    #: Conv left contexts and transposed-conv partials, in layer order.
    seanet: list[np.ndarray]

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
        self, config: MimiConfig, weights: dict[str, np.ndarray], arithmetic: str = "fp32"
    ) -> None:
        """``weights``: Mimi tensors in upstream names without the ``mimi.`` prefix;
        ``arithmetic``: what the decoder multiplies in, one of ``arithmetic.MIMI_ARITHMETIC``
        but "auto" (check it with ``choose_arithmetic`` first)."""
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
        # Shape [outer_dim, latent_dim].
        self.latent_projection = fetch_weight(
            weights, "quantizer.output_proj.weight", (outer_dim, latent_dim, 1)
        )[:, :, 0]
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
        self.arithmetic = arithmetic
        if arithmetic == "bf16":
            use_bf16(self.decoder_transformer, self.decoder)
        elif arithmetic == "int16":
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
        # Shape [1, outer_dim].
        x = (self.latent_projection @ latent)[None, :]
        if self.upsample is not None:
            # Shape [16, D].
            x, state.upsample_partial = self.upsample(x, state.upsample_partial)
        # Shape [16, D].
        x = self.decoder_transformer(x, state.attention)
        # Shape [frame_size, 1].
        audio = self.decoder(x, state.seanet)
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
        differently (``blocks_exact``: none in this model's arithmetic)."""
        latents = np.asarray(latents, dtype=np.float32)
        batch = len(states)
        if latents.ndim != 3 or latents.shape[0] != batch or latents.shape[2] != self.latent_dim:
            raise ValueError(
                f"Mimi decode_frames takes latents [{batch}, K, {self.latent_dim}], "
                f"got {latents.shape}"
            )
        frames = latents.shape[1]
        # one product per frame, as a frame alone runs it (the same sums in a block)
        # Shape [B, K, outer_dim].
        x = (latents[:, :, None, :] @ self.latent_projection.T)[:, :, 0]
        if self.upsample is not None:
            x, partials = self.upsample.call_batch(x, [s.upsample_partial for s in states])
            for state, partial in zip(states, partials, strict=True):
                state.upsample_partial = partial
        x = self.decoder_transformer.call_batch(
            x, [s.attention for s in states], chunk=self.resample_stride
        )
        seanet = [s.seanet for s in states]
        # Shape [B, K·frame_size, 1].
        audio = self.decoder.call_batch(x, seanet, DECODE_GROUP)
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
        # The encoder has no transposed convs.
        matrices += [conv.matrix for conv in self.seanet.convs()]
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
            # Shape [steps, 512].
            x = self.seanet(padded[start : start + chunk, None], seanet_state)
            x = self.transformer(x, cache)
            if self.downsample is not None:
                # Shape [frames, inner].
                x, history = self.downsample(x, history, first=start == 0)
            outputs.append(x)
        return np.concatenate(outputs, axis=0)


def mimi_weight_shapes(config: MimiConfig) -> dict[str, tuple[int, ...]]:
    """Every Mimi weight name (upstream names, no ``mimi.`` prefix) → shape, for ``config``."""
    recorder = ShapeRecorder()
    Mimi(config, recorder)
    return dict(recorder)
