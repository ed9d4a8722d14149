"""A community model as upstream loads it with ``--config``: the fixture of
tools/reference/make_config_fixture.py (tests/fixtures/reference/community_config/), written
out as a YAML in upstream's schema with its weights and tokenizer by path or by hf://…@revision.
Two configs: ``czech`` (the tiny_lsd model, the default here) and ``korean`` (tiny_small's:
the small 2026-10 layout).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import yaml
from hub_cache import cache_put
from reference_fixtures import FIXTURES_DIR

FIXTURE = FIXTURES_DIR / "community_config"
MODEL = FIXTURES_DIR / "tiny_lsd"
#: Config name → (the folder of the model it names, its files' prefix in the fixture).
CONFIGS = {"czech": (MODEL, ""), "korean": (FIXTURES_DIR / "tiny_small", "korean_")}
#: The text upstream spoke (make_config_fixture.TEXT).
TEXT = "«ahoj» svete \u2013 mam 3 jablka a dva psy, dobry den"
VOICE = FIXTURE / "voice.safetensors"
HUB_REPO = "community/pocket-tts-czech"
HUB_COMMIT = "c5" * 20


def voice(name: str = "czech") -> Path:
    """The voice state upstream exported for config ``name``."""
    return FIXTURE / f"{CONFIGS[name][1]}voice.safetensors"


def config_dict(config: str = "czech", **overrides: object) -> dict:
    """A fixture config (upstream schema), with top-level keys replaced."""
    raw = yaml.safe_load((FIXTURE / f"{config}.yaml").read_text(encoding="utf-8"))
    raw.update(overrides)
    return raw


def write_config(
    folder: Path,
    *,
    name: str = "czech.yaml",
    config: str = "czech",
    tokenizer: str = "tokenizer.model",
    copy_files: bool = True,
    **overrides: object,
) -> Path:
    """``folder/name``: community config ``config``, its weights and tokenizer copied beside
    it (``copy_files``) and named as given (default: by relative path)."""
    folder.mkdir(parents=True, exist_ok=True)
    model = CONFIGS[config][0]
    if copy_files:
        shutil.copy(model / "model.safetensors", folder / "model.safetensors")
        shutil.copy(model / "tokenizer.model", folder / "tokenizer.model")
    raw = config_dict(config, **overrides)
    raw["flow_lm"]["lookup_table"]["tokenizer_path"] = tokenizer
    path = folder / name
    path.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    return path


def publish(cache: Path) -> str:
    """The model's weights, tokenizer and config in a local HF cache (as huggingface_hub lays
    it out) at ``HUB_COMMIT``; returns the config's ``hf://…@revision``."""

    def hub(path: str) -> str:
        return f"hf://{HUB_REPO}/{path}@{HUB_COMMIT}"

    for name in ("model.safetensors", "tokenizer.model"):
        cache_put(cache, HUB_REPO, HUB_COMMIT, f"v1/{name}", (MODEL / name).read_bytes())
    raw = config_dict(weights_path=hub("v1/model.safetensors"))
    raw["flow_lm"]["lookup_table"]["tokenizer_path"] = hub("v1/tokenizer.model")
    content = yaml.safe_dump(raw, allow_unicode=True).encode()
    cache_put(cache, HUB_REPO, HUB_COMMIT, "v1/czech.yaml", content)
    return hub("v1/czech.yaml")


def reference(config: str = "czech") -> tuple[np.ndarray, list[str]]:
    """Upstream's audio (float32 [n]) and the chunk texts it spoke for config ``config``."""
    with np.load(FIXTURE / f"{CONFIGS[config][1]}audio.npz") as npz:
        return npz["audio"].reshape(-1), [str(c) for c in npz["chunks"]]
