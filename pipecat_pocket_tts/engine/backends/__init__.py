"""Which backends exist and where each runs: names → ``Backend`` classes, packs, loaded models.

The engine only ever sees the stage interface of ``base.Backend``; this module is the one place
that knows which implementations exist. Each backend owns its pack layout
(``Backend.find_pack_files``, in its ``files.py``) and how it loads (``Backend.from_pack``)::

    kind = resolve_backend_name(options.backend, pack_name="english")
    pack = find_pack_files("english", backend_kind=kind, model_dir=...)
    backend = load_backend(pack, options.for_backend(kind))
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import platform
from pathlib import Path

from ..errors import BackendUnavailableError, UnknownBackendError
from ..model.config_reference import coreml_pack_reference, is_config_reference
from ..model.languages import pack_name
from ..model.options import BACKEND_NAMES, LoadOptions
from ..model.packs import PackFiles, PackRequest
from .base import Backend

#: Concrete backend kind → (module, class). Imported on first use: the CoreML one only needs
#: coremltools when a model is loaded, so every kind imports anywhere.
BACKEND_CLASSES = {
    "numpy": (f"{__name__}.numpy.backend", "NumpyBackend"),
    "coreml": (f"{__name__}.coreml.backend", "CoreMLBackend"),
}

__all__ = [
    "BACKEND_NAMES",
    "Backend",
    "backend_class",
    "concrete_options",
    "coreml_unavailable_reason",
    "find_pack_files",
    "load_backend",
    "resolve_backend_name",
]


def backend_class(kind: str) -> type[Backend]:
    """The ``Backend`` class of a concrete kind ("numpy" | "coreml")."""
    if kind not in BACKEND_CLASSES:
        raise UnknownBackendError(
            f"no backend of kind {kind!r}; known: {', '.join(sorted(BACKEND_CLASSES))}"
        )
    module, name = BACKEND_CLASSES[kind]
    return getattr(importlib.import_module(module), name)


def coreml_unavailable_reason() -> str | None:
    """Why the CoreML backend cannot run here, or None when it can."""
    if platform.system() != "Darwin":
        return f"CoreML runs only on Apple machines (this is {platform.system() or 'unknown'})"
    if importlib.util.find_spec("coremltools") is None:
        return "coremltools is not installed (pip install 'pipecat-pocket-tts[coreml]')"
    return None


def concrete_options(options: LoadOptions, kind: str) -> LoadOptions:
    """``options.for_backend(kind)``, whose refusal of a precision says why "auto" chose
    NumPy (no CoreML here, or no CoreML pack)."""
    why = None
    if kind == "numpy" and options.backend == "auto":
        folder = options.model_dir
        where = f"in {folder}" if folder is not None else "for this pack"
        why = coreml_unavailable_reason() or f"there is no CoreML pack {where}"
    return options.for_backend(kind, why=why)


def resolve_backend_name(
    name: str, *, pack_name: str | None = None, model_dir: str | os.PathLike[str] | None = None
) -> str:
    """Map a user's backend name to a concrete one ("numpy" or "coreml").

    "auto" picks CoreML where it can run and NumPy everywhere else; given ``pack_name`` (and
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
        if pack_name is not None:
            from .coreml.files import has_coreml_pack

            return "coreml" if has_coreml_pack(pack_name, model_dir) else "numpy"
        return "coreml"
    if reason:
        raise BackendUnavailableError(
            f"backend='coreml' is not available: {reason}. Use backend='numpy' (runs anywhere) "
            "or backend='auto' (CoreML where it can run, else NumPy)."
        )
    return "coreml"


def find_pack_files(
    config_name: str = "english",
    *,
    model_dir: str | os.PathLike[str] | None = None,
    revision: str | None = None,
    token: str | bool | None = None,
    backend_kind: str = "numpy",
    voice_cloning: bool | None = None,
) -> PackFiles:
    """Find (or download) the files of pack ``config_name`` in a backend kind's layout.

    ``config_name`` may be any name ``languages.pack_name`` takes ("en", "English").
    ``voice_cloning`` (NumPy hub packs): None tries the gated weights and falls back to the
    ungated ones with a warning; True requires the gated weights (``GatedRepoError``
    otherwise); False takes the ungated weights directly. Ignored with ``model_dir``.
    """
    layout = backend_class(backend_kind)
    if backend_kind != "numpy" and is_config_reference(config_name):
        raise BackendUnavailableError(
            f"an upstream model config ({config_name}) runs on the numpy backend only; pass "
            "backend='numpy' (or 'auto')"
        )
    if backend_kind != "coreml" and coreml_pack_reference(config_name) is not None:
        raise BackendUnavailableError(
            f"{config_name} is a CoreML pack (FluidInference's v2.1 layout): it runs on "
            "backend='coreml' (Apple machines); name its registry config for numpy"
        )
    request = PackRequest(
        config_name=pack_name(config_name, custom=model_dir is not None),
        model_dir=Path(model_dir).expanduser() if model_dir is not None else None,
        revision=revision,
        token=token,
        voice_cloning=voice_cloning,
    )
    return layout.find_pack_files(request)


def load_backend(pack: PackFiles, options: LoadOptions) -> Backend:
    """The loaded backend of ``pack``'s kind, built with ``options`` (checked by it)."""
    return backend_class(pack.backend_kind).from_pack(pack, options)
