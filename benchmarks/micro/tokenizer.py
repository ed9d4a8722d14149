"""The engine's tokenizer on a few hundred sentences, beside the bare libraries under it.

Both pack kinds (``tokenizer.model`` read by sentencepiece, ``tokenizer.json`` read by HF
``tokenizers``), each with a devpack vocabulary of 4000 pieces. Per sentence, measured side by
side in one run: ``Tokenizer.count`` (what chunking calls), ``filter_unrepresentable`` (what
preparation calls) and the library's own ``encode`` on the same text; the ratio is the cost of
the engine's layer over the library.

    python -m benchmarks.micro.tokenizer [--sentences 400] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import sentencepiece as spm
import tokenizers

from pipecat_pocket_tts.devpack import sentencepiece_to_json, train_sentencepiece
from pipecat_pocket_tts.devpack.tokenizer import corpus
from pipecat_pocket_tts.engine.text.tokenizer import Tokenizer


def _per_sentence_ms(work: Callable[[str], object], sentences: list[str], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for sentence in sentences:
            work(sentence)
        best = min(best, time.perf_counter() - start)
    return best / len(sentences) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    sentences = corpus(args.sentences, seed=7)
    with tempfile.TemporaryDirectory() as tmp:
        model = train_sentencepiece(tmp, 4000)
        json_path = Path(tmp) / "tokenizer.json"
        json_path.write_text(json.dumps(sentencepiece_to_json(model)), encoding="utf-8")
        sides = {
            "tokenizer.model": (
                Tokenizer.from_file(model),
                spm.SentencePieceProcessor(model_file=str(model)).encode,
            ),
            "tokenizer.json": (
                Tokenizer.from_file(json_path),
                tokenizers.Tokenizer.from_file(str(json_path)).encode,
            ),
        }
        print(f"{len(sentences)} sentences, best of {args.repeats}; ms per sentence")
        print(f"{'file':<16}{'count':>9}{'filter':>9}{'library':>9}{'count/library':>15}")
        for name, (ours, library) in sides.items():
            count = _per_sentence_ms(ours.count, sentences, args.repeats)
            filtered = _per_sentence_ms(ours.filter_unrepresentable, sentences, args.repeats)
            bare = _per_sentence_ms(library, sentences, args.repeats)
            print(f"{name:<16}{count:>9.4f}{filtered:>9.4f}{bare:>9.4f}{count / bare:>15.2f}")


if __name__ == "__main__":
    main()
