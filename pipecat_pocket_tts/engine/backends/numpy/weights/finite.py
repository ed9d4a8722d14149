"""Weights checked finite at load: a NaN or inf in a checkpoint is a load error naming the
tensor, not a model that speaks NaN.

Memory-mapped fp32 tensors are scanned in slices (a small boolean buffer, never a copy of
the tensor); the first synthesis reads every weight anyway, so the scan mostly moves that
page-in earlier.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ....errors import WeightsMismatchError

SLICE_ELEMENTS = 1 << 20
"""Elements scanned per step (4 MB of fp32; the boolean buffer is 1 MB)."""


def first_non_finite(array: np.ndarray) -> int | None:
    """Flat index of the first NaN or ±inf in ``array``, or None when all are finite."""
    flat = array.reshape(-1)
    for start in range(0, flat.size, SLICE_ELEMENTS):
        part = flat[start : start + SLICE_ELEMENTS]
        finite = np.isfinite(part)
        if not finite.all():
            return start + int(np.argmin(finite))
    return None


def check_finite_weights(weights: Mapping[str, np.ndarray], *, source: str = "weights") -> None:
    """Raise ``WeightsMismatchError`` naming every tensor of ``weights`` holding NaN or inf."""
    bad = []
    for key, array in weights.items():
        if not np.issubdtype(array.dtype, np.floating):
            continue
        index = first_non_finite(array)
        if index is not None:
            value = array.reshape(-1)[index]
            where = np.unravel_index(index, array.shape) if array.ndim else ()
            bad.append(f"{key} (first at {tuple(int(i) for i in where)}: {value})")
    if bad:
        shown = ", ".join(bad[:8]) + (f", … ({len(bad)} in all)" if len(bad) > 8 else "")
        raise WeightsMismatchError(
            f"{source} holds NaN or infinite values in {shown}. The file is corrupt or was "
            "saved from a diverged model: download it again or use a checkpoint that loads "
            "in upstream pocket-tts."
        )


__all__ = ["SLICE_ELEMENTS", "check_finite_weights", "first_non_finite"]
