"""Voice states: a prefilled FlowLM KV cache, loaded from and saved to safetensors.

A voice is the K/V of every FlowLM attention layer after prefilling ``[bos_before_voice,
voice frames…]``. Files use upstream's exported layout (one entry per attention layer):

    transformer.layers.<i>.self_attn/cache   float32 [2, 1, T, kv_heads, head_dim]  (K, V)
    transformer.layers.<i>.self_attn/offset  int64 [1]   filled positions (slots ≥ offset unused,
                                                          upstream leaves NaN there)
    transformer.layers.<i>.self_attn/pad     int64 [1]   optional, 0 for a single voice

Older upstream files store ``current_end`` (whose length is the offset) instead of ``offset``.
Files written here add safetensors metadata naming the model config the voice was made for, so
a voice used with another pack is detected instead of producing garbage audio.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..atomic_files import atomic_path
from ..backends.base import VoiceKV
from ..errors import VoiceFileError
from ..model.config import ModelConfig, get_config
from ..model.config_registry import config_names

#: Metadata key naming the model config a voice was made for.
CONFIG_METADATA_KEY = "pocket_tts_config"
#: Metadata key of the fingerprint of the weights a cloned voice was made with
#: (``PackFiles.weights_id``): packs of one config name with other weights tell apart by it.
WEIGHTS_METADATA_KEY = "pocket_tts_weights"
#: Metadata key with a free-form description of where the voice came from.
SOURCE_METADATA_KEY = "pocket_tts_source"

_KEY_PATTERN = re.compile(r"^transformer\.layers\.(\d+)\.self_attn/(cache|offset|pad|current_end)$")


@dataclass
class Voice:
    """A voice state plus what it was made for.

    ``kv`` holds per layer K and V [T, kv_heads, head_dim] float32. ``config_name`` is the model
    config the state was computed with (None when unknown, e.g. upstream's own files);
    ``source`` says where it came from (a pack voice name, a file, a cloned recording).
    """

    kv: VoiceKV
    config_name: str | None = None
    source: str = ""
    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def num_layers(self) -> int:
        return len(self.kv.keys)

    @property
    def weights_id(self) -> str | None:
        """The fingerprint of the weights the voice was made with (None: unknown)."""
        return self.metadata.get(WEIGHTS_METADATA_KEY) or None

    @property
    def length(self) -> int:
        """Number of prefilled positions T."""
        return self.kv.length

    @property
    def kv_heads(self) -> int:
        return int(self.kv.keys[0].shape[1])

    @property
    def head_dim(self) -> int:
        return int(self.kv.keys[0].shape[2])

    # -- files --------------------------------------------------------------------------

    def __repr__(self) -> str:
        return (
            f"Voice(config_name={self.config_name!r}, source={self.source!r}, "
            f"positions={self.length}, layers={self.num_layers})"
        )

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        config: ModelConfig | None = None,
        *,
        weights_id: str | None = None,
    ) -> Voice:
        """Read a voice-state file; with ``config`` (and the model's ``weights_id``), also
        check it fits that model.

        Raises ``VoiceFileError`` for a missing, corrupt or foreign file.
        """
        path = Path(path)
        tensors, metadata = _read_safetensors(path)
        kv = _kv_from_tensors(tensors, path)
        voice = cls(
            kv=kv,
            config_name=metadata.get(CONFIG_METADATA_KEY) or None,
            source=metadata.get(SOURCE_METADATA_KEY) or str(path),
            metadata=dict(metadata),
        )
        if config is not None:
            voice.check_compatible(config, where=str(path), weights_id=weights_id)
        return voice

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the voice in upstream's layout (+ metadata); atomic: no half-written file."""
        from safetensors.numpy import save_file

        path = Path(path)
        tensors: dict[str, np.ndarray] = {}
        for i, (k, v) in enumerate(zip(self.kv.keys, self.kv.values, strict=True)):
            prefix = f"transformer.layers.{i}.self_attn/"
            tensors[prefix + "cache"] = np.ascontiguousarray(
                np.stack([k, v])[:, None].astype(np.float32, copy=False)
            )
            tensors[prefix + "offset"] = np.array([k.shape[0]], dtype=np.int64)
            tensors[prefix + "pad"] = np.zeros(1, dtype=np.int64)
        metadata = {k: v for k, v in self.metadata.items() if isinstance(v, str)}
        if self.config_name:
            metadata[CONFIG_METADATA_KEY] = self.config_name
        if self.source:
            metadata[SOURCE_METADATA_KEY] = self.source
        with atomic_path(path) as tmp:
            save_file(tensors, str(tmp), metadata=metadata)
        return path

    # -- validation ---------------------------------------------------------------------

    def check_compatible(
        self, config: ModelConfig, *, where: str | None = None, weights_id: str | None = None
    ) -> None:
        """Raise ``VoiceFileError`` unless this voice fits ``config``'s FlowLM and pack
        (``weights_id``: the model's weights fingerprint, compared when the voice has one)."""
        what = f"voice {where or self.source or '(in memory)'}"
        tr = config.flow_lm.transformer
        expected = (tr.num_layers, tr.kv_heads, tr.head_dim)
        found = (self.num_layers, self.kv_heads, self.head_dim)
        if found != expected:
            raise VoiceFileError(
                f"{what} has {found[0]} layers × {found[1]} KV heads × {found[2]} dims, but model "
                f"{config.name!r} needs {expected[0]} × {expected[1]} × {expected[2]}: it was made "
                f"for another model (config {self.config_name or 'unknown'}). Use a voice of this "
                "pack, or re-create the voice with this model."
            )
        if not _same_pack(self.config_name, config):
            raise VoiceFileError(
                f"{what} was made for model config {self.config_name!r}, not {config.name!r} "
                "(another language or other weights: it would produce wrong audio). Use a voice "
                f"of the {config.name!r} pack, or re-create the voice with this model."
            )
        if weights_id and self.weights_id and weights_id != self.weights_id:
            raise VoiceFileError(
                f"{what} was cloned with other weights than this {config.name!r} pack's (same "
                "config name and shapes, another pack): it would produce wrong audio. Clone the "
                "voice again with this model, or use one of its voices."
            )


def _same_pack(voice_config: str | None, config: ModelConfig) -> bool:
    """True unless ``voice_config`` names a config known to differ from ``config``."""
    if not voice_config or voice_config == config.name:
        return True
    if voice_config not in config_names():
        # A custom config we cannot look up: only the language prefix can be compared.
        return voice_config.split("_", 1)[0] == config.language
    other = get_config(voice_config)
    if other.language != config.language:
        return False
    if config.weights is None and config.weights_without_voice_cloning is None:
        # Custom weights of the same language: nothing more to compare.
        return True
    return (other.weights, other.weights_without_voice_cloning) == (
        config.weights,
        config.weights_without_voice_cloning,
    )


def _read_safetensors(path: Path) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    from safetensors import safe_open

    if not path.is_file():
        raise VoiceFileError(
            f"voice file not found: {path}. Pass a pack voice name or the path of an existing "
            "voice-state .safetensors file."
        )
    try:
        with safe_open(str(path), framework="np") as f:
            metadata = dict(f.metadata() or {})
            tensors = {key: f.get_tensor(key) for key in f.keys()}  # noqa: SIM118
    except VoiceFileError:
        raise
    except Exception as exc:
        # Safetensors raises its own error types, and TypeError for bf16.
        raise VoiceFileError(
            f"cannot read voice file {path}: {exc}. It must be a voice-state .safetensors file "
            "(as written by Voice.save or upstream's export-voice)."
        ) from exc
    return tensors, metadata


def _kv_from_tensors(tensors: dict[str, np.ndarray], path: Path) -> VoiceKV:
    layers: dict[int, dict[str, np.ndarray]] = {}
    for key, value in tensors.items():
        match = _KEY_PATTERN.match(key)
        if match is None:
            raise VoiceFileError(
                f"{path} is not a voice-state file: unexpected entry {key!r} (expected "
                "'transformer.layers.N.self_attn/cache' and '/offset' entries)."
            )
        layers.setdefault(int(match.group(1)), {})[match.group(2)] = value
    if not layers:
        raise VoiceFileError(f"{path} holds no voice state (no attention-layer entries).")
    indices = sorted(layers)
    if indices != list(range(len(indices))):
        raise VoiceFileError(
            f"{path}: attention layers are not contiguous from 0 (found layers {indices})."
        )

    keys: list[np.ndarray] = []
    values: list[np.ndarray] = []
    first_shape: tuple[int, ...] | None = None
    first_offset: int | None = None
    for i in indices:
        entry = layers[i]
        where = f"{path}, layer {i}"
        cache = entry.get("cache")
        if cache is None:
            raise VoiceFileError(f"{where}: the 'cache' entry is missing.")
        if cache.ndim != 5 or cache.shape[0] != 2 or cache.shape[1] != 1:
            raise VoiceFileError(
                f"{where}: cache has shape {list(cache.shape)}, expected "
                "[2, 1, T, kv_heads, head_dim]."
            )
        if not np.issubdtype(cache.dtype, np.floating):
            raise VoiceFileError(f"{where}: cache has dtype {cache.dtype}, expected float32.")
        if first_shape is None:
            first_shape = cache.shape
        elif cache.shape != first_shape:
            raise VoiceFileError(
                f"{where}: cache shape {list(cache.shape)} differs from layer 0's "
                f"{list(first_shape)}."
            )
        offset = _offset_of(entry, where, capacity=int(cache.shape[2]))
        if first_offset is None:
            first_offset = offset
        elif offset != first_offset:
            raise VoiceFileError(f"{where}: offset {offset} differs from layer 0's {first_offset}.")
        pad = entry.get("pad")
        if pad is not None and np.any(np.asarray(pad) != 0):
            raise VoiceFileError(
                f"{where}: pad={np.asarray(pad).ravel().tolist()} (a padded batch state); only "
                "single-voice states with pad 0 are supported."
            )
        used = np.asarray(cache[:, 0, :offset], dtype=np.float32)
        if not np.isfinite(used).all():
            raise VoiceFileError(
                f"{where}: the cache holds NaN or infinite values in its first {offset} positions "
                "(a corrupt voice state). Re-create the voice."
            )
        keys.append(np.ascontiguousarray(used[0]))
        values.append(np.ascontiguousarray(used[1]))
    return VoiceKV(keys=keys, values=values)


def _offset_of(entry: dict[str, np.ndarray], where: str, *, capacity: int) -> int:
    if "offset" in entry:
        raw = np.asarray(entry["offset"])
        if raw.size < 1 or not np.issubdtype(raw.dtype, np.integer):
            raise VoiceFileError(f"{where}: offset must be an integer tensor [1], got {raw!r}.")
        flat = raw.ravel()
        if np.any(flat != flat[0]):
            raise VoiceFileError(f"{where}: offset differs across the batch ({flat.tolist()}).")
        offset = int(flat[0])
    elif "current_end" in entry:
        # The older upstream layout.
        offset = int(np.asarray(entry["current_end"]).shape[0])
    else:
        raise VoiceFileError(f"{where}: the 'offset' entry is missing.")
    if not 0 < offset <= capacity:
        raise VoiceFileError(
            f"{where}: offset {offset} is outside the cache (1…{capacity} positions)."
        )
    return offset


def recorded_config(voices_dir: str | os.PathLike[str]) -> str | None:
    """The model config every voice file in ``voices_dir`` records it was made for, or None
    (no voices, none recording one, or voices of different configs). Reads headers only."""
    from safetensors import safe_open

    names = set()
    for path in sorted(Path(voices_dir).glob("*.safetensors")):
        try:
            with safe_open(str(path), "numpy") as f:
                names.add((f.metadata() or {}).get(CONFIG_METADATA_KEY))
        except Exception:
            # A damaged file says nothing here; loading it says what is wrong.
            return None
    return names.pop() if len(names) == 1 else None
