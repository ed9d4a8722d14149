"""The smaller frictions of a newcomer's second hour, each through the installed command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cli_process import run_cli
from paths import REPO_ROOT

from pipecat_pocket_tts.engine.backends.numpy.weights.pack_files import KNOWN_VOICES
from pipecat_pocket_tts.engine.model.languages import LANGUAGES, LITERARY_VOICES, language_info


def test_ctrl_c_while_importing_is_one_line_and_exit_130() -> None:
    """A KeyboardInterrupt raised inside the engine's import (as Ctrl-C in the first half
    second lands), deterministic: an import hook raises it."""
    script = (
        "import sys\n"
        "class Interrupt:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'pipecat_pocket_tts.engine':\n"
        "            raise KeyboardInterrupt\n"
        "sys.meta_path.insert(0, Interrupt())\n"
        "from pipecat_pocket_tts.__main__ import main\n"
        "sys.exit(main(['languages']))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert result.returncode == 130
    assert result.stderr == "interrupted\n"


def test_an_argument_error_is_one_line_and_where_to_look() -> None:
    result = run_cli("say", "Hi.", "-o", "x.wav", "--seed", "-1")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "error: argument --seed: expected an integer ≥ 0, got -1",
        "see: pipecat-pocket-tts say --help",
    ]


def test_devpack_voices_all_means_every_voice_as_in_download(tmp_path: Path) -> None:
    result = run_cli("devpack", str(tmp_path / "pack"), "--voices", "all")
    assert result.returncode == 0, result.stderr
    written = sorted(p.stem for p in (tmp_path / "pack" / "embeddings").glob("*.safetensors"))
    assert written == sorted(KNOWN_VOICES)


def test_offline_by_choice_names_the_devpack_as_the_unreachable_hub_does(tmp_path: Path) -> None:
    env = {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "empty")}
    result = run_cli("say", "Hi.", "-o", str(tmp_path / "a.wav"), env=env)
    assert result.returncode == 2
    assert "pipecat-pocket-tts devpack <folder>" in result.stderr or (
        "pipecat_pocket_tts devpack <folder>" in result.stderr
    )


def test_a_pack_folder_knows_its_own_config(tmp_path: Path) -> None:
    from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict

    pack = build_pack(tmp_path / "pack", tiny_config_dict("standard"), language="french")
    out = tmp_path / "bonjour.wav"
    said = run_cli("say", "Bonjour !", "-o", str(out), "--model-dir", str(pack))
    assert said.returncode == 0, said.stderr  # no --language: the voices' own config
    assert out.exists()
    overridden = run_cli("say", "Hi.", "-o", str(out), "--model-dir", str(pack), "-l", "english")
    assert overridden.returncode == 2 and "made for model config 'french'" in overridden.stderr


@pytest.mark.parametrize("language", [info.name for info in LANGUAGES])
def test_voices_marks_the_voices_recorded_in_the_language(language: str) -> None:
    result = run_cli("voices", "--language", language, env={"HF_HUB_OFFLINE": "1"})
    assert result.returncode == 0, result.stderr
    info = language_info(language)
    marks = dict(line.split("  ", 1) for line in result.stdout.splitlines())
    assert set(marks) == set(KNOWN_VOICES)
    own = "English-trained" if info.code == "en" else f"native {info.name}"
    marked_own = {name for name, mark in marks.items() if mark.startswith(f"({own}")}
    assert marked_own == set(info.native_voices) and info.native_voices
    assert "default" in marks[info.default_voice]
    assert sum("default" in mark for mark in marks.values()) == 1
    assert all(
        mark.startswith("(English-trained")
        for name, mark in marks.items()
        if name in LITERARY_VOICES
    )
    legend = result.stderr.splitlines()[0]
    assert "English-trained = one of the 21 literary voices" in legend
    if info.code != "en":
        assert legend.startswith(f"{', '.join(info.native_voices)}: recorded in {info.name}")
    if not info.natives_published:
        assert all("unverified" in marks[name] for name in info.native_voices)


def test_voices_of_a_pack_folder_mark_its_voices_too(tmp_path: Path) -> None:
    from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict

    pack = build_pack(
        tmp_path / "pack",
        tiny_config_dict("standard"),
        language="french",
        voices=("alba", "estelle"),
    )
    result = run_cli("voices", "--model-dir", str(pack))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "alba  (English-trained)",
        "estelle  (native French, default)",
    ]
    assert result.stderr.startswith("estelle: recorded in French")
