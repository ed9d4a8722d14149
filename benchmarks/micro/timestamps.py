"""Cost of word timestamps per frame on the NumPy backend, as a share of a frame's compute.

Random weights in a real config's shapes, no downloads. Usage:

    python -m benchmarks.micro.timestamps [--config english] [--frames 60] [--threads 1]

One chunk (a voice prompt of ``--voice`` frames, then a 40-token sentence) is generated twice
per round, side by side: plain, and with the config's timestamp heads probed plus everything
timestamps add per frame (unit scores, the voicing test, the word pointer and the caller-word
assembly). A frame's compute is step + sample + Mimi decode. Printed: median ms per frame of
both and the overhead in percent (the target is ≤ 5 %), and the per-frame cost of the fallback
(words released by a speaking rate, for packs without heads) on the same frames.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time

from benchmarks.common import cap_blas_threads


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="english")
    parser.add_argument("--frames", type=int, default=60)
    parser.add_argument("--voice", type=int, default=125, help="voice prompt frames")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    return parser.parse_args()


ARGS = parse_args()
cap_blas_threads(ARGS.threads)

import numpy as np  # noqa: E402

from pipecat_pocket_tts import devpack  # noqa: E402
from pipecat_pocket_tts.engine.backends.base import AttentionProbe  # noqa: E402
from pipecat_pocket_tts.engine.backends.numpy import NumpyBackend  # noqa: E402
from pipecat_pocket_tts.engine.model.config import get_config  # noqa: E402
from pipecat_pocket_tts.engine.timing.heads import _head_table  # noqa: E402
from pipecat_pocket_tts.engine.timing.word_timing import UtteranceWords  # noqa: E402
from pipecat_pocket_tts.engine.timing.words import (  # noqa: E402
    WordMapper,
    caller_words,
    chunk_spans,
)

TEXT = "The quick brown fox jumps over the lazy dog and runs far away into the woods today."
TOKENS = 40


def frame_times(backend: NumpyBackend, voice, heads, timed: bool) -> list[float]:
    """ms per frame of one chunk, plain or with timestamps."""
    state = voice.copy()
    start = state.position
    rng = np.random.default_rng(0)
    ids = rng.integers(0, backend.config.flow_lm.lookup_table.n_bins, TOKENS)
    backend.prefill(state, backend.embed_text(ids))
    probe = AttentionProbe(heads, start, state.position)
    mimi = backend.new_mimi_state()
    words = fallback = None
    if timed:
        mapper = WordMapper()
        mapper.add(caller_words(TEXT))
        # token spans spread evenly over the text: the cost does not depend on where they are
        edges = np.linspace(0, len(TEXT), TOKENS + 1).astype(int)
        units = chunk_spans(TEXT, list(itertools.pairwise(edges.tolist())), mapper)
        words = UtteranceWords(mapper.words)
        words.start_chunk(units, attention=True)
        fallback = UtteranceWords(mapper.words)
        fallback.start_chunk(units, attention=False)
    latent = None
    times = []
    for index in range(ARGS.frames):
        t0 = time.perf_counter()
        out = backend.step(state, latent, probe) if timed else backend.step(state, latent)
        latent = backend.sample(out.hidden, np.zeros(backend.config.flow_lm.latent_dim, np.float32))
        samples = backend.decode(mimi, latent)
        if words is not None:
            t1 = time.perf_counter()
            words.frame(samples, out.attention, last_in_chunk=index == ARGS.frames - 1)
            ALIGN_MS.append(1000 * (time.perf_counter() - t1))
        if fallback is not None:
            t2 = time.perf_counter()
            fallback.frame(samples, None, last_in_chunk=index == ARGS.frames - 1)
            FALLBACK_MS.append(1000 * (time.perf_counter() - t2))
            t0 += time.perf_counter() - t2  # not part of the timed frame
        times.append(1000 * (time.perf_counter() - t0))
    if timed:
        PROBE_MS.extend(probe_times(backend, state, probe))
    return times


ALIGN_MS: list[float] = []
FALLBACK_MS: list[float] = []
PROBE_MS: list[float] = []


def probe_times(backend: NumpyBackend, state, probe: AttentionProbe) -> list[float]:
    """ms of the probe's extra work in one step (its logits, every layer), repeated."""
    flow = backend.flow_lm
    q = np.random.default_rng(2).standard_normal((flow.num_heads, flow.head_dim)).astype(np.float32)
    out = flow._probe_rows(probe)
    times = []
    for _ in range(50):
        t0 = time.perf_counter()
        for layer in range(flow.num_layers):
            flow._probe(layer, q, state, probe, out)
        times.append(1000 * (time.perf_counter() - t0))
    return times


def main() -> None:
    config = get_config(ARGS.config)
    heads = _head_table().get(config.name) or ((0, 0),)
    backend = NumpyBackend(config, devpack.random_weights(config))
    voice = backend.new_flow_state()
    d = config.flow_lm.transformer.d_model
    backend.prefill(
        voice, np.random.default_rng(1).standard_normal((ARGS.voice, d)).astype(np.float32)
    )
    plain: list[float] = []
    timed: list[float] = []
    frame_times(backend, voice, heads, True)  # warm-up
    for _ in range(ARGS.rounds):
        plain += frame_times(backend, voice, heads, False)
        timed += frame_times(backend, voice, heads, True)
    p, t = statistics.median(plain), statistics.median(timed)
    print(
        f"config {config.name}, heads {list(heads)}, threads {ARGS.threads}, "
        f"{ARGS.rounds}×{ARGS.frames} frames each"
    )
    a, q = statistics.median(ALIGN_MS), statistics.median(PROBE_MS)
    print(f"plain frame          {p:9.3f} ms (median)")
    print(f"with timestamps      {t:9.3f} ms (median; side by side: {100 * (t - p) / p:+.2f} %)")
    print(f"  probe logits       {q:9.4f} ms per frame ({100 * q / p:.3f} % of a frame)")
    print(f"  pointer + words    {a:9.4f} ms per frame ({100 * a / p:.3f} % of a frame)")
    print(f"timestamp work       {100 * (a + q) / p:9.3f} % of a frame (target ≤ 5 %)")
    f = statistics.median(FALLBACK_MS)
    print(f"fallback words       {f:9.4f} ms per frame ({100 * f / p:.3f} % of a frame)")


if __name__ == "__main__":
    main()
