"""When a reply's words reach Pipecat after a greeting, against when they are heard (real clock).

    python -m benchmarks.soak.word_release                              # this checkout's code
    python -m benchmarks.soak.word_release --against /work/base-release # and an older one

The pipeline is wired as a Pipecat bot is: ``PocketTTSService → output transport →
LLMAssistantAggregator`` (``transport.output()`` before ``context_aggregator.assistant()``), word
timestamps on. The output transport is ``benchmarks.soak.pipeline.RealtimeOutput``: it plays audio
at its real duration on the wall clock, as a sound card or a WebRTC track does, and does not hold
the pipeline back while its queue fills, so the engine runs ahead of the playback. The driver queues
a greeting (``TTSSpeakFrame``) and, right behind it, an LLM reply streamed token by token, as a bot
that greets and then answers a queued user turn does.

Per run, each word's *release* (when its ``TTSTextFrame`` reaches the assistant aggregator)
is set against when it is *heard* (when the transport plays the audio at the word's start, on
the transport's own clock): release − heard per context, negative meaning early. Then the
user barges in (an ``InterruptionFrame``, as Pipecat's user-started-speaking path sends) at
points inside the reply, and the words the assistant context keeps are set against the words
whose start was played. With ``--against`` each code base runs in a fresh process
(``PYTHONPATH``), on the same tiny random-weight pack, and the figures are printed side by side.

The pack's EOS never fires, so each chunk runs its whole frame budget: the greeting's words
are said in its first 0.5 s and its audio goes on to 3.7 s, as a voice's trailing pause does;
the reply is two sentences, 10.8 s. A run takes as long as its audio plays (four runs per code).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pipecat.frames.frames import (
    EndFrame,
    Frame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    OutputAudioRawFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    TTSTextFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMAssistantAggregator
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.tts_service import TextAggregationMode
from pipecat.workers.runner import WorkerRunner

from benchmarks.common import REPO, module_command, never_eos_pack, tree_env
from benchmarks.soak.pipeline import Ledger, RealtimeOutput
from benchmarks.soak.replies import quiet_pipecat

RATE = 24000
BYTES_PER_SECOND = 2 * RATE
NS = 1_000_000_000
HEADS = ((1, 2), (0, 1))  # the tiny pack names no checkpoint: word times read from these heads
GREETING = "Hi there."
REPLY = "Sure, at nine. Or ten."
TOKEN_DELAY_S = 0.01  # between streamed LLM tokens
READY_TIMEOUT_S = 120.0


@dataclass
class Word:
    text: str
    context: int  # 0: the greeting, 1: the reply
    start_s: float  # the engine's time of the word, from the start of its context's audio


@dataclass
class RunResult:
    """One real-time run, all times in seconds on ``time.monotonic``."""

    context_audio_s: list[float]  # audio per context, in playing order
    words: list[Word]
    released: list[tuple[str, float]]  # word frames reaching the aggregator, in order
    heard: list[float | None]  # per word: when its start played (None: never)
    messages: list[str]  # the assistant context's messages
    barge_in_reply_s: float | None = None  # into the reply's audio, when the audio stopped
    heard_words: list[str] = field(default_factory=list)  # reply words begun by then


class PlayLog(RealtimeOutput):
    """``RealtimeOutput`` noting where each chunk starts playing, which context's audio comes
    where in the played stream, and where the playback stood when the user barged in."""

    def __init__(self, sample_rate: int) -> None:
        super().__init__(Ledger(), sample_rate)
        self.chunks: list[tuple[int, float, int]] = []  # (byte offset, monotonic start, size)
        self.context_offsets: dict[str, int] = {}  # context id -> its first byte in the stream
        self.received_bytes = 0
        self.interrupted_at: float | None = None  # monotonic time the audio stopped
        self.reply_started = asyncio.Event()
        self._wake_at: int | None = None
        self._reached = asyncio.Event()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        if isinstance(frame, TTSAudioRawFrame) and frame.context_id:
            self.context_offsets.setdefault(frame.context_id, self.received_bytes)
            self.received_bytes += len(frame.audio)
            if len(self.context_offsets) == 2:
                self.reply_started.set()
        if isinstance(frame, InterruptionFrame) and self.interrupted_at is None:
            self.interrupted_at = time.monotonic()
        await super().process_frame(frame, direction)

    async def write_audio_frame(self, frame: OutputAudioRawFrame) -> bool:
        offset = self.played_bytes
        written = await super().write_audio_frame(frame)  # returns as the chunk starts playing
        self.chunks.append((offset, time.monotonic(), len(frame.audio)))
        if self._wake_at is not None and self.played_bytes > self._wake_at:
            self._reached.set()
        return written

    async def played_up_to(self, byte_offset: int) -> None:
        """Wait until the playback has begun the chunk holding ``byte_offset``."""
        self._wake_at = byte_offset
        if self.played_bytes <= byte_offset:
            await self._reached.wait()

    def time_of(self, byte_offset: int) -> float | None:
        """When the byte at ``byte_offset`` of the played stream played (None: never)."""
        for offset, started, size in self.chunks:
            if offset <= byte_offset < offset + size:
                return started + (byte_offset - offset) / BYTES_PER_SECOND
        return None

    def position_at(self, moment: float) -> float:
        """Seconds of the stream played by ``moment`` (the chunk then playing, partly)."""
        played = 0.0
        for offset, started, size in self.chunks:
            if started > moment:
                break
            played = (offset + min((moment - started) * BYTES_PER_SECOND, size)) / BYTES_PER_SECOND
        return played


class ReleaseTap(FrameProcessor):
    """Between the output transport and the aggregator: when each word frame is released."""

    def __init__(self) -> None:
        super().__init__()
        self.released: list[tuple[str, float]] = []

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, TTSTextFrame) and direction == FrameDirection.DOWNSTREAM:
            self.released.append((frame.text, time.monotonic()))
        await self.push_frame(frame, direction)


def reply_frames() -> list[Frame]:
    """The LLM reply as an LLM streams it: pieces of up to 4 characters."""
    words = re.findall(r"\s*\S+", REPLY)
    pieces = [word[i : i + 4] for word in words for i in range(0, len(word), 4)]
    return [LLMFullResponseStartFrame(), *map(LLMTextFrame, pieces), LLMFullResponseEndFrame()]


async def run_once(pack: Path, mode: str, barge_in_reply_s: float | None) -> RunResult:
    """A greeting, then the reply queued behind it; barge in that far into the reply's audio."""
    from pipecat_pocket_tts import PocketTTSService

    given: dict[str, list[tuple[str, float]]] = {}

    class RecordingService(PocketTTSService):
        """Notes the engine's word times per context as the service hands them to Pipecat."""

        async def add_word_timestamps(self, word_times, context_id=None, *args, **kwargs):
            given.setdefault(context_id, []).extend(word_times)
            await super().add_word_timestamps(word_times, context_id, *args, **kwargs)

    aggregation = TextAggregationMode.TOKEN if mode == "token" else TextAggregationMode.SENTENCE
    tts = RecordingService(
        model_dir=pack,
        backend="numpy",
        settings=PocketTTSService.Settings(seed=3),
        text_aggregation_mode=aggregation,
    )
    output = PlayLog(RATE)
    tap = ReleaseTap()
    context = LLMContext()
    worker = PipelineWorker(
        Pipeline([tts, output, tap, LLMAssistantAggregator(context)]),
        params=PipelineParams(audio_out_sample_rate=RATE),
        cancel_on_idle_timeout=False,
    )
    started = asyncio.Event()

    @tts.event_handler("on_model_loaded")  # the pipeline runs and the model is loaded
    async def _started(_tts):
        started.set()

    async def drive() -> None:
        await asyncio.wait_for(started.wait(), READY_TIMEOUT_S)
        tts.engine.timestamp_heads = HEADS
        await worker.queue_frame(TTSSpeakFrame(GREETING))
        for frame in reply_frames():
            await worker.queue_frame(frame)
            if isinstance(frame, LLMTextFrame):
                await asyncio.sleep(TOKEN_DELAY_S)
        if barge_in_reply_s is not None:
            await output.reply_started.wait()
            reply_offset = list(output.context_offsets.values())[1]
            await output.played_up_to(reply_offset + round(barge_in_reply_s * RATE) * 2)
            await worker.queue_frame(InterruptionFrame())
            await asyncio.sleep(0.2)  # the interruption reaches the aggregator
        await worker.queue_frame(EndFrame())

    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    await asyncio.gather(runner.run(), drive())
    return summarize(output, tap, context, given, barge_in_reply_s)


def summarize(
    output: PlayLog,
    tap: ReleaseTap,
    context: LLMContext,
    given: dict[str, list[tuple[str, float]]],
    barge_in_reply_s: float | None,
) -> RunResult:
    offsets = list(output.context_offsets.items())  # playing order
    ends = [o for _, o in offsets[1:]] + [output.received_bytes]
    context_audio_s = [
        (end - o) / BYTES_PER_SECOND for (_, o), end in zip(offsets, ends, strict=True)
    ]
    words, heard = [], []
    for index, (context_id, offset) in enumerate(offsets):
        for text, start in given.get(context_id, []):
            words.append(Word(text, index, start))
            heard.append(output.time_of(offset + round(start * RATE) * 2))
    result = RunResult(
        context_audio_s=context_audio_s,
        words=words,
        released=tap.released,
        heard=heard,
        messages=[_content(m) for m in context.get_messages() if m.get("role") == "assistant"],
    )
    if barge_in_reply_s is not None and output.interrupted_at is not None and len(offsets) > 1:
        stopped_s = output.position_at(output.interrupted_at) - offsets[1][1] / BYTES_PER_SECOND
        result.barge_in_reply_s = stopped_s
        result.heard_words = [w.text for w in words if w.context == 1 and w.start_s <= stopped_s]
    return result


def _content(message) -> str:
    content = message["content"]
    if isinstance(content, list):
        content = "".join(part.get("text", "") for part in content)
    return content


def early_ms(run: RunResult) -> list[dict[str, float]]:
    """Per context: release − heard over its words (ms; negative: released before heard)."""
    out = []
    released = iter(run.released)
    gaps: dict[int, list[float]] = {}
    for word, heard in zip(run.words, run.heard, strict=True):
        frame = next(released, None)
        if frame is None or heard is None:
            continue
        if frame[0] != word.text:
            raise SystemExit(f"word frames out of step: {frame[0]!r} released for {word.text!r}")
        gaps.setdefault(word.context, []).append((frame[1] - heard) * 1000)
    for index in sorted(gaps):
        values = gaps[index]
        out.append({"min": min(values), "median": statistics.median(values), "max": max(values)})
    return out


def child(args: argparse.Namespace) -> int:
    """Run the full reply and the barge-ins on the code on ``sys.path``; print JSON."""
    import pipecat_pocket_tts

    runs = [asyncio.run(run_once(args.pack, args.mode, None))]
    for point in args.barge_in:
        runs.append(asyncio.run(run_once(args.pack, args.mode, point)))
    print(json.dumps({"code": pipecat_pocket_tts.__file__, "runs": [asdict(r) for r in runs]}))
    return 0


def run_code(root: Path, args: argparse.Namespace, pack: Path) -> dict:
    """Run this benchmark on the code in ``root`` in a fresh process."""
    command = module_command(__spec__.name, "--child", "--pack", str(pack), "--mode", args.mode)
    command += ["--barge-in", *map(str, args.barge_in)]
    done = subprocess.run(command, env=tree_env(root), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the run on {root} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def report(label: str, result: dict) -> list[str]:
    runs = [RunResult(**{**r, "words": [Word(**w) for w in r["words"]]}) for r in result["runs"]]
    full = runs[0]
    greeting_s, reply_s = [*full.context_audio_s, 0.0, 0.0][:2]
    lines = [f"{label}: {result['code']}"]
    last_greeting_word = max((w.start_s for w in full.words if w.context == 0), default=0.0)
    lines.append(
        f"  greeting {greeting_s:.2f} s of audio (its last word starts at "
        f"{last_greeting_word:.2f} s), reply {reply_s:.2f} s"
    )
    for name, gap in zip(("greeting", "reply"), early_ms(full), strict=False):  # may lack one
        lines.append(
            f"  {name:8} release − heard: earliest {gap['min']:+8.1f} ms, "
            f"median {gap['median']:+8.1f} ms, latest {gap['max']:+8.1f} ms"
        )
    for run in runs[1:]:
        kept = run.messages[1].split() if len(run.messages) > 1 else []
        heard = run.heard_words
        verdict = "exact" if kept == heard else f"{len(kept) - len(heard):+d} words"
        lines.append(
            f"  barge-in {run.barge_in_reply_s:5.2f} s into the reply: heard {len(heard):2d} "
            f"words, context holds {len(kept):2d} ({verdict})"
        )
        if kept != heard:
            lines.append(f"    heard: {' '.join(heard)!r}; assistant messages: {run.messages}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, help="also run this checkout's code (a folder)")
    parser.add_argument("--mode", choices=["sentence", "token"], default="sentence")
    parser.add_argument(
        "--barge-in",
        type=float,
        nargs="*",
        default=[0.1, 0.2, 3.0],
        help="seconds into the reply's audio",
    )
    parser.add_argument("--pack", type=Path, help="a pack folder (default: a tiny one)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    quiet_pipecat()
    if args.child:
        return child(args)
    with tempfile.TemporaryDirectory() as tmp:
        pack = args.pack or never_eos_pack(Path(tmp), "tiny")
        lines = []
        if args.against is not None:
            lines += report("against", run_code(args.against, args, pack))
        lines += report("this code", run_code(REPO, args, pack))
    print(f"mode {args.mode}, barge-ins at {args.barge_in} s into the reply")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
