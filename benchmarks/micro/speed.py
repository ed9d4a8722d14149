"""What the speaking rate costs (issue 41): the time-scaling's CPU per audio second, and the
first audio it delays, each against the model run side by side in one process.

1. CPU: ``TimeScaler`` (engine/tempo.py) fed the model's own audio in 80 ms frames, at each
   speed; CPU seconds per second of audio out, and as a share of what synthesizing that audio
   cost the model (measured here too, same pack, same threads).
2. First audio added: how many engine frames the scaler takes before its first sample (0, or
   1 at 4x where the first frame's audio is all held) times the model's CPU per frame, plus
   the CPU of the push that gives the first samples; then, on the wall clock,
   ``session.enqueue`` → the first frame with samples at speed 1 and at each other speed,
   alternated run by run (``--repeats`` rounds), medians and their ratios to speed 1.

    python -m benchmarks.micro.speed                # full-size random english pack (built once)
    python -m benchmarks.micro.speed --tiny         # the tests' tiny pack (quick check)

Prints the CPU model and its SIMD flags: compare ratios across machines, not times.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.common import build_files
from pipecat_pocket_tts.engine import PocketTTS
from pipecat_pocket_tts.engine.audio.tempo import TimeScaler
from pipecat_pocket_tts.engine.model.config import FRAME_SIZE, SAMPLE_RATE

SPEEDS = (0.5, 0.8, 1.25, 1.5, 2.0, 4.0)
TEXT = "The quick brown fox jumps over the lazy dog, and then it runs back home again."
FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_vnni", "neon", "asimd")


def cpu_line() -> str:
    """The CPU's model name and which of FLAGS it has (Linux /proc/cpuinfo)."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "cpu: unknown (no /proc/cpuinfo)"
    model = next(
        (ln.split(":", 1)[1].strip() for ln in info.splitlines() if "model name" in ln), "?"
    )
    line = next((ln for ln in info.splitlines() if ln.startswith(("flags", "Features"))), "")
    have = set(line.split(":", 1)[1].split()) if ":" in line else set()
    return (
        f"cpu: {model}; flags: {' '.join(f for f in FLAGS if f in have) or 'none of ' + str(FLAGS)}"
    )


def load(tiny: bool, work: Path) -> PocketTTS:
    from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict

    if tiny:
        pack = build_pack(work / "tiny" / "english", tiny_config_dict("standard"), eos_logit=-30.0)
    else:
        pack, _ = build_files(work)
    return PocketTTS.load("english", backend="numpy", model_dir=pack)


def model_audio(tts: PocketTTS, frames: int) -> tuple[np.ndarray, float]:
    """The model's audio of TEXT (at least ``frames`` frames) and its CPU per audio second."""
    start = time.process_time()
    audio = tts.synthesize(TEXT, seed=1, eos_threshold=100.0, max_frames=frames)
    cpu = time.process_time() - start
    return audio, cpu / (audio.shape[0] / SAMPLE_RATE)


def scaling_cpu(audio: np.ndarray, speed: float, rounds: int) -> float:
    """CPU seconds per second of audio out, time-scaling ``audio`` frame by frame."""
    out = 0
    start = time.process_time()
    for _ in range(rounds):
        scaler = TimeScaler(speed)
        for i in range(0, audio.shape[0], FRAME_SIZE):
            out += scaler.push(audio[i : i + FRAME_SIZE]).shape[0]
        out += scaler.flush().shape[0]
    return (time.process_time() - start) / (out / SAMPLE_RATE)


def held_frames(speed: float) -> tuple[int, float]:
    """Engine frames the scaler takes before its first sample out, and the CPU (seconds) of
    the push that gives it (median of 200)."""
    audio = np.sin(np.arange(FRAME_SIZE * 3) * 0.05).astype(np.float32)
    frames = 0
    scaler = TimeScaler(speed)
    while not scaler.push(audio[frames * FRAME_SIZE : (frames + 1) * FRAME_SIZE]).shape[0]:
        frames += 1
    costs = []
    for _ in range(200):
        scaler = TimeScaler(speed)
        for i in range(frames):
            scaler.push(audio[i * FRAME_SIZE : (i + 1) * FRAME_SIZE])
        start = time.process_time()
        scaler.push(audio[frames * FRAME_SIZE : (frames + 1) * FRAME_SIZE])
        costs.append(time.process_time() - start)
    return frames, statistics.median(costs)


def first_audio(tts: PocketTTS, speed: float) -> float:
    """Seconds from enqueue to the first frame with samples (a warm session)."""
    with tts.session(seed=1) as session:
        session.enqueue("Warm up.")
        for frame in session:
            if frame.is_last_in_utterance:
                break
        start = time.perf_counter()
        session.enqueue(TEXT, speed=speed)
        for frame in session:
            if frame.samples.shape[0]:
                return time.perf_counter() - start
    raise RuntimeError("no audio")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="the tests' tiny pack")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "pocket_bench")
    parser.add_argument("--repeats", type=int, default=7, help="first-audio rounds")
    args = parser.parse_args()
    print(cpu_line())
    tts = load(args.tiny, args.work)
    print(f"pack: {'tiny' if args.tiny else 'full-size'} english, numpy backend")

    audio, model_cpu = model_audio(tts, 125)
    seconds = audio.shape[0] / SAMPLE_RATE
    print(f"\nmodel: {model_cpu * 1000:.1f} ms CPU per audio second ({seconds:.1f} s of audio)")
    rounds = max(1, round(60 * SAMPLE_RATE / audio.shape[0]))  # about a minute of audio in
    print(f"{'speed':>6} {'scaling CPU ms/audio s':>24} {'share of the model':>20}")
    for speed in SPEEDS:
        cost = scaling_cpu(audio, speed, rounds)
        print(f"{speed:>6} {cost * 1000:>24.2f} {cost / model_cpu:>19.1%}")

    frame_cpu = model_cpu * FRAME_SIZE / SAMPLE_RATE
    print(f"\nfirst audio added by the scaler (model: {frame_cpu * 1000:.1f} ms CPU a frame):")
    print(f"{'speed':>6} {'frames held':>12} {'push CPU ms':>12} {'added ms':>9} {'in frames':>10}")
    for speed in SPEEDS:
        held, push = held_frames(speed)
        added = held * frame_cpu + push
        print(
            f"{speed:>6} {held:>12} {push * 1000:>12.3f} {added * 1000:>9.1f} "
            f"{added / frame_cpu:>10.2f}"
        )

    times: dict[float, list[float]] = {speed: [] for speed in (1.0, *SPEEDS)}
    for _ in range(args.repeats):
        for speed in times:  # alternated: each round runs every speed once
            times[speed].append(first_audio(tts, speed))
    base = statistics.median(times[1.0])
    print(f"\nfirst audio on the wall clock, warm session, median of {args.repeats} (alternated;")
    print("on a shared machine the spread of the model's own time is far larger than the above):")
    print(f"{'speed':>6} {'ms':>8} {'ratio to 1.0':>13} {'added ms':>9}")
    for speed, values in times.items():
        median = statistics.median(values)
        added = (median - base) * 1000
        print(f"{speed:>6} {median * 1000:>8.1f} {median / base:>13.2f} {added:>9.1f}")


if __name__ == "__main__":
    main()
