"""The engine (sessions on the NumPy backend) beside upstream pocket-tts, same weights, offline.

A full-size random English pack is written by ``pipecat_pocket_tts.devpack``
(``model.safetensors`` in upstream's key layout, ``tokenizer.json``, a voice state); upstream
4.0.1 (torch, fp32) loads the very same weights, tokenizer and voice. Measured in one process,
one side at a time:

1. time to first audio for a 10-word sentence: ours in a warm session (voice prefilled, one
   utterance already spoken) from ``enqueue`` to the first frame; upstream from the
   ``generate_audio_stream`` call to its first chunk (voice state loaded beforehand);
2. streaming real-time factor: audio seconds / wall seconds for the same sentence with EOS
   disabled (both sides then run to the same frame limit);
3. cancellation: how long ``cancel()`` takes mid-utterance, then the backend calls and the
   session threads left after it returned (both must be 0), and the process CPU time in five
   100 ms windows after it (multi-threaded OpenBLAS spins its idle workers for a moment after
   the last call, which shows in the first window only);
4. parity: temperature 0, default EOS: frame counts and max |difference| of the audio (after
   the 5 ms fade-in, whose ramp differs slightly).

    /tmp/refvenv/bin/python benchmarks/bench_engine_vs_upstream.py [--work DIR]
        [--threads N] [--repeats 5]

Needs torch + pocket-tts 4.0.1 (the ``reference`` extra) and this package in the same
environment. ``--threads`` caps BLAS and torch threads on both sides (default: 1, as upstream
sets torch itself on import); 0 leaves every library at its default.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SENTENCE = "The quick brown fox jumps over the lazy sleeping dog."  # 10 words
WARM_UP = "Warm up, please."
VOICE_FRAMES = 125  # a typical shipped voice prompt (10 s)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench_engine_vs_upstream"))
    parser.add_argument("--threads", type=int, default=1, help="BLAS/torch threads (0: default)")
    parser.add_argument("--repeats", type=int, default=5)
    return parser.parse_args(argv)


ARGS = parse_args()
if ARGS.threads > 0:
    for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_name] = str(ARGS.threads)
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

from pipecat_pocket_tts.devpack import build_pack  # noqa: E402
from pipecat_pocket_tts.engine import PocketTTS  # noqa: E402
from pipecat_pocket_tts.engine.backends.base import Backend  # noqa: E402
from pipecat_pocket_tts.engine.config import FRAME_SIZE, SAMPLE_RATE, _registry  # noqa: E402
from pipecat_pocket_tts.engine.synthesis import TextPlanner  # noqa: E402


class CountingBackend(Backend):
    """Delegates every stage to a real backend and counts the calls."""

    def __init__(self, inner: Backend) -> None:
        self.inner, self.name, self.config = inner, inner.name, inner.config
        self.calls = 0

    @property
    def capabilities(self):
        return self.inner.capabilities

    def _count(self) -> None:
        self.calls += 1

    def embed_text(self, ids):
        self._count()
        return self.inner.embed_text(ids)

    def new_flow_state(self):
        return self.inner.new_flow_state()

    def prefill(self, state, embeddings):
        self._count()
        self.inner.prefill(state, embeddings)

    def step(self, state, latent):
        self._count()
        return self.inner.step(state, latent)

    def sample(self, hidden, noise):
        self._count()
        return self.inner.sample(hidden, noise)

    def bos_before_voice(self):
        return self.inner.bos_before_voice()

    def flow_state_from_voice(self, voice):
        return self.inner.flow_state_from_voice(voice)

    def voice_from_flow_state(self, state):
        return self.inner.voice_from_flow_state(state)

    def new_mimi_state(self):
        return self.inner.new_mimi_state()

    def decode(self, state, latent):
        self._count()
        return self.inner.decode(state, latent)

    def encode(self, audio):
        return self.inner.encode(audio)


def median_ms(values: list[float]) -> float:
    return 1e3 * statistics.median(values)


def build_files(work: Path) -> tuple[Path, Path]:
    """The pack (ours) and an upstream YAML config pointing at its files."""
    import yaml

    pack = work / "english"
    if not (pack / "model.safetensors").exists():
        print(f"writing a full-size random English pack to {pack} ...", flush=True)
        build_pack(pack, "english", voices=("alba",), voice_frames=VOICE_FRAMES)
    raw = copy.deepcopy(_registry()["english"])
    raw["weights_path"] = str(pack / "model.safetensors")
    raw.pop("weights_path_without_voice_cloning", None)
    raw["flow_lm"]["lookup_table"]["tokenizer"] = "tokenizers"
    raw["flow_lm"]["lookup_table"]["tokenizer_path"] = str(pack / "tokenizer.json")
    config_path = work / "upstream_english.yaml"
    config_path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return pack, config_path


# -- upstream ------------------------------------------------------------------------------


def upstream_first_chunk(model, voice, text: str) -> tuple[float, int]:
    """Seconds to upstream's first streamed chunk; the rest of the stream is stopped."""
    stop = threading.Event()
    start = time.perf_counter()
    stream = model.generate_audio_stream(voice, text, stop=stop)
    first = next(stream)
    elapsed = time.perf_counter() - start
    stop.set()
    for _ in stream:
        pass
    return elapsed, int(first.shape[-1])


def upstream_stream(model, voice, text: str) -> tuple[float, int]:
    """(wall seconds, samples) of a whole upstream stream."""
    start = time.perf_counter()
    samples = sum(int(chunk.shape[-1]) for chunk in model.generate_audio_stream(voice, text))
    return time.perf_counter() - start, samples


def measure_upstream(config_path: Path, pack: Path) -> dict[str, object]:
    import torch
    from pocket_tts import TTSModel

    if ARGS.threads > 0:
        torch.set_num_threads(ARGS.threads)
    model = TTSModel.load_model(config=config_path)
    voice = model.get_state_for_audio_prompt(pack / "embeddings" / "alba.safetensors")
    upstream_first_chunk(model, voice, WARM_UP)
    first = [upstream_first_chunk(model, voice, SENTENCE)[0] for _ in range(ARGS.repeats)]

    model.eos_threshold = 1e9  # no EOS: run to the frame limit
    runs = [upstream_stream(model, voice, SENTENCE) for _ in range(max(2, ARGS.repeats // 2))]
    model.eos_threshold = -4.0
    rtf = [samples / SAMPLE_RATE / wall for wall, samples in runs]

    model.temp = 0.0
    reference = torch.cat(list(model.generate_audio_stream(voice, SENTENCE))).numpy()
    return {"first": first, "rtf": rtf, "frames": runs[0][1] // FRAME_SIZE, "audio": reference}


# -- ours ----------------------------------------------------------------------------------


def ours_first_frames(tts: PocketTTS) -> list[float]:
    """Seconds from enqueue to the first frame, in one warm session."""
    session = tts.session(seed=0)
    session.enqueue(WARM_UP)
    times = []
    frames = iter(session)
    for frame in frames:
        if frame.is_last_in_utterance:
            break
    for _ in range(ARGS.repeats):
        start = time.perf_counter()
        session.enqueue(SENTENCE)
        frame = next(frames)
        times.append(time.perf_counter() - start)
        while not frame.is_last_in_utterance:
            frame = next(frames)
    session.cancel()
    return times


def ours_stream(tts: PocketTTS) -> tuple[float, int]:
    session = tts.session(seed=0, eos_threshold=1e9)
    start = time.perf_counter()
    session.enqueue(SENTENCE)
    session.finish()
    samples = sum(frame.samples.shape[0] for frame in session)
    return time.perf_counter() - start, samples


def ours_cancel(tts: PocketTTS, counter: CountingBackend) -> dict[str, float]:
    session = tts.session(seed=0, eos_threshold=1e9)
    session.enqueue(SENTENCE)
    for received, _frame in enumerate(session, start=1):
        if received == 5:
            break
    start = time.perf_counter()
    session.cancel()
    cancel_s = time.perf_counter() - start
    calls = counter.calls
    cpu_ms = []  # process CPU time in each 100 ms window after cancel() returned
    for _ in range(5):
        cpu0 = time.process_time()
        time.sleep(0.1)
        cpu_ms.append(1e3 * (time.process_time() - cpu0))
    threads = [t.name for t in threading.enumerate() if t.name.startswith("pocket-tts-session")]
    return {
        "cancel_ms": 1e3 * cancel_s,
        "cpu_ms": cpu_ms,
        "calls_after": counter.calls - calls,
        "threads_left": len(threads),
    }


def measure_ours(pack: Path) -> dict[str, object]:
    loaded = PocketTTS.load("english", backend="numpy", model_dir=pack)
    counter = CountingBackend(loaded.backend)
    tts = PocketTTS(
        config=loaded.config, backend=counter, tokenizer=loaded.tokenizer, pack=loaded.pack
    )
    first = ours_first_frames(tts)
    runs = [ours_stream(tts) for _ in range(max(2, ARGS.repeats // 2))]
    rtf = [samples / SAMPLE_RATE / wall for wall, samples in runs]
    cancel = ours_cancel(tts, counter)
    reference = tts.synthesize(SENTENCE, temperature=0.0)
    tokens = TextPlanner(tts.config, tts.tokenizer).plan(SENTENCE)[0].num_tokens
    return {
        "first": first,
        "rtf": rtf,
        "frames": runs[0][1] // FRAME_SIZE,
        "cancel": cancel,
        "audio": reference,
        "overlap": tts.overlap_decode,
        "tokens": tokens,
    }


def main() -> None:
    ARGS.work.mkdir(parents=True, exist_ok=True)
    pack, config_path = build_files(ARGS.work)
    threads = ARGS.threads or "default"
    print(f"BLAS/torch threads: {threads}; cores: {os.cpu_count()}; work dir {ARGS.work}")

    ours = measure_ours(pack)
    upstream = measure_upstream(config_path, pack)

    print(f'\nsentence: "{SENTENCE}" ({ours["tokens"]} tokens with the devpack tokenizer)')
    print(f"ours: overlap_decode={ours['overlap']}")
    o_first, u_first = median_ms(ours["first"]), median_ms(upstream["first"])
    print(
        f"time to first audio  ours {o_first:6.1f} ms   upstream {u_first:6.1f} ms   "
        f"ratio {u_first / o_first:.2f}x"
    )
    print(f"  ours runs (ms): {[round(1e3 * t) for t in ours['first']]}")
    print(f"  upstream runs (ms): {[round(1e3 * t) for t in upstream['first']]}")
    o_rtf, u_rtf = statistics.median(ours["rtf"]), statistics.median(upstream["rtf"])
    print(
        f"streaming RTF        ours {o_rtf:6.2f}x    upstream {u_rtf:6.2f}x    "
        f"ratio {o_rtf / u_rtf:.2f}  ({ours['frames']} vs {upstream['frames']} frames)"
    )
    cancel = ours["cancel"]
    print(
        f"cancel               returns in {cancel['cancel_ms']:.1f} ms; afterwards: backend "
        f"calls {cancel['calls_after']}, session threads {cancel['threads_left']}, process CPU "
        f"per 100 ms window {[round(ms, 1) for ms in cancel['cpu_ms']]} ms"
    )
    a, b = ours["audio"], upstream["audio"]
    n = min(a.size, b.size)
    diff = float(np.abs(a[120:n] - b[120:n]).max()) if n > 120 else float("nan")
    print(
        f"parity (temp 0)      ours {a.size // FRAME_SIZE} frames, upstream "
        f"{b.size // FRAME_SIZE} frames; max |diff| after the fade {diff:.2e}"
    )


if __name__ == "__main__":
    main()
