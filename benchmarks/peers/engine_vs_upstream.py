"""The engine (sessions on the NumPy backend) beside upstream pocket-tts, same weights, offline.

A full-size random English pack is written by ``pipecat_pocket_tts.devpack``
(``model.safetensors`` in upstream's key layout, ``tokenizer.json``, a voice state); upstream
4.0.1 (torch, fp32) loads the very same weights, tokenizer and voice. Measured in one process;
the timed runs alternate between the two sides (ours, upstream, ours, ...), so a machine that
slows down for a while slows both alike:

1. time to first audio for a 10-word sentence: ours in a warm session (voice prefilled, one
   utterance already spoken) from ``enqueue`` to the first frame; upstream from the
   ``generate_audio_stream`` call to its first chunk (voice state loaded beforehand);
2. streaming real-time factor: audio seconds / wall seconds for the same sentence with EOS
   disabled (both sides then run to the same frame limit);
3. cancellation: how long ``cancel()`` takes mid-utterance, then the backend calls made and the
   threads started since that session began, left after it returned (both must be 0; the
   model's fixed pool, started by the earlier sessions, stays for the next utterance), and the
   process CPU time in five
   100 ms windows after it (multi-threaded OpenBLAS spins its idle workers for a moment after
   the last call, which shows in the first window only);
4. parity: temperature 0, default EOS: frame counts and max |difference| of the audio (after
   the 5 ms fade-in, whose ramp differs slightly).

    /tmp/refvenv/bin/python -m benchmarks.peers.engine_vs_upstream [--work DIR]
        [--threads N] [--repeats 5]

Needs torch + pocket-tts 4.0.1 (the ``reference`` extra) and this package in the same
environment. ``--threads`` caps BLAS and torch threads on both sides (default: 1, as upstream
sets torch itself on import); 0 leaves every library at its default.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from pathlib import Path

from benchmarks.common import build_files, cap_blas_threads

SENTENCE = "The quick brown fox jumps over the lazy sleeping dog."  # 10 words
WARM_UP = "Warm up, please."


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench_engine_vs_upstream"))
    parser.add_argument("--threads", type=int, default=1, help="BLAS/torch threads (0: default)")
    parser.add_argument("--repeats", type=int, default=5)
    return parser.parse_args(argv)


ARGS = parse_args()
if ARGS.threads > 0:
    cap_blas_threads(ARGS.threads)
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

from pipecat_pocket_tts.engine import PocketTTS  # noqa: E402
from pipecat_pocket_tts.engine.backends.base import Backend  # noqa: E402
from pipecat_pocket_tts.engine.model.config import FRAME_SIZE, SAMPLE_RATE  # noqa: E402
from pipecat_pocket_tts.engine.text.planner import TextPlanner  # noqa: E402


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


class Upstream:
    """Upstream's model and voice, loaded once; each method times one run."""

    def __init__(self, config_path: Path, pack: Path) -> None:
        import torch
        from pocket_tts import TTSModel

        if ARGS.threads > 0:
            torch.set_num_threads(ARGS.threads)
        self.model = TTSModel.load_model(config=config_path)
        self.voice = self.model.get_state_for_audio_prompt(pack / "embeddings" / "alba.safetensors")
        upstream_first_chunk(self.model, self.voice, WARM_UP)

    def first_audio(self) -> float:
        return upstream_first_chunk(self.model, self.voice, SENTENCE)[0]

    def stream(self) -> tuple[float, int]:
        self.model.eos_threshold = 1e9  # no EOS: run to the frame limit
        try:
            return upstream_stream(self.model, self.voice, SENTENCE)
        finally:
            self.model.eos_threshold = -4.0

    def reference_audio(self) -> np.ndarray:
        import torch

        self.model.temp = 0.0
        return torch.cat(list(self.model.generate_audio_stream(self.voice, SENTENCE))).numpy()


# -- ours ----------------------------------------------------------------------------------


class OursFirstAudio:
    """One warm session (voice prefilled, one utterance spoken); each call times one sentence."""

    def __init__(self, tts: PocketTTS) -> None:
        self.session = tts.session(seed=0)
        self.session.enqueue(WARM_UP)
        self.frames = iter(self.session)
        self._drain(next(self.frames))

    def _drain(self, frame) -> None:
        while not frame.is_last_in_utterance:
            frame = next(self.frames)

    def __call__(self) -> float:
        start = time.perf_counter()
        self.session.enqueue(SENTENCE)
        frame = next(self.frames)
        elapsed = time.perf_counter() - start
        self._drain(frame)
        return elapsed

    def close(self) -> None:
        self.session.cancel()


def ours_stream(tts: PocketTTS) -> tuple[float, int]:
    session = tts.session(seed=0, eos_threshold=1e9)
    start = time.perf_counter()
    session.enqueue(SENTENCE)
    session.finish()
    samples = sum(frame.samples.shape[0] for frame in session)
    return time.perf_counter() - start, samples


def ours_cancel(tts: PocketTTS, counter: CountingBackend) -> dict[str, float]:
    before = set(threading.enumerate())  # the model's pool runs already (earlier sessions)
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
    left = set(threading.enumerate()) - before
    return {
        "cancel_ms": 1e3 * cancel_s,
        "cpu_ms": cpu_ms,
        "calls_after": counter.calls - calls,
        "threads_left": len(left),
        "pool_threads": tts.scheduler.threads,
    }


def load_ours(pack: Path) -> tuple[PocketTTS, CountingBackend]:
    loaded = PocketTTS.load("english", backend="numpy", model_dir=pack)
    counter = CountingBackend(loaded.backend)
    tts = PocketTTS(
        config=loaded.config, backend=counter, tokenizer=loaded.tokenizer, pack=loaded.pack
    )
    return tts, counter


def alternate(ours, upstream, repeats: int) -> tuple[list, list]:
    """Run ``ours()`` and ``upstream()`` in turn, ``repeats`` times each."""
    mine, theirs = [], []
    for _ in range(repeats):
        mine.append(ours())
        theirs.append(upstream())
    return mine, theirs


def stream_summary(runs: list[tuple[float, int]]) -> dict[str, object]:
    """Real-time factors and frame count of (wall seconds, samples) stream runs."""
    rtf = [samples / SAMPLE_RATE / wall for wall, samples in runs]
    return {"rtf": rtf, "frames": runs[0][1] // FRAME_SIZE}


def main() -> None:
    ARGS.work.mkdir(parents=True, exist_ok=True)
    pack, config_path = build_files(ARGS.work)
    threads = ARGS.threads or "default"
    print(f"BLAS/torch threads: {threads}; cores: {os.cpu_count()}; work dir {ARGS.work}")

    tts, counter = load_ours(pack)
    upstream = Upstream(config_path, pack)
    first_audio = OursFirstAudio(tts)
    first_ours, first_up = alternate(first_audio, upstream.first_audio, ARGS.repeats)
    first_audio.close()
    streams = max(2, ARGS.repeats // 2)
    runs_ours, runs_up = alternate(lambda: ours_stream(tts), upstream.stream, streams)
    cancel = ours_cancel(tts, counter)
    audio_ours = tts.synthesize(SENTENCE, temperature=0.0)
    audio_up = upstream.reference_audio()
    tokens = TextPlanner(tts.config, tts.tokenizer).plan(SENTENCE)[0].num_tokens
    ours = {
        "first": first_ours,
        **stream_summary(runs_ours),
        "audio": audio_ours,
        "tokens": tokens,
    }
    upstream = {
        "first": first_up,
        **stream_summary(runs_up),
        "audio": audio_up,
    }

    print(f'\nsentence: "{SENTENCE}" ({ours["tokens"]} tokens with the devpack tokenizer)')
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
    print(
        f"cancel               returns in {cancel['cancel_ms']:.1f} ms; afterwards: backend "
        f"calls {cancel['calls_after']}, new threads {cancel['threads_left']} (the model's pool: "
        f"{cancel['pool_threads']} threads, kept), process CPU "
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
