"""Random voice states, prefilled through a backend and saved in upstream's layout."""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from ..engine.backends.base import Backend
from ..engine.voices.voice import Voice


def write_random_voices(
    folder: str | os.PathLike[str],
    backend: Backend,
    names: Iterable[str],
    *,
    seed: int = 0,
    frames: int = 12,
) -> list[Path]:
    """Prefill random voice conditioning through ``backend`` and save each voice.

    Args:
        folder: The pack folder; voices go to ``embeddings/<name>.safetensors``, stamped with
            the backend's config name.
        backend: The backend that prefills them.
        names: The voice names.
        seed: Seeds the conditioning.
        frames: Conditioning frames per voice ([frames, d_model]).

    Returns:
        The files written.
    """
    config = backend.config
    d_model = config.flow_lm.transformer.d_model
    paths = []
    for voice_name in names:
        rng = np.random.default_rng([seed, zlib.crc32(voice_name.encode())])
        conditioning = rng.standard_normal((frames, d_model)).astype(np.float32)
        bos = backend.bos_before_voice()
        if bos is not None:
            conditioning = np.concatenate([np.reshape(bos, (1, d_model)), conditioning])
        state = backend.new_flow_state()
        backend.prefill(state, conditioning)
        voice = Voice(
            kv=backend.voice_from_flow_state(state),
            config_name=config.name,
            source=f"devpack random voice {voice_name!r} (seed {seed})",
        )
        paths.append(voice.save(Path(folder) / "embeddings" / f"{voice_name}.safetensors"))
    return paths
