"""``say --speed`` and ``<break/>`` pauses on the command line (tiny random pack)."""

from __future__ import annotations

import wave
from pathlib import Path

import numpy as np
import pytest
from audio_checks import silent_run

from pipecat_pocket_tts.__main__ import main
from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_pack(tmp_path_factory.mktemp("pack"), tiny_config_dict("standard"))


def say(pack: Path, path: Path, text: str, *extra: str) -> np.ndarray:
    args = ["say", text, "-o", str(path), "--model-dir", str(pack), "--seed", "3", *extra]
    assert main([*args, "--eos-threshold", "5", "--max-frames", "20"]) == 0
    with wave.open(str(path)) as w:
        return np.frombuffer(w.readframes(w.getnframes()), "<i2")


def test_speed_scales_the_duration(pack: Path, tmp_path: Path) -> None:
    plain = say(pack, tmp_path / "plain.wav", "Hello world, how are you?")
    fast = say(pack, tmp_path / "fast.wav", "Hello world, how are you?", "--speed", "2")
    assert fast.size / plain.size == pytest.approx(0.5, rel=0.10)


def test_a_break_in_the_text_is_a_pause(pack: Path, tmp_path: Path) -> None:
    audio = say(pack, tmp_path / "pause.wav", 'Hello there. <break time="800ms"/> And now.')
    assert silent_run(audio) >= round(0.7 * 24000)


@pytest.mark.parametrize(
    ("text", "extra", "message"),
    [
        ("Hi.", ["--speed", "5"], "speed must be between 0.25 and 4"),
        ('Hi <break time="11s"/> you.', [], "at most 10 s"),
    ],
)
def test_bad_controls_exit_2_with_a_message(
    pack: Path, tmp_path: Path, capsys, text: str, extra: list[str], message: str
) -> None:
    out = tmp_path / "x.wav"
    assert main(["say", text, "-o", str(out), "--model-dir", str(pack), *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err
    assert not out.exists()
