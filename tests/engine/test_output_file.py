"""Output paths as audio tools handle them: stdout, devices and FIFOs written through, symlinks
kept, regular files atomic, missing folders and unknown formats refused (CLI and engine)."""

from __future__ import annotations

import io
import os
import stat
import subprocess
import threading
import wave
from pathlib import Path

import numpy as np
import pytest
from cli_process import installed_command, run_cli
from paths import REPO_ROOT

from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict
from pipecat_pocket_tts.engine import OutputFormatError, PocketTTS
from pipecat_pocket_tts.engine.audio.output_file import OutputKind, check_output
from pipecat_pocket_tts.engine.audio.wav import write_wav
from pipecat_pocket_tts.engine.timing.subtitles import write_timestamps

TONE = (0.3 * np.sin(np.arange(2400) / 8.0)).astype(np.float32)


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_pack(tmp_path_factory.mktemp("pack"), tiny_config_dict("standard"))


def _wav_params(data: bytes) -> tuple[int, int, int, int]:
    with wave.open(io.BytesIO(data)) as w:
        return w.getnchannels(), w.getsampwidth(), w.getframerate(), w.getnframes()


def _read_fifo(fifo: Path, into: list[bytes]) -> threading.Thread:
    def read() -> None:
        with open(fifo, "rb") as f:  # blocks until the writer opens it
            into.append(f.read())

    reader = threading.Thread(target=read)
    reader.start()
    return reader


# -- the command line ------------------------------------------------------------------------


def test_say_to_stdout_pipes_a_wav_into_a_reader(pack: Path, tmp_path: Path) -> None:
    writer = subprocess.Popen(
        [installed_command(), "say", "Hello there.", "-o", "-", "--model-dir", str(pack)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    data, errors = writer.communicate(timeout=180)
    assert writer.returncode == 0, errors
    channels, width, rate, frames = _wav_params(data)
    assert (channels, width, rate) == (1, 2, 24_000) and frames > 0
    assert len(data) == 44 + 2 * frames  # the header's sizes are the real ones
    assert list(tmp_path.iterdir()) == []  # no file named "-"
    assert "wrote stdout" in errors.decode()


def test_say_raw_to_stdout_is_headerless_pcm(pack: Path) -> None:
    wav = run_cli("say", "Hi.", "-o", "-", "--model-dir", str(pack), "--seed", "2", text=False)
    raw = run_cli(
        "say", "Hi.", "-o", "-", "--format", "raw", "--model-dir", str(pack), "--seed", "2",
        text=False,
    )  # fmt: skip
    assert wav.returncode == raw.returncode == 0, raw.stderr
    assert raw.stdout == wav.stdout[44:]


def test_say_into_dev_stdout_writes_through(pack: Path) -> None:
    result = run_cli("say", "Hi.", "-o", "/dev/stdout", "--model-dir", str(pack), text=False)
    assert result.returncode == 0, result.stderr
    assert _wav_params(result.stdout)[:3] == (1, 2, 24_000)


def test_say_into_a_fifo_writes_through_and_keeps_it(pack: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "audio.fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = _read_fifo(fifo, received)
    result = run_cli("say", "Hi.", "-o", str(fifo), "--model-dir", str(pack))
    reader.join()
    assert result.returncode == 0, result.stderr
    assert _wav_params(received[0])[:3] == (1, 2, 24_000)
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_say_into_a_symlink_replaces_its_target_and_keeps_the_link(
    pack: Path, tmp_path: Path
) -> None:
    target = tmp_path / "takes" / "take1.wav"
    target.parent.mkdir()
    target.write_bytes(b"old take")
    link = tmp_path / "latest.wav"
    link.symlink_to(target)
    result = run_cli("say", "Hi.", "-o", str(link), "--model-dir", str(pack))
    assert result.returncode == 0, result.stderr
    assert link.is_symlink() and link.resolve() == target
    assert _wav_params(target.read_bytes())[:3] == (1, 2, 24_000)
    assert sorted(p.name for p in target.parent.iterdir()) == ["take1.wav"]  # no temp left


def test_say_refuses_an_extension_it_does_not_write_before_loading(tmp_path: Path) -> None:
    result = run_cli("say", "Hi.", "-o", str(tmp_path / "a.mp3"), "--model-dir", "/no/pack")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "error: cannot write audio as 'a.mp3': the formats written are wav (.wav/.wave), "
        "raw (.raw/.pcm); name the file by one of them, or pass --format"
    )
    assert list(tmp_path.iterdir()) == []


# -- the engine's file API -------------------------------------------------------------------


def test_engine_symlink_target_replaced_atomically(tmp_path: Path) -> None:
    target = tmp_path / "real.wav"
    link = tmp_path / "link.wav"
    link.symlink_to(target.name)  # relative, dangling until written
    assert write_wav(link, TONE) == link
    assert link.is_symlink() and _wav_params(target.read_bytes())[3] == TONE.size


def test_engine_fifo_is_written_through(tmp_path: Path) -> None:
    fifo = tmp_path / "out"  # no extension needed: a FIFO is not a file to name a format
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = _read_fifo(fifo, received)
    write_wav(fifo, TONE)
    reader.join()
    assert _wav_params(received[0])[3] == TONE.size and stat.S_ISFIFO(fifo.lstat().st_mode)


def test_engine_char_device_is_written_through() -> None:
    assert check_output("/dev/null").kind is OutputKind.THROUGH
    write_wav("/dev/null", TONE)
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)


@pytest.mark.parametrize(
    ("name", "requested"), [("a.mp3", None), ("a", None), ("a.wav", "raw"), ("a.wav", "flac")]
)
def test_engine_unknown_or_contradicting_formats_are_refused(
    tmp_path: Path, name: str, requested: str | None
) -> None:
    with pytest.raises(OutputFormatError, match=r"wav|raw"):
        write_wav(tmp_path / name, TONE, audio_format=requested)
    assert list(tmp_path.iterdir()) == []


def test_engine_synthesize_to_file_checks_the_path_before_synthesis(
    pack: Path, tmp_path: Path
) -> None:
    tts = PocketTTS.load(model_dir=pack, backend="numpy")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        tts.synthesize_to_file("Hi.", tmp_path / "missing" / "a.wav")
    with pytest.raises(OutputFormatError):
        tts.synthesize_to_file("Hi.", tmp_path / "a.mp3")
    raw = tts.synthesize_to_file("Hi.", tmp_path / "a.out", audio_format="raw", seed=1)
    wav = tts.synthesize_to_file("Hi.", tmp_path / "a.wav", seed=1)
    assert raw.read_bytes() == wav.read_bytes()[44:]
    assert not (tmp_path / "missing").exists()


def test_timestamps_follow_the_same_rules(tmp_path: Path) -> None:
    target = tmp_path / "words.vtt"
    link = tmp_path / "current.vtt"
    link.symlink_to(target)
    write_timestamps([], link)
    assert link.is_symlink() and target.read_text().startswith("WEBVTT")
    with pytest.raises(FileNotFoundError):
        write_timestamps([], tmp_path / "missing" / "w.json")
