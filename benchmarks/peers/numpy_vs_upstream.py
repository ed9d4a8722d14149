"""NumPy backend beside upstream pocket-tts (torch, fp32) on one full-size model, same weights.

Runs in an environment with both torch + pocket-tts 4.0.1 (the ``reference`` extra) and this
package, offline. Random weights (upstream's own initialisation) are saved once as an fp32
``model.safetensors`` that both sides load. Measured side by side in one process:

- model load from that file (ours also in a fresh child process, with its peak RSS)
- text prefill of 33 tokens on top of a 5 s voice prompt
- autoregressive step + sampler per frame (ours also split into step / sampler)
- Mimi decode per frame (frame by frame, fresh streaming state)

and a parity check (temperature 0: the latents of both sides, max abs difference).

    /tmp/refvenv/bin/python -m benchmarks.peers.numpy_vs_upstream [--config english]
        [--threads 1] [--frames 40] [--work DIR]

``--threads`` caps BLAS/torch threads for both sides (upstream sets torch to 1 on import).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks.common import cap_blas_threads, module_command, proc_status

VOICE_FRAMES = 63  # 5 s of voice prompt at 12.5 Hz
TEXT_TOKENS = 33
MEMORY_KEYS = ("VmRSS", "VmHWM", "RssAnon", "RssFile")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="english")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--frames", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=5, help="repeats of load and prefill")
    parser.add_argument("--work", type=Path, default=None, help="folder for the files")
    parser.add_argument("--child-load", type=Path, default=None, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


ARGS = parse_args()
cap_blas_threads(ARGS.threads)
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

from pipecat_pocket_tts.engine.backends.numpy.backend import NumpyBackend  # noqa: E402
from pipecat_pocket_tts.engine.model.config import get_config  # noqa: E402
from pipecat_pocket_tts.engine.model.config_registry import raw_configs  # noqa: E402


def _memory_kb() -> dict[str, float]:
    return {key: mb * 1024 for key, mb in proc_status(MEMORY_KEYS).items()}


def child_load(weights_path: Path) -> None:
    """In a fresh process: our load time and memory, before and after a first frame."""
    config = get_config(ARGS.config)
    before = _memory_kb()
    start = time.perf_counter()
    backend = NumpyBackend.from_files(config, weights_path)
    load_s = time.perf_counter() - start
    after_load = _memory_kb()
    state = backend.new_flow_state()
    backend.prefill(state, np.zeros((VOICE_FRAMES, config.flow_lm.transformer.d_model), "f4"))
    out = backend.step(state, None)
    latent = backend.sample(out.hidden, np.zeros(config.flow_lm.latent_dim, np.float32))
    backend.decode(backend.new_mimi_state(), latent)
    print(
        json.dumps(
            {"load_s": load_s, "before": before, "after_load": after_load, "after": _memory_kb()}
        )
    )


def _median_ms(times: list[float]) -> float:
    return 1e3 * statistics.median(times)


def build_upstream_files(work: Path):
    """Tokenizer, upstream YAML configs and the fp32 checkpoint of a random upstream model."""
    import safetensors.torch
    import torch
    import yaml
    from pocket_tts import TTSModel

    from pipecat_pocket_tts.devpack import train_sentencepiece

    config = get_config(ARGS.config)
    raw = copy.deepcopy(raw_configs()[ARGS.config])
    for key in ("weights_path", "weights_path_without_voice_cloning"):
        raw.pop(key, None)
    n_bins = config.flow_lm.lookup_table.n_bins
    tokenizer = work / "tokenizer.model"
    if not tokenizer.exists():
        train_sentencepiece(work, n_bins, num_lines=60_000)
    raw["flow_lm"]["lookup_table"]["tokenizer"] = "sentencepiece"
    raw["flow_lm"]["lookup_table"]["tokenizer_path"] = str(tokenizer)
    random_yaml = work / "random.yaml"
    random_yaml.write_text(yaml.safe_dump(raw, sort_keys=False))
    weights = work / "model.safetensors"
    if not weights.exists():
        torch.manual_seed(0)
        model = TTSModel.load_model(config=random_yaml)
        state = {k: v.contiguous() for k, v in model.state_dict().items()}
        safetensors.torch.save_file(state, str(weights))
        del model, state
    raw["weights_path"] = str(weights)
    loaded_yaml = work / "loaded.yaml"
    loaded_yaml.write_text(yaml.safe_dump(raw, sort_keys=False))
    return config, weights, loaded_yaml


def main() -> None:
    if ARGS.child_load is not None:
        child_load(ARGS.child_load)
        return
    import torch
    from pocket_tts import TTSModel
    from pocket_tts.modules.stateful_module import increment_steps, init_states

    torch.set_num_threads(ARGS.threads)
    work = ARGS.work or Path(tempfile.mkdtemp(prefix="bench_numpy_vs_upstream_"))
    work.mkdir(parents=True, exist_ok=True)
    config, weights_path, loaded_yaml = build_upstream_files(work)
    weight_bytes = weights_path.stat().st_size
    print(f"config {ARGS.config}, BLAS/torch threads {ARGS.threads}, work dir {work}")
    print(f"fp32 checkpoint: {weight_bytes / 1e6:.0f} MB")

    # -- load -------------------------------------------------------------------------------
    upstream_load, ours_load = [], []
    for _ in range(ARGS.repeats):
        start = time.perf_counter()
        upstream = TTSModel.load_model(config=loaded_yaml, temp=0.0)
        upstream_load.append(time.perf_counter() - start)
    upstream.temp = 0.0
    for _ in range(ARGS.repeats):
        start = time.perf_counter()
        ours = NumpyBackend.from_files(config, weights_path)
        ours_load.append(time.perf_counter() - start)
    child = json.loads(
        subprocess.run(
            module_command(__spec__.name, "--config", ARGS.config, "--threads",
                           str(ARGS.threads), "--child-load", str(weights_path)),
            check=True, capture_output=True, text=True,
        ).stdout.strip().splitlines()[-1]
    )  # fmt: skip

    # -- voice state (same random conditioning on both sides) ---------------------------------
    rng = np.random.default_rng(0)
    d_model = config.flow_lm.transformer.d_model
    voice = rng.standard_normal((VOICE_FRAMES, d_model)).astype(np.float32)
    tokens = rng.integers(0, config.flow_lm.lookup_table.n_bins, TEXT_TOKENS)
    prompt = torch.from_numpy(voice)[None]
    if upstream.flow_lm.insert_bos_before_voice:
        prompt = torch.cat([upstream.flow_lm.bos_before_voice.detach(), prompt], dim=1)
    max_frames = upstream._estimate_max_gen_len(TEXT_TOKENS)
    with torch.no_grad():
        upstream_voice = init_states(
            upstream.flow_lm, batch_size=1, sequence_length=prompt.shape[1]
        )
        upstream._run_flow_lm_and_increment_step(upstream_voice, audio_conditioning=prompt)
    ours_voice = ours.new_flow_state()
    bos = ours.bos_before_voice()
    if bos is not None:
        ours.prefill(ours_voice, bos[None])
    ours.prefill(ours_voice, voice)

    def upstream_chunk_state():
        state = copy.deepcopy(upstream_voice)
        needed = prompt.shape[1] + TEXT_TOKENS + max_frames
        upstream._expand_kv_cache(state, sequence_length=needed)
        return state

    # -- text prefill -----------------------------------------------------------------------
    token_tensor = torch.from_numpy(tokens)[None]
    upstream_prefill, ours_prefill = [], []
    with torch.no_grad():
        for _ in range(ARGS.repeats):
            state = upstream_chunk_state()
            start = time.perf_counter()
            upstream._run_flow_lm_and_increment_step(state, text_tokens=token_tensor)
            upstream_prefill.append(time.perf_counter() - start)
    for _ in range(ARGS.repeats):
        state = ours_voice.copy()
        start = time.perf_counter()
        ours.prefill(state, ours.embed_text(tokens))
        ours_prefill.append(time.perf_counter() - start)

    # -- autoregressive steps (temperature 0 on both sides) -----------------------------------
    upstream_state = upstream_chunk_state()
    ours_state = ours_voice.copy()
    zeros = np.zeros(config.flow_lm.latent_dim, np.float32)
    upstream_steps, ours_steps, ours_step_only, ours_sampler = [], [], [], []
    upstream_latents, ours_latents = [], []
    with torch.no_grad():
        upstream._run_flow_lm_and_increment_step(upstream_state, text_tokens=token_tensor)
        latent_t = torch.full((1, 1, config.flow_lm.latent_dim), float("nan"))
        for _ in range(ARGS.frames):
            start = time.perf_counter()
            latent_t, _eos = upstream._run_flow_lm_and_increment_step(
                upstream_state, backbone_input_latents=latent_t
            )
            upstream_steps.append(time.perf_counter() - start)
            upstream_latents.append(latent_t.reshape(-1).numpy().copy())
    ours.prefill(ours_state, ours.embed_text(tokens))
    latent = None
    for _ in range(ARGS.frames):
        start = time.perf_counter()
        out = ours.step(ours_state, latent)
        middle = time.perf_counter()
        latent = ours.sample(out.hidden, zeros)
        end = time.perf_counter()
        ours_steps.append(end - start)
        ours_step_only.append(middle - start)
        ours_sampler.append(end - middle)
        ours_latents.append(latent)
    parity = float(np.max(np.abs(np.array(upstream_latents) - np.array(ours_latents))))

    # -- Mimi decode per frame --------------------------------------------------------------
    latents = np.array(ours_latents)
    steps_per_latent = int(upstream.mimi.encoder_frame_rate / upstream.mimi.frame_rate)
    upstream_decode, ours_decode, upstream_audio, ours_audio = [], [], [], []
    with torch.no_grad():
        mimi_state = init_states(upstream.mimi, 1, sequence_length=len(latents) * steps_per_latent)
        std, mean = upstream.flow_lm.emb_std, upstream.flow_lm.emb_mean
        for row in latents:
            x = torch.from_numpy(row)[None, None] * std + mean
            start = time.perf_counter()
            frame = upstream.mimi.decode_from_latent(x, mimi_state)
            increment_steps(upstream.mimi, mimi_state, increment=steps_per_latent)
            upstream_decode.append(time.perf_counter() - start)
            upstream_audio.append(frame.reshape(-1).numpy().copy())
    ours_mimi = ours.new_mimi_state()
    for row in latents:
        start = time.perf_counter()
        ours_audio.append(ours.decode(ours_mimi, row))
        ours_decode.append(time.perf_counter() - start)
    reference = np.concatenate(upstream_audio).astype(np.float64)
    error = reference - np.concatenate(ours_audio)
    audio_snr = 10 * np.log10(np.sum(reference**2) / max(np.sum(error**2), 1e-30))

    # -- report -----------------------------------------------------------------------------
    def row(label: str, theirs: float, mine: float, unit: str) -> None:
        print(f"{label:<34} {theirs:>9.2f} {mine:>9.2f} {unit:<3} {theirs / mine:>6.2f}x")

    print(f"\n{'':<34} {'upstream':>9} {'numpy':>9}     {'speedup':>7}")
    row("model load (median)", statistics.median(upstream_load), statistics.median(ours_load), "s")
    row("model load (fresh process)", statistics.median(upstream_load), child["load_s"], "s")
    row(f"text prefill, {TEXT_TOKENS} tokens", _median_ms(upstream_prefill),
        _median_ms(ours_prefill), "ms")  # fmt: skip
    row("AR step + sampler / frame", _median_ms(upstream_steps), _median_ms(ours_steps), "ms")
    print(f"  numpy step only {_median_ms(ours_step_only):.2f} ms, "
          f"sampler {_median_ms(ours_sampler):.2f} ms (context {ours_state.position})")  # fmt: skip
    row("Mimi decode / frame", _median_ms(upstream_decode), _median_ms(ours_decode), "ms")
    hwm = child["after"]["VmHWM"] * 1024
    net = hwm - child["before"]["VmRSS"] * 1024
    print(f"\nnumpy peak RSS (fresh process, after load + one frame): {hwm / 1e6:.0f} MB = "
          f"{hwm / weight_bytes:.2f}x the fp32 weights, {net / weight_bytes:.2f}x without the "
          f"interpreter baseline of {child['before']['VmRSS'] / 1e3:.0f} MB ("
          f"file-backed {child['after']['RssFile'] / 1e3:.0f} MB, "
          f"anonymous {child['after']['RssAnon'] / 1e3:.0f} MB)")  # fmt: skip
    print(f"parity at temperature 0 over {ARGS.frames} frames: latents max |diff| {parity:.2e}, "
          f"audio SNR {audio_snr:.1f} dB")  # fmt: skip


if __name__ == "__main__":
    main()
