"""Loading compiled CoreML models with coremltools, and the compute units each stage runs on.

Every model hides behind ``CoreMLModel``: ``inputs`` / ``outputs`` (``TensorSpec`` in spec
order) and ``predict(dict[str, ndarray]) -> dict[str, ndarray]``. ``CompiledModel`` wraps
``coremltools.models.CompiledMLModel`` on an ``.mlmodelc`` folder (descriptions read from its
``metadata.json``, else from its ``model.mil``); the Linux test stand-ins implement the same
protocol, so the backend cannot tell them apart.

Compute units, per stage (``STAGES``). The default is what measured fastest on Apple silicon:
``cond_prefill``, ``flowlm`` and ``flow_decoder`` on all units (CoreML places them on the GPU
or the Neural Engine), ``mimi_decoder`` on the CPU only (fp16 on the Neural Engine makes it
beep), and ``mimi_encoder`` (voice cloning) on the CPU and GPU, as FluidAudio runs it.
Presets: ``default``, ``all``, ``cpu-gpu``, ``cpu-ane``, ``cpu-only`` and ``no-ane`` (the
default without the Neural Engine). A mapping ``{stage: unit}`` overrides single stages on
top of the default; the CLI form is ``"no-ane,mimi=cpu-gpu"``.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol

import numpy as np

from ...errors import BackendUnavailableError, PackFilesMissingError
from .contracts import TensorSpec

#: The stages whose compute units can be chosen (``mimi_encoder``: voice cloning only).
STAGES = ("cond_prefill", "flowlm", "flow_decoder", "mimi_decoder", "mimi_encoder")
#: Short names accepted for the stages.
STAGE_ALIASES = MappingProxyType(
    {
        "cond": "cond_prefill",
        "prefill": "cond_prefill",
        "flow": "flow_decoder",
        "flow_decoder_fused": "flow_decoder",
        "mimi": "mimi_decoder",
        "encoder": "mimi_encoder",
        "flowlm_step": "flowlm",
    }
)
#: Compute units of one stage, by name → ``coremltools.ComputeUnit`` member name.
UNITS = MappingProxyType(
    {"all": "ALL", "cpu-gpu": "CPU_AND_GPU", "cpu-ane": "CPU_AND_NE", "cpu-only": "CPU_ONLY"}
)
_DEFAULT = {
    "cond_prefill": "all",
    "flowlm": "all",
    "flow_decoder": "all",
    "mimi_decoder": "cpu-only",
    "mimi_encoder": "cpu-gpu",
}
#: Named presets: stage → unit.
PRESETS: Mapping[str, Mapping[str, str]] = MappingProxyType(
    {
        "default": MappingProxyType(dict(_DEFAULT)),
        **{unit: MappingProxyType(dict.fromkeys(STAGES, unit)) for unit in UNITS},
        "no-ane": MappingProxyType(
            {stage: "cpu-gpu" if unit == "all" else unit for stage, unit in _DEFAULT.items()}
        ),
    }
)

ComputeUnitsSpec = str | Mapping[str, str] | None


def resolve_compute_units(spec: ComputeUnitsSpec = None) -> dict[str, str]:
    """Per-stage unit names from a preset name, a ``{stage: unit}`` mapping or a CLI string.

    A mapping may hold ``"preset"`` (default "default") plus stage overrides. Raises
    ``ValueError`` naming the valid choices.
    """
    if spec is None:
        return dict(PRESETS["default"])
    if isinstance(spec, str):
        spec = parse_compute_units(spec)
    if not isinstance(spec, Mapping):
        raise TypeError(
            f"compute_units must be a preset name or a mapping, got {type(spec).__name__}"
        )
    overrides = dict(spec)
    preset = overrides.pop("preset", "default")
    if preset not in PRESETS:
        raise ValueError(
            f"unknown compute-units preset {preset!r}; choose one of: {', '.join(PRESETS)}"
        )
    units = dict(PRESETS[preset])
    for stage, unit in overrides.items():
        name = STAGE_ALIASES.get(stage, stage)
        if name not in STAGES:
            raise ValueError(
                f"unknown CoreML stage {stage!r} in compute_units; stages: {', '.join(STAGES)} "
                f"(or {', '.join(STAGE_ALIASES)})"
            )
        if unit not in UNITS:
            raise ValueError(
                f"unknown compute units {unit!r} for stage {name}; "
                f"choose one of: {', '.join(UNITS)}"
            )
        units[name] = unit
    return units


def parse_compute_units(text: str) -> dict[str, str]:
    """``"no-ane"`` / ``"mimi=cpu-gpu"`` / ``"default,flowlm=cpu-gpu,mimi=all"`` → a mapping."""
    out: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if "=" in part:
            stage, _, unit = part.partition("=")
            out[stage.strip()] = unit.strip()
        elif "preset" in out:
            raise ValueError(f"compute_units {text!r} names two presets")
        else:
            out["preset"] = part
    return out


class CoreMLModel(Protocol):
    """A loaded model: I/O descriptions in spec order, and one prediction per call."""

    @property
    def inputs(self) -> tuple[TensorSpec, ...]: ...

    @property
    def outputs(self) -> tuple[TensorSpec, ...]: ...

    def predict(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]: ...


# -- model descriptions -----------------------------------------------------------------------

_DTYPES = {
    "float32": "float32",
    "float16": "float16",
    "int32": "int32",
    "double": "float64",
    "float64": "float64",
    "fp32": "float32",
    "fp16": "float16",
    "int8": "int8",
}


def read_model_io(path: str | Path) -> tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...]]:
    """Inputs and outputs (spec order) of a compiled ``.mlmodelc`` folder.

    Read from ``metadata.json`` (``inputSchema`` / ``outputSchema``), else from the main
    function of ``model.mil``. Raises ``PackFilesMissingError`` when neither is readable.
    """
    folder = Path(path)
    metadata = folder / "metadata.json"
    if metadata.is_file():
        try:
            document = json.loads(metadata.read_text(encoding="utf-8"))
            entry = document[0] if isinstance(document, list) else document
            return _schema(entry["inputSchema"]), _schema(entry["outputSchema"])
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise PackFilesMissingError(
                f"{metadata} is not a CoreML model description ({exc}); re-download the pack"
            ) from exc
    mil = folder / "model.mil"
    if mil.is_file():
        return _mil_io(mil.read_text(encoding="utf-8"), mil)
    raise PackFilesMissingError(
        f"{folder} has neither metadata.json nor model.mil: it is not a compiled CoreML model "
        "(.mlmodelc); re-download the pack"
    )


def _schema(entries: list[dict[str, Any]]) -> tuple[TensorSpec, ...]:
    specs = []
    for entry in entries:
        shape = entry.get("shape", "[]")
        if isinstance(shape, str):
            shape = [int(x) for x in re.findall(r"\d+", shape)]
        dtype = _DTYPES.get(str(entry.get("dataType", "Float32")).lower(), "float32")
        specs.append(TensorSpec(str(entry["name"]), tuple(int(x) for x in shape), dtype))
    return tuple(specs)


_MIL_TENSOR = r"tensor<(\w+),\s*\[([\d,\s]*)\]>\s+(\w+)"


def _mil_io(text: str, where: Path) -> tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...]]:
    """Inputs/outputs from the ``func main`` signature and return list of a MIL program."""
    head = re.search(r"func\s+main(?:<\w+>)?\s*\((.*?)\)\s*\{", text, re.S)
    tail = re.search(r"\}\s*->\s*\(([^)]*)\)", text[head.end() :] if head else "")
    if head is None or tail is None:
        raise PackFilesMissingError(f"{where}: no main function found; re-download the pack")

    def spec(dtype: str, dims: str, name: str) -> TensorSpec:
        shape = tuple(int(x) for x in re.findall(r"\d+", dims))
        return TensorSpec(name, shape, _DTYPES.get(dtype.lower(), "float32"))

    inputs = tuple(spec(*m) for m in re.findall(_MIL_TENSOR, head.group(1)))
    defined = {m[2]: spec(*m) for m in re.findall(_MIL_TENSOR + r"\s*=", text)}
    names = [n.strip() for n in tail.group(1).split(",") if n.strip()]
    missing = [n for n in names if n not in defined]
    if missing:
        raise PackFilesMissingError(f"{where}: cannot find the shapes of outputs {missing}")
    return inputs, tuple(defined[n] for n in names)


# -- coremltools ------------------------------------------------------------------------------


class CompiledModel:
    """``coremltools.models.CompiledMLModel`` behind the ``CoreMLModel`` protocol.

    Inputs are cast to the types the model declares; outputs come back as float32 arrays.
    Predictions on one model are serialized (a lock), so sessions on many threads can share it.
    """

    def __init__(self, path: str | Path, units: str = "all") -> None:
        if units not in UNITS:
            raise ValueError(f"unknown compute units {units!r}; choose one of: {', '.join(UNITS)}")
        self.path = Path(path)
        self.units = units
        self._inputs, self._outputs = read_model_io(self.path)
        self._dtypes = {s.name: np.dtype(s.dtype) for s in self._inputs}
        ct = import_coremltools()
        try:
            self._model = ct.models.CompiledMLModel(
                str(self.path), compute_units=getattr(ct.ComputeUnit, UNITS[units])
            )
        except Exception as exc:  # coremltools raises bare Exceptions from its native layer
            raise BackendUnavailableError(
                f"CoreML could not load {self.path} on compute units {units!r}: {exc}. Try "
                "compute_units='cpu-only' for this stage, re-download the pack, or use "
                "backend='numpy'."
            ) from exc
        self._lock = threading.Lock()

    @property
    def inputs(self) -> tuple[TensorSpec, ...]:
        return self._inputs

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        return self._outputs

    def predict(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        data = {
            name: np.ascontiguousarray(value, dtype=self._dtypes.get(name, np.float32))
            for name, value in feeds.items()
        }
        with self._lock:
            raw = self._model.predict(data)
        return {name: np.asarray(value, dtype=np.float32) for name, value in raw.items()}

    def __repr__(self) -> str:
        return f"CompiledModel({self.path.name!r}, units={self.units!r})"


def import_coremltools() -> Any:
    """The coremltools module, or ``BackendUnavailableError`` saying why CoreML cannot run."""
    from .. import coreml_unavailable_reason

    reason = coreml_unavailable_reason()
    if reason:
        raise BackendUnavailableError(
            f"backend='coreml' is not available: {reason}. Use backend='numpy' (runs anywhere) "
            "or backend='auto' (CoreML where it can run, else NumPy)."
        )
    import coremltools

    return coremltools
