"""Linux stand-ins for the PocketTTS v2.1 CoreML models, computing through the NumPy backend.

Each stand-in has the real models' input names and shapes (for the model config it is built
for) and converter-style output names (``new_cache_7_internal_tensor_assign_2``, ``var_445``…)
numbered in a shuffled order, so anything that matched outputs by sorted names instead of by
shape and spec order would feed layer caches back to the wrong layers. The stand-ins keep no
state of their own: FlowLM caches and positions, and the 24 Mimi state tensors, are rebuilt into
NumPy states from the tensors they receive, and written back into the tensors they return.

- ``cond_prefill``: checks the zero padding after ``valid_len`` rows, prefills those rows.
- ``flowlm``: replaces NaN in ``sequence`` by the ``bos_emb`` input (as the rank-5 graphs do).
- ``flow_decoder_fused``: the NumPy sampler with 8 LSD steps.
- ``mimi_decoder``: maps the NumPy Mimi decoder state onto the v2.1 tensors — upsample and
  transposed-conv partials and conv histories as [1, C, T], the attention K/V ring as
  ``attn{j}_cache`` [2, 1, S, H, Dh] with S = 256 slots indexed by position mod S, and
  ``attn{j}_offset`` as the next position — and back. The ``*_first`` flags are passed through.
- ``mimi_encoderv2`` / ``mimi_encoderv3``: ``audio`` [1, 1, 240000] → ``conditioning``
  [1, 125, d] through the NumPy Mimi encoder and a speaker projection (the pack's own, or a
  stand-in "English" one for the shared encoder); optionally fp16 and/or a strided view.

``write_coreml_pack`` turns a NumPy pack into a CoreML pack folder: ``constants_bin/`` from the
weights and ``.mlmodelc`` folders holding only a ``metadata.json`` with the stand-in I/O;
``write_model_folder`` writes one such folder (e.g. an encoder, beside the pack or at the root).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict
from pipecat_pocket_tts.engine.backends import find_pack_files
from pipecat_pocket_tts.engine.backends.coreml.backend import CoreMLBackend, StageModels
from pipecat_pocket_tts.engine.backends.coreml.constants import write_floats
from pipecat_pocket_tts.engine.backends.coreml.files import FLOWLM_MODELS, stage_folders
from pipecat_pocket_tts.engine.backends.coreml.io_specs import TensorSpec, mimi_state_layout
from pipecat_pocket_tts.engine.backends.numpy.backend import NumpyBackend
from pipecat_pocket_tts.engine.backends.numpy.layers.kv_cache import KVCache
from pipecat_pocket_tts.engine.backends.numpy.layers.streaming_conv import StreamingConvTranspose1d
from pipecat_pocket_tts.engine.text.tokenizer import Tokenizer
from pipecat_pocket_tts.engine.tts import PocketTTS
from pipecat_pocket_tts.engine.voices.voice import Voice

CAPACITY = 512
WINDOW = 256

Compute = Callable[[dict[str, np.ndarray]], list[np.ndarray]]


class StandInModel:
    """A ``CoreMLModel``: strict about its inputs (names, shapes, float32), records its calls."""

    def __init__(
        self,
        name: str,
        inputs: list[TensorSpec],
        outputs: list[TensorSpec],
        compute: Compute,
        *,
        raw_outputs: bool = False,
    ) -> None:
        """``raw_outputs``: hand outputs back as computed (dtype and strides kept), as coremltools
        may; otherwise as contiguous float32."""
        self.name = name
        self.raw_outputs = raw_outputs
        self._inputs = tuple(inputs)
        self._outputs = tuple(outputs)
        self._compute = compute
        self.calls: list[dict[str, np.ndarray]] = []
        self.results: list[dict[str, np.ndarray]] = []
        self.record = False

    @property
    def inputs(self) -> tuple[TensorSpec, ...]:
        return self._inputs

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        return self._outputs

    def predict(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        expected = {s.name: s for s in self._inputs}
        if set(feeds) != set(expected):
            raise ValueError(
                f"{self.name}: fed {sorted(feeds)}, the model takes {sorted(expected)}"
            )
        for name, value in feeds.items():
            value = np.asarray(value)
            if value.dtype != np.float32 or value.shape != expected[name].shape:
                raise ValueError(
                    f"{self.name}: input {name} is {value.dtype} {value.shape}, "
                    f"expected float32 {expected[name].shape}"
                )
        arrays = self._compute({k: np.array(v) for k, v in feeds.items()})
        out = {}
        for spec, value in zip(self._outputs, arrays, strict=True):
            value = np.asarray(value) if self.raw_outputs else np.asarray(value, dtype=np.float32)
            assert value.shape == spec.shape, (self.name, spec, value.shape)
            out[spec.name] = value
        if self.record:
            self.calls.append({k: np.array(v) for k, v in feeds.items()})
            self.results.append({k: v.copy() for k, v in out.items()})
        return out


class _Names:
    """Converter-style output names, numbered in a seeded rotation of the spec order (never
    the identity for two or more outputs), so sorting by name never gives the spec order."""

    def __init__(self, seed: int) -> None:
        self._seed = seed

    def _order(self, n: int) -> np.ndarray:
        shift = 1 + self._seed % max(1, n - 1)
        return np.roll(np.arange(n), shift)

    def numbers(self, n: int, start: int = 100) -> list[int]:
        return [int(x) for x in start + 7 * self._order(n)]

    def caches(self, n: int) -> list[str]:
        order = self._order(n)
        names = [f"new_cache_{2 * int(k) + 1}_internal_tensor_assign_2" for k in order]
        names[int(np.argmax(order))] = "new_cache_internal_tensor_assign_2"
        return names

    def variables(self, n: int) -> list[str]:
        return [f"var_{k}" for k in self.numbers(n, start=400)]


def _kv_outputs(
    n: int, cache_shape: tuple[int, ...], names: _Names, order: str
) -> list[TensorSpec]:
    caches = [TensorSpec(name, cache_shape) for name in names.caches(n)]
    positions = [TensorSpec(name, (1,)) for name in names.variables(n)]
    if order == "grouped":
        return caches + positions
    return [spec for pair in zip(caches, positions, strict=True) for spec in pair]


def _kv_inputs(n: int, cache_shape: tuple[int, ...]) -> list[TensorSpec]:
    specs = []
    for i in range(n):
        specs += [TensorSpec(f"cache{i}", cache_shape), TensorSpec(f"position{i}", (1,))]
    return specs


class _FlowBridge:
    """CoreML cache/position tensors ⇄ a NumPy KVCache."""

    def __init__(self, backend: NumpyBackend, capacity: int) -> None:
        flow = backend.flow_lm
        self.flow = flow
        self.n = flow.num_layers
        self.capacity = capacity
        self.cache_shape = (2, 1, capacity, flow.kv_heads, flow.head_dim)

    def load(self, feeds: dict[str, np.ndarray]) -> KVCache:
        positions = {float(feeds[f"position{i}"][0]) for i in range(self.n)}
        if len(positions) != 1:
            raise ValueError(f"layers disagree on the position: {sorted(positions)}")
        state = KVCache(self.n, self.flow.kv_heads, self.flow.head_dim, self.capacity)
        for i in range(self.n):
            cache = feeds[f"cache{i}"]
            state.keys[i] = cache[0, 0].transpose(1, 0, 2)
            state.values[i] = cache[1, 0].transpose(1, 0, 2)
        state.advance(int(positions.pop()))
        return state

    def dump(self, state: KVCache, order: str) -> list[np.ndarray]:
        caches = [
            np.stack([state.keys[i].transpose(1, 0, 2), state.values[i].transpose(1, 0, 2)])[
                :, None
            ]
            for i in range(self.n)
        ]
        positions = [np.array([state.position], dtype=np.float32) for _ in range(self.n)]
        if order == "grouped":
            return caches + positions
        return [x for pair in zip(caches, positions, strict=True) for x in pair]


def cond_prefill_standin(
    backend: NumpyBackend,
    *,
    window: int = WINDOW,
    capacity: int = CAPACITY,
    order: str = "interleaved",
    seed: int = 0,
) -> StandInModel:
    bridge = _FlowBridge(backend, capacity)
    d = backend.flow_lm.d_model
    inputs = [
        TensorSpec("conditioning", (1, window, d)),
        TensorSpec("valid_len", (1,)),
        *_kv_inputs(bridge.n, bridge.cache_shape),
    ]
    outputs = _kv_outputs(bridge.n, bridge.cache_shape, _Names(seed), order)

    def compute(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        valid = int(feeds["valid_len"][0])
        rows = feeds["conditioning"][0]
        if not 0 < valid <= window or np.any(rows[valid:] != 0):
            raise ValueError(f"cond_prefill: valid_len {valid} or non-zero padding")
        state = bridge.load(feeds)
        backend.prefill(state, rows[:valid])
        return bridge.dump(state, order)

    return StandInModel("cond_prefill", inputs, outputs, compute)


def flowlm_standin(
    backend: NumpyBackend,
    *,
    capacity: int = CAPACITY,
    order: str = "interleaved",
    heads_last: bool = False,
    seed: int = 1,
) -> StandInModel:
    bridge = _FlowBridge(backend, capacity)
    latent = backend.config.flow_lm.latent_dim
    hidden_dim = backend.config.flow_lm.head_input_dim
    inputs = [
        TensorSpec("sequence", (1, 1, latent)),
        TensorSpec("bos_emb", (latent,)),
        *_kv_inputs(bridge.n, bridge.cache_shape),
    ]
    names = _Names(seed)
    heads = [TensorSpec("input", (1, 1, hidden_dim)), TensorSpec("var_2582", (1, 1, 1))]
    kv = _kv_outputs(bridge.n, bridge.cache_shape, names, order)
    outputs = kv + heads if heads_last else heads + kv

    def compute(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        seq = feeds["sequence"].reshape(-1)
        vec = np.where(np.isnan(seq), feeds["bos_emb"], seq).astype(np.float32)
        state = bridge.load(feeds)
        out = backend.step(state, vec)
        head = [out.hidden.reshape(1, 1, -1), np.full((1, 1, 1), out.eos_logit, np.float32)]
        kv_values = bridge.dump(state, order)
        return kv_values + head if heads_last else head + kv_values

    return StandInModel("flowlm_step", inputs, outputs, compute)


def flow_decoder_standin(backend: NumpyBackend) -> StandInModel:
    """``backend`` must sample with 8 steps (``NumpyBackend(..., sampler_steps=8)``)."""
    assert backend.sampler_steps == 8, "the fused flow decoder bakes 8 LSD steps"
    latent = backend.config.flow_lm.latent_dim
    hidden_dim = backend.config.flow_lm.head_input_dim
    inputs = [
        TensorSpec("transformer_out", (1, hidden_dim)),
        TensorSpec("latent_init", (1, latent)),
    ]
    outputs = [TensorSpec("latent_final", (1, latent))]

    def compute(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        z = backend.sample(feeds["transformer_out"][0], feeds["latent_init"][0])
        return [z.reshape(1, -1)]

    return StandInModel("flow_decoder_fused", inputs, outputs, compute)


class MimiBridge:
    """The NumPy Mimi decoder state ⇄ the v2.1 Mimi state tensors."""

    def __init__(self, backend: NumpyBackend) -> None:
        self.backend = backend
        self.mimi = backend.mimi
        for conv in self.mimi.decoder.convs():  # CoreML's state: the overlapping outputs
            if isinstance(conv, StreamingConvTranspose1d) and not conv.depthwise:
                conv.carry_outputs = True
        self.layout = mimi_state_layout(backend.config)
        self.shapes = {s.name: s.shape for s in self.layout}
        fresh = self.mimi.new_state()
        self.slots = self.layout[1].shape[2] if self.mimi.decoder_transformer.layers else 0
        self.layers = len(self.mimi.decoder_transformer.layers)
        self.context = self.mimi.decoder_transformer.context
        assert self.slots >= self.context, "the ring must hold the attention context"
        self.seanet_names = [
            s.name
            for s in self.layout
            if s.name != "upsample_partial" and s.name.endswith(("_prev", "_partial"))
        ]
        assert len(self.seanet_names) == len(fresh.seanet)
        for name, array in zip(self.seanet_names, fresh.seanet, strict=True):
            assert self.shapes[name] == (1, *array.T.shape), (name, array.shape)
        assert self.shapes["upsample_partial"] == (1, *fresh.upsample_partial.T.shape)

    def load(self, tensors: dict[str, np.ndarray]):  # -> MimiDecoderState
        state = self.mimi.new_state()
        state.upsample_partial = np.ascontiguousarray(tensors["upsample_partial"][0].T)
        state.seanet = [np.ascontiguousarray(tensors[n][0].T) for n in self.seanet_names]
        offsets = {float(tensors[f"attn{j}_offset"][0]) for j in range(self.layers)}
        if len(offsets) > 1:
            raise ValueError(f"attention layers disagree on the offset: {sorted(offsets)}")
        cache = state.attention
        offset = int(offsets.pop()) if offsets else 0
        ring = cache.slot_positions.shape[0]
        for p in range(max(0, offset - self.slots), offset):
            for j in range(self.layers):
                kv = tensors[f"attn{j}_cache"]
                cache.keys[j, :, p % ring] = kv[0, 0, p % self.slots]
                cache.values[j, :, p % ring] = kv[1, 0, p % self.slots]
            cache.slot_positions[p % ring] = p
        cache.position = offset
        return state

    def dump(self, state, passthrough: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = {name: value.copy() for name, value in passthrough.items()}
        out["upsample_partial"] = state.upsample_partial.T[None]
        for name, array in zip(self.seanet_names, state.seanet, strict=True):
            out[name] = array.T[None]
        cache = state.attention
        ring = cache.slot_positions.shape[0]
        offset = cache.position
        for j in range(self.layers):
            kv = np.zeros(self.shapes[f"attn{j}_cache"], dtype=np.float32)
            for p in range(max(0, offset - self.slots), offset):
                assert cache.slot_positions[p % ring] == p
                kv[0, 0, p % self.slots] = cache.keys[j, :, p % ring]
                kv[1, 0, p % self.slots] = cache.values[j, :, p % ring]
            out[f"attn{j}_cache"] = kv
            out[f"attn{j}_offset"] = np.array([offset], dtype=np.float32)
        return out


def mimi_standin(
    backend: NumpyBackend, *, naming: str = "converter", seed: int = 2
) -> StandInModel:
    """``naming``: "converter" (pass-throughs keep their names, the rest ``var_N`` shuffled),
    "suffixed" (``audio`` and ``<input>_out``) or "anonymous" (every output ``var_N``)."""
    bridge = MimiBridge(backend)
    latent = backend.config.flow_lm.latent_dim
    frame = backend.config.mimi.frame_size
    inputs = [TensorSpec("latent", (1, latent)), *bridge.layout]
    names = _Names(seed)
    numbers = iter(names.numbers(len(bridge.layout) + 1, start=1000))
    outputs: list[TensorSpec] = []
    audio_name = "audio" if naming == "suffixed" else f"var_{next(numbers)}"
    outputs.append(TensorSpec(audio_name, (1, 1, frame)))
    for spec in bridge.layout:
        if naming == "suffixed":
            name = f"{spec.name}_out"
        elif naming == "converter" and (spec.name.endswith("_first") or spec.size == 0):
            name = spec.name
        else:
            name = f"var_{next(numbers)}"
        outputs.append(TensorSpec(name, spec.shape))

    def compute(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        state = bridge.load(feeds)
        audio = backend.decode(state, feeds["latent"][0])
        firsts = {s.name: feeds[s.name] for s in bridge.layout if s.name.endswith("_first")}
        tensors = bridge.dump(state, firsts)
        return [audio.reshape(1, 1, -1)] + [tensors[s.name] for s in bridge.layout]

    return StandInModel("mimi_decoder", inputs, outputs, compute)


ENCODER_SAMPLES = 240_000
ENCODER_FRAMES = 125


def encoder_standin(
    backend: NumpyBackend,
    *,
    projection: np.ndarray | None = None,
    dtype: str = "float32",
    strided: bool = False,
    output_name: str = "conditioning",
    name: str = "mimi_encoderv3",
) -> StandInModel:
    """A Mimi encoder over ``backend``'s NumPy Mimi encoder.

    ``projection`` [d, latent]: the speaker projection baked in (None: the backend's own, i.e.
    ``backend.encode``). ``dtype`` "float16" returns fp16 conditioning; ``strided`` returns a
    view into a wider buffer (rows padded, as CoreML's strided arrays are).
    """
    d = backend.config.flow_lm.transformer.d_model
    inputs = [TensorSpec("audio", (1, 1, ENCODER_SAMPLES))]
    outputs = [TensorSpec(output_name, (1, ENCODER_FRAMES, d), dtype)]

    def compute(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        audio = feeds["audio"].reshape(-1)
        if projection is None:
            cond = backend.encode(audio)
        else:
            cond = backend.mimi.encode(audio) @ np.asarray(projection, np.float32).T
        assert cond.shape == (ENCODER_FRAMES, d), cond.shape
        if not strided:
            return [cond[None].astype(dtype)]
        buffer = np.full((1, ENCODER_FRAMES, d + 5), np.nan, dtype=dtype)
        buffer[0, :, :d] = cond
        view = buffer[:, :, :d]
        assert not view.flags.c_contiguous
        return [view]

    return StandInModel(name, inputs, outputs, compute, raw_outputs=True)


def standin_models(
    backend: NumpyBackend,
    *,
    window: int = WINDOW,
    order: str = "interleaved",
    heads_last: bool = False,
    mimi_naming: str = "converter",
) -> StageModels:
    """The four stand-ins over one NumPy backend built with ``sampler_steps=8``."""
    return StageModels(
        cond_prefill=cond_prefill_standin(backend, window=window, order=order),
        flowlm=flowlm_standin(backend, order=order, heads_last=heads_last),
        flow_decoder=flow_decoder_standin(backend),
        mimi_decoder=mimi_standin(backend, naming=mimi_naming),
    )


# -- pack folders -----------------------------------------------------------------------------


def metadata_document(inputs: tuple[TensorSpec, ...], outputs: tuple[TensorSpec, ...]) -> list[Any]:
    """A ``metadata.json`` document in the shape Xcode's compiler writes into ``.mlmodelc``."""

    def entry(spec: TensorSpec) -> dict[str, str]:
        dims = " × ".join(str(d) for d in spec.shape)
        kind = {"float32": "Float32", "float16": "Float16"}[spec.dtype]
        return {
            "hasShapeFlexibility": "0",
            "isOptional": "0",
            "dataType": kind,
            "formattedType": f"MultiArray ({kind} {dims})",
            "shortDescription": "",
            "shape": "[" + ", ".join(str(d) for d in spec.shape) + "]",
            "name": spec.name,
            "type": "MultiArray",
        }

    return [
        {
            "metadataOutputVersion": "3.0",
            "outputSchema": [entry(s) for s in outputs],
            "inputSchema": [entry(s) for s in inputs],
            "modelType": {"name": "MLModelType_mlProgram"},
            "specificationVersion": 8,
        }
    ]


def write_coreml_pack(
    folder: Path,
    numpy_pack: Path,
    backend: NumpyBackend,
    models: StageModels,
    *,
    precisions: tuple[str, ...] = ("fp16",),
) -> Path:
    """A CoreML pack folder for the model of ``numpy_pack`` (see the module docstring)."""
    constants = folder / "constants_bin"
    constants.mkdir(parents=True, exist_ok=True)
    flow = backend.flow_lm
    table = flow.embed(np.arange(flow.embed_table.shape[0]))
    write_floats(constants / "text_embed_table.bin", table)
    write_floats(constants / "bos_emb.bin", flow.bos_emb)
    if backend.bos_before_voice() is not None:
        write_floats(constants / "bos_before_voice.bin", backend.bos_before_voice())
    shutil.copy(numpy_pack / "tokenizer.model", constants / "tokenizer.model")
    for voice in sorted((numpy_pack / "embeddings").glob("*.safetensors")):
        shutil.copy(voice, constants / voice.name)
    if (numpy_pack / "config.json").is_file():
        shutil.copy(numpy_pack / "config.json", folder / "config.json")
    by_stage = {
        "cond_prefill": models.cond_prefill,
        "flowlm": models.flowlm,
        "flow_decoder": models.flow_decoder,
        "mimi_decoder": models.mimi_decoder,
    }
    for precision in precisions:
        for stage, name in stage_folders(precision).items():
            model_dir = folder / name
            model_dir.mkdir(exist_ok=True)
            document = metadata_document(by_stage[stage].inputs, by_stage[stage].outputs)
            (model_dir / "metadata.json").write_text(json.dumps(document, indent=2))
    return folder


def write_model_folder(folder: Path, model: StandInModel) -> Path:
    """``folder`` (a ``<name>.mlmodelc`` path) holding a ``metadata.json`` with ``model``'s I/O."""
    folder.mkdir(parents=True, exist_ok=True)
    document = metadata_document(model.inputs, model.outputs)
    (folder / "metadata.json").write_text(json.dumps(document, indent=2))
    return folder


def standin_loader(
    models: StageModels, encoders: dict[str, StandInModel] | None = None
) -> Callable[[Path, str], StandInModel]:
    """A ``model_loader`` for ``CoreMLBackend.from_pack`` that hands out the stand-ins.

    ``encoders``: ``.mlmodelc`` folder name → encoder stand-in. It checks that the folder's
    ``metadata.json`` describes the stand-in it returns, and records (folder name, compute
    units) in ``loader.loaded`` (and the full paths in ``loader.paths``).
    """
    from pipecat_pocket_tts.engine.backends.coreml.compiled_models import read_model_io

    by_folder = {
        "cond_prefill.mlmodelc": models.cond_prefill,
        "flow_decoder_fused.mlmodelc": models.flow_decoder,
        "mimi_decoder.mlmodelc": models.mimi_decoder,
        **{f"{name}.mlmodelc": models.flowlm for name in FLOWLM_MODELS.values()},
        **(encoders or {}),
    }
    loaded: list[tuple[str, str]] = []
    paths: list[Path] = []

    def load(path: Path, units: str) -> StandInModel:
        model = by_folder[path.name]
        assert read_model_io(path) == (model.inputs, model.outputs), path
        loaded.append((path.name, units))
        paths.append(path)
        return model

    load.loaded = loaded  # type: ignore[attr-defined]
    load.paths = paths  # type: ignore[attr-defined]
    return load


# -- a tiny NumPy pack and its CoreML twin, for tests in several folders --------------------


class Setup:
    """A tiny NumPy pack, its CoreML twin with stand-ins, and both backends."""

    def __init__(self, root: Path, config: dict, **standin_options) -> None:
        self.numpy_dir = build_pack(root / "numpy", config, voices=("alba",))
        self.numpy_pack = find_pack_files("english", model_dir=self.numpy_dir)
        self.config = self.numpy_pack.config
        self.reference = NumpyBackend.from_files(
            self.config, self.numpy_pack.weights, sampler_steps=8
        )
        self.models = standin_models(self.reference, **standin_options)
        self.coreml_dir = write_coreml_pack(
            root / "coreml",
            self.numpy_dir,
            self.reference,
            self.models,
            precisions=("fp16", "int8"),
        )
        self.pack = find_pack_files("english", model_dir=self.coreml_dir, backend_kind="coreml")
        self.loader = standin_loader(self.models)
        self.backend = CoreMLBackend.from_pack(self.pack, model_loader=self.loader)
        self.voice = Voice.load(self.pack.voice_path("alba"), self.config)

    def engines(self) -> tuple[PocketTTS, PocketTTS]:
        tokenizer = Tokenizer.from_file(self.pack.tokenizer)
        numpy_engine = PocketTTS(
            config=self.config, backend=self.reference, tokenizer=tokenizer, pack=self.numpy_pack
        )
        coreml_engine = PocketTTS(
            config=self.config, backend=self.backend, tokenizer=tokenizer, pack=self.pack
        )
        return numpy_engine, coreml_engine

    def record(self, on: bool = True) -> None:
        for model in (self.models.cond_prefill, self.models.flowlm, self.models.mimi_decoder):
            model.record = on
            if on:
                model.calls.clear()
                model.results.clear()


def tiny_config() -> dict:
    """The tiny standard config with the real Mimi decoder's two attention layers (24 state
    tensors, as in the full-size packs)."""
    config = tiny_config_dict("standard")
    config["mimi"]["transformer"]["num_layers"] = 2
    return config
