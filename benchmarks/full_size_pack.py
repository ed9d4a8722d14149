"""The full-size random ``english`` pack the side-by-side benchmarks share, and an upstream config.

``build_files(work)`` writes (once) ``work/english`` with ``pipecat_pocket_tts.devpack`` (weights in
upstream's key layout, ``tokenizer.json``, a voice) and a config upstream pocket-tts loads the
very same files from.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

VOICE_FRAMES = 125  # a typical shipped voice prompt (10 s)


def pack_files(work: Path) -> tuple[Path, Path]:
    """Where the pack and the upstream config (JSON, which YAML loaders read) are."""
    return work / "english", work / "upstream_english.yaml"


def build_files(work: Path) -> tuple[Path, Path]:
    """The pack (ours) and an upstream config pointing at its files; built when missing."""
    from pipecat_pocket_tts.devpack import build_pack
    from pipecat_pocket_tts.engine.model.config_registry import raw_configs

    pack, config_path = pack_files(work)
    if not (pack / "model.safetensors").exists():
        print(f"writing a full-size random English pack to {pack} ...", flush=True)
        build_pack(pack, "english", voices=("alba",), voice_frames=VOICE_FRAMES)
    raw = copy.deepcopy(raw_configs()["english"])
    raw["weights_path"] = str(pack / "model.safetensors")
    raw.pop("weights_path_without_voice_cloning", None)
    raw["flow_lm"]["lookup_table"]["tokenizer"] = "tokenizers"
    raw["flow_lm"]["lookup_table"]["tokenizer_path"] = str(pack / "tokenizer.json")
    config_path.write_text(json.dumps(raw, indent=1))
    return pack, config_path
