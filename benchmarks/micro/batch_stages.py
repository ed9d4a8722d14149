"""Per-stream cost of each batched stage (FlowLM step, sampler, Mimi decode) against batch size.

Full-size config, random weights, one BLAS thread (what a scheduler worker runs). Each stream
has its own KV cache (a voice-sized prefill plus a text chunk, all at different lengths) and
its own Mimi state. Usage:

    python -m benchmarks.micro.batch_stages [--config english] [--sizes 1,2,4,8,16] [--frames 12]
        [--layers]

Prints CPU ms (of the calling thread) per call and per stream for every stage and B; the last
column is the per-stream speed-up against B = 1. ``--layers`` also prints, per B, the Mimi
decode's CPU ms per stream in each of its layers (transformer, every SEANet conv). CPU time,
not wall time, so other jobs on a shared machine move the figures less (memory bandwidth is
still shared).

``--roofline`` adds, for the largest B, the multiply-adds of a stream-frame in each stage and the
rate the stage reached, beside this core's ceilings measured in the same run (register-only fp32 FMA
and int16 multiply-add loops, one large BLAS product; ``benchmarks.micro.roofline``), and how many
real-time streams ``--cores`` cores could serve at each rate, with the whole core and with the share
the scheduler's ``"auto"`` admission fills (``slots.AUTO_LOAD``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from benchmarks.common import cap_blas_threads


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="english")
    parser.add_argument("--sizes", default="1,2,4,8,16")
    parser.add_argument("--frames", type=int, default=12, help="timed calls per stage and B")
    parser.add_argument("--layers", action="store_true", help="Mimi decode time per layer")
    parser.add_argument("--roofline", action="store_true", help="arithmetic against ceilings")
    parser.add_argument("--cores", type=int, default=os.cpu_count(), help="for --roofline")
    return parser.parse_args()


ARGS = parse_args()
cap_blas_threads(1)

import numpy as np  # noqa: E402

from pipecat_pocket_tts.devpack import random_weights  # noqa: E402
from pipecat_pocket_tts.engine.backends.numpy.backend import NumpyBackend  # noqa: E402
from pipecat_pocket_tts.engine.model.config import get_config  # noqa: E402


def timed(call, repeats: int) -> float:
    """Median CPU ms of this thread in ``call()`` over ``repeats`` runs (after a warm-up).

    CPU time of the calling thread (BLAS runs single-threaded in it), not wall time: other
    jobs on a shared machine then barely move the figures.
    """
    call()
    times = []
    for _ in range(repeats):
        start = time.thread_time()
        call()
        times.append(1000 * (time.thread_time() - start))
    return statistics.median(times)


class LayerTimes:
    """Wraps the ``call_batch`` of every Mimi decoder layer to add up its thread CPU time."""

    def __init__(self, mimi) -> None:
        from pipecat_pocket_tts.engine.backends.numpy.layers.seanet import ResidualBlock

        self.seconds: dict[str, float] = {}
        layers = [("upsample", mimi.upsample), ("transformer", mimi.decoder_transformer)]
        for i, (_, layer) in enumerate(mimi.decoder.steps):
            if isinstance(layer, ResidualBlock):
                layers += [(f"{i} residual in", layer.conv_in), (f"{i} residual", layer.conv_out)]
            else:
                layers.append((f"{i} {type(layer).__name__.removeprefix('Streaming')}", layer))
        self._layers = [layer for _, layer in layers if layer is not None]
        for name, layer in layers:
            if layer is not None:
                layer.call_batch = self._timed(name, layer.call_batch)

    def restore(self) -> None:
        """Unwrap the layers."""
        for layer in self._layers:
            del layer.call_batch

    def _timed(self, name: str, call):
        def timed_call(*args, **kwargs):
            start = time.thread_time()
            try:
                return call(*args, **kwargs)
            finally:
                self.seconds[name] = self.seconds.get(name, 0.0) + time.thread_time() - start

        return timed_call


def main() -> None:
    config = get_config(ARGS.config)
    print(f"building random weights for {ARGS.config!r}…", flush=True)
    backend = NumpyBackend(config, random_weights(config, seed=1))
    sizes = [int(size) for size in ARGS.sizes.split(",")]
    rng = np.random.default_rng(0)
    d, latent_dim = config.flow_lm.transformer.d_model, config.flow_lm.latent_dim
    head_dim = config.flow_lm.head_input_dim
    rows = []
    for batch in sizes:
        # Streams at different KV lengths: 150…300 prefilled positions.
        states = []
        for b in range(batch):
            state = backend.new_flow_state()
            length = 150 + (150 * b) // max(1, batch - 1) if batch > 1 else 200
            backend.prefill(state, rng.standard_normal((length, d)).astype(np.float32) * 0.1)
            states.append(state)
        latents = [rng.standard_normal(latent_dim).astype(np.float32) for _ in range(batch)]
        hidden = rng.standard_normal((batch, head_dim)).astype(np.float32)
        noise = rng.standard_normal((batch, latent_dim)).astype(np.float32)
        mimi_states = [backend.new_mimi_state() for _ in range(batch)]
        step_ms = timed(lambda s=states, x=latents: backend.step_batch(s, x), ARGS.frames)
        sample_ms = timed(lambda h=hidden, n=noise: backend.sample_batch(h, n), ARGS.frames)
        decode_ms = timed(lambda m=mimi_states, n=noise: backend.decode_batch(m, n), ARGS.frames)
        if ARGS.layers:
            layer_times = LayerTimes(backend.mimi)
            for _ in range(ARGS.frames):
                backend.decode_batch(mimi_states, noise)
            print(f"  Mimi decode B={batch}, CPU ms per stream and layer:")
            for name, seconds in layer_times.seconds.items():
                print(f"    {name:<22}{1000 * seconds / ARGS.frames / batch:8.3f}")
            layer_times.restore()
        rows.append((batch, step_ms, sample_ms, decode_ms))
        print(f"  B={batch} done", flush=True)
    base = {
        name: rows[0][i + 1] / rows[0][0] for i, name in enumerate(("step", "sample", "decode"))
    }
    print(f"\n{ARGS.config}, 1 BLAS thread, median thread CPU time of {ARGS.frames} calls")
    print(f"{'stage':<8}{'B':>4}{'ms/call':>10}{'ms/stream':>11}{'speed-up':>10}")
    for batch, *times in rows:
        for name, ms in zip(("step", "sample", "decode"), times, strict=True):
            per = ms / batch
            print(f"{name:<8}{batch:>4}{ms:>10.2f}{per:>11.2f}{base[name] / per:>9.1f}×")
    print(f"{'total':<8}{'B':>4}")
    for batch, *times in rows:
        total = sum(times) / batch
        print(
            f"{'':<8}{batch:>4}{sum(times):>10.2f}{total:>11.2f}{sum(base.values()) / total:>9.1f}×"
        )
    if ARGS.roofline:
        print_roofline(backend, rows[-1], config.mimi.frame_rate)


KV_LENGTH = 225  # the middle of the prefilled lengths above


def print_roofline(backend, row: tuple, frame_rate: float) -> None:
    """Multiply-adds per stream-frame and stage at the largest B, the rates reached, and the
    streams ``--cores`` cores could serve at each measured ceiling."""
    from benchmarks.micro.roofline import register_rates, sgemm_rate, stage_macs
    from pipecat_pocket_tts.engine.runtime.slots import AUTO_LOAD

    batch, *times = row
    macs = stage_macs(backend, KV_LENGTH)
    print(f"\nroofline at B={batch} (multiply-adds counted from the shapes; elementwise work not)")
    print(f"{'stage':<8}{'M MAC/frame':>12}{'ms/stream':>11}{'G MAC/s':>9}")
    total_ms = 0.0
    for name, ms in zip(("step", "sample", "decode"), times, strict=True):
        per = ms / batch
        total_ms += per
        print(f"{name:<8}{macs[name] / 1e6:>12.1f}{per:>11.2f}{macs[name] / per / 1e6:>9.1f}")
    total = sum(macs.values())
    print(f"{'total':<8}{total / 1e6:>12.1f}{total_ms:>11.2f}{total / total_ms / 1e6:>9.1f}")
    needed = total * frame_rate
    print(f"one real-time stream needs {needed / 1e9:.2f} G MAC/s")
    rates = {f"register-only {name}": rate for name, rate in register_rates().items()}
    rates["BLAS sgemm 2048³"] = sgemm_rate()
    rates[f"these stages at B={batch}"] = total / total_ms * 1e3
    print(f"\n{'rate (one core)':<36}{'G MAC/s':>8}   real-time streams on {ARGS.cores} cores")
    print(f"{'':<44}{'whole cores':>14}{f'at {AUTO_LOAD:.0%}':>10}")
    for name, rate in rates.items():
        streams = ARGS.cores * rate / needed
        print(f"{name:<36}{rate / 1e9:>8.1f}{streams:>14.1f}{AUTO_LOAD * streams:>10.1f}")


if __name__ == "__main__":
    main()
