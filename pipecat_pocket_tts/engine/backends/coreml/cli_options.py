"""Command-line options of the CoreML backend, for the package's CLI to include.

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    options = backend_options(parser.parse_args())   # → PocketTTS.load(..., **options)

``--compute-units`` takes a preset (default, all, cpu-gpu, cpu-ane, cpu-only, no-ane) and/or
per-stage overrides: ``--compute-units no-ane,mimi=cpu-gpu``. ``--precision`` picks the FlowLM
weights of either backend (CoreML: fp16 or int8; NumPy: fp32, bf16 or int8).
"""

from __future__ import annotations

import argparse
from typing import Any

from ...model.compute_units import (
    PRESETS,
    STAGES,
    UNITS,
    parse_compute_units,
    resolve_compute_units,
)
from ...model.options import NUMPY_PRECISIONS
from .backend import PRECISIONS


def _compute_units(text: str) -> dict[str, str]:
    try:
        spec = parse_compute_units(text)
        # Validate now, so argparse reports the mistake.
        resolve_compute_units(spec)
    except (ValueError, TypeError) as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    return spec


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--compute-units`` (``--backend coreml``) and ``--precision`` (either backend)."""
    group = parser.add_argument_group("CoreML backend")
    group.add_argument(
        "--compute-units",
        type=_compute_units,
        default=None,
        metavar="SPEC",
        help=(
            f"compute units: a preset ({', '.join(PRESETS)}) and/or STAGE=UNIT overrides, "
            f"comma-separated (stages: {', '.join(STAGES)}; units: {', '.join(UNITS)}); "
            "default: GPU/Neural Engine for the FlowLM stages, CPU for Mimi"
        ),
    )
    parser.add_argument(
        "--precision",
        choices=sorted({*NUMPY_PRECISIONS, *PRECISIONS}),
        default=None,
        help="FlowLM weights: on numpy fp32 (default), bf16 or int8 (narrow ones need "
        "pip install -e '.[fast]' in the clone); on coreml fp16 (default) or int8",
    )


def backend_options(args: argparse.Namespace) -> dict[str, Any]:
    """The ``PocketTTS.load`` keyword arguments the parsed CoreML options ask for."""
    options: dict[str, Any] = {}
    if getattr(args, "compute_units", None):
        options["compute_units"] = args.compute_units
    if getattr(args, "precision", None):
        options["precision"] = args.precision
    return options
