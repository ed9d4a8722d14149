"""Host-side constants of a CoreML pack (``constants_bin/``: raw little-endian float32, no header).

text_embed_table.bin     [vocab, d_model]   one row per token id (read memory-mapped)
bos_emb.bin              [latent_dim]       the BOS latent, fed to flowlm as ``bos_emb``
bos_before_voice.bin     [d_model]          optional: put before the frames of a cloned voice
speaker_proj_weight.bin  [d_model, 32]      24-layer packs: the pack's speaker projection, for
                                            cloning through the shared encoder (see encoder.py)
mimi_init_state/<n>.bin  the initial value of Mimi state input <n> (absent: zeros)
tokenizer.model          SentencePiece model (read by the text stages)
<voice>.safetensors      voice KV snapshots (upstream layout, read by ``Voice.load``)

At the repository root: ``encoder_recover_pinv.bin`` [d_model, 32], the pseudo-inverse of the
shared encoder's (English) speaker projection (same raw format).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...errors import PackFilesMissingError, WeightsMismatchError
from .io_specs import TensorSpec

TEXT_EMBED_TABLE = "text_embed_table.bin"
BOS_EMB = "bos_emb.bin"
BOS_BEFORE_VOICE = "bos_before_voice.bin"
TOKENIZER = "tokenizer.model"
MIMI_INIT_STATE = "mimi_init_state"
SPEAKER_PROJ = "speaker_proj_weight.bin"
#: Lives at the repository root (beside ``mimi_encoderv2.mlmodelc``), not in ``constants_bin``.
RECOVER_PINV = "encoder_recover_pinv.bin"
#: Files every pack needs (``bos_before_voice.bin`` is optional).
REQUIRED_FILES = (TEXT_EMBED_TABLE, BOS_EMB, TOKENIZER)


@dataclass(frozen=True, eq=False)
class PackConstants:
    """The arrays the host needs besides the models."""

    #: Float32 [vocab, d_model].
    text_embed_table: np.ndarray
    #: Float32 [latent_dim].
    bos_emb: np.ndarray
    #: Float32 [d_model].
    bos_before_voice: np.ndarray | None
    #: Raw values by state name.
    mimi_init_state: dict[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def load(cls, folder: str | Path, *, d_model: int, latent_dim: int) -> PackConstants:
        """Read ``constants_bin/``; ``PackFilesMissingError`` / ``WeightsMismatchError`` if bad."""
        folder = Path(folder)
        missing = [name for name in (TEXT_EMBED_TABLE, BOS_EMB) if not (folder / name).is_file()]
        if missing:
            raise PackFilesMissingError(
                f"{folder} lacks {', '.join(missing)}: the CoreML pack is incomplete. "
                "Re-download it (delete the folder, or load without model_dir)."
            )
        table = _read_floats(folder / TEXT_EMBED_TABLE)
        if table.size == 0 or table.size % d_model:
            raise WeightsMismatchError(
                f"{folder / TEXT_EMBED_TABLE} holds {table.size} floats, not a multiple of "
                f"d_model={d_model}: the pack is for another model"
            )
        bos = _read_floats(folder / BOS_EMB)
        if bos.size != latent_dim:
            raise WeightsMismatchError(
                f"{folder / BOS_EMB} holds {bos.size} floats, expected {latent_dim}"
            )
        bos_before_voice = None
        if (folder / BOS_BEFORE_VOICE).is_file():
            bos_before_voice = _read_floats(folder / BOS_BEFORE_VOICE)
            if bos_before_voice.size != d_model:
                raise WeightsMismatchError(
                    f"{folder / BOS_BEFORE_VOICE} holds {bos_before_voice.size} floats, "
                    f"expected {d_model}"
                )
        init = {}
        init_dir = folder / MIMI_INIT_STATE
        if init_dir.is_dir():
            init = {p.stem: _read_floats(p) for p in sorted(init_dir.glob("*.bin"))}
        return cls(
            text_embed_table=table.reshape(-1, d_model),
            bos_emb=np.array(bos),
            bos_before_voice=None if bos_before_voice is None else np.array(bos_before_voice),
            mimi_init_state=init,
        )

    def initial_mimi_state(self, specs: Sequence[TensorSpec]) -> dict[str, np.ndarray]:
        """Fresh Mimi state tensors: from ``mimi_init_state/<name>.bin`` when its size fits,
        zeros otherwise (zero-length tensors included)."""
        state = {}
        for spec in specs:
            raw = self.mimi_init_state.get(spec.name)
            if raw is not None and raw.size == spec.size:
                state[spec.name] = np.array(raw, dtype=np.float32).reshape(spec.shape)
            else:
                state[spec.name] = np.zeros(spec.shape, dtype=np.float32)
        return state


def read_matrix(path: str | Path, shape: tuple[int, ...]) -> np.ndarray:
    """A raw float32 file holding exactly ``shape`` (row-major) → a float32 array of ``shape``.

    Raises ``WeightsMismatchError`` when the file holds another number of floats.
    """
    path = Path(path)
    values = _read_floats(path)
    expected = int(np.prod(shape))
    if values.size != expected:
        raise WeightsMismatchError(
            f"{path} holds {values.size} floats, expected {expected} "
            f"({' × '.join(map(str, shape))}): the file belongs to another model; re-download it"
        )
    return np.array(values, dtype=np.float32).reshape(shape)


def _read_floats(path: Path) -> np.ndarray:
    """A raw little-endian float32 file, memory-mapped (empty files give an empty array)."""
    size = path.stat().st_size
    if size % 4:
        raise WeightsMismatchError(f"{path} is {size} bytes, not a whole number of float32")
    if size == 0:
        return np.zeros(0, dtype=np.float32)
    return np.memmap(path, dtype="<f4", mode="r")


def write_floats(path: str | Path, array: np.ndarray) -> Path:
    """Write an array as raw little-endian float32 (the ``constants_bin`` format)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(np.ascontiguousarray(array, dtype="<f4").tobytes())
    return path
