"""CoreML compute units per stage: the presets, the names, and a spec resolved to units.

Compute units, per stage (``STAGES``). The default is what measured fastest on Apple silicon:
``cond_prefill``, ``flowlm`` and ``flow_decoder`` on all units (CoreML places them on the GPU
or the Neural Engine), ``mimi_decoder`` on the CPU only (fp16 on the Neural Engine makes it
beep), and ``mimi_encoder`` (voice cloning) on the CPU and GPU, as FluidAudio runs it.
Presets: ``default``, ``all``, ``cpu-gpu``, ``cpu-ane``, ``cpu-only`` and ``no-ane`` (the
default without the Neural Engine). A mapping ``{stage: unit}`` overrides single stages on
top of the default; the CLI form is ``"no-ane,mimi=cpu-gpu"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

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
