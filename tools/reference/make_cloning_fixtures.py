"""Upstream voice cloning from audio FILES, recorded as a small extra fixture (cloning.npz).

``stages.npz`` clones from a 24 kHz float tensor. This adds what the file path of upstream's
``get_state_for_audio_prompt(Path, truncate=True)`` does (the call its CLI ``export-voice`` and
its server make): 16-bit WAV reading, channel mixing, resampling (scipy ``resample_poly``) and
the 30 s truncation. Run with the reference venv, offline, from the repo root:

    /tmp/refvenv/bin/python tools/reference/make_cloning_fixtures.py [family ...]

For each family (default: tiny_lsd) it loads the fixture's weights into upstream's model and
writes ``tests/fixtures/reference/<family>/cloning.npz``:

| key | content |
|---|---|
| ``<case>_rate``, ``_channels``, ``_speech_seconds``, ``_silence_seconds`` | how
  ``cloning_signals.voice_like`` made the WAV (int64 / float64 scalars) |
| ``<case>_sha256`` | sha256 of the int16 PCM written (the test regenerates it and checks) |
| ``<case>_prepared_len`` | samples upstream's Mimi encoder saw (after trim, pause and padding) |
| ``<case>_positions`` | P, the filled positions of the voice state upstream built |
| ``<case>_kv_index`` | the positions kept below: all of them, or for long voices the first 8 and
  the last 24 (causal attention: the last positions depend on every sample before) |
| ``<case>_voice_k``, ``<case>_voice_v`` | [L, len(kv_index), kv_heads, head_dim] K/V there |

Cases: ``wav24`` (24 kHz mono, no resampling: exact parity), ``narrow`` (8 kHz mono),
``stereo`` (44.1 kHz stereo), ``long`` (24 kHz mono, 31 s: truncated to 30 s).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import safetensors.torch
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cloning_signals as signals
import upstream_reference as ref
from pocket_tts.data.audio import audio_read
from pocket_tts.data.audio_utils import convert_audio, end_on_pause
from pocket_tts.modules.conv import pad_for_conv1d

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parents[1] / "tests" / "fixtures" / "reference"
UPSTREAM_TRUNCATE_SECONDS = 30
#: Voices longer than this keep only their first/last positions in the fixture (size).
FULL_KV_POSITIONS = 64

#: case → (sample rate, channels, seconds of speech, seconds of trailing silence)
CASES: dict[str, tuple[int, int, float, float]] = {
    "wav24": (24_000, 1, 1.2, 0.3),
    "narrow": (8_000, 1, 1.2, 0.3),
    "stereo": (44_100, 2, 1.2, 0.3),
    "long": (24_000, 1, 31.0, 0.0),
}


def load_upstream(folder: Path):
    """Upstream TTSModel holding the fixture family's weights."""
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        model = ref.build_model(config, folder / "tokenizer.model", Path(tmp), seed=0)
    state = safetensors.torch.load_file(str(folder / "model.safetensors"))
    model.load_state_dict(state, strict=True)
    model.eval()
    return model


def case_pcm(rate: int, channels: int, speech: float, silence: float) -> np.ndarray:
    """The int16 PCM [n] or [n, channels] of one case."""
    mono = signals.voice_like(speech, rate, silence_seconds=silence)
    samples = mono if channels == 1 else signals.stereo_pair(mono, rate, speech)
    return signals.to_pcm16(samples)


def prepared_length(model, path: Path) -> int:
    """Samples the encoder sees for ``path`` on upstream's file path (truncate=True)."""
    audio, rate = audio_read(path)
    audio = audio[..., : int(UPSTREAM_TRUNCATE_SECONDS * rate)]
    audio = convert_audio(audio, rate, model.config.mimi.sample_rate, 1)
    audio = end_on_pause(audio, model.config.mimi.sample_rate)
    return int(pad_for_conv1d(audio[None], ref.FRAME_SIZE, ref.FRAME_SIZE).shape[-1])


@torch.no_grad()
def record(model, work: Path) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for case, (rate, channels, speech, silence) in CASES.items():
        pcm = case_pcm(rate, channels, speech, silence)
        path = signals.write_pcm16_wav(work / f"{case}.wav", pcm, rate)
        state = model.get_state_for_audio_prompt(path, truncate=True)
        keys, values = ref._kv(model, state)
        positions = keys.shape[1]
        index = np.arange(positions)
        if positions > FULL_KV_POSITIONS:
            index = np.concatenate([index[:8], index[-24:]])
        out[f"{case}_rate"] = np.asarray(rate, dtype=np.int64)
        out[f"{case}_channels"] = np.asarray(channels, dtype=np.int64)
        out[f"{case}_speech_seconds"] = np.asarray(speech, dtype=np.float64)
        out[f"{case}_silence_seconds"] = np.asarray(silence, dtype=np.float64)
        out[f"{case}_sha256"] = np.asarray(signals.digest(pcm))
        out[f"{case}_prepared_len"] = np.asarray(prepared_length(model, path), dtype=np.int64)
        out[f"{case}_positions"] = np.asarray(positions, dtype=np.int64)
        out[f"{case}_kv_index"] = index.astype(np.int64)
        out[f"{case}_voice_k"] = keys[:, index]
        out[f"{case}_voice_v"] = values[:, index]
        prepared = out[f"{case}_prepared_len"]
        print(f"  {case}: {pcm.shape} @ {rate} Hz → prepared {prepared}, voice {keys.shape}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("families", nargs="*", default=["tiny_lsd"])
    args = parser.parse_args()
    for family in args.families:
        folder = FIXTURES / family
        print(family)
        model = load_upstream(folder)
        with tempfile.TemporaryDirectory() as tmp:
            arrays = record(model, Path(tmp))
        np.savez_compressed(folder / "cloning.npz", **arrays)
        print(f"  wrote {folder / 'cloning.npz'} ({(folder / 'cloning.npz').stat().st_size} bytes)")


if __name__ == "__main__":
    main()
