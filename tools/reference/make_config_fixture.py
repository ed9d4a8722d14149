"""Regenerate tests/fixtures/reference/community_config/ from upstream pocket-tts with --config.

Run with the reference venv (torch 2.13.0 + pocket-tts 4.0.1), offline:

    /tmp/refvenv/bin/python tools/reference/make_config_fixture.py

Community-layout configs in upstream's own schema, each in a language no built-in pack has,
with the three text options set away from their defaults: ``czech`` on the ``tiny_lsd``
family's model, ``korean`` on ``tiny_small``'s (the small 2026-10 layout: GQA, low-rank table,
z_proj, drifting head, its own decoder side), weights and SentencePiece tokenizer named by
path. Upstream loads each as ``--config`` does (``TTSModel.load_model(config=<yaml>)``), clones
a voice from a synthetic prompt, exports that voice state (``export_model_state``) and speaks
``TEXT`` at temperature 0. Written per config: <name>.yaml (weights and tokenizer as
``model.safetensors`` / ``tokenizer.model``, the family's files), <name>_voice.safetensors and
<name>_audio.npz (the audio and the chunk texts upstream spoke); czech keeps the names
voice.safetensors and audio.npz.
"""

from __future__ import annotations

import copy
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import upstream_reference as ref
from pocket_tts import TTSModel
from pocket_tts.models.model_state import export_model_state
from pocket_tts.models.text_chunking import split_into_best_sentences

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "tests" / "fixtures" / "reference"
FIXTURE = REFERENCE / "community_config"
#: Config name → (the family whose model it names, its files' prefix in the fixture).
CONFIGS = {"czech": ("tiny_lsd", ""), "korean": ("tiny_small", "korean_")}
#: ASCII the tiny tokenizer holds, a digit no normalizer may spell out, and characters the
#: config replaces («» dropped, the dash a comma).
TEXT = "«ahoj» svete \u2013 mam 3 jablka a dva psy, dobry den"
TEXT_OPTIONS = {
    "append_terminal_punctuation": False,
    "capitalize_first_letter": False,
    "replace_characters": {"\u00ab": "", "\u00bb": "", "\u2013": ","},
}
VOICE_SEED = 7


def community_config(family: str) -> dict:
    """A family's config in upstream's schema with the community text options and paths."""
    model = REFERENCE / family
    config = copy.deepcopy(json.loads((model / "config.json").read_text(encoding="utf-8")))
    config.update(copy.deepcopy(TEXT_OPTIONS))
    config["weights_path"] = "model.safetensors"
    config["flow_lm"]["lookup_table"]["tokenizer_path"] = "tokenizer.model"
    return config


def make(name: str) -> None:
    """Write one config of ``CONFIGS`` and what upstream makes of it."""
    family, prefix = CONFIGS[name]
    model_dir = REFERENCE / family
    config = community_config(family)
    (FIXTURE / f"{name}.yaml").write_text(
        yaml.safe_dump(config, allow_unicode=True, sort_keys=True), encoding="utf-8"
    )
    with tempfile.TemporaryDirectory() as tmp:
        absolute = copy.deepcopy(config)  # upstream reads relative paths from the working dir
        absolute["weights_path"] = str(model_dir / "model.safetensors")
        absolute["flow_lm"]["lookup_table"]["tokenizer_path"] = str(model_dir / "tokenizer.model")
        path = Path(tmp) / f"{name}.yaml"
        path.write_text(yaml.safe_dump(absolute, allow_unicode=True), encoding="utf-8")
        model = TTSModel.load_model(config=str(path), temp=0.0)
    prompt = torch.from_numpy(ref.synthetic_voice(2.0, VOICE_SEED))[None]
    with torch.no_grad():
        state = model.get_state_for_audio_prompt(prompt)
        export_model_state(state, FIXTURE / f"{prefix}voice.safetensors")
        audio = model.generate_audio(state, TEXT).numpy().astype(np.float32)
    chunks = split_into_best_sentences(
        model.flow_lm.conditioner.tokenizer,
        TEXT,
        50,
        config.get("pad_with_spaces_for_short_inputs", False),
        config.get("remove_semicolons", False),
        **TEXT_OPTIONS,
    )
    np.savez_compressed(FIXTURE / f"{prefix}audio.npz", audio=audio, chunks=np.array(chunks))
    print(f"{name}: chunks {chunks}")
    print(f"{name}: audio {audio.shape[-1]} samples ({audio.shape[-1] / 24000:.2f} s)")


def main() -> None:
    FIXTURE.mkdir(parents=True, exist_ok=True)
    for name in CONFIGS:
        make(name)


if __name__ == "__main__":
    main()
