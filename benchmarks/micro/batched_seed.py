"""How far a seeded stream computed in a batch is from the same stream computed alone.

    python -m benchmarks.micro.batched_seed                    # a tiny random-weight pack
    python -m benchmarks.micro.batched_seed --model-dir DIR    # a pack folder (full size)

"Same seed, text and voice give the same audio" holds bit for bit for a stream computed
alone. A stream that shares the scheduler's ticks with others runs its FlowLM step, sampler
and Mimi decode as rows of batched matrix products, whose float32 sums round in another
order. Printed: for 1..N streams beside it, the signal-to-difference ratio in dB of the
batched audio against the audio alone (higher: closer; 16-bit audio resolves about 96 dB),
the largest sample difference, and whether the lengths match (the EOS decision may move).
"""

from __future__ import annotations

import argparse
import tempfile
import threading
from pathlib import Path

import numpy as np

from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict
from pipecat_pocket_tts.engine import PocketTTS

TEXT = "The same seed should give the same voice, whatever else is speaking at the time."


def speak(tts: PocketTTS, seed: int, out: dict[int, np.ndarray], start: threading.Barrier):
    session = tts.session(seed=seed)
    start.wait()
    session.enqueue(TEXT)
    session.finish()
    out[seed] = np.concatenate([frame.samples for frame in session])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model-dir", type=Path)
    parser.add_argument("--max-others", type=int, default=4)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as root:
        pack = args.model_dir or build_pack(Path(root) / "english", tiny_config_dict("standard"))
        with PocketTTS.load("english", model_dir=pack, backend="numpy") as tts:
            alone: dict[int, np.ndarray] = {}
            speak(tts, 1, alone, threading.Barrier(1))
            print(f"pack: {pack}  audio alone: {alone[1].size / 24000:.2f} s")
            print("streams beside it   ratio dB   max |difference|   same length")
            for others in range(1, args.max_others + 1):
                out: dict[int, np.ndarray] = {}
                barrier = threading.Barrier(others + 1)
                threads = [
                    threading.Thread(target=speak, args=(tts, seed, out, barrier))
                    for seed in range(1, others + 2)
                ]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                a, b = alone[1], out[1]
                n = min(a.size, b.size)
                diff = a[:n] - b[:n]
                rms_diff = float(np.sqrt(np.mean(diff**2)))
                ratio = (
                    float("inf")
                    if rms_diff == 0
                    else 20 * np.log10(float(np.sqrt(np.mean(a[:n] ** 2))) / rms_diff)
                )
                print(
                    f"{others:17d}   {ratio:8.1f}   {float(np.max(np.abs(diff))):16.2e}   "
                    f"{a.size == b.size}"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
