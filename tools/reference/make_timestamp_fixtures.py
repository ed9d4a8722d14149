"""Word-timestamp fixtures from pocket-tts-timestamped 1.4.0 on the reference fixtures' weights.

Run in a venv with torch 2.13.0 CPU and the peer (``pip install -e '.[timestamps-reference]'``,
or ``pip install torch==2.13.0`` then ``pip install pocket-tts-timestamped==1.4.0``), offline:

    /tmp/tsvenv/bin/python tools/reference/make_timestamp_fixtures.py [family ...]

For each family of tests/fixtures/reference/ (its config.json, model.safetensors and
tokenizer.model, i.e. the same random weights as every parity test) the peer is built with the
two heads chosen below (the tiny models have too few layers for any shipped head table), its
voice state is prefilled from the family's ``voice_raw``, and ``generate_audio_with_timestamps``
runs on each text of ``TEXTS`` at temperature 0 with EOS disabled (threshold 1e9: every chunk
runs its whole frame budget, so the fixture does not hang on where random weights put EOS).

Written to tests/fixtures/reference/<family>/timestamps.json: per text, per chunk, the prepared
text, token ids, the peer's units (begin, end, is_word, synthetic), its per-frame unit scores
and voiced flags, and its words with start/end frames (times / 80 ms). Byte-identical on re-runs.

Random weights give degenerate attention: on most heads the pointer stays on a chunk's first
word for the whole chunk. The heads are therefore chosen deterministically as the
``HEADS_PER_FAMILY`` single heads whose pointer opens the most words on the long text (ties:
lowest layer, then head). ``pointer_cases`` adds the peer's pointer (its ``WordAlignment``) on
seeded random unit scores and quiet frames over the real chunks' units, so every branch of the
pointer is compared, not only the few moves the random model makes.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

import numpy as np
import safetensors.torch
import torch
import yaml

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "reference"
FRAME_SECONDS = 0.08

FAMILIES = ("tiny_lsd", "tiny_small", "tiny_inner512")
HEADS_PER_FAMILY = 2
TEXTS = [
    "It costs 12.50 for 3 apples, not 4.",
    "The quick brown fox jumps over the lazy dog. Then it runs far away into the woods. "
    "Nobody can find it there again.",
]


def build_peer(family: str, work: Path, heads: list[list[int]]):
    """The peer's TTSModel with the family's config, heads and weights."""
    from pocket_tts_timestamped import TTSModel

    folder = FIXTURES / family
    config = json.loads((folder / "config.json").read_text())
    config = copy.deepcopy(config)
    config["flow_lm"]["lookup_table"]["tokenizer"] = "sentencepiece"
    config["flow_lm"]["lookup_table"]["tokenizer_path"] = str(folder / "tokenizer.model")
    config["timestamp_heads"] = [{"layer": layer, "head": head} for layer, head in heads]
    path = work / f"{family}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    torch.manual_seed(0)
    model = TTSModel.load_model(config=path)
    state = safetensors.torch.load_file(str(folder / "model.safetensors"))
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected or [k for k in missing if "freqs" not in k]:
        raise RuntimeError(f"{family}: weights do not fit: {missing} {unexpected}")
    model.eval()
    model.temp = 0.0
    model.eos_threshold = 1e9
    return model


class _Recorder:
    """Wraps the peer's WordAlignment to record the unit scores and voicing of every frame."""

    def __init__(self) -> None:
        self.chunks: list[dict] = []

    def install(self):
        from pocket_tts_timestamped.models import tts_model
        from pocket_tts_timestamped.timestamps import alignment

        recorder = self
        original = alignment.WordAlignment

        class Recording(original):  # type: ignore[misc, valid-type]
            def __init__(self, units):
                super().__init__(units)
                self._record = {
                    "units": [[u.chunk_begin, u.chunk_end, u.is_word, u.synthetic] for u in units],
                    "scores": [],
                    "voiced": [],
                }
                recorder.chunks.append(self._record)

            def process_frame(self, scores, voiced, frame_start):
                self._record["scores"].append(_floats(scores.numpy()))
                self._record["voiced"].append(bool(voiced))
                return super().process_frame(scores, voiced, frame_start)

        tts_model.WordAlignment = Recording


def _voice_state(model, family: str):
    stages = np.load(FIXTURES / family / "stages.npz")
    voice = torch.from_numpy(stages["voice_raw"].astype(np.float32))[None, :]
    return model.get_state_for_audio_prompt(voice)


def choose_heads(family: str, work: Path) -> list[list[int]]:
    """The single heads whose pointer opens the most words on the long text (see above)."""
    config = json.loads((FIXTURES / family / "config.json").read_text())["flow_lm"]["transformer"]
    counts = []
    for layer in range(config["num_layers"]):
        for head in range(config["num_heads"]):
            model = build_peer(family, work, [[layer, head]])
            result = model.generate_audio_with_timestamps(_voice_state(model, family), TEXTS[1])
            counts.append((-len(result.words), layer, head))
    return [[layer, head] for _, layer, head in sorted(counts)[:HEADS_PER_FAMILY]]


def record(family: str, work: Path) -> dict:
    heads = choose_heads(family, work)
    model = build_peer(family, work, heads)
    voice_state = _voice_state(model, family)
    recorder = _Recorder()
    recorder.install()
    out = []
    for text in TEXTS:
        recorder.chunks.clear()
        prepared = model._prepare_text_chunks(text, 50, None)
        result = model.generate_audio_with_timestamps(voice_state, text)
        frames = result.audio.shape[-1] // model.mimi.frame_size
        chunks = []
        for (chunk_text, _), rec in zip(prepared, recorder.chunks, strict=True):
            ids = model.flow_lm.conditioner.prepare(chunk_text)[0].tolist()
            chunks.append({"text": chunk_text, "token_ids": ids, **rec})
        words = [
            [w.word, round(w.start_time / FRAME_SECONDS, 6), round(w.end_time / FRAME_SECONDS, 6)]
            for w in result.words
        ]
        out.append({"text": text, "frames": frames, "chunks": chunks, "words": words})
    return {"heads": heads, "texts": out, "pointer_cases": pointer_cases(out)}


def pointer_cases(texts: list[dict], frames: int = 60) -> list[dict]:
    """The peer's pointer on seeded random scores over each recorded chunk's units."""
    from pocket_tts_timestamped.timestamps.alignment import WordAlignment
    from pocket_tts_timestamped.timestamps.text import _SourceWord, _TextUnit

    cases = []
    chunks = [chunk for text in texts for chunk in text["chunks"]]
    for seed, chunk in enumerate(chunks):
        units = []
        for k, (begin, end, is_word, synthetic) in enumerate(chunk["units"]):
            word = _SourceWord(chunk["text"][begin:end], k, begin, end) if is_word else None
            units.append(_TextUnit(chunk["text"][begin:end], begin, end, word, synthetic))
        rng = np.random.default_rng(seed)
        sharpness = [0.5, 2.0, 6.0][seed % 3]
        logits = rng.standard_normal((frames, len(units))) * sharpness
        scores = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
        scores = scores.astype(np.float32)
        voiced = (rng.random(frames) > 0.25).tolist()
        alignment = WordAlignment(tuple(units))
        events = []
        for index in range(frames):
            for event in alignment.process_frame(
                torch.from_numpy(scores[index]), voiced[index], index * FRAME_SECONDS
            ):
                events.append(_event(event))
        events += [_event(e) for e in alignment.finish(frames * FRAME_SECONDS)]
        cases.append(
            {
                "units": chunk["units"],
                "scores": [_floats(row) for row in scores],
                "voiced": voiced,
                "events": events,
            }
        )
    return cases


def _floats(values: np.ndarray) -> list[float]:
    """float32 values as the shortest decimals that read back to the same float32."""
    return [float(repr(np.float32(v)).removeprefix("np.float32(").rstrip(")")) for v in values]


def _event(event) -> list:
    """[kind, unit-word position, start frame, end frame or None]."""
    end = getattr(event, "end_time", None)
    return [
        "end" if end is not None else "start",
        event.word_index,
        round(event.start_time / FRAME_SECONDS, 6),
        None if end is None else round(end / FRAME_SECONDS, 6),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("families", nargs="*", default=list(FAMILIES))
    args = parser.parse_args(argv)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for family in args.families:
            data = record(family, Path(tmp))
            path = FIXTURES / family / "timestamps.json"
            path.write_text(json.dumps(data, indent=None, separators=(",", ":")) + "\n")
            print(f"{family}: {path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
