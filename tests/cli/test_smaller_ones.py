"""The smaller frictions of a newcomer's second hour, each through the installed command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cli_process import run_cli
from paths import REPO_ROOT

from pipecat_pocket_tts.engine.backends.numpy.files import KNOWN_VOICES


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
