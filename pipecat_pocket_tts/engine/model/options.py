"""How a model is loaded: one frozen ``LoadOptions``, checked when it is made.

Every loading path takes it — ``PocketTTS.load`` / ``load_shared`` (whose keywords build one),
``backends.load_backend`` and the Pipecat service — so an option is declared here once::

    options = LoadOptions(backend="numpy", model_dir="packs/english", sampler_steps=4)
    tts = PocketTTS.load("english", options=options)   # same as the keywords themselves
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from ..errors import LoadOptionError, UnknownBackendError
from .compute_units import resolve_compute_units

BACKEND_NAMES = ("auto", "numpy", "coreml")
AUTO_STREAMS = "auto"
"""``max_streams="auto"``: admit streams while the measured cost of a tick keeps real time."""
"""Every name ``LoadOptions.backend`` accepts."""

#: Precisions the NumPy backend runs (``backends.numpy.layers.linears``); kept when "auto"
#: picks NumPy (CoreML's "fp16" is refused there, never dropped).
NUMPY_PRECISIONS = ("fp32", "bf16", "int8")
#: Options only the CoreML backend reads (dropped when "auto" picks NumPy).
COREML_ONLY = ("compute_units", "placement")


@dataclass(frozen=True)
class LoadOptions:
    """Where a pack comes from and how its backend runs. Checked at construction.

    ``backend``: "numpy", "coreml" or "auto" (CoreML where it can run and has a pack, else
    NumPy). ``model_dir``: a local pack folder (nothing is downloaded). ``revision`` /
    ``token``: hub revision override and Hugging Face token (default: ``HF_TOKEN``).
    ``sampler_steps``: LSD steps of the NumPy sampler (CoreML's fused decoder runs 8).
    ``precision``: the weights' precision on the backend (CoreML: "fp16" or "int8"; NumPy:
    "fp32", "bf16" or "int8" FlowLM transformer linears, narrow ones with the ``fast`` extra and
    cached once narrowed, see ``backends.numpy.narrow_cache``); None is the backend's default
    (fp16 on CoreML, fp32 on NumPy).
    ``compute_units`` / ``placement``: CoreML only (see ``backends.coreml.runtime``).
    Every session runs on the model's one scheduler (its streams batched each frame) on a
    pool of ``threads`` compute threads (None: the usable cores), with at most
    ``max_streams`` speaking at once (default ``"auto"``: as many as the measured cost of a
    frame keeps in real time on the pool; an integer: that many; None: no limit, so an
    overloaded pool makes every stream late together). Later utterances wait in order.
    """

    backend: str = "auto"
    model_dir: Path | None = None
    revision: str | None = None
    token: str | bool | None = None
    sampler_steps: int = 1
    precision: str | None = None
    compute_units: str | Mapping[str, str] | None = None
    placement: str = "gpu"
    threads: int | None = None
    max_streams: int | str | None = "auto"

    def __post_init__(self) -> None:
        if not isinstance(self.backend, str) or self.backend.lower() not in BACKEND_NAMES:
            raise UnknownBackendError(
                f"unknown backend {self.backend!r}; choose one of: {', '.join(BACKEND_NAMES)}"
            )
        object.__setattr__(self, "backend", self.backend.lower())
        if self.model_dir is not None:
            if not isinstance(self.model_dir, str | os.PathLike):
                raise LoadOptionError(
                    f"model_dir must be a folder path, got {type(self.model_dir).__name__}"
                )
            object.__setattr__(self, "model_dir", Path(self.model_dir).expanduser())
        _check_optional_str("revision", self.revision)
        if self.token is not None and not isinstance(self.token, str | bool):
            raise LoadOptionError(
                f"token must be a Hugging Face token string, True/False or None, got "
                f"{type(self.token).__name__}"
            )
        steps = self.sampler_steps
        if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
            raise LoadOptionError(f"sampler_steps must be an integer ≥ 1, got {steps!r}")
        _check_optional_str("precision", self.precision)
        if not isinstance(self.placement, str):
            raise LoadOptionError(f"placement must be a string, got {self.placement!r}")
        threads = self.threads
        if threads is not None and (
            not isinstance(threads, int) or isinstance(threads, bool) or threads < 1
        ):
            raise LoadOptionError(f"threads must be an integer ≥ 1 or None, got {threads!r}")
        if not is_stream_limit(self.max_streams):
            raise LoadOptionError(
                f'max_streams must be an integer ≥ 1, "auto" or None, got {self.max_streams!r}'
            )
        if self.compute_units is not None:
            # This raises ValueError or TypeError naming the choices.
            resolve_compute_units(self.compute_units)

    @classmethod
    def build(cls, options: LoadOptions | None = None, **keywords: Any) -> LoadOptions:
        """``options`` with ``keywords`` replacing its fields (unknown keywords: TypeError)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(keywords) - known)
        if "batching" in unknown:
            raise TypeError(
                "batching is no load option: every session runs on the model's one scheduler; "
                "size it with threads= and max_streams="
            )
        if unknown:
            raise TypeError(
                f"unknown load option(s) {', '.join(unknown)}; options: {', '.join(sorted(known))}"
            )
        return replace(options, **keywords) if options is not None else cls(**keywords)

    def for_backend(self, kind: str, *, why: str | None = None) -> LoadOptions:
        """These options with ``backend`` set to the concrete ``kind`` ("numpy" | "coreml").

        When "auto" picked NumPy, the CoreML compute units are dropped (they only place work);
        a precision NumPy runs ("int8", "bf16", "fp32") is kept, and one it does not run
        ("fp16") is a ``LoadOptionError``, saying ``why`` "auto" chose NumPy when given (see
        ``backends.concrete_options``): never silently widened.
        """
        if kind == "numpy" and self.precision not in (None, *NUMPY_PRECISIONS):
            chosen = ""
            if self.backend == "auto":
                chosen = f", and backend='auto' chose numpy here{f': {why}' if why else ''}"
            raise LoadOptionError(
                f"precision={self.precision!r} is not one the numpy backend runs "
                f"({', '.join(NUMPY_PRECISIONS)}){chosen}. Pass one of those, drop precision "
                "for fp32, or use backend='coreml' (Apple) for fp16"
            )
        if kind == "numpy" and self.backend == "auto":
            return replace(self, backend=kind, compute_units=None)
        return replace(self, backend=kind)

    def dropped_for(self, concrete: LoadOptions) -> list[str]:
        """The option names ``for_backend`` dropped to make ``concrete`` (sorted)."""
        return sorted(
            f.name
            for f in fields(self)
            if f.name != "backend" and getattr(self, f.name) != getattr(concrete, f.name)
        )

    def cache_key(self) -> tuple[Any, ...]:
        """What identifies one loaded model (``token`` aside: it does not change the files)."""
        folder = None if self.model_dir is None else str(self.model_dir.resolve())
        units = self.compute_units
        if isinstance(units, Mapping):
            units = tuple(sorted(units.items()))
        return (
            self.backend,
            folder,
            self.revision,
            self.sampler_steps,
            self.precision,
            units,
            self.placement,
            # One scheduler per loaded model, so its settings are the model's.
            self.threads,
            self.max_streams,
        )


def _check_optional_str(name: str, value: object) -> None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise LoadOptionError(f"{name} must be a non-empty string or None, got {value!r}")


__all__ = ["BACKEND_NAMES", "LoadOptionError", "LoadOptions"]


def is_stream_limit(value: object) -> bool:
    """Whether ``value`` is a ``max_streams``: None, ``"auto"`` or an integer ≥ 1."""
    if value is None or value == AUTO_STREAMS:
        return True
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1
