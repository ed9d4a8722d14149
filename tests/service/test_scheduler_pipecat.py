"""Eight PocketTTSServices in one process share one model and its scheduler, each with its own
barge-ins: no audio of an interrupted turn, no cross-talk, every reply after a barge-in speaks
(all of it, to its frame limit)."""

from __future__ import annotations

import asyncio
import random
import re
from pathlib import Path

import numpy as np
import pytest
from frame_recorder import Until, run_script
from pipecat.frames.frames import (
    ErrorFrame,
    Frame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    MetricsFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.tests.utils import run_test
from test_service import assert_no_stale_audio, is_audio, is_interruption

from pipecat_pocket_tts import PocketTTSService
from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict
from pipecat_pocket_tts.engine import PocketTTS
from pipecat_pocket_tts.engine.model.config import FRAME_SIZE
from pipecat_pocket_tts.engine.text.planner import TextPlanner
from pipecat_pocket_tts.service.turns import AdmissionWaitMetricsData

START = 60.0  # run_test start timeout: eight services load and warm up at once
SERVICES = 8
LONG_REPLY = " ".join(
    f"This is sentence number {n} of a long answer that keeps the voice busy." for n in range(6)
)


@pytest.fixture(scope="module")
def long_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny pack whose EOS never fires: every reply runs until it is interrupted."""
    folder = tmp_path_factory.mktemp("scheduler_pipecat") / "english"
    return build_pack(folder, tiny_config_dict("standard"), voices=("alba",), eos_logit=-30.0)


def _service(pack: Path) -> PocketTTSService:
    return PocketTTSService(
        model_dir=pack, backend="numpy", settings=PocketTTSService.Settings(seed=7)
    )


def _llm_turn(text: str) -> list[Frame]:
    tokens = re.findall(r"\s*\S+", text)
    return [LLMFullResponseStartFrame(), *map(LLMTextFrame, tokens), LLMFullResponseEndFrame()]


def _script(rng: random.Random, last: str) -> list[Frame | Until]:
    """Two or three replies cut by barge-ins at random moments (after 1 to 6 of their audio
    frames), then one spoken to the end."""
    script: list[Frame | Until] = []
    for n in range(rng.randint(2, 3)):
        script += [*_llm_turn(f"Reply {n}. {LONG_REPLY}")[:-1], Until(is_audio, rng.randint(1, 6))]
        script += [InterruptionFrame(), Until(is_interruption)]
    return [*script, TTSSpeakFrame(last)]


def _final_turn_audio(frames: list[Frame]) -> tuple[list[str], np.ndarray]:
    """Texts and int16 audio (24 kHz) of the last turn (after the last TTSStartedFrame)."""
    start = max(i for i, f in enumerate(frames) if isinstance(f, TTSStartedFrame))
    turn = frames[start:]
    texts = [f.text for f in turn if isinstance(f, TTSTextFrame)]
    pcm = b"".join(f.audio for f in turn if isinstance(f, TTSAudioRawFrame))
    return texts, np.frombuffer(pcm, dtype="<i2")


async def test_eight_services_with_barge_ins_share_one_scheduler(long_pack: Path) -> None:
    finals = [f"Service {i} is still here." for i in range(SERVICES)]
    services = [_service(long_pack) for _ in range(SERVICES)]
    scripts = [_script(random.Random(i), finals[i]) for i in range(SERVICES)]
    results = await asyncio.gather(
        *(
            run_script(service, script, start_timeout=START)
            for service, script in zip(services, scripts, strict=True)
        )
    )
    model = PocketTTS.load_shared("english", backend="numpy", model_dir=long_pack)
    planner = TextPlanner(model.config, model.tokenizer)
    # EOS never fires in this pack: a reply spoken to its end fills every chunk's frame limit.
    expected = [sum(p.max_frames for p in planner.plan(text)) * FRAME_SIZE for text in finals]
    for down, final, samples in zip(results, finals, expected, strict=True):
        assert_no_stale_audio(down)
        texts, audio = _final_turn_audio(down)
        assert " ".join(texts) == final  # its own reply's words, nobody else's
        last_start = max(i for i, f in enumerate(down) if isinstance(f, TTSStartedFrame))
        assert any(isinstance(f, TTSStoppedFrame) for f in down[last_start:])  # it ended
        assert audio.shape == (samples,)  # the whole reply
        assert np.abs(audio).max() > 0
    assert model.scheduler.wait_parked(30.0)


async def test_a_turn_that_waits_for_a_slot_is_reported_as_a_metric(long_pack: Path) -> None:
    def limited() -> PocketTTSService:  # one slot on the shared model: the second turn waits
        return PocketTTSService(model_dir=long_pack, backend="numpy", max_streams=1, warmup=False)

    services = [limited(), limited()]
    runs = [
        run_test(
            service,
            frames_to_send=[TTSSpeakFrame(f"Caller {i} speaks now.")],
            pipeline_params=PipelineParams(enable_metrics=True),
            start_timeout=START,
        )
        for i, service in enumerate(services)
    ]
    results = await asyncio.gather(*runs)
    waits = {
        service.name: [
            data
            for frame in down
            if isinstance(frame, MetricsFrame)
            for data in frame.data
            if isinstance(data, AdmissionWaitMetricsData)
        ]
        for service, (down, _) in zip(services, results, strict=True)
    }
    assert sorted(len(w) for w in waits.values()) == [0, 1]  # one turn waited, once
    (name, (data,)) = next((n, w) for n, w in waits.items() if w)
    assert data.processor == name and data.model == "english"
    assert data.value >= 0 and data.streams_speaking == 1
    for down, _ in results:  # both spoke
        assert any(isinstance(f, TTSAudioRawFrame) for f in down)


class _HoldEndUntilAnotherCallSpeaks(FrameProcessor):
    """Holds the reply's LLMFullResponseEndFrame until another stream on the service's model
    has taken its only slot (``max_streams=1``) and speaks: the reply's audio is then all made,
    its session idle, and its end of turn must not wait for that other call."""

    def __init__(self, service: PocketTTSService) -> None:
        super().__init__()
        self._service = service
        self.engine = None  # the service's model
        self.reply_audio = asyncio.Event()  # set downstream at the reply's first audio
        self.other = None  # the other call's session on it

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMFullResponseEndFrame):
            await self.reply_audio.wait()  # the reply holds the slot: the other call waits
            self.engine = engine = self._service.engine
            self.other = engine.session(seed=3, max_frames=100_000)
            self.other.enqueue(" ".join([LONG_REPLY] * 20))
            # its first frame: the reply's audio is all made and the other call has the slot
            first = await asyncio.to_thread(next, iter(self.other))
            assert first.frame_index == 0
        await self.push_frame(frame, direction)


class _SnapshotAtStop(FrameProcessor):
    """Notes whether the other call still held the slot when the turn's end came out."""

    def __init__(self, gate: _HoldEndUntilAnotherCallSpeaks) -> None:
        super().__init__()
        self._gate = gate
        self.other_speaking_at_stop: bool | None = None

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, TTSAudioRawFrame):
            self._gate.reply_audio.set()
        if isinstance(frame, TTSStoppedFrame) and self._gate.other is not None:
            self.other_speaking_at_stop = self._gate.other.pending == 1
        await self.push_frame(frame, direction)


async def test_an_idle_turns_end_does_not_wait_for_another_calls_slot(engine_pack_dir: Path):
    service = PocketTTSService(
        model_dir=engine_pack_dir,
        backend="numpy",
        max_streams=1,
        warmup=False,
        stop_frame_timeout_s=300,  # only the turn's end marker may end it, not a quiet spell
    )
    gate = _HoldEndUntilAnotherCallSpeaks(service)
    snapshot = _SnapshotAtStop(gate)
    # Three words: a sentence of one or two waits for the turn's next one (short sentences).
    reply = [LLMFullResponseStartFrame(), LLMTextFrame("Hello there, friend."), LLMTextFrame(" 🙂")]
    try:
        down, _ = await asyncio.wait_for(  # hang guard only: before the fix it never ended
            run_test(
                Pipeline([gate, service, snapshot]),
                frames_to_send=[*reply, LLMFullResponseEndFrame()],
                start_timeout=START,
            ),
            timeout=240,
        )
        kinds = [type(f) for f in down if isinstance(f, TTSAudioRawFrame | TTSStoppedFrame)]
        assert kinds[-1] is TTSStoppedFrame and TTSAudioRawFrame in kinds
        assert snapshot.other_speaking_at_stop  # out while the other call held the slot
    finally:
        if gate.other is not None:
            gate.other.cancel()


class _SpeakOnceTheSlotIsTaken(FrameProcessor):
    """Before letting a ``TTSSpeakFrame`` on, puts another call on the service's model
    (``max_streams=1``) and waits for its first frame: the turn then waits for the slot. The
    slot is freed once the service has kept the turn's context alive ``keepalives`` times
    (longer than Pipecat lets a context go quiet), or at once if an error comes upstream
    (Pipecat gave up on the context: the test then fails on it)."""

    def __init__(self, service: PocketTTSService, keepalives: asyncio.Event) -> None:
        super().__init__()
        self._service = service
        self._keepalives = keepalives
        self.errored = asyncio.Event()
        self.other = None
        self._release: asyncio.Task | None = None
        self._loaded = asyncio.Event()  # the service loads in the background from setup on
        service.event_handler("on_model_loaded")(self._model_loaded)

    async def _model_loaded(self, _service: PocketTTSService) -> None:
        self._loaded.set()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, ErrorFrame):
            self.errored.set()
        if isinstance(frame, TTSSpeakFrame):
            await self._loaded.wait()
            self.other = self._service.engine.session(seed=3, max_frames=100_000)
            self.other.enqueue(" ".join([LONG_REPLY] * 20))
            await asyncio.to_thread(next, iter(self.other))  # it holds the only slot
            self._release = asyncio.create_task(self._free_the_slot())
        await self.push_frame(frame, direction)

    async def _free_the_slot(self) -> None:
        waits = [asyncio.ensure_future(e.wait()) for e in (self._keepalives, self.errored)]
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for wait in waits:
            wait.cancel()
        await asyncio.to_thread(self.other.cancel)


async def test_a_turn_waiting_longer_than_pipecats_quiet_timeout_is_not_lost(
    long_pack: Path, monkeypatch
) -> None:
    """Pipecat ends an audio context that gets nothing for ``stop_frame_timeout_s`` and reports
    it as completed with no audio (three in a row write the service off): under load, a turn
    waiting for a scheduler slot lost its reply so. The service keeps the context alive while
    the engine owes it audio."""
    from pipecat_pocket_tts.service import output as output_module

    refreshed: list[str] = []
    enough = asyncio.Event()
    timeout = 1.5  # Pipecat's quiet timeout here; keepalives every 0.5 s
    refresh = output_module.refresh_audio_context

    def counting(service, context_id: str) -> None:
        refreshed.append(context_id)
        if len(refreshed) >= 5:  # more than the timeout has passed since the turn queued
            enough.set()
        refresh(service, context_id)

    monkeypatch.setattr(output_module, "refresh_audio_context", counting)
    service = PocketTTSService(
        model_dir=long_pack,
        backend="numpy",
        max_streams=1,
        warmup=False,
        stop_frame_timeout_s=timeout,
    )
    gate = _SpeakOnceTheSlotIsTaken(service, enough)
    try:
        down, up = await run_test(
            Pipeline([gate, service]),
            frames_to_send=[TTSSpeakFrame("Caller two speaks now.")],
            start_timeout=START,
        )
    finally:
        if gate.other is not None:
            gate.other.cancel()
    assert not [f for f in up if isinstance(f, ErrorFrame)]
    assert enough.is_set() and len(set(refreshed)) == 1  # the one turn, kept alive throughout
    kinds = [type(f) for f in down if isinstance(f, TTSAudioRawFrame | TTSStoppedFrame)]
    assert TTSAudioRawFrame in kinds and kinds[-1] is TTSStoppedFrame  # it spoke, then ended
