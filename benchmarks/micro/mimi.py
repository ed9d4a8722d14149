"""Per-frame Mimi decode time of the NumPy backend, optionally beside upstream's torch Mimi.

Random weights, no downloads. Usage:

    python -m benchmarks.micro.mimi [--config english] [--frames 60] [--threads 1] [--upstream]

``--threads`` caps BLAS threads (set before NumPy loads; torch gets the same number).
``--upstream`` needs the ``reference`` extra (torch + pocket-tts): both decoders then run the
same weights and latents, and the script prints their ms/frame and the audio SNR between them.
Encode time (a 5 s clip) is printed too.
"""

from __future__ import annotations

import argparse
import statistics
import time

from benchmarks.common import cap_blas_threads


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="english")
    parser.add_argument("--frames", type=int, default=60)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--upstream", action="store_true")
    return parser.parse_args()


ARGS = parse_args()
cap_blas_threads(ARGS.threads)

import numpy as np  # noqa: E402

from pipecat_pocket_tts.engine.backends.numpy.layers.mimi import Mimi, mimi_weight_shapes  # noqa: E402
from pipecat_pocket_tts.engine.model.config import get_config  # noqa: E402


def random_weights(shapes: dict[str, tuple[int, ...]], seed: int) -> dict[str, np.ndarray]:
    """Weights of roughly trained scale: fan-in scaled matrices, small biases, unit norms."""
    rng = np.random.default_rng(seed)
    weights = {}
    for name, shape in shapes.items():
        if name.endswith(".scale"):
            array = rng.uniform(0.05, 0.3, shape)
        elif "norm" in name and name.endswith("weight"):
            array = 1.0 + 0.1 * rng.standard_normal(shape)
        elif len(shape) == 1:
            array = 0.05 * rng.standard_normal(shape)
        else:
            array = rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))
        weights[name] = array.astype(np.float32)
    return weights


def time_frames(decode_frame, latents: np.ndarray) -> tuple[list[float], np.ndarray]:
    """Decode every latent [F, 32] in turn; (ms per frame, audio [F·frame_size])."""
    times, audio = [], []
    for latent in latents:
        start = time.perf_counter()
        audio.append(decode_frame(latent))
        times.append(1000 * (time.perf_counter() - start))
    return times, np.concatenate(audio)


def upstream_decoder(config_name: str, weights: dict[str, np.ndarray], threads: int):
    """Upstream MimiModel with our weights; returns (decode_frame, encode)."""
    import torch
    from pocket_tts.models.mimi import build_mimi
    from pocket_tts.modules.stateful_module import StatefulModule, increment_steps, init_states
    from pocket_tts.utils.config import MimiConfig

    torch.set_num_threads(threads)
    from pipecat_pocket_tts.engine.model.config_registry import raw_configs

    raw = dict(raw_configs()[config_name]["mimi"])
    raw.pop("weights_path", None)
    model = build_mimi(MimiConfig(**raw)).eval()
    model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()}, strict=True)
    for name, module in model.named_modules():
        if isinstance(module, StatefulModule):
            module._module_absolute_name = name
    state = init_states(model, batch_size=1, sequence_length=16 * (ARGS.frames + 8))

    @torch.no_grad()
    def decode_frame(latent: np.ndarray) -> np.ndarray:
        audio = model.decode_from_latent(torch.from_numpy(latent)[None, None, :], state)
        increment_steps(model, state, increment=16)
        return audio[0, 0].numpy()

    @torch.no_grad()
    def encode(audio: np.ndarray) -> np.ndarray:
        return model.encode_to_latent(torch.from_numpy(audio)[None, None, :])[0].numpy()

    return decode_frame, encode


def main() -> None:
    config = get_config(ARGS.config).mimi
    weights = random_weights(mimi_weight_shapes(config), seed=0)
    rng = np.random.default_rng(1)
    latents = rng.standard_normal((ARGS.frames, config.quantizer_dimension)).astype(np.float32)
    clip = (0.3 * rng.standard_normal(5 * config.sample_rate)).astype(np.float32)

    mimi = Mimi(config, weights)
    state = mimi.new_state()
    runs = {"numpy": lambda latent: mimi.decode(state, latent)}
    encoders = {"numpy": mimi.encode}
    if ARGS.upstream:
        runs["upstream"], encoders["upstream"] = upstream_decoder(
            ARGS.config, weights, ARGS.threads
        )

    audio = {}
    print(f"{ARGS.config}: {ARGS.frames} frames, {ARGS.threads} BLAS thread(s)")
    for name, decode_frame in runs.items():
        times, audio[name] = time_frames(decode_frame, latents)
        steady = times[3:]
        print(
            f"  {name:9s} decode ms/frame: median {statistics.median(steady):6.2f}  "
            f"min {min(steady):6.2f}  first {times[0]:6.2f}"
        )
    for name, encode in encoders.items():
        start = time.perf_counter()
        encode(clip)
        print(f"  {name:9s} encode 5 s clip: {1000 * (time.perf_counter() - start):7.1f} ms")
    if "upstream" in audio:
        ref, error = audio["upstream"], audio["numpy"] - audio["upstream"]
        snr = 10 * np.log10(np.sum(ref**2) / max(np.sum(error**2), 1e-30))
        print(f"  numpy vs upstream audio: SNR {snr:.1f} dB, max abs {np.abs(error).max():.2e}")


if __name__ == "__main__":
    main()
