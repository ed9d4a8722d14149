"""The command line, end to end on a tiny random pack (``--model-dir``); no network."""

from __future__ import annotations

import os
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
import pytest
from hub_cache import cache_put
from paths import REPO_ROOT

from pipecat_pocket_tts.__main__ import main, shell_wording
from pipecat_pocket_tts.cli_arguments import build_parser
from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict
from pipecat_pocket_tts.engine.backends.numpy.weights import pack_files as numpy_files
from pipecat_pocket_tts.engine.model.config import get_config
from pipecat_pocket_tts.engine.model.config_registry import config_names


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_pack(
        tmp_path_factory.mktemp("pack"), tiny_config_dict("standard"), voices=("alba", "marius")
    )


def _run(*args: str, stdin: str | None = None, env: dict[str, str] | None = None):
    """``python -m pipecat_pocket_tts ARGS`` in a fresh process."""
    full_env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "pipecat_pocket_tts", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=full_env,
        timeout=120,
    )


def _wav(path: Path) -> np.ndarray:
    with wave.open(str(path)) as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, 24_000)
        return np.frombuffer(w.readframes(w.getnframes()), "<i2")


# -- say ------------------------------------------------------------------------------------


def test_say_writes_a_wav_in_a_subprocess(pack: Path, tmp_path: Path) -> None:
    out = tmp_path / "hello.wav"
    result = _run("say", "Hello there.", "-o", str(out), "--model-dir", str(pack), "--seed", "1")
    assert result.returncode == 0, result.stderr
    assert f"wrote {out}" in result.stderr
    samples = _wav(out)
    assert samples.size > 0 and samples.size % 1920 == 0
    assert np.abs(samples).max() > 100  # not silent


def test_say_reads_stdin(pack: Path, tmp_path: Path) -> None:
    out = tmp_path / "stdin.wav"
    result = _run("say", "-", "-o", str(out), "--model-dir", str(pack), stdin="From a pipe.")
    assert result.returncode == 0, result.stderr
    assert _wav(out).size > 0


def test_say_options_reach_the_engine(pack: Path, tmp_path: Path) -> None:
    def say(name: str, *extra: str) -> np.ndarray:
        path = tmp_path / f"{name}.wav"
        args = ["say", "Hello world.", "-o", str(path), "--model-dir", str(pack), *extra]
        assert main([*args, "--seed", "3", "--backend", "numpy"]) == 0
        return _wav(path)

    base = say("base")
    assert np.array_equal(base, say("again"))  # same seed → same audio
    assert not np.array_equal(base, say("marius", "--voice", "marius"))
    voice_file = pack / "embeddings" / "marius.safetensors"
    assert np.array_equal(
        say("marius2", "--voice", "marius"), say("file", "--voice", str(voice_file))
    )
    assert not np.array_equal(base, say("post", "--post-process"))
    assert not np.array_equal(base, say("hot", "--temperature", "1.0"))
    # The tiny pack's EOS head is constant 0: a threshold above it never stops early.
    long = say("long", "--eos-threshold", "5", "--max-frames", "30")
    assert long.size > base.size
    assert say("capped", "--eos-threshold", "5", "--max-frames", "4").size < long.size
    assert say("raw", "--no-normalize").size > 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--language", "klingon"], "unknown language 'klingon'"),
        (["--voice", "nobody"], "unknown voice 'nobody'"),
        (["--voice", "missing.safetensors"], "voice file not found"),
        (["--backend", "tpu"], "unknown backend 'tpu'"),
        (["--temperature", "-1"], "temperature"),
    ],
)
def test_say_errors_exit_2_with_a_message(
    pack: Path, tmp_path: Path, capsys, args: list[str], message: str
) -> None:
    out = tmp_path / "x.wav"
    code = main(["say", "Hi.", "-o", str(out), "--model-dir", str(pack), *args])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: ") and message in err
    assert "Traceback" not in err
    assert not out.exists()


@pytest.mark.skipif(sys.platform == "darwin", reason="CoreML can run on macOS")
def test_say_with_coreml_off_apple_says_what_to_use(pack: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "x.wav"
    argv = ["say", "Hi.", "-o", str(out), "--model-dir", str(pack), "--backend", "coreml"]
    assert main([*argv, "--precision", "int8", "--compute-units", "no-ane"]) == 2
    err = capsys.readouterr().err
    assert "--backend coreml is not available" in err and "--backend numpy" in err
    assert "backend='" not in err  # the flags, not the API's keyword arguments
    assert not out.exists()


def test_say_unknown_language_from_the_hub(capsys) -> None:
    assert main(["say", "Hi.", "-o", "x.wav", "--language", "klingon"]) == 2
    err = capsys.readouterr().err
    assert "unknown language or model config 'klingon'" in err and "french_24l" in err


def test_say_missing_model_dir_in_a_subprocess(tmp_path: Path) -> None:
    result = _run("say", "Hi.", "-o", str(tmp_path / "x.wav"), "--model-dir", str(tmp_path / "no"))
    assert result.returncode == 2
    assert "error: --model-dir" in result.stderr and "does not exist" in result.stderr
    assert "leave --model-dir out" in result.stderr
    assert "Traceback" not in result.stderr


def test_say_unwritable_output_exits_1(pack: Path, tmp_path: Path, capsys) -> None:
    folder = tmp_path / "a-folder.wav"
    folder.mkdir()
    assert main(["say", "Hi.", "-o", str(folder), "--model-dir", str(pack)]) == 1
    assert "error:" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["say", "text"],
        ["say", "-o", "x.wav"],
        ["unknown"],
        ["say", "t", "-o", "x", "--seed", "x"],
        ["say", "t", "-o", "x", "--compute-units", "warp-drive"],
        ["say", "t", "-o", "x", "--precision", "int4"],
    ],
)
def test_bad_usage_exits_2(argv: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    error, see = capsys.readouterr().err.splitlines()  # one line, and where to read more
    assert error.startswith("error: ") and "usage:" not in error
    assert see.startswith("see: ") and see.endswith("--help")


# -- voices, languages ---------------------------------------------------------------------


def test_voices_of_a_model_dir(pack: Path, capsys) -> None:
    assert main(["voices", "--model-dir", str(pack)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["alba  (English-trained, default)", "marius  (English-trained)"]


def test_voices_of_a_hub_pack_mark_default_and_cached(hf_cache: Path, capsys) -> None:
    french = get_config("french")
    hub = numpy_files.voice_hub_file(french, "anna")
    cache_put(hf_cache, "kyutai/pocket-tts-without-voice-cloning", hub.revision, hub.path, b"anna")
    assert main(["voices", "--language", "french"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(numpy_files.KNOWN_VOICES)
    assert "estelle  (native French, default)" in lines
    assert "anna  (English-trained, cached)" in lines
    assert "alba  (English-trained)" in lines


def test_voices_of_an_unknown_language(capsys) -> None:
    assert main(["voices", "-l", "klingon"]) == 2
    err = capsys.readouterr().err
    assert "klingon" in err and "english" in err and "french_24l" in err


def test_languages_lists_every_config(capsys) -> None:
    assert main(["languages"]) == 0
    printed = capsys.readouterr()
    header, *lines = printed.out.splitlines()
    assert header.split() == ["PACK", "LANGUAGE", "SIZE", "SAMPLER", "DEFAULT"]
    assert len(lines) == len(config_names())
    english = next(line for line in lines if line.split()[0] == "english")
    assert "6 layers × 1024" in english and "lsd" in english and english.endswith("default")
    assert not next(line for line in lines if line.split()[0] == "english_2026-01").endswith(
        "default"
    )
    assert "SAMPLER:" in printed.err and "drifting" in printed.err
    small = next(line for line in lines if line.split()[0] == "english_7m_2026-10")
    assert "drifting" in small


# -- download ------------------------------------------------------------------------------


def test_download_offline_with_an_empty_cache(tmp_path: Path) -> None:
    env = {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "empty")}
    result = _run("download", "english", "--voices", "alba", env=env)
    assert result.returncode == 2
    err = result.stderr
    assert "error:" in err and "not in the Hugging Face cache" in err
    assert "kyutai/pocket-tts-without-voice-cloning/languages/english/model.safetensors" in err
    assert "Traceback" not in err


def test_download_offline_says_to_go_online_not_to_run_download(tmp_path: Path) -> None:
    env = {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "empty")}
    result = _run("download", "english", "--voices", "alba", env=env)
    assert result.returncode == 2
    err = result.stderr
    assert "pipecat_pocket_tts download" not in err  # the very command that just failed
    assert "go online once" in err and "HF_ENDPOINT" in err
    assert "run `say` with --model-dir" in err and "model_dir" not in err
    gated = get_config("english").weights
    assert f"{gated.repo}/{gated.path}@{gated.revision}" in err  # tried before the fallback


def test_say_offline_names_the_download_command_and_flags(tmp_path: Path) -> None:
    env = {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "empty")}
    result = _run("say", "Hi.", "-o", str(tmp_path / "x.wav"), "-l", "french", env=env)
    assert result.returncode == 2
    err = result.stderr
    assert "`python -m pipecat_pocket_tts download french`" in err
    assert "pass --model-dir <a folder with the pack's files>" in err
    assert "model_dir" not in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            "set HF_TOKEN (or pass token=) to a token of that account.",
            "set HF_TOKEN to a token of that account.",
        ),
        ("check HF_TOKEN / token=, or pass model_dir=.", "check HF_TOKEN, or pass --model-dir."),
        ("pass voice= as the path of a file", "pass --voice as the path of a file"),
        ("use backend='coreml' (Apple) or 'auto'", "use --backend coreml (Apple) or 'auto'"),
        ("unknown stage in compute_units; stages:", "unknown stage in --compute-units; stages:"),
        ("eos_threshold must be a finite number", "--eos-threshold must be a finite number"),
        # paths and other words that merely contain an argument name stay as they are
        (
            "cannot read /srv/model_dir/voice=x.wav or my_model_dir",
            "cannot read /srv/model_dir/voice=x.wav or my_model_dir",
        ),
    ],
)
def test_error_messages_use_the_flags(message: str, expected: str) -> None:
    args = build_parser().parse_args(["voices"])
    assert shell_wording(message, args) == expected


def test_hub_log_lines_print_once_on_stderr(tmp_path: Path) -> None:
    """huggingface_hub has a handler of its own: its lines must not also reach ours."""
    script = """
import logging, sys
from pipecat_pocket_tts import __main__ as cli

def noisy(args):
    from huggingface_hub.utils import logging as hf_logging

    hf_logging.get_logger("huggingface_hub.utils._http").warning("Retrying in 1s [Retry 1/5].")
    logging.getLogger("pipecat_pocket_tts.engine.model.packs").info("our progress line")
    return 0

cli.COMMANDS["languages"] = noisy
sys.exit(cli.main(["-v", "languages"]))
"""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    env.pop("HF_HUB_VERBOSITY", None)
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("Retrying in 1s [Retry 1/5].") == 1
    assert result.stderr.count("our progress line") == 1


def test_download_from_a_populated_cache(hf_cache: Path, pack: Path, capsys) -> None:
    english = get_config("english")
    files = {
        english.weights_without_voice_cloning: (pack / "model.safetensors").read_bytes(),
        english.flow_lm.lookup_table.tokenizer_file: b"{}",
        numpy_files.voice_hub_file(english, "alba"): b"voice",
    }
    for hub, content in files.items():
        cache_put(hf_cache, hub.repo, hub.revision, hub.path, content)
    assert main(["download", "english", "--voices", "alba", "--without-cloning"]) == 0
    out = capsys.readouterr().out
    assert "weights (without voice cloning)" in out
    assert "voices (1): alba" in out
    assert main(["download", "english", "--voices", "none", "--without-cloning"]) == 0
    assert "voices (0): none" in capsys.readouterr().out
    assert main(["download", "english", "--voices", "bob", "--without-cloning"]) == 2
    assert "unknown voice(s) bob" in capsys.readouterr().err


# -- voice cloning ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def speaker_wav(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pipecat_pocket_tts.engine.audio.wav import write_wav

    rng = np.random.default_rng(0)
    t = np.arange(24_000 * 2) / 24_000
    tone = 0.3 * np.sin(2 * np.pi * 180 * t) * (1 + 0.2 * rng.standard_normal(t.size))
    return write_wav(tmp_path_factory.mktemp("spk") / "speaker.wav", tone.astype(np.float32))


def test_clone_save_and_reuse_a_voice(
    pack: Path, speaker_wav: Path, tmp_path: Path, capsys
) -> None:
    saved = tmp_path / "me.safetensors"
    common = ["--model-dir", str(pack), "--seed", "5"]
    cloned_wav, reused_wav = tmp_path / "cloned.wav", tmp_path / "reused.wav"
    args = ["say", "Hello.", "-o", str(cloned_wav), "--clone-voice", str(speaker_wav)]
    assert main([*args, "--save-voice", str(saved), *common]) == 0
    assert f"saved voice {saved}" in capsys.readouterr().err
    assert main(["say", "Hello.", "-o", str(reused_wav), "--voice", str(saved), *common]) == 0
    assert np.array_equal(_wav(cloned_wav), _wav(reused_wav))
    default_wav = tmp_path / "default.wav"
    assert main(["say", "Hello.", "-o", str(default_wav), *common]) == 0
    assert not np.array_equal(_wav(cloned_wav), _wav(default_wav))


def test_clone_errors(pack: Path, speaker_wav: Path, tmp_path: Path, capsys) -> None:
    out = ["-o", str(tmp_path / "x.wav")]
    no_cloning = build_pack(tmp_path / "nc", tiny_config_dict("standard"), with_cloning=False)
    args = ["say", "Hi.", *out, "--clone-voice", str(speaker_wav), "--model-dir", str(no_cloning)]
    assert main(args) == 2
    assert "HF_TOKEN" in capsys.readouterr().err
    args = ["say", "Hi.", *out, "--clone-voice", str(tmp_path / "none.wav"), "--model-dir"]
    assert main([*args, str(pack)]) == 2
    assert "none.wav" in capsys.readouterr().err
    assert (
        main(["say", "Hi.", *out, "--save-voice", "v.safetensors", "--model-dir", str(pack)]) == 2
    )
    assert "--clone-voice" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["say", "Hi.", *out, "--voice", "alba", "--clone-voice", str(speaker_wav)])
    assert "not allowed with" in capsys.readouterr().err
