"""Characters no tokenizer takes (lone surrogates, noncharacters) never break the engine.

On both pack kinds (``tokenizer.model`` and ``tokenizer.json``), through ``synthesize``,
``Session.enqueue`` and ``Session.feed``: such characters are dropped before tokenizing, so
the audio equals that of the text without them (same seed), and no library error escapes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict
from pipecat_pocket_tts.engine import PocketTTS
from pipecat_pocket_tts.engine.text.tokenizer import Tokenizer, without_lone_surrogates

CLEAN = "Hello world, how are you?"
DIRTY = [
    "Hello \ud83d world, how are you?",  # a lone high surrogate (half an emoji)
    "Hello world\udc00, how are you?",  # a lone low surrogate
    "Hello \ud83d\ude00 world, how are you?",  # a pair given as two code units: an emoji
    "Hello \ufffe\U0010ffff\ue000world, how are you?",  # noncharacters and private use
]


@pytest.fixture(scope="module", params=["model", "json"])
def tts(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> PocketTTS:
    folder = tmp_path_factory.mktemp(f"pack_{request.param}") / "english"
    build_pack(folder, tiny_config_dict("standard"), tokenizer_format=request.param)
    assert (folder / f"tokenizer.{request.param}").exists()
    return PocketTTS.load("english", backend="numpy", model_dir=folder)


def _session_audio(session) -> np.ndarray:
    session.finish()
    return np.concatenate([frame.samples for frame in session])


@pytest.mark.parametrize("text", DIRTY)
def test_synthesize_drops_them(tts: PocketTTS, text: str) -> None:
    expected = tts.synthesize(CLEAN, seed=3)
    np.testing.assert_array_equal(tts.synthesize(text, seed=3), expected)


@pytest.mark.parametrize("normalize", [True, False])
def test_enqueue_drops_them(tts: PocketTTS, normalize: bool) -> None:
    clean = tts.session(seed=3, normalize=normalize)
    assert clean.enqueue(CLEAN) == 0
    expected = _session_audio(clean)
    for text in DIRTY:
        session = tts.session(seed=3, normalize=normalize)
        assert session.enqueue(text) == 0
        np.testing.assert_array_equal(_session_audio(session), expected)


def test_feed_drops_them(tts: PocketTTS) -> None:
    clean = tts.session(seed=3)
    for piece in ("Hello ", "world, how ", "are you?"):
        clean.feed(piece)
    clean.flush()
    expected = _session_audio(clean)
    for pieces in (
        ("Hello \ud83d", " world, how ", "are you?"),
        ("Hello ", "\ud83d", "\ude00 world, how are you?"),  # the pair split across feeds
        ("Hello world\udc00", ", how are you?"),
    ):
        session = tts.session(seed=3)
        for piece in pieces:
            session.feed(piece)
        assert session.flush() or session.pending
        np.testing.assert_array_equal(_session_audio(session), expected)


def test_text_of_only_such_characters_has_nothing_to_say(tts: PocketTTS) -> None:
    session = tts.session()
    assert session.enqueue("\ud83d\udc00") is None
    assert session.feed("\ud83d") == [] and session.flush() == []
    session.cancel()


def test_tokenizer_leaves_lone_surrogates_out(sp_model_path: Path, tokenizer_json_path) -> None:
    assert without_lone_surrogates("abc") == "abc"
    assert without_lone_surrogates("a\ud83d\ude00b\udc00") == "a😀b"
    for path in (sp_model_path, tokenizer_json_path):
        tokenizer = Tokenizer.from_file(path)
        assert tokenizer.encode_list("Hello \ud83dworld") == tokenizer.encode_list("Hello world")
        assert tokenizer.count("\ud83d") == tokenizer.count("")
        assert tokenizer.filter_unrepresentable("Hello\ud83dworld") == "Hello world"
        assert tokenizer.filter_unrepresentable("Hi \ud83d") == "Hi"
        assert not tokenizer.is_representable("\ud83d")
