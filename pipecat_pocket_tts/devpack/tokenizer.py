"""The packs' tokenizers: a SentencePiece unigram model trained on a generated corpus.

``train_sentencepiece`` runs sentencepiece's own trainer; ``sentencepiece_to_json`` gives the
same vocabulary as a Hugging Face ``tokenizer.json``, built with the ``tokenizers`` package.
"""

from __future__ import annotations

import io
import json
import os
import random
import tempfile
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import sentencepiece as spm
import tokenizers
from tokenizers import Regex, decoders, models, normalizers

from ..engine.atomic_files import atomic_write_bytes

TokenizerFormat = Literal["model", "json"]


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_COMMON_WORDS = _words(
    "the of and to a in is you that it he was for on are as with his they I at be this have "
    "from or one had by word but not what all were we when your can said there use an each "
    "which she do how their if will up other about out many then them these so some her would "
    "make like him into time has look two more write go see number no way could people my "
    "than first water been call who its now find long down day did get come made may part "
    "hello world voice speech sound model test yes okay thanks please good morning evening"
)
_ONSETS = ("", *_words("b c d f g h j k l m n p r s t v w z ch sh th st br tr pl gr qu"))
_VOWELS = _words("a e i o u ai ea ou ie oo é è à ü ö ä ñ ç ô í ó ú")
_CODAS = ("", "", "n", "r", "s", "t", "l", "m", "nd", "st", "ng", "x")
_ENDINGS = (".", ".", ".", "!", "?", ",", ";", ":", "...")


def corpus(num_lines: int, seed: int) -> list[str]:
    """Deterministic pseudo-text: common words, syllable words, numbers, punctuation."""
    rng = random.Random(seed)

    def word() -> str:
        if rng.random() < 0.4:
            return rng.choice(_COMMON_WORDS)
        syllables = rng.randint(1, 3)
        return "".join(
            rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(syllables)
        )

    lines = []
    for _ in range(num_lines):
        words = []
        for _ in range(rng.randint(3, 14)):
            if rng.random() < 0.05:
                words.append(str(rng.randint(0, 99_999)))
            else:
                w = word()
                words.append(w.capitalize() if rng.random() < 0.1 else w)
        lines.append(" ".join(words) + rng.choice(_ENDINGS))
    return lines


def train_sentencepiece(
    folder: str | os.PathLike[str],
    vocab_size: int,
    *,
    seed: int = 0,
    num_lines: int = 2000,
    model_name: str = "tokenizer",
) -> Path:
    """Train a SentencePiece unigram model on a generated corpus; write ``<model_name>.model``.

    Byte fallback, split digits and identity normalization, like the real packs' tokenizers
    (every character stays representable). Deterministic for a given seed and vocab size.

    Args:
        folder: Where to write the model.
        vocab_size: The number of pieces.
        seed: Seeds the corpus.
        num_lines: The corpus's length in lines.
        model_name: The file name without its extension.

    Returns:
        The model file written.
    """
    if vocab_size < 300:
        raise ValueError(f"vocab_size={vocab_size}: needs ≥ 300 (256 byte pieces + text pieces)")
    path = Path(folder) / f"{model_name}.model"
    atomic_write_bytes(path, _trained_model(vocab_size, seed, num_lines))
    return path


@lru_cache(maxsize=8)
def _trained_model(vocab_size: int, seed: int, num_lines: int) -> bytes:
    """The serialized SentencePiece model (cached: tests build many packs per process)."""
    return sentencepiece_model(corpus(num_lines, seed), vocab_size, seed_sentencepiece_size=20_000)


def sentencepiece_model(
    sentences: Iterable[str],
    vocab_size: int,
    *,
    normalization: str = "identity",
    byte_fallback: bool = True,
    **options: Any,
) -> bytes:
    """A SentencePiece unigram model trained on ``sentences``, serialized (the one trainer).

    Set up like the real packs' tokenizers: digits split, every character covered, byte
    fallback and identity normalization unless asked otherwise. One thread and no shuffling:
    the same sentences and settings give the same bytes. ``options`` are further
    ``SentencePieceTrainer`` settings, e.g. ``remove_extra_whitespaces=False``.

    Args:
        sentences: The training text, one sentence per item.
        vocab_size: The number of pieces.
        normalization: SentencePiece's normalization rule name.
        byte_fallback: Cover unknown characters with byte pieces.
        **options: Further trainer settings.

    Returns:
        The serialized model.
    """
    proto = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences),
        model_writer=proto,
        vocab_size=vocab_size,
        model_type="unigram",
        byte_fallback=byte_fallback,
        split_digits=True,
        normalization_rule_name=normalization,
        character_coverage=1.0,
        shuffle_input_sentence=False,
        num_threads=1,
        minloglevel=2,
        **options,
    )
    return proto.getvalue()


def sentencepiece_to_json(model_path: str | os.PathLike[str]) -> dict[str, Any]:
    """The Hugging Face ``tokenizers`` JSON (Unigram model) equivalent to a SentencePiece model.

    Built with ``tokenizers`` itself. Same vocabulary, scores and ids (control and unknown
    pieces as special added tokens); the normalizer mirrors SentencePiece's whitespace
    handling (strip spaces at both ends, collapse runs of spaces, prefix '▁', spaces become
    '▁'); the decoder undoes it and fuses byte pieces.

    Args:
        model_path: The SentencePiece ``.model`` file.

    Returns:
        The tokenizer.json content.
    """
    sp = spm.SentencePieceProcessor(model_file=str(model_path))
    vocab = [(sp.id_to_piece(i), float(sp.get_score(i))) for i in range(sp.vocab_size())]
    library = tokenizers.Tokenizer(models.Unigram(vocab, sp.unk_id(), True))
    library.normalizer = normalizers.Sequence(
        [
            # Strip spaces at the ends of the text only.
            normalizers.Replace(Regex(r"(?<![\s\S]) +| +(?![\s\S])"), ""),
            normalizers.Replace(Regex(" {2,}"), " "),
            normalizers.Prepend("\u2581"),
            normalizers.Replace(" ", "\u2581"),
        ]
    )
    library.decoder = decoders.Sequence(
        [
            decoders.Replace("\u2581", " "),
            decoders.ByteFallback(),
            decoders.Fuse(),
            decoders.Strip(" ", 1, 0),
        ]
    )
    specials = [i for i in range(sp.vocab_size()) if sp.is_control(i) or sp.is_unknown(i)]
    library.add_special_tokens(
        [tokenizers.AddedToken(sp.id_to_piece(i), special=True, normalized=False) for i in specials]
    )
    return json.loads(library.to_str())


def write_tokenizer(folder: Path, vocab_size: int, fmt: TokenizerFormat, seed: int) -> None:
    """Write ``tokenizer.model`` or ``tokenizer.json`` of ``vocab_size`` pieces into ``folder``."""
    if fmt == "model":
        train_sentencepiece(folder, vocab_size, seed=seed)
        return
    with tempfile.TemporaryDirectory() as tmp:
        model = train_sentencepiece(tmp, vocab_size, seed=seed)
        data = json.dumps(sentencepiece_to_json(model), ensure_ascii=False, indent=1)
    atomic_write_bytes(folder / "tokenizer.json", data.encode())
