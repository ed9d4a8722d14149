"""Backend factory: turn a backend name ("numpy" | "coreml" | "auto") into a loaded Backend.

The engine only ever sees the stage interface of ``base.Backend``; this module is the one place
that knows which implementations exist and where each can run.
"""

from __future__ import annotations

import importlib.util
import os
import platform
from typing import TYPE_CHECKING, Any

from ..errors import BackendUnavailableError, UnknownBackendError
from .base import Backend

if TYPE_CHECKING:
    from pathlib import Path

    from ..config import ModelConfig

BACKEND_NAMES = ("auto", "numpy", "coreml")
"""Every name ``PocketTTS.load(backend=...)`` accepts."""

__all__ = [
    "BACKEND_NAMES",
    "Backend",
    "coreml_unavailable_reason",
    "create_backend",
    "resolve_backend_name",
]


def coreml_unavailable_reason() -> str | None:
    """Why the CoreML backend cannot run here, or None when it can."""
    if platform.system() != "Darwin":
        return f"CoreML runs only on Apple machines (this is {platform.system() or 'unknown'})"
    if importlib.util.find_spec("coremltools") is None:
        return "coremltools is not installed (pip install 'pipecat-pocket-tts[coreml]')"
    if importlib.util.find_spec(f"{__name__}.coreml.backend") is None:
        return "this build of pipecat-pocket-tts has no CoreML backend yet"
    return None


def resolve_backend_name(
    name: str, *, language: str | None = None, model_dir: str | os.PathLike[str] | None = None
) -> str:
    """Map a user's backend name to a concrete one ("numpy" or "coreml").

    "auto" picks CoreML where it can run and NumPy everywhere else; given ``language`` (and
    ``model_dir``), it also picks NumPy when there is no CoreML pack for them. Raises
    ``UnknownBackendError`` for a name outside ``BACKEND_NAMES`` and
    ``BackendUnavailableError`` for "coreml" where CoreML cannot run.
    """
    if not isinstance(name, str) or name.lower() not in BACKEND_NAMES:
        raise UnknownBackendError(
            f"unknown backend {name!r}; choose one of: {', '.join(BACKEND_NAMES)}"
        )
    name = name.lower()
    if name == "numpy":
        return "numpy"
    reason = coreml_unavailable_reason()
    if name == "auto":
        if reason:
            return "numpy"
        if language is not None:
            from .coreml.files import has_coreml_pack

            return "coreml" if has_coreml_pack(language, model_dir) else "numpy"
        return "coreml"
    if reason:
        raise BackendUnavailableError(
            f"backend='coreml' is not available: {reason}. Use backend='numpy' (runs anywhere) "
            "or backend='auto' (CoreML where it can run, else NumPy)."
        )
    return "coreml"


def create_backend(
    kind: str,
    config: ModelConfig,
    weights_path: Path | None,
    *,
    pack: Any = None,
    sampler_steps: int = 1,
    **options: Any,
) -> Backend:
    """Build a loaded backend of a concrete kind (see ``resolve_backend_name``).

    ``weights_path`` is the NumPy pack's ``model.safetensors``; ``pack`` is the resolved
    ``PackFiles`` (CoreML packs hold several model files). ``options`` are backend specific
    (e.g. CoreML compute units or precision); the NumPy backend takes only ``precision``
    ("fp32" | "bf16" | "int8", of its FlowLM transformer linears).
    """
    kind = resolve_backend_name(kind)
    if kind == "numpy":
        precision = options.pop("precision", "fp32")
        if options:
            raise ValueError(
                f"{', '.join(sorted(options))}: options of the CoreML backend, which the numpy "
                "backend does not take; drop them or use backend='coreml' (Apple) or 'auto'"
            )
        if weights_path is None:
            raise BackendUnavailableError("the numpy backend needs a model.safetensors file")
        from .numpy.backend import NumpyBackend

        return NumpyBackend.from_files(
            config, weights_path, sampler_steps=sampler_steps, precision=precision
        )
    from .coreml.backend import CoreMLBackend  # type: ignore[import-not-found]

    return CoreMLBackend.from_pack(config, pack, sampler_steps=sampler_steps, **options)
