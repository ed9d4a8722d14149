"""Tokenizer: ids equal sentencepiece (.model) and tokenizers (tokenizer.json); filtering."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import sentencepiece as spm
import tokenizers
from hypothesis import example, given, settings
from hypothesis import strategies as st
from sp_model import train_sentencepiece, write_tokenizer_json

from pipecat_pocket_tts.engine.errors import PocketTTSError, TokenizerFileError
from pipecat_pocket_tts.engine.text.tokenizer import DROP_MARK, Tokenizer

VARIED_TEXTS = [
    "Hello world, 3.14 times.",
    "The quick brown fox jumps over the lazy dog!",
    "Ça va? Très bien, merci. L'été est chaud.",
    "Größere Straßen müssen 1.000.000 € kosten; z.B. jetzt.",
    "¿Dónde está la señora García? ¡Aquí!",
    "Buongiorno, dottore: è già così.",
    "Dank je wel, meneer. Één café, alstublieft.",
    "Numbers: 0123456789, 12:30, 3/4, 50%, #1, @home, a+b=c.",
    "  leading and trailing spaces  ",
    "double  spaces   and\ttabs\nand newlines\r\n",
    "        padded short input.",
    "emoji 😀 in 🇫🇷 text 👍🏽 ok",
    "日本語のテキスト and Ελληνικά and русский",
    "control \x00\x07\x1b chars and zero\u200bwidth",
    "literal specials <s> <unk> </s> and bytes <0x41><0xFF>",
    "x<unk>y</s>",
    "",
    " ",
    "a",
    "…“quotes” ‘single’ «guillemets» — dashes – en",
    "ﬁne ｆｕｌｌｗｉｄｔｈ ½ ² ①",
    "e\u0301 combining and precomposed é",
]


@pytest.fixture(scope="module")
def sp(sp_model_path: Path) -> spm.SentencePieceProcessor:
    return spm.SentencePieceProcessor(model_file=str(sp_model_path))


@pytest.fixture(scope="module")
def hf(tokenizer_json_path: Path) -> tokenizers.Tokenizer:
    return tokenizers.Tokenizer.from_file(str(tokenizer_json_path))


@pytest.fixture(scope="module")
def from_model(sp_model_path: Path) -> Tokenizer:
    return Tokenizer.from_file(sp_model_path)


@pytest.fixture(scope="module")
def from_json(tokenizer_json_path: Path) -> Tokenizer:
    return Tokenizer.from_file(tokenizer_json_path)


def test_model_file_ids_equal_sentencepiece(from_model: Tokenizer, sp) -> None:
    for text in VARIED_TEXTS:
        assert from_model.encode_list(text) == sp.encode(text), text


def test_json_file_ids_equal_tokenizers_package(from_json: Tokenizer, hf) -> None:
    for text in VARIED_TEXTS:
        assert from_json.encode_list(text) == hf.encode(text).ids, text


def test_both_files_agree_on_ordinary_text(from_model: Tokenizer, from_json: Tokenizer) -> None:
    # Same vocabulary: the only differences between the two formats are leading blanks and
    # literal special tokens (tokenizers' own conventions), absent from ordinary text.
    for text in VARIED_TEXTS:
        if text[:1].isspace() or "<" in text:
            continue
        assert from_json.encode_list(text) == from_model.encode_list(text), text


_ALPHABET = st.sampled_from(
    [
        *"abcdefghijklmnopqrstuvwxyzABCXYZ0123456789 .,;:!?'\"-()éèçàüößñ—–…“”’«»",
        *["  ", "\n", "\t", "😀", "日", "\u200b", "<s>", "<0x41>", "▁", "\x00"],
    ]
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_ALPHABET, max_size=60).map("".join))
@example("aab)))")  # equal-scoring segmentations: tokenizers keeps its first, in float64
def test_json_ids_equal_tokenizers_on_random_text(from_json: Tokenizer, hf, text: str) -> None:
    assert from_json.encode_list(text) == hf.encode(text).ids


def _variant(tokenizer_json_path: Path, tmp_path: Path, configure) -> Path:
    hf_tok = tokenizers.Tokenizer.from_file(str(tokenizer_json_path))
    configure(hf_tok)
    path = tmp_path / "variant.json"
    hf_tok.save(str(path))
    return path


def _llama_style(tok: tokenizers.Tokenizer) -> None:
    from tokenizers import normalizers, processors

    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.pre_tokenizer = None
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", 1), ("</s>", 2)]
    )


def _collapse_and_first(tok: tokenizers.Tokenizer) -> None:
    from tokenizers import Regex, normalizers, pre_tokenizers

    tok.normalizer = normalizers.Sequence(
        [
            normalizers.Replace(Regex(" {2,}"), " "),
            normalizers.Strip(left=False, right=True),
            normalizers.NFKC(),
        ]
    )
    tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first", split=False)


def _lowercase_never(tok: tokenizers.Tokenizer) -> None:
    from tokenizers import normalizers, pre_tokenizers

    tok.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="never", split=True)


@pytest.mark.parametrize("configure", [_llama_style, _collapse_and_first, _lowercase_never])
def test_other_json_layouts_match_tokenizers(
    tokenizer_json_path: Path, tmp_path: Path, configure
) -> None:
    path = _variant(tokenizer_json_path, tmp_path, configure)
    hf_tok = tokenizers.Tokenizer.from_file(str(path))
    ours = Tokenizer.from_file(path)
    for text in VARIED_TEXTS:
        assert ours.encode_list(text) == hf_tok.encode(text).ids, (configure.__name__, text)


def test_precompiled_normalizer_matches(tmp_path: Path) -> None:
    model = train_sentencepiece(
        tmp_path / "nfkc.model", 1000, normalization="nmt_nfkc", remove_extra_whitespaces=True
    )
    path = write_tokenizer_json(model, tmp_path / "nfkc.json", style="from_spm")
    assert "Precompiled" in path.read_text(encoding="utf-8")
    hf_tok = tokenizers.Tokenizer.from_file(str(path))
    ours = Tokenizer.from_file(path)
    for text in VARIED_TEXTS:
        assert ours.encode_list(text) == hf_tok.encode(text).ids, text


def test_encode_returns_int64_array(from_json: Tokenizer) -> None:
    ids = from_json.encode("Hello world.")
    assert isinstance(ids, np.ndarray) and ids.dtype == np.int64 and ids.ndim == 1
    assert from_json.encode("").shape == (0,)
    assert from_json.count("Hello world.") == len(ids)


def test_decode_round_trips(from_model: Tokenizer, from_json: Tokenizer) -> None:
    text = "Ça va? 3.14 and 😀 ok."
    assert from_model.decode(from_model.encode(text)) == text
    assert from_json.decode(from_json.encode(text)) == text


def test_vocab_size_and_expected_size(sp_model_path: Path, tokenizer_json_path: Path) -> None:
    assert Tokenizer.from_file(sp_model_path).vocab_size == 4000
    assert Tokenizer.from_file(tokenizer_json_path, expected_vocab_size=4000).vocab_size == 4000
    with pytest.raises(TokenizerFileError, match="n_bins"):
        Tokenizer.from_file(sp_model_path, expected_vocab_size=3999)


def test_bad_files_raise_clear_errors(tmp_path: Path, tokenizer_json_path: Path) -> None:
    garbage = tmp_path / "tokenizer.model"
    garbage.write_bytes(b"\x01\x02not a model")
    with pytest.raises(TokenizerFileError, match="SentencePiece"):
        Tokenizer.from_file(garbage)
    with pytest.raises(TokenizerFileError, match="cannot read"):
        Tokenizer.from_file(tmp_path / "missing.json")
    broken = tmp_path / "broken.json"
    broken.write_text("{not json", encoding="utf-8")
    with pytest.raises(TokenizerFileError, match="JSON"):
        Tokenizer.from_file(broken)
    bpe = json.loads(tokenizer_json_path.read_text(encoding="utf-8"))
    bpe["model"] = {"type": "BPE", "vocab": {}, "merges": []}
    other = tmp_path / "bpe.json"
    other.write_text(json.dumps(bpe), encoding="utf-8")
    with pytest.raises(TokenizerFileError, match="Unigram") as info:
        Tokenizer.from_file(other)
    assert isinstance(info.value, PocketTTSError) and isinstance(info.value, ValueError)


def test_representable_characters(from_model: Tokenizer, from_json: Tokenizer) -> None:
    chars = from_model.representable_characters
    assert chars == from_json.representable_characters
    for char in "aZé. ,?0":
        assert from_model.is_representable(char), char
    for char in ["😀", "\x00", "\n", "日", "<", "\u200b"]:
        if char == "<":
            continue  # '<' may or may not be a piece; only byte pieces' text must not count
        assert not from_model.is_representable(char), char
    # Byte pieces do not make their bytes representable.
    assert "<0x41>" not in chars and len(chars) < 300


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hello world.", "Hello world."),
        ("Hello 😀 world!", "Hello world!"),
        ("I love it 😀.", "I love it."),
        ("hello😀world", "hello world"),
        ("😀😀 Hi 👍🏽", "Hi"),
        ("Flags 🇫🇷🇩🇪 and keycaps 1️⃣ here", "Flags and keycaps 1 here"),
        ("It’s “quoted”", "It's \u201cquoted\""),  # “ is a piece of the test vocab, ” is not
        ("non\u00a0breaking\u2009space", "non breaking space"),
        ("zero\u200bwidth\u00adsoft", "zerowidthsoft"),
        ("bell\x07 and esc\x1bape", "bell and escape"),
        ("ﬁne ｆｕｌｌ", "fine full"),
        ("½ cup", "1/2 cup"),
        ("٣ apples", "3 apples"),
        ("Bucureș ți Kőbánya", "Bucures ti Kobánya"),
        ("日本 is far", "is far"),
        ("line one\nline two\r\nthree", "line one\nline two\n\nthree"),
        ("tab\there", "tab here"),
        ("e\u0301", "é"),
        ("", ""),
    ],
)
def test_filter_unrepresentable(from_model: Tokenizer, text: str, expected: str) -> None:
    assert from_model.filter_unrepresentable(text) == expected


def test_filter_keeps_only_representable_and_spaces(from_model: Tokenizer) -> None:
    text = "Mix: 😀 日本 \x00\x01 ﬁ ½ ‘x’ — ok… 🎉"
    out = from_model.filter_unrepresentable(text)
    assert set(out) <= from_model.representable_characters | {"\n"}


def test_one_unknown_character_does_not_garble_the_rest(from_model: Tokenizer) -> None:
    # FluidAudio #931: one unknown character garbled the whole string.
    clean = from_model.encode_list("Hello world, how are you?")
    dirty = from_model.filter_unrepresentable("Hello 🙃 world, how are you?")
    assert from_model.encode_list(dirty) == clean


def test_trailing_mark_kept_for_streaming(from_model: Tokenizer) -> None:
    assert from_model.filter_unrepresentable("Hello 😀", keep_trailing_mark=True) == (
        "Hello" + DROP_MARK
    )
    pending = from_model.filter_unrepresentable("Hello😀", keep_trailing_mark=True)
    assert from_model.filter_unrepresentable(pending + "world") == "Hello world"
    assert from_model.filter_unrepresentable(pending + ".") == "Hello."


@settings(max_examples=150, deadline=None)
@given(st.text(st.characters(exclude_categories=("Cs",)), max_size=40))
def test_json_ids_equal_tokenizers_on_any_unicode(from_json: Tokenizer, hf, text: str) -> None:
    assert from_json.encode_list(text) == hf.encode(text).ids


def test_tokenizer_normalizer_counts_for_representability(
    tokenizer_json_path: Path, tmp_path: Path
) -> None:
    # A lowercasing tokenizer.json can say 'Q' through 'q' even if 'Q' is no piece.
    path = _variant(tokenizer_json_path, tmp_path, _lowercase_never)
    ours = Tokenizer.from_file(path)
    assert ours.is_representable("Q") and ours.filter_unrepresentable("Quick 😀") == "Quick"


def test_piece_holding_the_metaspace_inside_matches(
    tokenizer_json_path: Path, tmp_path: Path
) -> None:
    # A piece with '▁' after its first position ("s▁t") must not join two Metaspace words.
    document = json.loads(tokenizer_json_path.read_text(encoding="utf-8"))
    document["model"]["vocab"].append(["s▁t", 0.0])
    path = tmp_path / "inner_metaspace.json"
    path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    hf_tok = tokenizers.Tokenizer.from_file(str(path))
    ours = Tokenizer.from_file(path)
    for text in [*VARIED_TEXTS, "bus to this station", "s t s t"]:
        assert ours.encode_list(text) == hf_tok.encode(text).ids, text


def test_malformed_json_layouts_raise(tmp_path: Path, tokenizer_json_path: Path) -> None:
    document = json.loads(tokenizer_json_path.read_text(encoding="utf-8"))
    for breakage in (
        {"normalizer": {"type": "Replace"}},
        {"normalizer": {"type": "BertNormalizer"}},
        {"pre_tokenizer": {"type": "ByteLevel"}},
        {"post_processor": {"type": "RobertaProcessing"}},
        {"truncation": {"max_length": 8}},
    ):
        path = tmp_path / "broken.json"
        path.write_text(json.dumps({**document, **breakage}), encoding="utf-8")
        with pytest.raises(TokenizerFileError):
            Tokenizer.from_file(path)
    path.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(TokenizerFileError):
        Tokenizer.from_file(path)


def test_trained_models_are_exact_and_deterministic(tmp_path: Path) -> None:
    import sp_model

    first = train_sentencepiece(tmp_path / "a.model", 400).read_bytes()
    sp_model._CACHE.clear()  # train again from scratch
    second = train_sentencepiece(tmp_path / "b.model", 400).read_bytes()
    assert first == second
    assert Tokenizer.from_sentencepiece(first).vocab_size == 400
    with pytest.raises(ValueError, match="vocab_size"):
        train_sentencepiece(tmp_path / "c.model", 300)
