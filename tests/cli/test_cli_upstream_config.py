"""Every CLI verb's ``--language`` takes an upstream config (issue 51): ``say`` speaks it,
``voices`` lists its voices, ``download`` fetches its files (here from a local HF cache)."""

from __future__ import annotations

from pathlib import Path

from cli_process import run_cli
from community_config import TEXT, VOICE, publish, write_config

from pipecat_pocket_tts.engine.audio.wav import read_wav


def test_say_voices_and_download_take_a_config(tmp_path: Path) -> None:
    folder = tmp_path / "czech"
    (folder / "embeddings").mkdir(parents=True)
    (folder / "embeddings" / "pavel.safetensors").write_bytes(VOICE.read_bytes())
    config = str(write_config(folder))
    out = tmp_path / "ahoj.wav"
    said = run_cli("say", TEXT, "-o", str(out), "--language", config, "--backend", "numpy")
    assert said.returncode == 0, said.stderr
    assert "No text normalization for 'czech'" in said.stderr
    audio, rate = read_wav(out)
    assert rate == 24_000 and audio.size > 0
    voices = run_cli("voices", "--language", config)
    assert voices.returncode == 0, voices.stderr
    assert voices.stdout.split()[0] == "pavel"

    cache = tmp_path / "hf-cache"
    reference = publish(cache)
    env = {"HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    fetched = run_cli("download", reference, env=env)
    assert fetched.returncode == 0, fetched.stderr
    assert f"weights (with voice cloning): {cache}" in fetched.stdout
    assert "tokenizer.model" in fetched.stdout


def test_languages_shows_a_configs_row(tmp_path: Path) -> None:
    config = str(write_config(tmp_path / "czech"))
    listed = run_cli("languages", config)
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.splitlines()
    assert header.split()[0] == "PACK"
    assert row.split()[0] == "czech"
