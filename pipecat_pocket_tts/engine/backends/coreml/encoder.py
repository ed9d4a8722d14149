"""Voice cloning on CoreML: the Mimi encoder models, their 10 s window, and the reprojection.

Two encoders exist (same I/O: ``audio`` [1, 1, 240000] → ``conditioning`` [1, 125, d]):

    mimi_encoderv3   in ``v2.1/<language>/`` of the non-English packs: that pack's Mimi and
                     speaker projection are baked in, so its output is used as it is.
    mimi_encoderv2   at the repository root, shared: the English Mimi and projection. Another
                     pack maps its output into its own conditioning space,
                         cond [P, d] · encoder_recover_pinv [d, 32] · speaker_projᵀ [32, d],
                     which recovers the 32-d latents and projects them again (for English the
                     product is the identity, so English uses the output as it is).

The encoder always takes exactly ``window_samples`` (240,000 = 10 s at 24 kHz): shorter audio
is zero-padded, longer audio truncated. Of its frames only those covering real audio are kept:
P = min(125, encoder frames, ceil(real samples / 1920)). Outputs may come back as fp16 or as a
strided view (FluidAudio #612); they are copied into a contiguous float32 [P, d].
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...errors import CloneAudioError, WeightsMismatchError
from ...model.config import ModelConfig
from .compiled_models import CoreMLModel
from .constants import read_matrix
from .io_specs import ENCODER_AUDIO, EncoderSpecs

#: Frames the v2.1 encoders give for their 10 s window (and the longest cloned prompt).
MAX_VOICE_FRAMES = 125


def fit_window(audio: np.ndarray, window_samples: int) -> tuple[np.ndarray, int]:
    """Mono samples [n] → (the encoder input [1, 1, window_samples] float32, real samples).

    Zero-pads short audio and truncates long audio; real samples = min(n, window_samples).
    """
    samples = np.asarray(audio, dtype=np.float32)
    if samples.ndim != 1:
        raise CloneAudioError(f"clone audio must be mono samples [n], got shape {samples.shape}")
    real = min(samples.shape[0], window_samples)
    window = np.zeros((1, 1, window_samples), dtype=np.float32)
    window[0, 0, :real] = samples[:real]
    return window, real


def usable_frames(
    real_samples: int, encoder_frames: int, frame_size: int, max_frames: int = MAX_VOICE_FRAMES
) -> int:
    """Encoder frames that cover real audio: min(max_frames, encoder_frames, ⌈real / frame⌉)."""
    return min(max_frames, encoder_frames, math.ceil(real_samples / frame_size))


def read_conditioning(output: np.ndarray, frames: int, d_model: int) -> np.ndarray:
    """An encoder output [1, F, d] (fp16 or fp32, any strides) → its first ``frames`` rows
    [frames, d] as contiguous float32."""
    array = np.asarray(output)
    if array.ndim == 3 and array.shape[0] == 1:
        array = array[0]
    if array.ndim != 2 or array.shape[1] != d_model or array.shape[0] < frames:
        raise WeightsMismatchError(
            f"the Mimi encoder returned conditioning of shape {list(np.shape(output))}, expected "
            f"[1, ≥{frames}, {d_model}]: re-download the encoder model"
        )
    return np.ascontiguousarray(array[:frames], dtype=np.float32)


@dataclass(frozen=True, eq=False)
class Reprojection:
    """Shared-encoder conditioning → this pack's space: cond · recover_pinv · speaker_projᵀ."""

    #: Float32 [d, latent]: the pseudo-inverse of the encoder's projection.
    recover_pinv: np.ndarray
    #: Float32 [d, latent]: the pack's speaker projection.
    speaker_proj: np.ndarray

    @classmethod
    def load(
        cls, recover_pinv: str | Path, speaker_proj: str | Path, *, d_model: int, latent_dim: int
    ) -> Reprojection:
        """Read both raw float32 [d_model, latent_dim] files."""
        shape = (d_model, latent_dim)
        return cls(read_matrix(recover_pinv, shape), read_matrix(speaker_proj, shape))

    def __call__(self, conditioning: np.ndarray) -> np.ndarray:
        """[P, d] → [P, d] float32 (through the [P, latent] latents)."""
        # Shape [P, latent].
        latents = np.asarray(conditioning, dtype=np.float32) @ self.recover_pinv
        return np.ascontiguousarray(latents @ self.speaker_proj.T, dtype=np.float32)


class VoiceEncoder:
    """One loaded Mimi encoder model, with the reprojection its output needs (or None)."""

    def __init__(
        self,
        model: CoreMLModel,
        config: ModelConfig,
        *,
        reprojection: Reprojection | None = None,
        label: str = "mimi_encoder",
    ) -> None:
        """Check the model's I/O against ``config`` (``WeightsMismatchError`` if it differs)."""
        self.model = model
        self.label = label
        self.io_specs = EncoderSpecs.from_io(model.inputs, model.outputs, label)
        self.io_specs.check(config)
        self.reprojection = reprojection
        self.frame_size = config.mimi.frame_size

    def encode(self, audio: np.ndarray) -> np.ndarray:
        """24 kHz mono audio [n] → voice conditioning [P, d] float32 (P ≤ 125, see module)."""
        specs = self.io_specs
        window, real = fit_window(audio, specs.window_samples)
        if real == 0:
            raise CloneAudioError("clone audio is empty: pass at least 1 s of speech")
        if not np.all(np.isfinite(window)):
            raise CloneAudioError("clone audio contains NaN or infinite samples: clean it first")
        out = self.model.predict({ENCODER_AUDIO: window})
        frames = usable_frames(real, specs.frames, self.frame_size)
        conditioning = read_conditioning(out[specs.output], frames, specs.d_model)
        return conditioning if self.reprojection is None else self.reprojection(conditioning)
