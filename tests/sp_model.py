"""Small SentencePiece models trained inside the tests (no downloads).

``train_sentencepiece(path, vocab_size)`` writes a unigram model set up like upstream's
(byte fallback, digits split, identity normalization) with exactly ``vocab_size`` pieces.
The training is ``devpack.sentencepiece_model`` (the package's one trainer) on a multilingual
corpus of this module, generated from a fixed seed, so a given set of arguments always gives
the same model; trained models are cached per process, so each is trained once per session.

``write_tokenizer_json(model_path, json_path)`` writes the same vocabulary as a Hugging Face
``tokenizer.json`` (Unigram model), built with the ``tokenizers`` package (the devpack's
``sentencepiece_to_json``) in the layout the English packs ship.
"""

from __future__ import annotations

import base64
import json
import random
import string
from pathlib import Path

import sentencepiece as spm

from pipecat_pocket_tts.devpack import sentencepiece_model, sentencepiece_to_json

DEFAULT_VOCAB_SIZE = 4000

# Words of seven languages (and some shared names) for a multilingual-ish corpus.
_WORDS = {
    "en": "the a of and to in is it you that he was for on are with as his they be at one have "
    "this from or had by hot word but what some we can out other were all there when up use "
    "your how said an each she which do their time if will way about many then them write "
    "would like so these her long make thing see him two has look more day could go come did "
    "number sound no most people my over know water than call first who may down side been "
    "now find doctor street station weather morning evening tomorrow thousand hundred million "
    "isn't don't can't we're it's let's o'clock well-known self-driving",
    "fr": "le la les un une des et est dans pour que qui sur avec pas plus par mais nous vous "
    "ils elle être avoir faire très été où déjà même après français château garçon leçon "
    "noël naïf cœur œuvre monsieur madame mademoiselle aujourd'hui c'est l'homme qu'il "
    "voilà ça hôtel forêt fête élève",
    "de": "der die das und ist nicht ein eine zu mit sich auf für von dem den des im aus "
    "über größer schön grün müssen straße weiß fußball mädchen bäcker könnte würde hätte "
    "zusammen ungefähr bitte danke tschüss",
    "es": "el la los las de que y en un una por con para es está más pero muy también "
    "año niño señor señora mañana corazón canción está aquí qué cómo dónde información",
    "it": "il lo gli le di che e è un una per con non sono più anche città perché però "
    "già così università caffè grazie prego buongiorno signore dottore",
    "pt": "o a os as de que e é um uma para com não mais mas muito também ação coração "
    "irmão pão mãe você está obrigado obrigada amanhã informação",
    "nl": "de het een en van in is dat op te zijn met voor niet aan er die maar ook wij "
    "jullie heel goed dank alstublieft meneer mevrouw twee één café",
    "names": "Alice Bob Marie Jean Hans Lucía João Giulia Pieter Kyutai Paris Berlin Madrid "
    "Roma Lisboa Amsterdam London",
}
_SYLLABLES = str.split(
    "ka ke ki ko ku ma me mi mo mu ta te ti to tu ra re ri ro ru sa se si so su na ne ni no nu "
    "la le li lo lu pa pe pi po pu ba be bi bo bu da de di do du ga ge gi go gu va ve vi vo vu "
    "tra tre tri str sch ch sh th ph qu gn ll rr ss ée è ê ë ü ö ä ñ ç ã õ ô â î à ò ù ó á í ú"
)
_LETTERS = string.ascii_letters + "àâäçéèêëîïôöùûüÿñãõáíóúßœæ%&/+=@#$€£'-()"
_ABBREVIATIONS = str.split(
    "Dr. Mr. Mrs. St. e.g. i.e. etc. vs. M. Mme. z.B. usw. Sr. Sra. Sig. Dott."
)
_PUNCTUATION = [".", ".", ".", "!", "?", "...", "…"]


def _corpus(seed: int, n_sentences: int) -> list[str]:
    """Deterministic sentences: real words, pseudo-words, numbers, punctuation."""
    rng = random.Random(seed)
    vocab = [w for words in _WORDS.values() for w in words.split()]
    sentences = []
    for _ in range(n_sentences):
        words = []
        for _ in range(rng.randint(3, 16)):
            r = rng.random()
            if r < 0.55:
                word = rng.choice(vocab)
            elif r < 0.80:
                word = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 4)))
            elif r < 0.85:
                word = "".join(rng.choice(_LETTERS) for _ in range(rng.randint(1, 7)))
            elif r < 0.93:
                word = str(rng.randint(0, 100_000)) if rng.random() < 0.7 else f"{rng.random():.2f}"
            else:
                word = rng.choice(_ABBREVIATIONS)
            if rng.random() < 0.08:
                word = word.capitalize()
            if rng.random() < 0.12:
                word += rng.choice([",", ",", ";", ":", " -", " —", " –"])
            if rng.random() < 0.03:
                word = rng.choice(['"', "'", "(", "«", "“"]) + word
            words.append(word)
        words[0] = words[0][:1].upper() + words[0][1:]
        sentences.append(" ".join(words) + rng.choice(_PUNCTUATION))
    return sentences


_CACHE: dict[tuple, bytes] = {}


def train_sentencepiece(
    path: Path,
    vocab_size: int = DEFAULT_VOCAB_SIZE,
    *,
    seed: int = 0,
    normalization: str = "identity",
    remove_extra_whitespaces: bool = False,
    byte_fallback: bool = True,
) -> Path:
    """Train (or reuse) a unigram model with exactly ``vocab_size`` pieces; write it to ``path``.

    ``vocab_size`` must be in [400, 4000] with byte fallback (259 pieces are taken by <unk>,
    <s>, </s> and the 256 byte pieces), in [200, 4000] without. Returns ``path``.
    """
    smallest = 400 if byte_fallback else 200
    if not smallest <= vocab_size <= 4000:
        raise ValueError(f"vocab_size must be in [{smallest}, 4000], got {vocab_size}")
    key = (vocab_size, seed, normalization, remove_extra_whitespaces, byte_fallback)
    if key not in _CACHE:
        _CACHE[key] = sentencepiece_model(
            _corpus(seed, 1500 + vocab_size),
            vocab_size,
            normalization=normalization,
            byte_fallback=byte_fallback,
            remove_extra_whitespaces=remove_extra_whitespaces,
            max_sentencepiece_length=16,
        )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(_CACHE[key])
    return path


def write_tokenizer_json(model_path: Path, json_path: Path, *, style: str = "plain") -> Path:
    """Write the SentencePiece model at ``model_path`` as an HF ``tokenizer.json`` (Unigram).

    The vocabulary, added special tokens and Unigram model are ``devpack``'s
    (``sentencepiece_to_json``); the text handling differs: a Metaspace pre-tokenizer and
    decoder (prefix space always), byte fallback only if the model has byte pieces, and the
    normalizer ``style`` picks: "plain" has none (identity normalization; repeated spaces
    survive, which upstream's short-input padding relies on); "from_spm" is what
    ``tokenizers``' own SentencePiece conversion writes: the model's precompiled charsmap
    (if any), then runs of spaces collapsed to one.
    """
    if style not in ("plain", "from_spm"):
        raise ValueError(f"unknown style {style!r}")
    data = Path(model_path).read_bytes()
    sp = spm.SentencePieceProcessor(model_proto=data)
    document = sentencepiece_to_json(model_path)
    document["model"]["byte_fallback"] = any(sp.is_byte(i) for i in range(sp.get_piece_size()))
    normalizer = None
    if style == "from_spm":
        steps = []
        charsmap = _precompiled_charsmap(data)
        if charsmap:
            steps.append(
                {"type": "Precompiled", "precompiled_charsmap": base64.b64encode(charsmap).decode()}
            )
        steps.append({"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "})
        normalizer = {"type": "Sequence", "normalizers": steps}
    metaspace = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}
    document.update(normalizer=normalizer, pre_tokenizer=metaspace, decoder=dict(metaspace))
    json_path = Path(json_path)
    json_path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    return json_path


def _precompiled_charsmap(model_proto: bytes) -> bytes:
    """Field 2 (precompiled_charsmap) of the model's NormalizerSpec."""
    spec = spm.SentencePieceNormalizer(model_proto=model_proto).serialized_normalizer_spec()
    position = 0

    def varint() -> int:
        nonlocal position
        value = shift = 0
        while True:
            byte = spec[position]
            position += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value

    while position < len(spec):
        key = varint()
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            varint()
        elif wire_type == 2:
            length = varint()
            if number == 2:
                return spec[position : position + length]
            position += length
        elif wire_type == 5:
            position += 4
        else:
            position += 8
    return b""
