"""The chunk loop (EOS rules, BOS, limits), the decoder's fade and continuity, and determinism
of the three synthesis paths (synthesize, stream, session) on a tiny pack."""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field

import numpy as np
import pytest
from chunk_loop import AudioDecoder, generate_chunk
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipecat_pocket_tts.devpack import tiny_config_dict
from pipecat_pocket_tts.engine import FRAME_SIZE, PocketTTS
from pipecat_pocket_tts.engine.audio.signal import post_process
from pipecat_pocket_tts.engine.backends.base import (
    Backend,
    BackendCapabilities,
    StepOutput,
    VoiceKV,
)
from pipecat_pocket_tts.engine.frames import GenerationSettings
from pipecat_pocket_tts.engine.model.config import ModelConfig
from pipecat_pocket_tts.engine.runtime.generation import (
    FADE_IN_SAMPLES,
    MIN_FRAMES_BEFORE_EOS,
    draw_noise,
)
from pipecat_pocket_tts.engine.text.planner import TextPlanner
from pipecat_pocket_tts.engine.text.prepare import PreparedChunk

CONFIG = ModelConfig.from_dict("english", tiny_config_dict("standard"))
LATENT = CONFIG.flow_lm.latent_dim
HIDDEN = CONFIG.flow_lm.head_input_dim


# -- a scripted backend: EOS logits from a list, every call recorded ---------------------


@dataclass
class FakeState:
    position: int = 0
    capacity: int = 1000

    def copy(self) -> FakeState:
        return FakeState(self.position, self.capacity)


@dataclass
class ScriptedBackend(Backend):
    eos_logits: list[float]
    calls: list[tuple] = field(default_factory=list)
    name: str = "scripted"
    config: ModelConfig = CONFIG

    @property
    def capabilities(self) -> BackendCapabilities:
        return BackendCapabilities("a scripted test backend cannot clone", None, 1)

    def embed_text(self, token_ids):
        self.calls.append(("embed", len(token_ids)))
        return np.zeros((len(token_ids), CONFIG.flow_lm.transformer.d_model), np.float32)

    def new_flow_state(self):
        return FakeState()

    def prefill(self, state, embeddings):
        self.calls.append(("prefill", len(embeddings)))
        state.position += len(embeddings)

    def step(self, state, latent):
        index = sum(1 for c in self.calls if c[0] == "step")
        self.calls.append(("step", None if latent is None else float(latent[0])))
        state.position += 1
        logit = self.eos_logits[index] if index < len(self.eos_logits) else -100.0
        return StepOutput(hidden=np.full(HIDDEN, index, np.float32), eos_logit=logit)

    def sample(self, hidden, noise):
        self.calls.append(("sample",))
        return hidden[:LATENT] + noise

    def bos_before_voice(self):
        return None

    def flow_state_from_voice(self, voice: VoiceKV):
        return FakeState(voice.length)

    def voice_from_flow_state(self, state):
        raise NotImplementedError

    def new_mimi_state(self):
        return {"frames": 0}

    def decode(self, state, latent):
        state["frames"] += 1
        return np.full(FRAME_SIZE, state["frames"], np.float32)

    def encode(self, audio):
        raise NotImplementedError


def chunk(frames_after_eos: int = 3, max_frames: int = 50, tokens: int = 5) -> PreparedChunk:
    ids = np.arange(tokens, dtype=np.int64)
    return PreparedChunk("Hi.", ids, frames_after_eos, max_frames, False)


def run(backend, plan, *, threshold=-4.0, max_frames=None, voice=None, cancelled=None):
    voice = voice or FakeState(position=10)
    settings = GenerationSettings(temperature=0.0, eos_threshold=threshold, max_frames=max_frames)
    rng = np.random.default_rng(0)
    return list(generate_chunk(backend, voice, plan, settings, rng, cancelled or (lambda: False)))


def test_eos_stops_after_frames_after_eos_counting_the_eos_frame():
    # EOS first allowed and seen at step 8: frames 8, 9, 10 are the 3 frames "after" EOS
    # (upstream breaks at step e + frames_after_eos before emitting it).
    backend = ScriptedBackend(eos_logits=[-10.0] * 8 + [0.0] * 20)
    frames = run(backend, chunk(frames_after_eos=3))
    assert [f.frame_index for f in frames] == list(range(11))
    assert [f.is_last for f in frames] == [False] * 10 + [True]
    assert sum(1 for c in backend.calls if c[0] == "step") == 11  # no wasted step


def test_eos_is_ignored_in_the_first_frames():
    backend = ScriptedBackend(eos_logits=[5.0] * 40)  # EOS on every step
    frames = run(backend, chunk(frames_after_eos=1))
    assert len(frames) == MIN_FRAMES_BEFORE_EOS + 1  # EOS counted at step 6 only


def test_eos_needs_a_logit_strictly_above_the_threshold():
    backend = ScriptedBackend(eos_logits=[-4.0] * 10 + [-3.9] * 10)
    frames = run(backend, chunk(frames_after_eos=2), threshold=-4.0)
    assert len(frames) == 12


def test_without_eos_the_chunk_stops_at_its_limit_the_users_bound_or_the_kv_room():
    assert len(run(ScriptedBackend([]), chunk(max_frames=17))) == 17
    assert len(run(ScriptedBackend([]), chunk(max_frames=17), max_frames=9)) == 9
    small_room = FakeState(position=10, capacity=10 + 5 + 4)  # 5 text tokens, room for 4
    frames = run(ScriptedBackend([]), chunk(max_frames=17), voice=small_room)
    assert len(frames) == 4 and frames[-1].is_last


def test_bos_first_then_each_sampled_latent_is_fed_back():
    backend = ScriptedBackend([])
    run(backend, chunk(max_frames=4))
    steps = [c[1] for c in backend.calls if c[0] == "step"]
    assert steps == [None, 0.0, 1.0, 2.0]  # hidden i → latent i (temperature 0)


def test_voice_state_is_copied_and_text_prefilled_per_chunk():
    backend = ScriptedBackend([])
    voice = FakeState(position=10)
    run(backend, chunk(max_frames=3, tokens=7), voice=voice)
    run(backend, chunk(max_frames=3, tokens=7), voice=voice)
    assert voice.position == 10  # never written
    assert [c for c in backend.calls if c[0] == "prefill"] == [("prefill", 7), ("prefill", 7)]


def test_cancel_stops_before_the_next_step():
    backend = ScriptedBackend([])
    flag = threading.Event()
    out = []
    settings = GenerationSettings(temperature=0.3, eos_threshold=-4.0)
    rng = np.random.default_rng(0)
    for frame in generate_chunk(backend, FakeState(), chunk(), settings, rng, flag.is_set):
        out.append(frame)
        if len(out) == 3:
            flag.set()
    assert len(out) == 3
    assert sum(1 for c in backend.calls if c[0] == "step") == 3


def test_noise_is_standard_normal_times_sqrt_temperature():
    a = draw_noise(np.random.default_rng(4), 0.25, LATENT)
    b = np.random.default_rng(4).standard_normal(LATENT) * 0.5
    assert a.dtype == np.float32 and a.shape == (LATENT,)
    np.testing.assert_allclose(a, b, rtol=1e-6)
    assert not draw_noise(np.random.default_rng(4), 0.0, LATENT).any()


def test_fade_in_only_at_the_start_of_the_decoders_audio():
    decoder = AudioDecoder(ScriptedBackend([]))
    first, second = decoder.decode(np.zeros(LATENT)), decoder.decode(np.zeros(LATENT))
    assert first[0] == 0.0 and 0 < first[FADE_IN_SAMPLES // 2] < 1.0
    assert first[FADE_IN_SAMPLES] == 1.0
    assert (second == 2.0).all()  # no fade later, and the state carried on


# -- on a real tiny pack -----------------------------------------------------------------

TEXT = "The quick brown fox jumps over the lazy dog. It was 3 pm on a sunny day!"


def test_planner_normalizes_chunks_and_tokenizes(engine_tts: PocketTTS):
    planner = TextPlanner(engine_tts.config, engine_tts.tokenizer)
    chunks = planner.plan("I have 3 cats.")
    assert len(chunks) == 1 and "three" in chunks[0].text
    assert "3" in planner.plan("I have 3 cats.", normalize=False)[0].text
    assert planner.plan("  \n ") == []
    assert chunks[0].token_ids.dtype == np.int64 and chunks[0].num_tokens > 0


def test_decoder_state_runs_on_across_chunks(engine_tts: PocketTTS):
    backend = engine_tts.backend
    latents = np.random.default_rng(1).standard_normal((6, LATENT)).astype(np.float32)
    one = AudioDecoder(backend)
    joined = [one.decode(x) for x in latents]
    first, second = AudioDecoder(backend), AudioDecoder(backend)
    split = [first.decode(x) for x in latents[:3]] + [second.decode(x) for x in latents[3:]]
    np.testing.assert_array_equal(joined[:3], split[:3])
    assert not np.allclose(joined[3], split[3], atol=1e-4)  # state was carried, not reset


def test_same_seed_same_audio_on_all_three_paths(engine_tts: PocketTTS):
    audio = engine_tts.synthesize(TEXT, seed=11)
    streamed = np.concatenate([f.samples for f in engine_tts.stream(TEXT, seed=11)])
    session = engine_tts.session(seed=11)
    session.enqueue(TEXT)
    session.finish()
    in_session = np.concatenate([f.samples for f in session])
    assert audio.dtype == np.float32 and audio.shape[0] % FRAME_SIZE == 0
    np.testing.assert_array_equal(audio, streamed)
    np.testing.assert_array_equal(audio, in_session)
    assert not np.array_equal(audio, engine_tts.synthesize(TEXT, seed=12))


def test_temperature_zero_is_deterministic_whatever_the_seed(engine_tts: PocketTTS):
    a = engine_tts.synthesize(TEXT, temperature=0.0, seed=1)
    b = engine_tts.synthesize(TEXT, temperature=0.0, seed=2)
    c = engine_tts.synthesize(TEXT, temperature=0.0)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)


def test_post_processing_only_for_buffered_output(engine_tts: PocketTTS):
    raw = engine_tts.synthesize(TEXT, seed=3)
    polished = engine_tts.synthesize(TEXT, seed=3, post_process=True)
    np.testing.assert_allclose(polished, post_process(raw), atol=1e-6)
    assert not np.allclose(polished, raw)
    streamed = np.concatenate([f.samples for f in engine_tts.stream(TEXT, seed=3)])
    np.testing.assert_array_equal(streamed, raw)


def test_audio_fades_in_only_at_the_start_of_a_session(engine_tts: PocketTTS):
    session = engine_tts.session(seed=2)
    session.enqueue("Hello there.")
    session.enqueue("Hello there.")
    session.finish()
    frames = list(session)
    starts = [f for f in frames if f.frame_index == 0]
    assert len(starts) == 2
    assert starts[0].samples[0] == 0.0  # faded in
    alone = engine_tts.synthesize("Hello there.", seed=2)
    assert np.abs(alone[:FADE_IN_SAMPLES]).max() <= np.abs(alone[FADE_IN_SAMPLES:]).max()


def test_ten_thousand_characters_are_chunked_and_finished(engine_tts: PocketTTS):
    sentence = "Sentence number 42 talks about the weather, the sea and the mountains. "
    text = (sentence * (10_000 // len(sentence) + 1))[:10_000]
    frames = list(engine_tts.stream(text, seed=0, max_frames=4))  # short chunks: a fast test
    chunks = {f.chunk_index for f in frames}
    assert len(chunks) > 20 and chunks == set(range(len(chunks)))
    assert frames[-1].is_last_in_utterance
    assert sum(f.is_last_in_utterance for f in frames) == 1
    assert all(f.samples.shape == (FRAME_SIZE,) and np.isfinite(f.samples).all() for f in frames)


# -- streamed text: the same prepared chunks as the batch path ---------------------------

LONG_SENTENCE = (
    "When the committee finally met on Tuesday, after weeks of delays, arguments about the "
    "budget, and a long exchange of letters between the two departments, it decided, to the "
    "surprise of almost everyone in the room, that the old bridge over the river would be "
    "repaired rather than replaced, at a cost of $12.50 per person, which nobody expected."
)
SHORT_SENTENCES = ["It was late.", "Everyone went home at 3:45 pm.", "The end."]


@pytest.fixture(scope="module")
def engine_tts_planner(engine_tts: PocketTTS) -> TextPlanner:
    return TextPlanner(engine_tts.config, engine_tts.tokenizer)


def _facts(chunks: list[PreparedChunk]) -> list[tuple[str, tuple[int, ...], int, int, bool]]:
    return [
        (c.text, tuple(c.token_ids.tolist()), c.frames_after_eos, c.max_frames, c.is_mid_sentence)
        for c in chunks
    ]


def _streamed(planner: TextPlanner, fragments: list[str], **options) -> list[PreparedChunk]:
    """Fragments through the planner's text stream: the prepared chunks a session queues."""
    stream = planner.stream(**options)
    return [c for fragment in fragments for c in stream.push(fragment)] + stream.flush()


def _batch_per_sentence(planner: TextPlanner, sentences: list[str], **options):
    return [c for s in sentences for c in planner.plan(s, **options)]


def _split_at(text: str, cuts: list[int]) -> list[str]:
    bounds = [0, *sorted({min(max(c, 0), len(text)) for c in cuts}), len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]


@pytest.mark.parametrize("long_first", [True, False], ids=["long-first", "long-second"])
@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("step", [1, 3, 7])
def test_streamed_long_sentence_is_prepared_as_the_batch_path(
    engine_tts_planner: TextPlanner, step: int, normalize: bool, long_first: bool
) -> None:
    planner = engine_tts_planner
    sentences = [LONG_SENTENCE, *SHORT_SENTENCES]
    if not long_first:
        sentences[:2] = sentences[1::-1]
    text = " ".join(sentences)
    batch = _batch_per_sentence(planner, sentences, normalize=normalize)
    assert sum(c.is_mid_sentence for c in batch) >= 3  # the long sentence is cut in pieces
    assert all(c.text.strip()[0].islower() for c in batch if c.is_mid_sentence)
    # Token-sized fragments: every sentence completes alone, so none is merged with another.
    fragments = [text[i : i + step] for i in range(0, len(text), step)]
    streamed = _streamed(planner, fragments, normalize=normalize)
    assert _facts(streamed) == _facts(batch)
    # The pieces of the long sentence are also those of the whole text planned at once.
    whole = planner.plan(text, normalize=normalize)
    pieces = [c for c in batch if c.is_mid_sentence][:-1]
    assert set(_facts(pieces)) <= set(_facts(whole))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(0, 600), max_size=80))
def test_any_fragmentation_prepares_the_long_sentence_as_the_batch_path(
    engine_tts_planner: TextPlanner, cuts: list[int]
) -> None:
    text = " ".join([LONG_SENTENCE, *SHORT_SENTENCES])
    streamed = _streamed(engine_tts_planner, _split_at(text, cuts))
    long_batch = engine_tts_planner.plan(LONG_SENTENCE)
    head = len(long_batch) - 1  # the last piece may merge with sentences that came with it
    assert _facts(streamed[:head]) == _facts(long_batch[:head])
    rest = streamed[head:]
    rest_batch = long_batch[head:] + _batch_per_sentence(engine_tts_planner, SHORT_SENTENCES)
    assert " ".join(c.text for c in rest).split() == " ".join(c.text for c in rest_batch).split()
    assert [c.is_mid_sentence for c in rest] == [True] + [False] * (len(rest) - 1)
    for chunk in rest:  # each chunk prepared as the batch path prepares that text
        again = engine_tts_planner.plan(chunk.text, continues_sentence=chunk.is_mid_sentence)
        assert _facts([chunk]) == _facts(again)


def test_streaming_normalizes_whole_sentences_and_keeps_line_ends(
    engine_tts_planner: TextPlanner,
) -> None:
    planner = engine_tts_planner
    text = "Title\nIt costs $12.50 at 3:45 pm. Call me at 9.\n"
    fragments = list(text)  # "$12." must not be read as a sentence end
    streamed = _streamed(planner, fragments, lexicon={"Call": "Ring"})
    batch = _batch_per_sentence(
        planner,
        ["Title\n", "It costs $12.50 at 3:45 pm.", "Call me at 9."],
        lexicon={"Call": "Ring"},
    )
    assert _facts(streamed) == _facts(batch)
    spoken = " ".join(c.text for c in streamed).split()
    assert spoken[:3] == ["Title.", "It", "costs"]
    assert "twelve dollars and fifty cents" in " ".join(spoken)
    assert " ".join(spoken).endswith("Ring me at nine.")


def test_text_language_picks_a_regional_variant_of_the_pack_language(tmp_path):
    from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict
    from pipecat_pocket_tts.engine.errors import UnknownLanguageError

    folder = build_pack(tmp_path / "pt", tiny_config_dict("standard"), language="portuguese")
    tts = PocketTTS.load("portuguese", backend="numpy", model_dir=folder)
    european = TextPlanner(tts.config, tts.tokenizer)
    brazilian = european.with_text_language("pt-BR")
    assert (european.text_language, brazilian.text_language) == ("pt", "pt-BR")
    assert brazilian.preparer is european.preparer  # shares the tokenizer work
    assert european.with_text_language("pt") is european
    assert "dezasseis" in european.plan("São 16 km.")[0].text
    assert "dezesseis" in brazilian.plan("São 16 km.")[0].text
    session = tts.session(text_language="pt-BR", seed=1)
    try:
        assert session._planner.text_language == "pt-BR"
    finally:
        session.cancel()
    with pytest.raises(UnknownLanguageError, match="not a variant"):
        tts.session(text_language="fr")
