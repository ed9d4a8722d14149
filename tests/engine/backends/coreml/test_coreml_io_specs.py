"""CoreML models' I/O specs at full size: names, shapes, output matching, descriptions, options."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest
from coreml_standins import metadata_document

from pipecat_pocket_tts.engine.backends.coreml import cli_options as cli
from pipecat_pocket_tts.engine.backends.coreml.compiled_models import read_model_io
from pipecat_pocket_tts.engine.backends.coreml.constants import PackConstants, write_floats
from pipecat_pocket_tts.engine.backends.coreml.io_specs import (
    FlowDecoderSpecs,
    MimiSpecs,
    PackSpecs,
    PrefillSpecs,
    StepSpecs,
    TensorSpec,
    mimi_state_layout,
)
from pipecat_pocket_tts.engine.errors import PackFilesMissingError, WeightsMismatchError
from pipecat_pocket_tts.engine.model.compute_units import (
    PRESETS,
    parse_compute_units,
    resolve_compute_units,
)
from pipecat_pocket_tts.engine.model.config import get_config

#: The 24 Mimi state inputs of the v2.1 packs, in canonical order (FluidAudio).
REAL_MIMI_STATE = [
    ("upsample_partial", (1, 512, 16)),
    ("attn0_cache", (2, 1, 256, 8, 64)),
    ("attn0_offset", (1,)),
    ("attn1_cache", (2, 1, 256, 8, 64)),
    ("attn1_offset", (1,)),
    ("conv0_prev", (1, 512, 6)),
    ("conv0_first", (1,)),
    ("convtr0_partial", (1, 256, 6)),
    ("res0_conv0_prev", (1, 256, 2)),
    ("res0_conv0_first", (1,)),
    ("res0_conv1_prev", (1, 128, 0)),
    ("res0_conv1_first", (1,)),
    ("convtr1_partial", (1, 128, 5)),
    ("res1_conv0_prev", (1, 128, 2)),
    ("res1_conv0_first", (1,)),
    ("res1_conv1_prev", (1, 64, 0)),
    ("res1_conv1_first", (1,)),
    ("convtr2_partial", (1, 64, 4)),
    ("res2_conv0_prev", (1, 64, 2)),
    ("res2_conv0_first", (1,)),
    ("res2_conv1_prev", (1, 32, 0)),
    ("res2_conv1_first", (1,)),
    ("conv_final_prev", (1, 64, 2)),
    ("conv_final_first", (1,)),
]
CACHE = (2, 1, 512, 16, 64)


@pytest.mark.parametrize("language", ["english", "french_24l", "spanish_24l", "german"])
def test_mimi_layout_of_the_real_packs(language: str) -> None:
    layout = mimi_state_layout(get_config(language))
    assert [(s.name, s.shape) for s in layout] == REAL_MIMI_STATE


def kv_inputs(n: int) -> list[TensorSpec]:
    return [
        spec
        for i in range(n)
        for spec in (TensorSpec(f"cache{i}", CACHE), TensorSpec(f"position{i}", (1,)))
    ]


def legacy_kv_outputs(n: int, positions_first: int = 445) -> list[TensorSpec]:
    """Converter names as in the legacy English pack: new_cache_{1,3,5,7,9}…, last unnumbered."""
    outs = []
    for i in range(n):
        name = (
            "new_cache_internal_tensor_assign_2"
            if i == n - 1
            else f"new_cache_{2 * i + 1}_internal_tensor_assign_2"
        )
        outs += [TensorSpec(name, CACHE), TensorSpec(f"var_{positions_first + 384 * i}", (1,))]
    return outs


def real_pack_io_specs(n: int) -> PackSpecs:
    prefill_in = [
        TensorSpec("conditioning", (1, 256, 1024)),
        TensorSpec("valid_len", (1,)),
        *kv_inputs(n),
    ]
    step_in = [TensorSpec("sequence", (1, 1, 32)), TensorSpec("bos_emb", (32,)), *kv_inputs(n)]
    step_out = [
        TensorSpec("input", (1, 1, 1024)),
        TensorSpec("var_2582", (1, 1, 1)),
        *legacy_kv_outputs(n),
    ]
    flow_in = [TensorSpec("transformer_out", (1, 1024)), TensorSpec("latent_init", (1, 32))]
    mimi_in = [TensorSpec("latent", (1, 32)), *(TensorSpec(n_, s) for n_, s in REAL_MIMI_STATE)]
    mimi_out = [TensorSpec("audio", (1, 1, 1920))] + [
        TensorSpec(f"{n_}_out", s) for n_, s in REAL_MIMI_STATE
    ]
    return PackSpecs(
        prefill=PrefillSpecs.from_io(prefill_in, legacy_kv_outputs(n, 3000)),
        step=StepSpecs.from_io(step_in, step_out),
        flow=FlowDecoderSpecs.from_io(flow_in, [TensorSpec("latent_final", (1, 32))]),
        mimi=MimiSpecs.from_io(mimi_in, mimi_out),
    )


@pytest.mark.parametrize(
    ("language", "layers"), [("english", 6), ("french_24l", 24), ("italian_24l", 24)]
)
def test_full_size_io_specs_fit_their_configs(language: str, layers: int) -> None:
    specs = real_pack_io_specs(layers)
    specs.check(get_config(language))
    step = specs.step
    assert step.hidden_output == "input" and step.eos_output == "var_2582"
    assert step.kv.capacity == 512 and specs.prefill.window == 256
    # Spec order decides, not the names: the unnumbered cache is the last layer.
    assert step.kv.cache_outputs[-1] == "new_cache_internal_tensor_assign_2"
    assert step.kv.cache_outputs[0] == "new_cache_1_internal_tensor_assign_2"
    assert step.kv.position_outputs[1] == "var_829"
    assert dict((i, o) for o, i in specs.mimi.feedback)["attn1_cache"] == "attn1_cache_out"


def test_a_pack_for_another_layer_count_is_refused() -> None:
    with pytest.raises(WeightsMismatchError, match="24 layers"):
        real_pack_io_specs(6).check(get_config("french_24l"))


def test_mimi_outputs_by_name_then_shape_in_spec_order() -> None:
    """Converter style: pass-throughs keep their input names, the rest are var_N in spec order."""
    inputs = [TensorSpec("latent", (1, 32)), *(TensorSpec(n, s) for n, s in REAL_MIMI_STATE)]
    outputs = [TensorSpec("var_9000", (1, 1, 1920))]
    numbers = iter(range(5000, 4000, -17))  # decreasing: sorting by number would reverse
    for name, shape in REAL_MIMI_STATE:
        keep = name.endswith("_first") or 0 in shape
        outputs.append(TensorSpec(name if keep else f"var_{next(numbers)}", shape))
    specs = MimiSpecs.from_io(inputs, outputs)
    mapping = {i: o for o, i in specs.feedback}
    assert specs.audio_output == "var_9000" and specs.frame_size == 1920
    assert len(mapping) == 24 and mapping["conv0_first"] == "conv0_first"
    # res2_conv0_prev and conv_final_prev share a shape: spec order keeps them apart.
    order = [o.name for o in outputs]
    assert order.index(mapping["res2_conv0_prev"]) < order.index(mapping["conv_final_prev"])
    assert order.index(mapping["attn0_cache"]) < order.index(mapping["attn1_cache"])

    # Pass-through outputs may be absent: those inputs are fed back unchanged.
    trimmed = [
        o for o in outputs if not (o.name.endswith("_first") or o.name.endswith("conv1_prev"))
    ]
    specs = MimiSpecs.from_io(inputs, trimmed)
    assert len(specs.feedback) == 24 - 11


def test_mimi_io_specs_errors() -> None:
    inputs = [TensorSpec("latent", (1, 32)), *(TensorSpec(n, s) for n, s in REAL_MIMI_STATE)]
    outputs = [TensorSpec("audio", (1, 1, 1920))] + [
        TensorSpec(f"{n}_out", s) for n, s in REAL_MIMI_STATE
    ]
    with pytest.raises(WeightsMismatchError, match="attn1_cache"):
        MimiSpecs.from_io(inputs, [o for o in outputs if o.name != "attn1_cache_out"])
    with pytest.raises(WeightsMismatchError, match="audio"):
        MimiSpecs.from_io(inputs, outputs[1:])
    with pytest.raises(WeightsMismatchError, match="matches no state input"):
        MimiSpecs.from_io(inputs, [*outputs, TensorSpec("var_1", (3, 3))])
    with pytest.raises(WeightsMismatchError, match="latent"):
        MimiSpecs.from_io(inputs[1:], outputs)


def test_flowlm_io_specs_errors() -> None:
    step_in = [TensorSpec("sequence", (1, 1, 32)), TensorSpec("bos_emb", (32,)), *kv_inputs(2)]
    outs = [TensorSpec("x", (1, 1, 1024)), TensorSpec("eos", (1, 1, 1)), *legacy_kv_outputs(2)]
    StepSpecs.from_io(step_in, outs)
    with pytest.raises(WeightsMismatchError, match="2 cache outputs"):
        StepSpecs.from_io(step_in, outs[:-2])
    with pytest.raises(WeightsMismatchError, match="EOS"):
        StepSpecs.from_io(step_in, outs[1:])
    with pytest.raises(WeightsMismatchError, match="cache0"):
        StepSpecs.from_io([s for s in step_in if s.name != "cache1"], outs)
    with pytest.raises(WeightsMismatchError, match="bos_emb"):
        StepSpecs.from_io([s for s in step_in if s.name != "bos_emb"], outs)


# -- model descriptions -----------------------------------------------------------------------


def test_read_model_io_from_metadata_json(tmp_path: Path) -> None:
    inputs = (TensorSpec("latent", (1, 32)), TensorSpec("res0_conv1_prev", (1, 128, 0)))
    outputs = (TensorSpec("var_1", (1, 1, 1920)), TensorSpec("var_2", (1, 128, 0)))
    (tmp_path / "metadata.json").write_text(json.dumps(metadata_document(inputs, outputs)))
    assert read_model_io(tmp_path) == (inputs, outputs)
    document = metadata_document(inputs, outputs)[0]
    document["inputSchema"][0]["shape"] = [1, 32]
    document["outputSchema"][0]["dataType"] = "Float16"
    (tmp_path / "metadata.json").write_text(json.dumps(document))
    got_in, got_out = read_model_io(tmp_path)
    assert got_in == inputs and got_out[0].dtype == "float16"
    (tmp_path / "metadata.json").write_text("[{}]")
    with pytest.raises(PackFilesMissingError, match="not a CoreML model description"):
        read_model_io(tmp_path)


def test_read_model_io_from_model_mil(tmp_path: Path) -> None:
    (tmp_path / "model.mil").write_text(
        "program(1.3)\n{\n"
        "    func main<ios18>(tensor<fp32, [1, 256, 1024]> conditioning, "
        "tensor<fp32, [2, 1, 512, 16, 64]> cache0, tensor<fp32, [1]> position0) {\n"
        "            tensor<fp32, [2, 1, 512, 16, 64]> new_cache_1 = "
        'add(x = cache0, y = c)[name = string("a")];\n'
        '            tensor<fp32, [1]> var_445 = add(x = position0, y = v)[name = string("b")];\n'
        "    } -> (new_cache_1, var_445);\n}\n"
    )
    inputs, outputs = read_model_io(tmp_path)
    assert [(s.name, s.shape) for s in inputs] == [
        ("conditioning", (1, 256, 1024)),
        ("cache0", CACHE),
        ("position0", (1,)),
    ]
    assert [(s.name, s.shape) for s in outputs] == [("new_cache_1", CACHE), ("var_445", (1,))]
    (tmp_path / "model.mil").unlink()
    with pytest.raises(PackFilesMissingError, match="not a compiled CoreML model"):
        read_model_io(tmp_path)


# -- compute units and CLI options ------------------------------------------------------------


def test_compute_unit_presets() -> None:
    assert resolve_compute_units() == {
        "cond_prefill": "all",
        "flowlm": "all",
        "flow_decoder": "all",
        "mimi_decoder": "cpu-only",
        "mimi_encoder": "cpu-gpu",
    }
    assert set(PRESETS) == {"default", "all", "cpu-gpu", "cpu-ane", "cpu-only", "no-ane"}
    assert resolve_compute_units("no-ane") == {
        "cond_prefill": "cpu-gpu",
        "flowlm": "cpu-gpu",
        "flow_decoder": "cpu-gpu",
        "mimi_decoder": "cpu-only",
        "mimi_encoder": "cpu-gpu",
    }
    assert set(resolve_compute_units("cpu-ane").values()) == {"cpu-ane"}
    assert resolve_compute_units({"flow": "cpu-ane"})["flow_decoder"] == "cpu-ane"
    assert resolve_compute_units("cpu-only,mimi=all,flowlm=cpu-gpu,encoder=all") == {
        "cond_prefill": "cpu-only",
        "flowlm": "cpu-gpu",
        "flow_decoder": "cpu-only",
        "mimi_decoder": "all",
        "mimi_encoder": "all",
    }
    assert parse_compute_units(" all , cond=cpu-gpu ") == {"preset": "all", "cond": "cpu-gpu"}
    for bad, message in [
        ("gpu", "preset"),
        ("mimi=gpu", "compute units"),
        ("decoder=all", "stage"),
    ]:
        with pytest.raises(ValueError, match=message):
            resolve_compute_units(bad)
    with pytest.raises(ValueError, match="two presets"):
        resolve_compute_units("all,cpu-only")


def test_cli_options() -> None:
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    args = parser.parse_args(["--compute-units", "no-ane,mimi=cpu-gpu", "--precision", "int8"])
    assert cli.backend_options(args) == {
        "compute_units": {"preset": "no-ane", "mimi": "cpu-gpu"},
        "precision": "int8",
    }
    assert cli.backend_options(parser.parse_args([])) == {}
    with pytest.raises(SystemExit):
        parser.parse_args(["--compute-units", "mimi=fast"])


# -- constants --------------------------------------------------------------------------------


def test_constants_and_initial_mimi_state(tmp_path: Path) -> None:
    write_floats(tmp_path / "text_embed_table.bin", np.arange(12, dtype=np.float32))
    write_floats(tmp_path / "bos_emb.bin", np.ones(2))
    write_floats(tmp_path / "mimi_init_state/conv0_first.bin", np.ones(1))
    write_floats(tmp_path / "mimi_init_state/attn0_cache.bin", np.ones(5))  # wrong size
    constants = PackConstants.load(tmp_path, d_model=4, latent_dim=2)
    assert constants.text_embed_table.shape == (3, 4) and constants.bos_before_voice is None
    specs = [
        TensorSpec("conv0_first", (1,)),
        TensorSpec("attn0_cache", (2, 3)),
        TensorSpec("z", (1, 4, 0)),
    ]
    state = constants.initial_mimi_state(specs)
    assert state["conv0_first"].tolist() == [1.0]
    assert not state["attn0_cache"].any() and state["z"].shape == (1, 4, 0)
    with pytest.raises(WeightsMismatchError, match="multiple of d_model"):
        PackConstants.load(tmp_path, d_model=5, latent_dim=2)
    with pytest.raises(WeightsMismatchError, match="bos_emb"):
        PackConstants.load(tmp_path, d_model=4, latent_dim=3)
    (tmp_path / "bos_emb.bin").unlink()
    with pytest.raises(PackFilesMissingError, match=r"bos_emb\.bin"):
        PackConstants.load(tmp_path, d_model=4, latent_dim=2)
