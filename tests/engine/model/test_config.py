"""The model-config registry: every config upstream 4.0.1 ships, parsed into typed facts."""

import pytest

from pipecat_pocket_tts.engine.errors import UnknownLanguageError
from pipecat_pocket_tts.engine.model.config import (
    HubFile,
    ModelConfig,
    get_config,
)
from pipecat_pocket_tts.engine.model.config_registry import config_names
from pipecat_pocket_tts.engine.model.languages import pack_name

EXPECTED = {
    "english", "english_2026-01", "english_2026-04", "english_2026-04_24l", "english_2026-09",
    "english_2026-09_2", "english_2026-09_24l", "english_2026-10", "english_drifting_26-09",
    "english_18m_2026-10", "english_18m_refl_2026-10", "english_7m_2026-10",
    "english_7m_refl_2026-10", "english_2m_2026-10", "english_2m_refl_2026-10",
    "french", "french_24l", "german", "german_24l", "italian", "italian_24l",
    "portuguese", "portuguese_24l", "spanish", "spanish_24l", "dutch", "dutch_24l",
}  # fmt: skip


def test_registry_holds_every_upstream_config():
    assert set(config_names()) == EXPECTED


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_config_parses_with_pinned_hub_files(name):
    config = get_config(name)
    assert config.weights is not None and config.weights.revision
    assert config.weights_without_voice_cloning is not None
    assert config.weights_without_voice_cloning.repo == "kyutai/pocket-tts-without-voice-cloning"
    assert config.flow_lm.lookup_table.tokenizer_file is not None
    assert config.flow_lm.lookup_table.tokenizer_file.revision
    assert config.mimi.frame_size == 1920
    assert config.pack_folder == f"languages/{name}"


def test_english_facts():
    c = get_config("english")
    t = c.flow_lm.transformer
    assert (t.d_model, t.num_heads, t.num_layers, t.head_dim, t.ffn_dim) == (1024, 16, 6, 64, 4096)
    assert c.flow_lm.sampler.type == "lsd"
    assert c.flow_lm.insert_bos_before_voice is True
    assert c.default_temperature == 0.3 and c.default_eos_threshold == -4.0
    assert c.flow_lm.lookup_table.tokenizer == "tokenizers"
    assert c.language == "english"


def test_small_model_facts():
    c = get_config("english_7m_2026-10")
    t = c.flow_lm.transformer
    assert (t.d_model, t.kv_heads, t.query_dim, t.head_dim) == (224, 2, 512, 64)
    assert c.flow_lm.z_dim == 64 and c.flow_lm.head_input_dim == 64
    assert c.flow_lm.lookup_table.rank == 64
    assert c.flow_lm.sampler.type == "drifting"
    assert c.default_eos_threshold == -1.0
    assert c.mimi.decoder_transformer.context == 50
    assert c.mimi.transformer.context == 250


def test_variants():
    assert get_config("french_24l").num_layers == 24
    assert get_config("english_2026-01").flow_lm.insert_bos_before_voice is False
    assert get_config("english_2026-01").mimi.inner_dim == 512
    assert get_config("english_2m_2026-10").flow_lm.sampler.type == "pointwise"
    assert get_config("french_24l").text.remove_semicolons is True
    assert get_config("french_24l").language == "french"


def test_unknown_language_lists_valid_names():
    with pytest.raises(UnknownLanguageError, match=r"english.*french"):
        get_config("klingon")


def test_unsupported_feature_is_named():
    raw = {
        "flow_lm": {
            "dtype": "float32",
            "flow": {"dim": 8, "depth": 1, "type": "lsd", "fancy": 1},
            "transformer": {"d_model": 8, "num_heads": 2, "num_layers": 1, "hidden_scale": 2,
                            "max_period": 10000},
            "lookup_table": {"dim": 8, "n_bins": 10, "tokenizer": "sentencepiece",
                             "tokenizer_path": "tokenizer.model"},
        },
        "mimi": {},
    }  # fmt: skip
    with pytest.raises(NotImplementedError, match="fancy"):
        ModelConfig.from_dict("x", raw)
    raw["flow_lm"]["flow"].pop("fancy")
    raw["flow_lm"]["flow"]["type"] = "diffusion"
    with pytest.raises(NotImplementedError, match="diffusion"):
        ModelConfig.from_dict("x", raw)


def test_hub_file_parsing():
    f = HubFile.parse("hf://kyutai/pocket-tts/languages/english/model.safetensors@abc")
    assert (f.repo, f.path, f.revision) == (
        "kyutai/pocket-tts",
        "languages/english/model.safetensors",
        "abc",
    )
    assert f.folder == "languages/english" and f.filename == "model.safetensors"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("english", "english"),
        ("English", "english"),
        (" FRENCH_24L ", "french_24l"),
        ("en", "english"),
        ("en-US", "english"),
        ("pt-BR", "portuguese"),
        ("pt_BR", "portuguese"),
        ("de", "german"),
        ("english_tiny", "english_tiny"),  # custom packs keep their names
        ("klingon", "klingon"),  # unknown stays unknown: get_config says what is valid
    ],
)
def test_canonical_config_names(name, expected):
    assert pack_name(name, custom=True) == expected
