"""Text → token ids, from a SentencePiece ``tokenizer.model`` or an HF ``tokenizer.json``.

Both file kinds hold the same unigram vocabulary (the English packs ship ``tokenizer.json``
converted from the SentencePiece model; the small models ship ``tokenizer.model``). A
``.model`` file is run by sentencepiece exactly as upstream runs it. A ``tokenizer.json`` is
read without the ``tokenizers`` package: its Unigram search (``_Unigram``) and the steps
around it (added/special tokens, normalizer, Metaspace pre-tokenizer, template
post-processor) are replayed in Python, so the ids equal what ``tokenizers`` gives; the
pieces also become a SentencePiece model in memory, used for decoding.

Representable characters: a character is representable when the vocabulary has it as a
piece of its own. Byte pieces do not count: the models were trained on text, so the byte
fallback of an emoji or a control character is noise to them, and a single unknown
character must never garble the whole string. ``filter_unrepresentable`` maps what it can to
representable text (typographic variants, compatibility forms, accents) and drops the rest.
"""

from __future__ import annotations

import base64
import json
import re
import struct
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import sentencepiece as spm

from ..errors import TokenizerFileError

_BYTE_PIECE = re.compile(r"<0x[0-9A-F]{2}>")

# SentencePiece piece types (sentencepiece_model.proto).
_NORMAL, _UNKNOWN, _CONTROL, _BYTE = 1, 2, 3, 6


class Tokenizer:
    """A unigram tokenizer: ``encode(text) -> int64 ids``, plus what characters it can represent."""

    def __init__(
        self,
        processor: spm.SentencePieceProcessor,
        representable: frozenset[str],
        hf_pipeline: _HFPipeline | None = None,
    ) -> None:
        self._sp = processor
        self._hf = hf_pipeline
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
        except Exception as exc:  # sentencepiece raises RuntimeError/OSError variants
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
        return cls(processor, _single_characters(pieces, "▁"))

    @classmethod
    def from_json(cls, text: str, *, source: str = "<json>") -> Tokenizer:
        """Load an HF ``tokenizer.json`` whose model is Unigram."""
        try:
            document = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TokenizerFileError(f"{source} is not valid JSON: {exc}") from exc
        model = document.get("model") if isinstance(document, dict) else None
        if not isinstance(model, dict) or model.get("type") != "Unigram":
            raise TokenizerFileError(
                f"{source}: model type {(model or {}).get('type')!r} is not supported (only "
                "Unigram, the kind converted from SentencePiece)"
            )
        try:
            pipeline = _HFPipeline.from_document(document, source)
        except (KeyError, TypeError, AttributeError, IndexError, re.error) as exc:
            raise TokenizerFileError(
                f"{source}: unexpected tokenizer.json layout: {exc!r}"
            ) from exc
        processor = spm.SentencePieceProcessor()
        try:
            processor.LoadFromSerializedProto(pipeline.model_proto)
        except Exception as exc:
            raise TokenizerFileError(
                f"{source}: its Unigram vocab cannot be loaded: {exc}"
            ) from exc
        return cls(processor, pipeline.representable, pipeline)

    # ------------------------------------------------------------------------------- facts
    @property
    def vocab_size(self) -> int:
        """Number of ids (the config's ``n_bins``)."""
        return self._hf.vocab_size if self._hf else self._sp.get_piece_size()

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
        """Token ids of ``text`` as given (no filtering): int64 [n]."""
        return np.asarray(self.encode_list(text), dtype=np.int64)

    def _normalize(self, text: str) -> str:
        """``text`` as the tokenizer's own normalizer sees it (spaces as spaces)."""
        native = self._hf.normalize(text) if self._hf is not None else self._sp.normalize(text)
        return native.replace("▁", " ")

    def encode_list(self, text: str) -> list[int]:
        """Token ids of ``text`` as a list (the cheap form for counting)."""
        if self._hf is not None:
            return self._hf.encode(text, self._sp)
        return self._sp.encode(text)

    def count(self, text: str) -> int:
        """Number of tokens of ``text``."""
        return len(self.encode_list(text))

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ``ids`` (for inspection and tests)."""
        ids = [int(i) for i in ids]
        if self._hf is not None:
            return self._hf.decode(ids, self._sp)
        return self._sp.decode(ids)

    # --------------------------------------------------------------------------- filtering
    def filter_unrepresentable(self, text: str, *, keep_trailing_mark: bool = False) -> str:
        """``text`` with every character made representable, or dropped.

        NFC first. Whitespace stays whitespace: line breaks become a newline (the chunker
        reads them; the prepare step turns them into spaces), other spaces a space. A
        character without a piece of its own is replaced by the first of these that is
        representable: a plain typographic equivalent (curly quotes → straight, dashes → '-',
        '…' → '...'), its compatibility form (NFKC: ligatures, full-width letters,
        superscripts), its decimal digit, or its letters without accents. Otherwise it is
        dropped: format/control characters and lone combining marks vanish; symbols, emoji
        and letters of unsupported scripts vanish leaving one space between the words around
        them (none before closing punctuation or at either end). ``keep_trailing_mark``
        leaves a ``DROP_MARK`` for a symbol dropped at the very end, for text that more text
        will follow.
        """
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
        if not char.isspace():
            native = self._normalize(char).strip()
            if native and ok.issuperset(native):
                return char  # e.g. a lowercasing or NFKC tokenizer handles it itself
        if char in _LINE_BREAKS:
            return "\n"
        if char.isspace():
            return " "
        for candidate in _candidates(char):
            if candidate and ok.issuperset(candidate):
                return candidate
        category = unicodedata.category(char)
        if category[0] in "CM":  # control, format, private use, unassigned; combining marks
            return ""
        return DROP_MARK


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
    chars = set()
    for piece in pieces:
        surface = piece.replace(replacement, " ")
        if len(surface) == 1:
            chars.add(surface)
    return frozenset(chars)


# ------------------------------------------------------------------- tokenizer.json support
@dataclass(frozen=True)
class _AddedToken:
    id: int
    content: str
    single_word: bool
    lstrip: bool
    rstrip: bool


class _HFPipeline:
    """The steps ``tokenizers`` runs around a Unigram model, replayed in Python."""

    def __init__(
        self,
        *,
        model_proto: bytes,
        unigram: _Unigram,
        vocab: list[str],
        added: list[_AddedToken],
        normalize: Callable[[str], str],
        replacement: str | None,
        prepend_scheme: str,
        split: bool,
        template: tuple[list[int], list[int]],
        byte_fallback: bool,
    ) -> None:
        self.model_proto = model_proto
        self.unigram = unigram
        self.vocab = vocab
        self.vocab_size = max(len(vocab), 1 + max((t.id for t in added), default=-1))
        self.added = added
        self.normalize = normalize
        self.replacement = replacement
        self.prepend_scheme = prepend_scheme
        self.split = split
        self.prefix_ids, self.suffix_ids = template
        self.byte_fallback = byte_fallback
        self._added_re = _added_tokens_regex(added)
        # Pieces never hold the replacement character after their first position, so one
        # Viterbi pass over the whole string equals one pass per Metaspace word.
        rep = replacement or "▁"
        self._whole_string_ok = not any(rep in piece[1:] for piece in vocab)
        added_ids = {t.id for t in added}
        normal = [p for i, p in enumerate(vocab) if i not in added_ids]
        normal = [p for p in normal if not (byte_fallback and _BYTE_PIECE.fullmatch(p))]
        self.representable = _single_characters(normal, rep)

    @classmethod
    def from_document(cls, document: dict[str, Any], source: str) -> _HFPipeline:
        model = document["model"]
        for key in ("truncation", "padding"):
            if document.get(key):
                raise TokenizerFileError(f"{source}: '{key}' is set; it is not supported")
        try:
            vocab = [str(piece) for piece, _ in model["vocab"]]
            scores = [float(score) for _, score in model["vocab"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise TokenizerFileError(f"{source}: malformed Unigram vocab: {exc}") from exc
        unk_id = model.get("unk_id")
        byte_fallback = bool(model.get("byte_fallback", False))
        added = [
            _AddedToken(
                int(t["id"]),
                str(t["content"]),
                bool(t.get("single_word", False)),
                bool(t.get("lstrip", False)),
                bool(t.get("rstrip", False)),
            )
            for t in document.get("added_tokens") or []
        ]
        replacement, prepend_scheme, split = _read_pre_tokenizer(
            document.get("pre_tokenizer"), source
        )
        normalize = _read_normalizer(document.get("normalizer"), source)
        template = _read_post_processor(document.get("post_processor"), source)
        if byte_fallback:
            byte_pieces = sum(1 for p in vocab if _BYTE_PIECE.fullmatch(p))
            if byte_pieces != 256:
                raise TokenizerFileError(
                    f"{source}: byte_fallback is set but the vocab has {byte_pieces} of the "
                    "256 byte pieces"
                )
        proto = _sentencepiece_proto(vocab, scores, unk_id, {t.id for t in added}, byte_fallback)
        return cls(
            model_proto=proto,
            unigram=_Unigram(vocab, scores, unk_id, byte_fallback),
            vocab=vocab,
            added=added,
            normalize=normalize,
            replacement=replacement,
            prepend_scheme=prepend_scheme,
            split=split,
            template=template,
            byte_fallback=byte_fallback,
        )

    # --------------------------------------------------------------------------- encode
    def encode(self, text: str, sp: spm.SentencePieceProcessor) -> list[int]:
        ids = list(self.prefix_ids)
        if self._added_re is None:
            self._encode_segment(text, True, sp, ids)
        else:
            position = 0
            for match in self._added_re.finditer(text):
                if match.start() > position:
                    self._encode_segment(text[position : match.start()], position == 0, sp, ids)
                ids.append(int(match.lastgroup[1:]))
                position = match.end()
            if position < len(text):
                self._encode_segment(text[position:], position == 0, sp, ids)
        ids.extend(self.suffix_ids)
        return ids

    def _encode_segment(
        self, text: str, first: bool, sp: spm.SentencePieceProcessor, out: list[int]
    ) -> None:
        text = self.normalize(text)
        if not text:
            return
        rep = self.replacement
        if rep is not None:
            text = text.replace(" ", rep)
            if not text.startswith(rep) and (
                self.prepend_scheme == "always" or (self.prepend_scheme == "first" and first)
            ):
                text = rep + text
        if rep is None or not self.split or self._whole_string_ok:
            self._viterbi(text, sp, out)
        else:
            for word in _split_before(text, rep):
                self._viterbi(word, sp, out)

    def _viterbi(self, text: str, sp: spm.SentencePieceProcessor, out: list[int]) -> None:
        out.extend(self.unigram.encode(text))

    def decode(self, ids: list[int], sp: spm.SentencePieceProcessor) -> str:
        added = {t.id for t in self.added}
        text = sp.decode([i for i in ids if i not in added])
        if self.replacement:
            text = text.replace(self.replacement, " ")
            if self.prepend_scheme != "never" and text.startswith(" "):
                text = text[1:]
        return text


class _Unigram:
    """The Viterbi search of ``tokenizers``' Unigram model, as it computes it.

    sentencepiece runs the same algorithm but sums scores in float32; ``tokenizers`` sums in
    float64 and keeps the first of equal-scoring paths, and where two segmentations score the
    same up to rounding (")" + "))" against "))" + ")") the two libraries can pick differently.
    Upstream reads ``tokenizer.json`` with ``tokenizers``, so this search follows it: float64
    sums, start positions in increasing order, a strictly better score to replace a path, an
    unknown character scored ``min_score - 10``, consecutive unknowns fused, and (with byte
    fallback) the fused text spelled as byte pieces.
    """

    UNKNOWN_PENALTY = 10.0

    def __init__(
        self, vocab: list[str], scores: list[float], unk_id: int | None, byte_fallback: bool
    ) -> None:
        self.pieces: dict[str, tuple[int, float]] = {}
        for i, (piece, score) in enumerate(zip(vocab, scores, strict=True)):
            self.pieces.setdefault(piece, (i, score))
        self.max_length = max((len(p) for p in self.pieces), default=1)
        self.unk_id = unk_id
        self.unk_score = min(scores, default=0.0) - self.UNKNOWN_PENALTY
        self.byte_fallback = byte_fallback

    def encode(self, text: str) -> list[int]:
        """Ids of the best segmentation of ``text`` (one pre-tokenized word or string)."""
        n = len(text)
        if not n:
            return []
        # best[end] = (score of the best path to end, start of its last piece, piece id)
        best: list[tuple[float, int, int] | None] = [None] * (n + 1)
        best[0] = (0.0, 0, -1)
        pieces = self.pieces
        for start in range(n):
            reached = best[start]
            if reached is None:
                continue
            so_far = reached[0]
            single = False
            for end in range(start + 1, min(n, start + self.max_length) + 1):
                found = pieces.get(text[start:end])
                if found is None:
                    continue
                candidate = found[1] + so_far
                target = best[end]
                if target is None or candidate > target[0]:
                    best[end] = (candidate, start, found[0])
                if end == start + 1:
                    single = True
            if not single:
                candidate = self.unk_score + so_far
                target = best[start + 1]
                if target is None or candidate > target[0]:
                    best[start + 1] = (candidate, start, -2)  # -2: the unknown token
        spans: list[tuple[int, int, int]] = []  # (start, end, id) from the end backwards
        end = n
        while end > 0:
            _, start, piece_id = best[end]  # type: ignore[misc]
            if piece_id == -2 and spans and spans[-1][2] == -2:
                spans[-1] = (start, spans[-1][1], -2)  # fuse consecutive unknowns
            else:
                spans.append((start, end, piece_id))
            end = start
        ids: list[int] = []
        for start, end, piece_id in reversed(spans):
            if piece_id != -2:
                ids.append(piece_id)
            else:
                ids.extend(self._unknown(text[start:end]))
        return ids

    def _unknown(self, fused: str) -> list[int]:
        """Ids for a run of characters no piece covers: byte pieces, or the unknown token."""
        known = self.pieces.get(fused)
        if known is not None:
            return [known[0]]
        if self.byte_fallback:
            byte_ids = [self.pieces.get(f"<0x{b:02X}>") for b in fused.encode("utf-8")]
            if all(found is not None for found in byte_ids):
                return [found[0] for found in byte_ids]  # type: ignore[index]
        if self.unk_id is None:
            raise TokenizerFileError("the text holds an unknown character and there is no unk_id")
        return [self.unk_id]


def _split_before(text: str, delimiter: str) -> list[str]:
    """Split so each delimiter starts a new part (tokenizers' 'merged with next')."""
    parts = []
    start = 0
    for i, char in enumerate(text):
        if char == delimiter and i > start:
            parts.append(text[start:i])
            start = i
    if start < len(text):
        parts.append(text[start:])
    return parts


def _added_tokens_regex(added: list[_AddedToken]) -> re.Pattern[str] | None:
    """One alternation over the added tokens, longest first; group ``t<id>`` names the token."""
    if not added:
        return None
    alternatives = []
    for token in sorted(added, key=lambda t: -len(t.content)):
        body = (
            ("\\s*" if token.lstrip else "")
            + re.escape(token.content)
            + ("\\s*" if token.rstrip else "")
        )
        if token.single_word:
            body = f"(?<!\\w){body}(?!\\w)"
        alternatives.append(f"(?P<t{token.id}>{body})")
    return re.compile("|".join(alternatives))


def _read_pre_tokenizer(spec: dict[str, Any] | None, source: str) -> tuple[str | None, str, bool]:
    """(replacement, prepend_scheme, split) of a Metaspace pre-tokenizer; None when absent."""
    if spec is None:
        return None, "never", False
    if spec.get("type") == "Sequence" and len(spec.get("pretokenizers", [])) == 1:
        spec = spec["pretokenizers"][0]
    if spec.get("type") != "Metaspace":
        raise TokenizerFileError(
            f"{source}: pre-tokenizer {spec.get('type')!r} is not supported (only Metaspace)"
        )
    replacement = spec.get("replacement") or spec.get("str_rep") or "▁"
    scheme = spec.get("prepend_scheme")
    if scheme is None:
        scheme = "always" if spec.get("add_prefix_space", True) else "never"
    if scheme not in ("always", "first", "never"):
        raise TokenizerFileError(f"{source}: Metaspace prepend_scheme {scheme!r} is unknown")
    return replacement, scheme, bool(spec.get("split", True))


def _read_normalizer(spec: dict[str, Any] | None, source: str) -> Callable[[str], str]:
    """The normalizer as a Python function (the kinds SentencePiece conversions use)."""
    if spec is None:
        return _identity
    kind = spec.get("type")
    if kind == "Sequence":
        steps = [_read_normalizer(s, source) for s in spec.get("normalizers", [])]

        def sequence(text: str) -> str:
            for step in steps:
                text = step(text)
            return text

        return sequence
    if kind == "Replace":
        pattern, content = spec["pattern"], spec["content"]
        if "String" in pattern:
            literal = pattern["String"]
            return lambda text: text.replace(literal, content)
        regex = re.compile(pattern["Regex"])
        return lambda text: regex.sub(content.replace("\\", "\\\\"), text)
    if kind == "Prepend":
        prefix = spec["prepend"]
        return lambda text: prefix + text if text else text
    if kind == "Strip":
        left = spec.get("strip_left", spec.get("left", False))
        right = spec.get("strip_right", spec.get("right", True))

        def strip(text: str) -> str:
            if left:
                text = text.lstrip()
            return text.rstrip() if right else text

        return strip
    if kind in ("NFC", "NFD", "NFKC", "NFKD"):
        return lambda text: unicodedata.normalize(kind, text)
    if kind == "Lowercase":
        return str.lower
    if kind == "Precompiled":
        charsmap = base64.b64decode(spec.get("precompiled_charsmap") or "")
        if not charsmap:
            return _identity
        spec_bytes = (
            _field_bytes(1, b"precompiled")
            + _field_bytes(2, charsmap)
            + _field_varint(3, 0)
            + _field_varint(4, 0)
            + _field_varint(5, 0)
        )
        normalizer = spm.SentencePieceNormalizer(normalizer_spec=spec_bytes)
        return normalizer.normalize
    raise TokenizerFileError(f"{source}: normalizer {kind!r} is not supported")


def _identity(text: str) -> str:
    return text


def _read_post_processor(spec: dict[str, Any] | None, source: str) -> tuple[list[int], list[int]]:
    """Ids a TemplateProcessing post-processor puts before and after a single sequence."""
    if spec is None:
        return [], []
    if spec.get("type") != "TemplateProcessing":
        raise TokenizerFileError(
            f"{source}: post-processor {spec.get('type')!r} is not supported "
            "(only TemplateProcessing)"
        )
    specials = spec.get("special_tokens", {})
    before: list[int] = []
    after: list[int] = []
    target = before
    for item in spec.get("single", []):
        if "Sequence" in item:
            target = after
        else:
            target.extend(int(i) for i in specials[item["SpecialToken"]["id"]]["ids"])
    return before, after


# A serialized SentencePiece ModelProto, written field by field (sentencepiece_model.proto):
# ModelProto{1: pieces{1: piece, 2: score, 3: type}, 2: trainer_spec, 3: normalizer_spec}.
def _sentencepiece_proto(
    vocab: list[str],
    scores: list[float],
    unk_id: int | None,
    special_ids: set[int],
    byte_fallback: bool,
) -> bytes:
    if unk_id is None or not 0 <= unk_id < len(vocab):
        raise TokenizerFileError("the Unigram model has no valid unk_id; it cannot be loaded")
    out = bytearray()
    for i, (piece, score) in enumerate(zip(vocab, scores, strict=True)):
        if i == unk_id:
            kind = _UNKNOWN
        elif i in special_ids:
            kind = _CONTROL
        elif byte_fallback and _BYTE_PIECE.fullmatch(piece):
            kind = _BYTE
        else:
            kind = _NORMAL
        body = _field_bytes(1, piece.encode("utf-8")) + _field_float(2, score)
        out += _field_bytes(1, body + _field_varint(3, kind))
    trainer = (
        _field_varint(3, 1)  # model_type UNIGRAM
        + _field_varint(4, len(vocab))
        + _field_varint(35, int(byte_fallback))
        + _field_varint(40, unk_id)
        + _field_varint(41, -1)  # no BOS/EOS/PAD ids: the file's specials are plain controls
        + _field_varint(42, -1)
        + _field_varint(43, -1)
    )
    normalizer = (
        _field_bytes(1, b"identity")
        + _field_varint(3, 0)  # add_dummy_prefix: done by the Metaspace step instead
        + _field_varint(4, 0)  # remove_extra_whitespaces
        + _field_varint(5, 0)  # escape_whitespaces: already done
    )
    out += _field_bytes(2, trainer) + _field_bytes(3, normalizer)
    return bytes(out)


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _field_varint(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _field_float(number: int, value: float) -> bytes:
    return _varint(number << 3 | 5) + struct.pack("<f", value)


def _field_bytes(number: int, value: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(value)) + value
