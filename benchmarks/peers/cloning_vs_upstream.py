"""Voice cloning beside upstream pocket-tts (torch, fp32) on one full-size model, same weights.

Runs in an environment with both torch + pocket-tts 4.0.1 (the ``reference`` extra) and this
package's dependencies, offline, from the repo root:

    /tmp/refvenv/bin/python -m benchmarks.peers.cloning_vs_upstream [--config english]
        [--seconds 10] [--threads 1] [--repeats 3] [--work DIR]

Builds upstream's model with random weights (perturbed and calibrated as the golden fixtures,
so the encoder carries signal), hands the same tensors to our NumPy backend, writes a
recording of ``--seconds`` (a band-limited speech-like signal) as a 16-bit WAV at 24 kHz mono
and at 44.1 kHz stereo, then times, alternating the two sides:

- upstream: ``get_state_for_audio_prompt(path, truncate=True)`` (its CLI ``export-voice`` path:
  read, mix, resample with scipy, end on a pause, Mimi encoder, speaker projection, prefill)
- ours: ``cloning.clone_voice(backend, path)`` (read, mix, resample with soxr, the same
  preparation, ``encode``, ``prefill``)

It also checks parity (the voice states, K and V) and interoperability: our voice saved with
``Voice.save`` is loaded by upstream, which then generates frames at temperature 0 identical
to those from its own clone.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.common import cap_blas_threads


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="english")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the recording")
    parser.add_argument("--threads", type=int, default=1, help="BLAS / torch threads")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--frames", type=int, default=8, help="frames of the interop check")
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("--work", type=Path, default=None, help="folder for the files")
    return parser.parse_args(argv)


ARGS = parse_args()
cap_blas_threads(ARGS.threads)
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

from pipecat_pocket_tts.engine.backends.numpy.backend import NumpyBackend  # noqa: E402
from pipecat_pocket_tts.engine.model.config import get_config  # noqa: E402
from pipecat_pocket_tts.engine.model.config_registry import raw_configs  # noqa: E402
from pipecat_pocket_tts.engine.voices.cloning import clone_voice  # noqa: E402
from pipecat_pocket_tts.engine.voices.voice import Voice  # noqa: E402
from tools.reference import cloning_signals as signals  # noqa: E402

TEXT_TOKENS = 20


def build_models(work: Path):
    """Upstream's model with random, calibrated weights and our backend on the same tensors."""
    import torch
    import upstream_reference as ref

    raw = copy.deepcopy(raw_configs()[ARGS.config])
    tokenizer = work / "tokenizer.model"
    if not tokenizer.exists():
        ref.train_tokenizer(tokenizer, raw["flow_lm"]["lookup_table"]["n_bins"], seed=0)
    upstream = ref.build_model(raw, tokenizer, work, ARGS.seed)
    ref.perturb(upstream, ARGS.seed)
    prompt = ref.prepare_voice_audio(ref.synthetic_voice(5.0, ARGS.seed))
    ref.calibrate(upstream, prompt, ARGS.seed)
    upstream.temp = 0.0
    torch.set_num_threads(ARGS.threads)
    weights = {k: v.detach().numpy() for k, v in upstream.state_dict().items()}
    ours = NumpyBackend(get_config(ARGS.config), weights)
    assert ours.has_voice_cloning
    return upstream, ours


def write_recordings(work: Path) -> dict[str, Path]:
    """The same sound as 24 kHz mono and 44.1 kHz stereo 16-bit WAV files."""
    speech = ARGS.seconds - 0.3
    out = {}
    for label, rate, stereo in (("24 kHz mono", 24_000, False), ("44.1 kHz stereo", 44_100, True)):
        mono = signals.voice_like(speech, rate, silence_seconds=0.3)
        samples = signals.stereo_pair(mono, rate, speech) if stereo else mono
        path = work / f"speaker_{rate}.wav"
        signals.write_pcm16_wav(path, signals.to_pcm16(samples), rate)
        out[label] = path
    return out


def upstream_kv(model, state) -> tuple[np.ndarray, np.ndarray]:
    keys, values = [], []
    for i in range(len(model.flow_lm.transformer.layers)):
        layer = state[f"transformer.layers.{i}.self_attn"]
        filled = int(layer["offset"].reshape(-1)[0])
        keys.append(layer["cache"][0, 0, :filled].numpy())
        values.append(layer["cache"][1, 0, :filled].numpy())
    return np.stack(keys), np.stack(values)


def upstream_generate(model, voice_state, tokens: np.ndarray, frames: int) -> np.ndarray:
    """Temperature-0 latents from a voice state (text prefill, then BOS and feedback)."""
    import torch

    state = copy.deepcopy(voice_state)
    length = int(next(iter(state.values()))["offset"].reshape(-1)[0])
    model._expand_kv_cache(state, sequence_length=length + len(tokens) + frames + 1)
    with torch.no_grad():
        model._run_flow_lm_and_increment_step(state, text_tokens=torch.from_numpy(tokens)[None])
        latent = torch.full((1, 1, model.flow_lm.ldim), float("nan"))
        out = []
        for _ in range(frames):
            latent, _eos = model._run_flow_lm_and_increment_step(
                state, backbone_input_latents=latent
            )
            out.append(latent.reshape(-1).numpy().copy())
    return np.array(out)


def main() -> None:
    import torch

    work = ARGS.work or Path(tempfile.mkdtemp(prefix="bench_cloning_"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    upstream, ours = build_models(work)
    recordings = write_recordings(work)
    print(f"config {ARGS.config}, threads {ARGS.threads}, {ARGS.seconds:g} s recordings, "
          f"models built in {time.perf_counter() - started:.0f} s (work dir {work})")  # fmt: skip

    print(f"\n{'recording':<18} {'upstream':>10} {'numpy':>10} {'ours/upstream':>14}  parity")
    for label, path in recordings.items():
        upstream_times, our_times = [], []
        for _ in range(ARGS.repeats):
            start = time.perf_counter()
            with torch.no_grad():
                theirs = upstream.get_state_for_audio_prompt(path, truncate=True)
            upstream_times.append(time.perf_counter() - start)
            start = time.perf_counter()
            voice = clone_voice(ours, path)
            our_times.append(time.perf_counter() - start)
        keys, values = upstream_kv(upstream, theirs)
        mine = np.concatenate([np.stack(voice.kv.keys).ravel(), np.stack(voice.kv.values).ravel()])
        reference = np.concatenate([keys.ravel(), values.ravel()])
        parity = (
            f"{keys.shape[1]} vs {voice.length} positions, max |dK,dV| "
            f"{np.max(np.abs(reference - mine)):.1e}, relative "
            f"{np.linalg.norm(reference - mine) / np.linalg.norm(reference):.1e}"
        )
        theirs_s, ours_s = statistics.median(upstream_times), statistics.median(our_times)
        print(
            f"{label:<18} {theirs_s:>9.3f}s {ours_s:>9.3f}s {ours_s / theirs_s:>13.2f}x  {parity}"
        )

        # Interop: upstream loads our saved voice and speaks exactly as with its own clone.
        saved = voice.save(work / f"ours_{path.stem}.safetensors")
        with torch.no_grad():
            imported = upstream.get_state_for_audio_prompt(saved)
        tokens = np.random.default_rng(0).integers(
            0, upstream.flow_lm.conditioner.embed.num_embeddings - 1, TEXT_TOKENS
        )
        own = upstream_generate(upstream, theirs, tokens, ARGS.frames)
        from_ours = upstream_generate(upstream, imported, tokens, ARGS.frames)
        reloaded = Voice.load(saved, ours.config)
        print(f"{'':<18} upstream on our saved voice: {ARGS.frames} frames at temperature 0, "
              f"max |latent diff| vs its own clone {np.max(np.abs(own - from_ours)):.1e}; "
              f"reload exact: {np.array_equal(np.stack(reloaded.kv.keys), np.stack(voice.kv.keys))}"
              )  # fmt: skip


if __name__ == "__main__":
    main()
