"""Build upstream pocket-tts 4.0.1 models offline with random weights and record their stages.

Runs only in the reference venv (torch + pocket-tts 4.0.1), never inside the package. Every array
is computed by upstream's own modules and functions; this file only wires them together, captures
intermediate values with forward hooks, and converts tensors to NumPy (batch axis removed).
"""

from __future__ import annotations

import copy
import json
import logging
import math
import os
import queue
import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import sentencepiece as spm
import torch
import yaml
from pocket_tts import TTSModel
from pocket_tts.data.audio_utils import end_on_pause
from pocket_tts.models.flow_lm import drifting_decode, lsd_decode, ot_decode, pointwise_decode
from pocket_tts.models.text_chunking import prepare_text_prompt, split_into_best_sentences
from pocket_tts.modules.conv import pad_for_conv1d
from pocket_tts.modules.stateful_module import increment_steps, init_states

logging.getLogger("pocket_tts").setLevel(logging.ERROR)
logging.getLogger().setLevel(logging.ERROR)

SAMPLE_RATE = 24_000
FRAME_SIZE = 1920
FADE_IN_SAMPLES = SAMPLE_RATE // 200  # upstream's 5 ms click fix on the first decoded samples
DECODERS: dict[str, Callable[..., torch.Tensor]] = {
    "lsd": lsd_decode,
    "flow_matching": ot_decode,
    "drifting": drifting_decode,
    "pointwise": pointwise_decode,
}

# --------------------------------------------------------------------------------------------
# Tokenizer
# --------------------------------------------------------------------------------------------
_WORDS_TEXT = (
    "the of and to in is you that it he was for on are as with his they at be this have from "
    "or one had by word but not what all were we when your can said there use an each which "
    "she do how their if will up other about out many then them these so some her would make "
    "like him into time has look two more write go see number no way could people my than "
    "first water been call who oil its now find long down day did get come made may part hello "
    "world voice pocket small model speech quick brown fox jumps over lazy dog kyutai sound "
    "streaming audio frame latent token river mountain yellow garden window morning evening "
    "question answer music table chair paper story little great right think say help low line "
    "differ turn cause much mean before move boy old too same tell does set three want air well"
)
_SYLLABLES_TEXT = (
    "ka ri to mo na le si vu pa de zo ghi tra ple bro qui sta nde ver lin mar cho thu wex yal "
    "fen dor gus hap jib kel mun nox pry quo ruv sef tik ulm vag wob xen yip zar ble cri dwa"
)


def _training_sentences(count: int, seed: int) -> list[str]:
    """Deterministic English-like sentences with pseudo-words, digits and punctuation."""
    rng = random.Random(seed)
    words_pool, syllables = _WORDS_TEXT.split(), _SYLLABLES_TEXT.split()
    sentences = []
    for _ in range(count):
        words = []
        for _ in range(rng.randint(3, 14)):
            roll = rng.random()
            if roll < 0.7:
                words.append(rng.choice(words_pool))
            elif roll < 0.93:
                words.append("".join(rng.choice(syllables) for _ in range(rng.randint(1, 3))))
            else:
                words.append(str(rng.randint(0, 2025)))
            if rng.random() < 0.08:
                words[-1] += rng.choice(",;:")
        text = " ".join(words)
        text = text[0].upper() + text[1:] + rng.choice("..........!??")
        if rng.random() < 0.1:
            text = text.replace(" ", " '", 1) + "'"
        sentences.append(text)
    return sentences


def train_tokenizer(path: Path, vocab_size: int, seed: int = 0) -> Path:
    """Train a SentencePiece unigram model with exactly ``vocab_size`` pieces at ``path``."""
    corpus = path.with_suffix(".corpus.txt")
    count = 3000 if vocab_size <= 512 else 60000
    corpus.write_text("\n".join(_training_sentences(count, seed)) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(corpus),
        model_prefix=str(path.with_suffix("")),
        vocab_size=vocab_size,
        model_type="unigram",
        character_coverage=1.0,
        split_digits=True,
        byte_fallback=vocab_size >= 1000,
        normalization_rule_name="identity",
        num_threads=1,
        minloglevel=2,
    )
    corpus.unlink()
    path.with_suffix(".vocab").unlink()
    model_path = path.with_suffix(".model")
    if model_path != path:
        model_path.rename(path)
    processor = spm.SentencePieceProcessor(model_file=str(path))
    assert processor.vocab_size() == vocab_size, processor.vocab_size()
    return path


# --------------------------------------------------------------------------------------------
# Model building and perturbation
# --------------------------------------------------------------------------------------------
def build_model(
    config: dict[str, Any], tokenizer_path: Path, work_dir: Path, seed: int
) -> TTSModel:
    """Upstream ``TTSModel.load_model`` on a config without weight paths (random init)."""
    config = copy.deepcopy(config)
    for key in ("weights_path", "weights_path_without_voice_cloning"):
        config.pop(key, None)
    config["flow_lm"].pop("weights_path", None)
    config["mimi"].pop("weights_path", None)
    config["flow_lm"]["lookup_table"]["tokenizer"] = "sentencepiece"
    config["flow_lm"]["lookup_table"]["tokenizer_path"] = str(tokenizer_path)
    yaml_path = work_dir / "upstream_config.yaml"
    yaml_path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    torch.manual_seed(seed)
    model = TTSModel.load_model(config=yaml_path)
    model.eval()
    return model


def _is_norm_gain(name: str) -> bool:
    return name.endswith(
        (".norm1.weight", ".norm2.weight", "out_norm.weight", "in_ln.weight", ".alpha")
    )


@torch.no_grad()
def perturb(model: TTSModel, seed: int) -> list[str]:
    """Perturb every parameter and buffer (but the fixed ``freqs`` tables) in place.

    Zero- or one-initialised tensors (norm gains/biases, emb_mean/emb_std, layer scales, the
    speaker projection) get values in ranges that keep activations sane; random weights get
    a 20 % relative perturbation. Returns the names left untouched.
    """
    gen = torch.Generator().manual_seed(seed)

    def randn(t: torch.Tensor) -> torch.Tensor:
        return torch.randn(t.shape, generator=gen, dtype=torch.float32)

    def rand(t: torch.Tensor) -> torch.Tensor:
        return torch.rand(t.shape, generator=gen, dtype=torch.float32)

    untouched = []
    for name, tensor in model.state_dict().items():
        if name.endswith(".freqs"):
            untouched.append(name)  # constant sinusoid frequencies, not a learned parameter
            continue
        if name.endswith("emb_std"):
            tensor.copy_(0.5 + rand(tensor))
        elif name.endswith("emb_mean"):
            tensor.copy_(0.3 * randn(tensor))
        elif "layer_scale" in name:
            tensor.copy_(0.1 + 0.3 * rand(tensor))
        elif name.endswith("speaker_proj_weight"):
            tensor.copy_(randn(tensor) / math.sqrt(tensor.shape[1]))
        elif _is_norm_gain(name):
            tensor.copy_(1.0 + 0.2 * randn(tensor))
        elif name.endswith(".bias") or tensor.dim() == 1:
            tensor.add_(0.1 * randn(tensor))
        else:
            scale = float(tensor.std()) if tensor.numel() > 1 else 1.0
            tensor.add_(0.2 * scale * randn(tensor))
    return untouched


def _mimi_convs(model: TTSModel, side: str) -> list[torch.nn.Module]:
    """The Conv1d / ConvTranspose1d modules of one Mimi side, in forward order."""
    mimi = model.mimi
    if side == "encoder":
        modules = [mimi.encoder, mimi.downsample]
    else:
        modules = [mimi.quantizer, mimi.upsample, mimi.decoder]
    kinds = (torch.nn.Conv1d, torch.nn.ConvTranspose1d)
    return [m for top in modules for m in top.modules() if isinstance(m, kinds)]


@torch.no_grad()
def _normalize_conv_gains(
    model: TTSModel, side: str, run: Callable[[], None], last_target: float
) -> None:
    """Layer-sequential gain calibration: scale each conv so its output (bias excluded) has
    an RMS of 1 on the calibration input (``last_target`` for the last conv of the side).

    Random convs otherwise shrink the signal ~3x per layer and the biases dominate: the
    decoded audio would be a DC offset and the voice latents nearly constant in time.
    """
    convs = _mimi_convs(model, side)
    for index, conv in enumerate(convs):
        captured: list[torch.Tensor] = []

        def hook(
            module: torch.nn.Module,
            _inputs: Any,
            output: torch.Tensor,
            captured: list[torch.Tensor] = captured,
        ) -> None:
            bias = module.bias
            captured.append(output - (0 if bias is None else bias[:, None]))

        handle = conv.register_forward_hook(hook)
        try:
            run()
        finally:
            handle.remove()
        rms = float(torch.cat([c.flatten() for c in captured]).pow(2).mean().sqrt())
        target = last_target if index == len(convs) - 1 else 1.0
        conv.weight.mul_(target / rms)


@torch.no_grad()
def calibrate(model: TTSModel, voice_audio: torch.Tensor, seed: int) -> dict[str, float]:
    """Rescale weights (keeping them random) so every stage carries signal at sane levels.

    - Mimi conv biases are redrawn small (0.05·N(0,1)), conv gains calibrated layer by layer
      (encoder on the voice prompt, decoder on random latents; audio RMS about 0.1).
    - ``input_linear`` gets unit gain so the fed-back latent matters in each step.
    - The speaker projection is scaled so the voice conditioning has unit RMS (like the
      text embeddings).
    """
    gen = torch.Generator().manual_seed(seed + 1)
    for side in ("encoder", "decoder"):
        for conv in _mimi_convs(model, side):
            if conv.bias is not None:
                conv.bias.copy_(0.05 * torch.randn(conv.bias.shape, generator=gen))
    audio_in = voice_audio[None, None]
    _normalize_conv_gains(model, "encoder", lambda: model.mimi.encode_to_latent(audio_in), 1.0)
    latents = torch.randn((6, model.flow_lm.ldim), generator=gen)
    _normalize_conv_gains(model, "decoder", lambda: _decode_frames(model, latents), 0.1)

    convs = _mimi_convs(model, "decoder")
    last = convs[-1]
    audio = _decode_frames(model, latents)
    last.bias.sub_(float(audio.mean()))  # remove the DC offset of the decoded audio

    flow_net = model.flow_lm.flow_net
    for linear in (model.flow_lm.input_linear, flow_net.cond_embed):
        weight = linear.weight
        weight.mul_(1.0 / (float(weight.std()) * math.sqrt(weight.shape[1])))

    latents = model.mimi.encode_to_latent(audio_in)
    conditioning = torch.nn.functional.linear(latents, model.flow_lm.speaker_proj_weight)
    voice_scale = 1.0 / float(conditioning.pow(2).mean().sqrt())
    model.flow_lm.speaker_proj_weight.mul_(voice_scale)
    return {"speaker_proj_scale": voice_scale}


# --------------------------------------------------------------------------------------------
# Voice prompt
# --------------------------------------------------------------------------------------------
def synthetic_voice(seconds: float, seed: int, quiet_tail: float = 0.25) -> np.ndarray:
    """A deterministic voice-like prompt: gliding harmonics, syllable envelope, noise and a
    quiet tail (which end_on_pause trims)."""
    rng = np.random.default_rng(seed)
    n = int(seconds * SAMPLE_RATE)
    t = np.arange(n) / SAMPLE_RATE
    f0 = 120.0 + 40.0 * np.sin(2 * np.pi * 0.7 * t) + 20.0 * t
    phase = 2 * np.pi * np.cumsum(f0) / SAMPLE_RATE
    voiced = sum(np.sin(k * phase + k) / k for k in range(1, 9))
    envelope = 0.55 + 0.45 * np.sin(2 * np.pi * 3.3 * t) ** 2
    signal = 0.25 * envelope * voiced + 0.02 * rng.standard_normal(n)
    tail = int(quiet_tail * SAMPLE_RATE)
    signal[-tail:] = 1e-4 * rng.standard_normal(tail)
    return signal.astype(np.float32)


def prepare_voice_audio(raw: np.ndarray) -> torch.Tensor:
    """The samples upstream's Mimi encoder sees for a 24 kHz mono prompt: end_on_pause, then
    right zero-padding to a multiple of the frame (``encode_to_latent``'s pad_for_conv1d)."""
    trimmed = end_on_pause(torch.from_numpy(raw)[None], SAMPLE_RATE)
    return pad_for_conv1d(trimmed[None], FRAME_SIZE, FRAME_SIZE)[0, 0]


# --------------------------------------------------------------------------------------------
# Stage recording
# --------------------------------------------------------------------------------------------
def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().to(torch.float32).cpu().numpy().copy()


def _kv(model: TTSModel, state: dict[str, dict[str, torch.Tensor]]) -> tuple[np.ndarray, ...]:
    """Filled K/V slots of every FlowLM layer: ([L, P, kv_heads, head_dim], same)."""
    keys, values = [], []
    for i in range(len(model.flow_lm.transformer.layers)):
        layer = state[f"transformer.layers.{i}.self_attn"]
        filled = int(layer["offset"][0])
        keys.append(_np(layer["cache"][0, 0, :filled]))
        values.append(_np(layer["cache"][1, 0, :filled]))
    return np.stack(keys), np.stack(values)


class _HeadTap:
    """Forward hooks on out_eos: its input is the sampler/EOS head input, its output the logit."""

    def __init__(self, model: TTSModel):
        self.hidden: list[np.ndarray] = []
        self.logits: list[float] = []
        self.latents: list[np.ndarray] = []
        self.tokens: list[np.ndarray] = []
        self._handles = [
            model.flow_lm.out_eos.register_forward_hook(self._on_eos),
            model.flow_lm.register_forward_hook(self._on_flow_lm),
            model.flow_lm.conditioner.register_forward_hook(self._on_conditioner),
        ]

    def _on_eos(self, _module: Any, inputs: tuple[torch.Tensor], output: torch.Tensor) -> None:
        self.hidden.append(_np(inputs[0][0]))
        self.logits.append(float(output[0, 0]))

    def _on_flow_lm(self, _module: Any, _inputs: Any, output: tuple[torch.Tensor, ...]) -> None:
        self.latents.append(_np(output[0][0]))

    def _on_conditioner(self, _module: Any, inputs: tuple[torch.Tensor], _output: Any) -> None:
        self.tokens.append(inputs[0][0].numpy().copy())

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()


def _decode_frames(model: TTSModel, latents: torch.Tensor | np.ndarray) -> np.ndarray:
    """Frame-by-frame Mimi decode from a fresh state, as upstream's decoder worker does it
    (denormalize with emb_std/emb_mean, decode_from_latent, increment_steps) minus the fade."""
    latents = torch.as_tensor(latents, dtype=torch.float32)
    steps_per_frame = int(model.mimi.encoder_frame_rate / model.mimi.frame_rate)
    state = init_states(model.mimi, batch_size=1, sequence_length=len(latents) * steps_per_frame)
    frames = []
    with torch.no_grad():
        for latent in latents:
            mimi_input = latent[None, None] * model.flow_lm.emb_std + model.flow_lm.emb_mean
            frames.append(_np(model.mimi.decode_from_latent(mimi_input, state)[0, 0]))
            increment_steps(model.mimi, state, increment=steps_per_frame)
    return np.stack(frames)


def _decode_with_upstream_worker(model: TTSModel, latents: np.ndarray) -> np.ndarray:
    """Upstream's own ``_decode_audio_worker`` (one frame per call), fade-in included."""
    model.max_decoder_frames_per_call = 1
    latents_queue: queue.Queue = queue.Queue()
    results: queue.Queue = queue.Queue()
    for latent in latents:
        latents_queue.put(torch.from_numpy(latent)[None, None])
    latents_queue.put(None)
    steps_per_frame = int(model.mimi.encoder_frame_rate / model.mimi.frame_rate)
    model._decode_audio_worker(
        latents_queue, results, len(latents) * steps_per_frame, steps_per_frame
    )
    chunks = []
    while True:
        kind, payload = results.get()
        if kind == "error":
            raise payload
        if kind == "done":
            return np.concatenate(chunks)
        chunks.append(_np(payload[0, 0]))


def _check_fade_only_difference(raw: np.ndarray, faded: np.ndarray, what: str) -> None:
    ramp = np.linspace(0, 1, FADE_IN_SAMPLES, dtype=np.float32)
    expected = raw.copy()
    expected[:FADE_IN_SAMPLES] *= ramp
    err = float(np.abs(expected - faded).max())
    assert err < 1e-6, f"{what}: our no-fade decode differs from upstream's by {err}"


@dataclass
class StageSpec:
    """What to record for one model."""

    text: str
    voice_seconds: float = 1.7
    voice_seed: int = 7
    num_steps: int = 6
    num_sampler_rows: int = 4
    sampler_steps: int = 1
    extra_sampler_steps: tuple[int, ...] = ()
    mimi_frames: int = 20
    gen_frames: int = 20
    temperature: float = 0.3
    seed: int = 1234


def text_ids_for(model: TTSModel, text: str) -> np.ndarray:
    """Token ids of ``text`` exactly as upstream's generate_audio_stream prepares one chunk."""
    cfg = model
    chunks = split_into_best_sentences(
        model.flow_lm.conditioner.tokenizer,
        text,
        50,
        cfg.pad_with_spaces_for_short_inputs,
        remove_semicolons=cfg.remove_semicolons,
        append_terminal_punctuation=cfg.append_terminal_punctuation,
        capitalize_first_letter=cfg.capitalize_first_letter,
        replace_characters=cfg.replace_characters,
    )
    assert len(chunks) == 1, f"fixture text must be one chunk, got {chunks}"
    prepared, _ = prepare_text_prompt(
        chunks[0],
        cfg.pad_with_spaces_for_short_inputs,
        cfg.remove_semicolons,
        cfg.append_terminal_punctuation,
        cfg.capitalize_first_letter,
        cfg.replace_characters,
    )
    return model.flow_lm.conditioner.prepare(prepared)[0].numpy().astype(np.int64)


@torch.no_grad()
def record_stages(model: TTSModel, spec: StageSpec) -> dict[str, np.ndarray]:
    """Run every stage with upstream code and return the arrays of the fixture specs."""
    torch.manual_seed(spec.seed)
    gen = torch.Generator().manual_seed(spec.seed)
    flow_lm = model.flow_lm
    ldim = flow_lm.ldim
    out: dict[str, np.ndarray] = {}

    # Text.
    text_ids = text_ids_for(model, spec.text)
    out["text_ids"] = text_ids
    out["text_embeddings"] = _np(flow_lm.conditioner(torch.from_numpy(text_ids)[None])[0])

    # Voice: upstream's get_state_for_audio_prompt on a [channels, samples] tensor.
    raw = synthetic_voice(spec.voice_seconds, spec.voice_seed)
    voice_audio = prepare_voice_audio(raw)
    out["voice_raw"] = raw
    out["voice_audio"] = _np(voice_audio)
    latents = model.mimi.encode_to_latent(voice_audio[None, None])
    out["voice_latents"] = _np(latents[0])
    out["voice_conditioning"] = _np(model._encode_audio(voice_audio[None, None])[0])
    voice_state = model.get_state_for_audio_prompt(torch.from_numpy(raw)[None])
    out["voice_k"], out["voice_v"] = _kv(model, voice_state)

    # Text prefill on a copy of the voice state (upstream _generate: expand, then prefill).
    model.temp = spec.temperature
    model.sampler_decode_steps = spec.sampler_steps
    model.eos_threshold = 1e9
    state = copy.deepcopy(voice_state)
    voice_len = out["voice_k"].shape[1]
    capacity = voice_len + len(text_ids) + max(spec.num_steps, spec.gen_frames) + 1
    model._expand_kv_cache(state, sequence_length=capacity)
    model._run_flow_lm_and_increment_step(state, text_tokens=torch.from_numpy(text_ids)[None])
    out["text_k"], out["text_v"] = _kv(model, state)

    # Consecutive autoregressive steps: BOS, then teacher-forced random latents.
    inputs = torch.randn((spec.num_steps, ldim), generator=gen)
    inputs[0] = float("nan")
    tap = _HeadTap(model)
    try:
        for latent in inputs:
            model._run_flow_lm_and_increment_step(state, backbone_input_latents=latent[None, None])
    finally:
        tap.close()
    out["step_inputs"] = _np(inputs)
    out["step_hidden"] = np.stack(tap.hidden)
    out["step_eos"] = np.asarray(tap.logits, dtype=np.float32)

    # Sampler head alone, for this family's decode steps (plus extra step counts).
    head_dim = out["step_hidden"].shape[1]
    for steps in (spec.sampler_steps, *spec.extra_sampler_steps):
        prefix = "sampler" if steps == spec.sampler_steps else f"sampler{steps}"
        hidden = torch.randn((spec.num_sampler_rows, head_dim), generator=gen)
        noise = torch.randn((spec.num_sampler_rows, ldim), generator=gen) * spec.temperature**0.5
        decode = DECODERS[flow_lm.flow_type]
        latent = decode(partial(flow_lm.flow_net, hidden), noise, steps)
        out[f"{prefix}_hidden"] = _np(hidden)
        out[f"{prefix}_noise"] = _np(noise)
        out[f"{prefix}_latent"] = _np(latent)
        out[f"{prefix}_steps"] = np.asarray(steps, dtype=np.int64)

    # Mimi decoder from a fresh streaming state, frame by frame.
    mimi_latents = torch.randn((spec.mimi_frames, ldim), generator=gen)
    out["mimi_latents"] = _np(mimi_latents)
    out["mimi_audio"] = _decode_frames(model, mimi_latents)
    worker_audio = _decode_with_upstream_worker(model, out["mimi_latents"])
    _check_fade_only_difference(out["mimi_audio"].reshape(-1), worker_audio, "mimi_audio")

    # Whole temperature-0 generation through upstream's generate_audio (EOS threshold 1e9,
    # length bounded by patching the instance's _estimate_max_gen_len).
    out.update(_generate(model, voice_state, spec, text_ids))
    return out


def _generate(
    model: TTSModel, voice_state: dict, spec: StageSpec, text_ids: np.ndarray
) -> dict[str, np.ndarray]:
    model.temp = 0.0
    model.eos_threshold = 1e9
    model.sampler_decode_steps = spec.sampler_steps
    model.max_decoder_frames_per_call = 1
    model._estimate_max_gen_len = lambda token_count: spec.gen_frames  # type: ignore[method-assign]
    tap = _HeadTap(model)
    try:
        faded = _np(model.generate_audio(voice_state, spec.text, copy_state=True))
    finally:
        tap.close()
        del model._estimate_max_gen_len
    assert np.array_equal(tap.tokens[0], text_ids), (tap.tokens[0], text_ids)
    # Call 0 is the text prefill (its sampled latent is discarded), then one call per frame.
    latents = np.stack(tap.latents[1:])
    assert latents.shape[0] == spec.gen_frames, latents.shape
    audio = _decode_frames(model, latents).reshape(-1)
    _check_fade_only_difference(audio, faded, "gen_audio")
    return {
        "gen_latents": latents,
        "gen_eos_logits": np.asarray(tap.logits[1:], dtype=np.float32),
        "gen_hidden": np.stack(tap.hidden[1:]),
        "gen_audio": audio,
    }


def dump_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
