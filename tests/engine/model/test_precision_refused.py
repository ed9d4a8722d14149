"""A precision the chosen backend does not run is an error naming what it runs, whether the
backend was named or chosen by "auto"; Pipecat's built-in ``quantize=`` is read as it means."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_process import run_cli

from pipecat_pocket_tts import PocketTTSService
from pipecat_pocket_tts.engine import LoadOptionError, PocketTTS
from pipecat_pocket_tts.engine.backends import coreml_unavailable_reason

OFF_APPLE = coreml_unavailable_reason() is not None


@pytest.mark.parametrize("backend", ["numpy", "auto"])
def test_engine_refuses_fp16_on_numpy(engine_pack_dir: Path, backend: str) -> None:
    if backend == "auto" and not OFF_APPLE:
        pytest.skip("auto picks CoreML on an Apple machine with its pack")
    with pytest.raises(LoadOptionError, match=r"fp32, bf16, int8") as caught:
        PocketTTS.load(backend=backend, model_dir=engine_pack_dir, precision="fp16")
    if backend == "auto":
        assert "chose numpy here: CoreML runs only on Apple" in str(caught.value)


@pytest.mark.skipif(not OFF_APPLE, reason="auto picks CoreML per language on Apple machines")
def test_service_refuses_fp16_at_construction() -> None:
    with pytest.raises(LoadOptionError, match=r"numpy backend runs \(fp32, bf16, int8\)"):
        PocketTTSService(precision="fp16")


def test_quantize_false_is_the_builtin_default_and_accepted() -> None:
    service = PocketTTSService(quantize=False)
    assert service is not None
    with pytest.raises(LoadOptionError, match="quantize=False"):
        PocketTTSService(quantize=False, precision="int8")


def test_quantize_true_points_at_int8() -> None:
    with pytest.raises(TypeError, match=r"quantize=True is precision='int8' here"):
        PocketTTSService(quantize=True)


@pytest.mark.skipif(not OFF_APPLE, reason="auto picks CoreML per language on Apple machines")
def test_say_precision_fp16_is_one_line_naming_the_flags(
    engine_pack_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "a.wav"
    result = run_cli(
        "say", "Hi.", "-o", str(out), "--model-dir", str(engine_pack_dir), "--precision", "fp16"
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --precision fp16 is not one")
    assert "--backend auto chose numpy" in lines[0] and not out.exists()
