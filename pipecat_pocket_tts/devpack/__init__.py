"""Development packs: random-weight packs in the real file layout.

Tests, examples and benchmarks need a pack without Hugging Face access. ``build_pack`` writes a
folder that ``PocketTTS.load(model_dir=...)`` reads like a downloaded pack:

    config.json                 (for custom configs) upstream schema, replaces the registry config
    model.safetensors           every key of ``expected_shapes(config)``, random but well scaled
    tokenizer.model | .json     a SentencePiece unigram model trained here on a generated corpus
    embeddings/<voice>.safetensors   voice states prefilled through the NumPy backend

The weights are random: the audio is noise-like, finite and not silent. The EOS head is a
constant (``eos_logit``, 0 by default), so generation stops at the first frame where EOS is
allowed under the default thresholds (-4 and -1); pass an ``eos_threshold`` above ``eos_logit``
to generate up to ``max_frames``. Everything is deterministic for a given seed.

Modules: ``configs`` (tiny configs), ``tokenizer`` (corpus, SentencePiece training, the
tokenizer.json form), ``weights`` (random weights, decoder calibration, safetensors),
``voices`` (random voice states), ``pack`` (``build_pack``), ``command`` (the command line).

Command line (e.g. a full-size random English pack for benchmarks, ~440 MB):

    python -m pipecat_pocket_tts.devpack OUT --config english
"""

from .command import main
from .configs import tiny_config_dict
from .pack import DEFAULT_VOICES, build_pack
from .tokenizer import (
    TokenizerFormat,
    sentencepiece_model,
    sentencepiece_to_json,
    train_sentencepiece,
)
from .voices import write_random_voices
from .weights import TARGET_RMS, calibrated_output_layer, random_weights, write_safetensors

__all__ = [
    "DEFAULT_VOICES",
    "TARGET_RMS",
    "TokenizerFormat",
    "build_pack",
    "calibrated_output_layer",
    "main",
    "random_weights",
    "sentencepiece_model",
    "sentencepiece_to_json",
    "tiny_config_dict",
    "train_sentencepiece",
    "write_random_voices",
    "write_safetensors",
]
