"""Loading compiled CoreML models with coremltools, and the compute units each stage runs on.

Every model hides behind ``CoreMLModel``: ``inputs`` / ``outputs`` (``TensorSpec`` in spec
order) and ``predict(dict[str, ndarray]) -> dict[str, ndarray]``. ``CompiledModel`` wraps
``coremltools.models.CompiledMLModel`` on an ``.mlmodelc`` folder (descriptions read from its
``metadata.json``, else from its ``model.mil``); the Linux test stand-ins implement the same
protocol, so the backend cannot tell them apart.

The compute units of each stage are a load option (``engine/model/compute_units.py``).
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ...errors import BackendUnavailableError, PackFilesMissingError
from ...model.compute_units import UNITS
from .io_specs import TensorSpec


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
        except Exception as exc:
            # Coremltools raises bare Exceptions from its native layer.
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
