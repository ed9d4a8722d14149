"""One chunk run alone, frame after frame, on the runtime's rules (``runtime.generation``).

The reference the tests hold the scheduler and the word timing to: the same EOS rule, noise
draws, frame limit, attention probe and fade-in as the runtime, in one plain loop (no ticks,
no batching, no threads).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from pipecat_pocket_tts.engine.backends.base import Backend, FlowState
from pipecat_pocket_tts.engine.frames import GenerationSettings, LatentFrame
from pipecat_pocket_tts.engine.runtime.generation import (
    ChunkEnd,
    FadeIn,
    attention_probe,
    draw_noise,
    frame_limit,
)
from pipecat_pocket_tts.engine.text.prepare import PreparedChunk
from pipecat_pocket_tts.engine.timing.heads import Heads


def generate_chunk(
    backend: Backend,
    voice_state: FlowState,
    plan: PreparedChunk,
    settings: GenerationSettings,
    rng: np.random.Generator,
    cancelled: Callable[[], bool],
    heads: Heads | None = None,
) -> Iterator[LatentFrame]:
    """The latents of one chunk, one per frame, until ``ChunkEnd`` stops it.

    ``voice_state`` is copied, never changed. The first step is BOS (``step(state, None)``).
    ``cancelled`` is checked before every step and between the step and the sampler.
    ``heads`` (on a backend whose ``capabilities.attention_probe``): each frame carries those
    heads' attention logits over the chunk's text tokens.
    """
    if cancelled():
        return
    state = voice_state.copy()
    text_start = state.position
    backend.prefill(state, backend.embed_text(plan.token_ids))
    probe = attention_probe(backend, heads, text_start, state.position)
    end = ChunkEnd(
        frame_limit(plan, settings, state.capacity - state.position),
        settings.eos_threshold,
        plan.frames_after_eos,
    )
    latent_dim = backend.config.flow_lm.latent_dim
    previous: np.ndarray | None = None
    for index in range(end.limit):
        if cancelled():
            return
        out = (
            backend.step(state, previous)
            if probe is None
            else backend.step(state, previous, probe=probe)
        )  # type: ignore[call-arg]
        last = end.step(index, out.eos_logit)
        if cancelled():
            return
        latent = backend.sample(out.hidden, draw_noise(rng, settings.temperature, latent_dim))
        yield LatentFrame(latent=latent, frame_index=index, is_last=last, attention=out.attention)
        if last:
            return
        previous = latent


class AudioDecoder:
    """Mimi decoding with one streaming state for all the audio it is given (never reset, so
    no seam between chunks), faded in at its very start (``FadeIn``)."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self._state = backend.new_mimi_state()
        self._fade = FadeIn()

    def decode(self, latent: np.ndarray) -> np.ndarray:
        """Latent [latent_dim] → samples [1920] float32."""
        return self._fade(self._backend.decode(self._state, latent))
