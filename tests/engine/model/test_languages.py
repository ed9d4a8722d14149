"""The language registry and its one resolver, in the engine and through the installed CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hub_cache import cache_put
from paths import REPO_ROOT
from pipecat.transcriptions.language import Language

from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict
from pipecat_pocket_tts.engine.backends.numpy.weights import pack_files as numpy_files
from pipecat_pocket_tts.engine.errors import UnknownLanguageError
from pipecat_pocket_tts.engine.model import languages
from pipecat_pocket_tts.engine.model.config import get_config
from pipecat_pocket_tts.engine.model.config_registry import config_names

#: The console script ``pip install`` made for this interpreter (``[project.scripts]``).
CLI = Path(sys.executable).parent / "pipecat-pocket-tts"


# -- the registry ------------------------------------------------------------------------------


def test_one_record_per_language_with_its_facts() -> None:
    assert languages.codes() == ("en", "fr", "de", "it", "pt", "es", "nl")
    for info in languages.LANGUAGES:
        assert info.default_pack in config_names()
        assert get_config(info.default_pack).language == info.key
    german = languages.language_info("de")
    assert (german.name, german.default_pack, german.default_voice) == (
        "German",
        "german",
        "juergen",
    )


@pytest.mark.parametrize(
    "value",
    ["en", "EN", "en-US", "en_GB", "English", "english", "english_24l", "english_7m_2026-10",
     Language.EN, Language.EN_GB],
)  # fmt: skip
def test_every_way_of_naming_english_is_one_record(value: object) -> None:
    assert languages.language_info(value).code == "en"


@pytest.mark.parametrize(
    ("value", "code"),
    [("pt-BR", "pt-BR"), ("pt_br", "pt-BR"), (Language.PT_BR, "pt-BR"), ("brazilian", "pt-BR"),
     ("pt", "pt"), ("portuguese", "pt"), ("en-US", "en"), ("Deutsch", "de"), ("français", "fr")],
)  # fmt: skip
def test_text_codes_keep_only_the_variants_with_rules(value: object, code: str) -> None:
    assert languages.text_code(value) == code


@pytest.mark.parametrize("value", ["klingon", "ja", Language.JA, "", 3])
def test_unknown_languages_name_the_choices(value: object) -> None:
    with pytest.raises(UnknownLanguageError):
        languages.language_info(value)
    with pytest.raises(UnknownLanguageError, match="english"):
        languages.pack_name(value)


@pytest.mark.parametrize(
    ("value", "pack"),
    [("en", "english"), ("English", "english"), ("pt-BR", "portuguese"), ("Deutsch", "german"),
     (Language.FR_CA, "french"), ("french_24l", "french_24l"), ("FRENCH_24L", "french_24l")],
)  # fmt: skip
def test_the_one_resolver_of_pack_names(value: object, pack: str) -> None:
    assert languages.pack_name(value) == pack


# -- through the installed command -------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    assert CLI.is_file(), f"{CLI} missing: pip install -e '.[dev]' makes it"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(
        [str(CLI), *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


@pytest.mark.parametrize(
    ("language", "default"),
    [("en", "alba"), ("English", "alba"), ("pt-BR", "rafael"), ("french_24l", "estelle")],
)
def test_voices_takes_codes_names_and_packs(hf_cache: Path, language: str, default: str) -> None:
    result = _cli("voices", "-l", language)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == len(numpy_files.KNOWN_VOICES)
    assert [line for line in lines if "default" in line] == [
        next(line for line in lines if line.startswith(f"{default}  ("))
    ]


def test_languages_takes_a_language(hf_cache: Path) -> None:
    result = _cli("languages", "pt-BR")
    assert result.returncode == 0, result.stderr
    names = [line.split()[0] for line in result.stdout.splitlines()[1:]]  # under the header
    assert names and all(name.startswith("portuguese") for name in names)
    assert "portuguese" in names and "portuguese_24l" in names
    unknown = _cli("languages", "klingon")
    assert unknown.returncode == 2 and "klingon" in unknown.stderr


def test_download_takes_a_code(hf_cache: Path, tmp_path: Path) -> None:
    pack = build_pack(tmp_path / "pack", tiny_config_dict("standard"), voices=("alba",))
    english = get_config("english")
    for hub, content in {
        english.weights_without_voice_cloning: (pack / "model.safetensors").read_bytes(),
        english.flow_lm.lookup_table.tokenizer_file: b"{}",
        numpy_files.voice_hub_file(english, "alba"): b"voice",
    }.items():
        assert hub is not None
        cache_put(hf_cache, hub.repo, hub.revision, hub.path, content)
    result = _cli("download", "en", "--voices", "alba", "--without-cloning")
    assert result.returncode == 0, result.stderr
    assert "voices (1): alba" in result.stdout


def test_say_takes_a_code_with_a_model_dir(tmp_path: Path) -> None:
    pack = build_pack(tmp_path / "pack", tiny_config_dict("standard"), voices=("alba",))
    out = tmp_path / "out.wav"
    result = _cli("say", "Hi.", "-l", "en-US", "--model-dir", str(pack), "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert out.stat().st_size > 44
