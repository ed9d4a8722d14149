"""The model config registry: ``configs.json`` (upstream's schema) read once, by config name.

Kept apart from ``config`` (which types one entry) so the language registry can name the
packs that exist without importing the typed configs, which read the language registry.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any


@cache
def raw_configs() -> dict[str, dict[str, Any]]:
    """Every model config in upstream's schema, by name (shared: copy before changing one)."""
    text = resources.files(__package__).joinpath("configs.json").read_text(encoding="utf-8")
    return json.loads(text)


def config_names() -> list[str]:
    """Every model config name the registry holds, sorted."""
    return sorted(raw_configs())


__all__ = ["config_names", "raw_configs"]
