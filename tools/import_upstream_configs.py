"""Regenerate ``engine/model/configs.json`` from upstream pocket-tts's YAML configs.

Run in an environment with the ``reference`` extra (pocket-tts 4.0.1 and pyyaml installed):

    python tools/import_upstream_configs.py
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import yaml

OUT = (
    Path(__file__).resolve().parents[1] / "pipecat_pocket_tts" / "engine" / "model" / "configs.json"
)


def main() -> None:
    config_dir = resources.files("pocket_tts").joinpath("config")
    registry = {}
    for entry in sorted(config_dir.iterdir(), key=lambda p: p.name):
        if entry.name.endswith(".yaml"):
            registry[entry.name[: -len(".yaml")]] = yaml.safe_load(entry.read_text("utf-8"))
    OUT.write_text(json.dumps(registry, indent=1, ensure_ascii=False, sort_keys=True) + "\n")
    print(f"wrote {len(registry)} configs to {OUT}")


if __name__ == "__main__":
    main()
