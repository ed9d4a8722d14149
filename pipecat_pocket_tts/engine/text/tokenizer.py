"""Text → token ids, from a SentencePiece ``tokenizer.model`` or an HF ``tokenizer.json``.

Both file kinds hold the same unigram vocabulary (the English packs ship ``tokenizer.json``
converted from the SentencePiece model; the small models ship ``tokenizer.model``). Each is run
by the library upstream runs it with: a ``.model`` by ``sentencepiece``, a ``tokenizer.json``
by Hugging Face ``tokenizers`` (checked first to be a SentencePiece conversion: a Unigram
model, a Metaspace pre-tokenizer or none, no truncation or padding).

Representable characters: a character is representable when the vocabulary has it as a
piece of its own. Byte pieces do not count: the models were trained on text, so the byte
fallback of an emoji or a control character is noise to them, and a single unknown
character must never garble the whole string. ``filter_unrepresentable`` maps what it can to
representable text (typographic variants, compatibility forms, accents) and drops the rest.
Lone surrogates (half of a UTF-16 pair, e.g. ``"\\ud83d"``), which neither library accepts,
are dropped by ``filter_unrepresentable`` like a symbol and left out by ``encode``.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import sentencepiece as spm
import tokenizers
from tokenizers import decoders

from ..errors import TokenizerFileError

_BYTE_PIECE = re.compile(r"<0x[0-9A-F]{2}>")
_SURROGATE = re.compile("[\ud800-\udfff]")


class _Codec(Protocol):
    """What a tokenizer library does for ``Tokenizer``."""

    vocab_size: int

    def encode(self, text: str) -> list[int]: ...

    def normalize(self, text: str) -> str: ...

    def decode(self, ids: list[int]) -> str: ...


class Tokenizer:
    """A unigram tokenizer: ``encode(text) -> int64 ids``, plus what characters it can represent."""

    def __init__(self, codec: _Codec, representable: frozenset[str]) -> None:
        self._codec = codec
        self._representable = representable
        self._char_cache: dict[str, str] = {}

    # ----------------------------------------------------------------------------- loading
    @classmethod
    def from_file(cls, path: str | Path, *, expected_vocab_size: int | None = None) -> Tokenizer:
        """Load ``tokenizer.model`` (SentencePiece) or ``tokenizer.json`` (HF, Unigram).

        The kind is read from the content, not the name. ``expected_vocab_size`` (the config's
        ``n_bins``) is checked when given.
        """
        path = Path(path)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise TokenizerFileError(f"cannot read tokenizer file {path}: {exc}") from exc
        if data.lstrip()[:1] == b"{":
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise TokenizerFileError(f"{path} is not UTF-8 JSON: {exc}") from exc
            tokenizer = cls.from_json(text, source=str(path))
        else:
            tokenizer = cls.from_sentencepiece(data, source=str(path))
        if expected_vocab_size is not None and tokenizer.vocab_size != expected_vocab_size:
            raise TokenizerFileError(
                f"{path} has {tokenizer.vocab_size} pieces but the model config expects "
                f"{expected_vocab_size} (lookup_table.n_bins); use the tokenizer of this pack"
            )
        return tokenizer

    @classmethod
    def from_sentencepiece(cls, model_proto: bytes, *, source: str = "<bytes>") -> Tokenizer:
        """Load a serialized SentencePiece model (the bytes of a ``tokenizer.model``)."""
        processor = spm.SentencePieceProcessor()
        try:
            processor.LoadFromSerializedProto(model_proto)
        except Exception as exc:
            # Sentencepiece raises RuntimeError and OSError variants.
            raise TokenizerFileError(
                f"{source} is neither a tokenizer.json nor a valid SentencePiece model: {exc}"
            ) from exc
        pieces = [
            processor.id_to_piece(i)
            for i in range(processor.get_piece_size())
            if not (
                processor.is_byte(i)
                or processor.is_control(i)
                or processor.is_unknown(i)
                or processor.is_unused(i)
            )
        ]
        return cls(_SentencePieceCodec(processor), _single_characters(pieces, "▁"))

    @classmethod
    def from_json(cls, text: str, *, source: str = "<json>") -> Tokenizer:
        """Load an HF ``tokenizer.json`` whose model is Unigram (a SentencePiece conversion)."""
        try:
            document = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TokenizerFileError(f"{source} is not valid JSON: {exc}") from exc
        try:
            pieces, replacement = _check_conversion(document, source)
        except (KeyError, TypeError, AttributeError, IndexError, ValueError) as exc:
            if isinstance(exc, TokenizerFileError):
                raise
            raise TokenizerFileError(
                f"{source}: unexpected tokenizer.json layout: {exc!r}"
            ) from exc
        try:
            library = tokenizers.Tokenizer.from_str(text)
        except Exception as exc:
            # Tokenizers raises a bare Exception on a bad layout.
            raise TokenizerFileError(f"{source}: tokenizers cannot read it: {exc}") from exc
        codec = _TokenizersCodec(library, replacement)
        return cls(codec, _single_characters(pieces, replacement))

    # ------------------------------------------------------------------------------- facts
    @property
    def vocab_size(self) -> int:
        """Number of ids (the config's ``n_bins``)."""
        return self._codec.vocab_size

    @property
    def representable_characters(self) -> frozenset[str]:
        """Characters the vocabulary has as pieces of their own (space included)."""
        return self._representable

    def is_representable(self, char: str) -> bool:
        """Whether ``char`` is a piece, or the tokenizer's own normalizer makes it pieces."""
        if char in self._representable:
            return True
        return not char.isspace() and char != DROP_MARK and self._mapped(char) == char

    # ---------------------------------------------------------------------------- encoding
    def encode(self, text: str) -> np.ndarray:
        """Token ids of ``text`` as given (no filtering but lone surrogates): int64 [n]."""
        return np.asarray(self.encode_list(text), dtype=np.int64)

    def encode_list(self, text: str) -> list[int]:
        """Token ids of ``text`` as a list (the cheap form for counting)."""
        return self._codec.encode(without_lone_surrogates(text))

    def count(self, text: str) -> int:
        """Number of tokens of ``text``."""
        return len(self.encode_list(text))

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ``ids`` (for inspection and tests)."""
        return self._codec.decode([int(i) for i in ids])

    # --------------------------------------------------------------------------- filtering
    def filter_unrepresentable(self, text: str, *, keep_trailing_mark: bool = False) -> str:
        """``text`` with every character made representable, or dropped.

        NFC first. Whitespace stays whitespace: line breaks become a newline (the chunker
        reads them; the prepare step turns them into spaces), other spaces a space. A
        character without a piece of its own is replaced by the first of these that is
        representable: a plain typographic equivalent (curly quotes → straight, dashes → '-',
        '…' → '...'), its compatibility form (NFKC: ligatures, full-width letters,
        superscripts), its decimal digit, or its letters without accents. Otherwise it is
        dropped: format/control characters and lone combining marks vanish; symbols, emoji,
        lone surrogates and letters of unsupported scripts vanish leaving one space between
        the words around them (none before closing punctuation or at either end). A
        surrogate pair is first joined into its character. ``keep_trailing_mark`` leaves a
        ``DROP_MARK`` for a symbol dropped at the very end, for text that more text will
        follow.
        """
        if not text.isascii() and _SURROGATE.search(text):
            text = _joined_surrogate_pairs(text)
        if not unicodedata.is_normalized("NFC", text):
            text = unicodedata.normalize("NFC", text)
        if self._representable.issuperset(text):
            return text
        out = [self._mapped(char) for char in text]
        at_end = DROP_MARK if keep_trailing_mark else ""
        return resolve_drop_marks("".join(out), at_end=at_end)

    def _mapped(self, char: str) -> str:
        mapped = self._char_cache.get(char)
        if mapped is None:
            mapped = self._char_cache[char] = self._map_char(char)
        return mapped

    def _map_char(self, char: str) -> str:
        ok = self._representable
        if char in ok or char == DROP_MARK:
            return char
        if _SURROGATE.match(char):
            # Most likely half an emoji: dropped like the emoji.
            return DROP_MARK
        if not char.isspace():
            native = self._codec.normalize(char).replace("▁", " ").strip()
            if native and ok.issuperset(native):
                # A lowercasing or NFKC tokenizer, for example, handles it itself.
                return char
        if char in _LINE_BREAKS:
            return "\n"
        if char.isspace():
            return " "
        for candidate in _candidates(char):
            if candidate and ok.issuperset(candidate):
                return candidate
        category = unicodedata.category(char)
        # Control, format, private use and unassigned characters; combining marks.
        if category[0] in "CM":
            return ""
        return DROP_MARK


def without_lone_surrogates(text: str) -> str:
    """``text`` with surrogate pairs joined and lone surrogates left out (both libraries
    refuse them); the text itself when it has none (the usual case, checked cheaply)."""
    if text.isascii() or not _SURROGATE.search(text):
        return text
    return _SURROGATE.sub("", _joined_surrogate_pairs(text))


def _joined_surrogate_pairs(text: str) -> str:
    """Each high + low surrogate pair as the one character it encodes; lone ones stay."""
    return re.sub(
        "[\ud800-\udbff][\udc00-\udfff]",
        lambda m: m.group().encode("utf-16-le", "surrogatepass").decode("utf-16-le"),
        text,
    )


DROP_MARK = "\x00"
"""Stands for a dropped symbol until its neighbours are known (see ``resolve_drop_marks``)."""

_LINE_BREAKS = set("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029")
_DROP_RUN = re.compile(r"[ \t]*(?:\x00[ \t]*)+")
_CLOSING = set(".,!?;:…)]}")


def resolve_drop_marks(text: str, *, at_end: str = "") -> str:
    """Replace each run of drop marks (with the blanks around it) by a space or nothing.

    Nothing at the start, before closing punctuation or a line break; ``at_end`` at the end
    of ``text`` (pass ``DROP_MARK`` to keep the decision for when more text arrives); one
    space elsewhere, so the words on both sides stay apart.
    """
    if DROP_MARK not in text:
        return text

    def replace(match: re.Match[str]) -> str:
        start, end = match.span()
        if end == len(text):
            return at_end
        if start == 0 or text[end] in _CLOSING or text[end] == "\n" or text[start - 1] == "\n":
            return ""
        return " "

    return _DROP_RUN.sub(replace, text)


_TYPOGRAPHIC = {
    **dict.fromkeys("‘’‚‛′ʼʹ`´", "'"),
    **dict.fromkeys("“”„‟″«»‹›", '"'),
    **dict.fromkeys("‐‑‒–—―−⁃", "-"),
    "…": "...",
    "⁄": "/",
}


def _candidates(char: str) -> list[str]:
    """Representable stand-ins to try for ``char``, best first."""
    out = []
    if char in _TYPOGRAPHIC:
        out.append(_TYPOGRAPHIC[char])
    compat = unicodedata.normalize("NFKC", char)
    if compat != char:
        out.append(compat)
        out.append("".join(_TYPOGRAPHIC.get(c, c) for c in compat))
    digit = unicodedata.decimal(char, None)
    if digit is not None:
        out.append(str(digit))
    bare = "".join(c for c in unicodedata.normalize("NFKD", char) if not unicodedata.combining(c))
    if bare != char:
        out.append(bare)
    return out


def _single_characters(pieces: Iterable[str], replacement: str) -> frozenset[str]:
    """The pieces that are one character once ``replacement`` reads as a space."""
    chars = set()
    for piece in pieces:
        surface = piece.replace(replacement, " ")
        if len(surface) == 1:
            chars.add(surface)
    return frozenset(chars)


# ------------------------------------------------------------------------------ the libraries
class _SentencePieceCodec:
    """A ``tokenizer.model``, run by sentencepiece as upstream runs it."""

    def __init__(self, processor: spm.SentencePieceProcessor) -> None:
        self._sp = processor
        self.vocab_size = processor.get_piece_size()

    def encode(self, text: str) -> list[int]:
        return self._sp.encode(text)

    def normalize(self, text: str) -> str:
        return self._sp.normalize(text)

    def decode(self, ids: list[int]) -> str:
        return self._sp.decode(ids)


class _TokenizersCodec:
    """A ``tokenizer.json``, run by Hugging Face ``tokenizers`` as upstream runs it."""

    def __init__(self, library: tokenizers.Tokenizer, replacement: str) -> None:
        self._library = library
        self._encode = library.encode
        self.vocab_size = library.get_vocab_size(with_added_tokens=True)
        self._normalizer = library.normalizer
        self._added = set(library.get_added_tokens_decoder())
        # Pieces back to text the SentencePiece way, whatever decoder the file names.
        self._decoder = decoders.Sequence(
            [
                decoders.Replace(replacement, " "),
                decoders.ByteFallback(),
                decoders.Fuse(),
                decoders.Strip(" ", 1, 0),
            ]
        )

    def encode(self, text: str) -> list[int]:
        return self._encode(text).ids

    def normalize(self, text: str) -> str:
        return text if self._normalizer is None else self._normalizer.normalize_str(text)

    def decode(self, ids: list[int]) -> str:
        pieces = [self._library.id_to_token(i) for i in ids if i not in self._added]
        return self._decoder.decode([p for p in pieces if p is not None])


# What a SentencePiece conversion holds: the representability filter reads its vocabulary
# and Metaspace replacement, so other layouts (byte-level pre-tokenizers, BERT normalizers,
# truncation that would cut text silently) are refused rather than half understood.
_NORMALIZERS = {
    "Sequence",
    "Replace",
    "Prepend",
    "Strip",
    "NFC",
    "NFD",
    "NFKC",
    "NFKD",
    "Lowercase",
    "Precompiled",
}


def _check_conversion(document: Any, source: str) -> tuple[list[str], str]:
    """The representable pieces and the Metaspace replacement of a converted ``tokenizer.json``.

    Raises ``TokenizerFileError`` for a layout that is not a SentencePiece Unigram conversion.
    """
    model = document.get("model") if isinstance(document, dict) else None
    if not isinstance(model, dict) or model.get("type") != "Unigram":
        raise TokenizerFileError(
            f"{source}: model type {(model or {}).get('type')!r} is not supported (only "
            "Unigram, the kind converted from SentencePiece)"
        )
    for key in ("truncation", "padding"):
        if document.get(key):
            raise TokenizerFileError(f"{source}: '{key}' is set; it is not supported")
    vocab = [str(piece) for piece, _ in model["vocab"]]
    unk_id = model.get("unk_id")
    if not isinstance(unk_id, int) or not 0 <= unk_id < len(vocab):
        raise TokenizerFileError(f"{source}: the Unigram model has no valid unk_id")
    byte_fallback = bool(model.get("byte_fallback", False))
    if byte_fallback:
        byte_pieces = sum(1 for p in vocab if _BYTE_PIECE.fullmatch(p))
        if byte_pieces != 256:
            raise TokenizerFileError(
                f"{source}: byte_fallback is set but the vocab has {byte_pieces} of the "
                "256 byte pieces"
            )
    _check_normalizer(document.get("normalizer"), source)
    replacement = _metaspace_replacement(document.get("pre_tokenizer"), source)
    post = document.get("post_processor")
    if post is not None and post.get("type") != "TemplateProcessing":
        raise TokenizerFileError(
            f"{source}: post-processor {post.get('type')!r} is not supported "
            "(only TemplateProcessing)"
        )
    added = {int(t["id"]) for t in document.get("added_tokens") or []}
    pieces = [
        piece
        for i, piece in enumerate(vocab)
        if i not in added and not (byte_fallback and _BYTE_PIECE.fullmatch(piece))
    ]
    return pieces, replacement


def _check_normalizer(spec: dict[str, Any] | None, source: str) -> None:
    if spec is None:
        return
    kind = spec.get("type")
    if kind not in _NORMALIZERS:
        raise TokenizerFileError(f"{source}: normalizer {kind!r} is not supported")
    for step in spec.get("normalizers", []) if kind == "Sequence" else []:
        _check_normalizer(step, source)


def _metaspace_replacement(spec: dict[str, Any] | None, source: str) -> str:
    """The replacement character of a Metaspace pre-tokenizer ('▁' when there is none)."""
    if spec is None:
        return "▁"
    if spec.get("type") == "Sequence" and len(spec.get("pretokenizers", [])) == 1:
        spec = spec["pretokenizers"][0]
    if spec.get("type") != "Metaspace":
        raise TokenizerFileError(
            f"{source}: pre-tokenizer {spec.get('type')!r} is not supported (only Metaspace)"
        )
    return spec.get("replacement") or spec.get("str_rep") or "▁"
