"""Every kernel choice follows the CPU family numba compiles for: off x86 (aarch64: Graviton,
Apple Silicon) no x86 intrinsic is ever built, whatever the environment claims, and
``PocketTTS.kernels`` names the plain paths that run instead; the portable integer paths run
there where asked for, and speak as the x86 ones do. ``.ci/aarch64`` runs this file on arm64
under emulation, where the tests marked ``off_x86`` run."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import numba
import numpy as np
import pytest
from mimi_decoding import MIN_SNR_DB
from reference_fixtures import snr_db

from pipecat_pocket_tts.engine.backends.numpy.kernels import arithmetic, base
from pipecat_pocket_tts.engine.backends.numpy.layers import linears

#: Every x86 feature a kernel choice asks for, as NUMBA_CPU_FEATURES spells them.
X86_FEATURES = "+avx2,+fma,+avx512f,+avx512bw,+avx512vnni,+avx512bf16,+avxvnni"
CHOICES = (("avx2",), ("avx512vnni", "avx512bw"), ("avx512bf16", "avx512f"))

off_x86 = pytest.mark.skipif(base.X86_TARGET, reason="runs where numba compiles for aarch64")
#: What asks for the portable integer paths everywhere: "auto" never takes them.
PORTABLE_ENV = {
    arithmetic.INT8_KERNEL_ENV: arithmetic.PORTABLE,
    arithmetic.INT16_KERNEL_ENV: arithmetic.PORTABLE,
    arithmetic.ARITHMETIC_ENV: "int16",
    arithmetic.SAMPLER_ARITHMETIC_ENV: "int16",
}


@pytest.mark.parametrize("features", CHOICES)
def test_x86_features_are_never_claimed_off_x86(monkeypatch, features):
    monkeypatch.setattr(numba.config, "CPU_FEATURES", X86_FEATURES)
    monkeypatch.setattr(base, "X86_TARGET", True)
    assert base.compiles_for(*features)
    monkeypatch.setattr(base, "X86_TARGET", False)
    assert not base.compiles_for(*features)


def test_a_host_whose_features_llvm_cannot_read_takes_the_plain_paths(monkeypatch):
    def unreadable() -> dict[str, bool]:
        raise RuntimeError("failed to get host cpu features")

    monkeypatch.setattr(base, "X86_TARGET", True)
    monkeypatch.setattr(numba.config, "CPU_FEATURES", None)
    monkeypatch.setattr(numba.config, "CPU_NAME", None)
    monkeypatch.setattr(base.binding, "get_host_cpu_features", unreadable)
    assert not base.compiles_for("avx2")


def test_numba_without_avx_takes_no_avx_kernel(monkeypatch):
    monkeypatch.setattr(base, "X86_TARGET", True)
    monkeypatch.setattr(numba.config, "CPU_FEATURES", None)
    monkeypatch.setattr(numba.config, "CPU_NAME", None)
    monkeypatch.setattr(base.binding, "get_host_cpu_features", lambda: {"avx2": True})
    monkeypatch.setattr(numba.config, "ENABLE_AVX", True)
    assert base.compiles_for("avx2")
    monkeypatch.setattr(numba.config, "ENABLE_AVX", False)
    assert not base.compiles_for("avx2")


def test_the_target_is_the_machine_python_runs_on():
    machine = platform.machine().lower()
    assert base.target_name() == {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    assert base.X86_TARGET is (machine in ("x86_64", "amd64"))


@off_x86
def test_off_x86_every_choice_is_the_plain_path_unless_the_portable_one_is_asked_for(monkeypatch):
    kernels = linears.load_kernels()
    assert not kernels.AVX2 and kernels.int8_matmul is kernels.int8_matmul_float
    assert arithmetic.bf16_kernels() is None
    assert arithmetic.int16_kernels().INT16_PATHS == (arithmetic.PORTABLE,)
    for name in PORTABLE_ENV:
        monkeypatch.delenv(name, raising=False)
    assert arithmetic.choose_int8_kernel() == "float"
    assert arithmetic.choose_arithmetic(None, "int8") == "fp32"
    assert arithmetic.choose_sampler_arithmetic("int8") == "fp32"
    assert arithmetic.choose_int16_kernel() == arithmetic.PORTABLE
    for name, value in PORTABLE_ENV.items():
        monkeypatch.setenv(name, value)
    assert arithmetic.choose_int8_kernel() == arithmetic.PORTABLE
    assert arithmetic.choose_arithmetic(None, "int8") == "int16"
    assert arithmetic.choose_sampler_arithmetic("int8") == "int16"


#: A child that loads the tiny pack at each precision and speaks, printing what runs.
SPEAK = """
import json, sys
import numpy as np
from pipecat_pocket_tts.engine import PocketTTS
said = {}
for precision in ("fp32", "bf16", "int8"):
    tts = PocketTTS.load("english", backend="numpy", model_dir=sys.argv[1], precision=precision)
    samples = tts.synthesize("Hello from an arm machine.", voice="alba")
    assert samples.size and np.isfinite(samples).all(), precision
    said[precision] = tts.kernels
print(json.dumps(said))
"""


@off_x86
def test_off_x86_the_model_speaks_at_every_precision_though_x86_features_are_claimed(
    engine_pack_dir,
):
    """A portable setting for x86 (``NUMBA_CPU_FEATURES`` listing AVX2 and AVX-512) left in an
    image built for arm64 too: the x86 kernels would end the process in LLVM."""
    env = {**os.environ, "NUMBA_CPU_FEATURES": X86_FEATURES, "NUMBA_CPU_NAME": "generic"}
    for name in (arithmetic.ARITHMETIC_ENV, arithmetic.SAMPLER_ARITHMETIC_ENV):
        env.pop(name, None)
    env.pop(arithmetic.INT8_KERNEL_ENV, None)
    done = subprocess.run(
        [sys.executable, "-c", SPEAK, str(engine_pack_dir)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    said = json.loads(done.stdout.strip().splitlines()[-1])
    flow_lm, _, sampler = said["int8"]["flow_lm"].partition("; ")
    assert flow_lm.endswith(
        f"widened to float32 in numba kernels ({base.target_name()}: no x86 integer kernels)"
    )
    assert sampler == "sampler: float32 (window kernels)"  # no x86 int16 kernel either
    for precision in ("fp32", "bf16", "int8"):
        assert said[precision]["mimi"] == "Mimi decoder: float32 (window kernels and BLAS)"


def _speak_int8(pack_dir, monkeypatch, env: dict[str, str]):
    """The tiny pack at int8 under ``env`` (the kernel choices read at load): its audio and
    what ran."""
    from pipecat_pocket_tts.engine import PocketTTS

    for name in PORTABLE_ENV:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    tts = PocketTTS.load("english", backend="numpy", model_dir=pack_dir, precision="int8")
    return tts.synthesize("Hello from an arm machine.", voice="alba", seed=3), tts.kernels


def test_the_portable_paths_speak_as_the_x86_ones_bit_for_bit(engine_pack_dir, monkeypatch):
    """Asked for everywhere, the portable integer paths (Mimi's and the sampler's int16, the
    FlowLM's int8 tiles) say so and give the int8 model's audio bit for bit as "auto" does
    where its choices are the same sums (the int16 paths always; the int8 tiles of VNNI);
    elsewhere within the int8 path's rounding. On aarch64 (under emulation in CI) "auto" runs
    float32 there, so the portable audio is held to the int8 path's bound against it."""
    portable, said = _speak_int8(engine_pack_dir, monkeypatch, PORTABLE_ENV)
    assert "portable vector code" in said["mimi"]
    flow_lm, _, sampler = said["flow_lm"].partition("; ")
    assert "portable vector code" in flow_lm and "portable vector code" in sampler
    auto, _ = _speak_int8(engine_pack_dir, monkeypatch, {})
    assert portable.size and np.isfinite(portable).all()
    if base.X86_TARGET and arithmetic.choose_int8_kernel() in ("vnni", "avx-vnni"):
        np.testing.assert_array_equal(portable, auto)
    else:
        assert portable.shape == auto.shape
        assert snr_db(auto, portable) >= MIN_SNR_DB
