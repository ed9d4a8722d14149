"""Regenerate tests/fixtures/reference/community_config/ from upstream pocket-tts with --config.

Run with the reference venv (torch 2.13.0 + pocket-tts 4.0.1), offline:

    /tmp/refvenv/bin/python tools/reference/make_config_fixture.py

A community-layout config in upstream's own schema: the ``tiny_lsd`` family's model (weights
and SentencePiece tokenizer named by path), a language no built-in pack has ("czech"), and the
three text options set away from their defaults. Upstream loads it as ``--config`` does
(``TTSModel.load_model(config=<yaml>)``), clones a voice from a synthetic prompt, exports that
voice state (``export_model_state``) and speaks ``TEXT`` at temperature 0. Written: czech.yaml
(weights and tokenizer as ``model.safetensors`` / ``tokenizer.model``, the tiny_lsd files),
voice.safetensors, audio.npz (the audio and the chunk text upstream spoke).
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
MODEL = REPO / "tests" / "fixtures" / "reference" / "tiny_lsd"
FIXTURE = REPO / "tests" / "fixtures" / "reference" / "community_config"
#: ASCII the tiny tokenizer holds, a digit no normalizer may spell out, and characters the
#: config replaces («» dropped, the dash a comma).
TEXT = "«ahoj» svete \u2013 mam 3 jablka a dva psy, dobry den"
TEXT_OPTIONS = {
    "append_terminal_punctuation": False,
    "capitalize_first_letter": False,
    "replace_characters": {"\u00ab": "", "\u00bb": "", "\u2013": ","},
}
VOICE_SEED = 7


def community_config() -> dict:
    """tiny_lsd's config in upstream's schema with the community text options and paths."""
    config = copy.deepcopy(json.loads((MODEL / "config.json").read_text(encoding="utf-8")))
    config.update(copy.deepcopy(TEXT_OPTIONS))
    config["weights_path"] = "model.safetensors"
    config["flow_lm"]["lookup_table"]["tokenizer_path"] = "tokenizer.model"
    return config


def main() -> None:
    FIXTURE.mkdir(parents=True, exist_ok=True)
    config = community_config()
    (FIXTURE / "czech.yaml").write_text(
        yaml.safe_dump(config, allow_unicode=True, sort_keys=True), encoding="utf-8"
    )
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        absolute = copy.deepcopy(config)  # upstream reads relative paths from the working dir
        absolute["weights_path"] = str(MODEL / "model.safetensors")
        absolute["flow_lm"]["lookup_table"]["tokenizer_path"] = str(MODEL / "tokenizer.model")
        path = work / "czech.yaml"
        path.write_text(yaml.safe_dump(absolute, allow_unicode=True), encoding="utf-8")
        model = TTSModel.load_model(config=str(path), temp=0.0)
    prompt = torch.from_numpy(ref.synthetic_voice(2.0, VOICE_SEED))[None]
    with torch.no_grad():
        state = model.get_state_for_audio_prompt(prompt)
        export_model_state(state, FIXTURE / "voice.safetensors")
        audio = model.generate_audio(state, TEXT).numpy().astype(np.float32)
    chunks = split_into_best_sentences(
        model.flow_lm.conditioner.tokenizer,
        TEXT,
        50,
        config.get("pad_with_spaces_for_short_inputs", False),
        config.get("remove_semicolons", False),
        **TEXT_OPTIONS,
    )
    np.savez_compressed(FIXTURE / "audio.npz", audio=audio, chunks=np.array(chunks))
    print(f"chunks: {chunks}")
    print(f"audio: {audio.shape[-1]} samples ({audio.shape[-1] / 24000:.2f} s)")


if __name__ == "__main__":
    main()
