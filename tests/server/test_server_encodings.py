"""Audio encodings of our dialect (G.711 μ-law against the reference coder, the rates each
encoding is sent at, through the engine's ``FrameEncoder``) and the protocol's message checks,
without a server."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from pipecat_pocket_tts import wire
from pipecat_pocket_tts.engine import mulaw
from pipecat_pocket_tts.engine.errors import InvalidSettingError
from pipecat_pocket_tts.server.dialects.native import NativeDialect, check_format


def test_mulaw_is_the_g711_reference_coding_of_every_sample() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        audioop = pytest.importorskip("audioop")  # CPython's G.711 coder (until 3.13)
    every = np.arange(-32768, 32768, dtype=np.int16)
    reference = np.frombuffer(audioop.lin2ulaw(every.tobytes(), 2), dtype=np.uint8)
    assert np.array_equal(mulaw(every), reference)


def test_mulaw_frames_are_8_khz_and_seamless() -> None:
    encoder = NativeDialect().encoder(wire.Start("c", encoding="mulaw", sample_rate=8000))
    tone = np.sin(2 * np.pi * 440 * np.arange(1920 * 10) / 24000).astype(np.float32) * 0.5
    out = b"".join(encoder.encode(frame) for frame in tone.reshape(10, 1920))
    out += encoder.encode(np.zeros(0, np.float32), last=True)
    assert len(out) == 640 * 10  # 80 ms at 8 kHz, one byte a sample


@pytest.mark.parametrize(
    ("encoding", "rate", "ok"),
    [("pcm_s16le", 24000, True), ("float32", 24000, True), ("mulaw", 8000, True),
     ("mulaw", 24000, False), ("pcm_s16le", 16000, False), ("opus", 48000, False)],
)  # fmt: skip
def test_formats(encoding: str, rate: int, ok: bool) -> None:
    if ok:
        check_format(encoding, rate)
    else:
        with pytest.raises(InvalidSettingError):
            check_format(encoding, rate)


def test_messages_round_trip_and_refuse_wrong_fields() -> None:
    text = wire.Text("c", 3, "Hello", complete=True, lexicon={"Dr.": "Doctor"}, seed=5)
    assert wire.decode_client(wire.encode(text)) == text
    header = wire.AudioHeader("c", 3, 0, 1, words=[wire.WordTime("Hello", 0, 0.0, 0.0, False)])
    assert wire.unpack_audio(wire.pack_audio(header, b"\x00\x01")) == (header, b"\x00\x01")
    for raw, code in [
        ('{"type": "text", "context": "c", "utterance": "3", "text": "x"}', 4002),
        ('{"type": "mark", "context": "c", "id": 1, "extra": 2}', 4002),
        ('{"type": "start", "context": "c", "seed": true}', 4002),
        ('{"type": "start", "context": "c", "lexicon": {"a": 1}}', 4002),
        ('{"type": "shout"}', 4003),
    ]:
        with pytest.raises(wire.ProtocolError) as refused:
            wire.decode_client(raw)
        assert refused.value.code == code, raw
