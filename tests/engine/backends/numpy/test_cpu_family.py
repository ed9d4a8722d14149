"""Every kernel choice follows the CPU family numba compiles for: off x86 (aarch64: Graviton,
Apple Silicon) no x86 intrinsic is ever built, whatever the environment claims, and
``PocketTTS.kernels`` names the plain paths that run instead. ``.ci/aarch64`` runs this file
on arm64 under emulation, where the tests marked ``off_x86`` run."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import numba
import pytest

from pipecat_pocket_tts.engine.backends.numpy.kernels import arithmetic, base
from pipecat_pocket_tts.engine.backends.numpy.layers import linears

#: Every x86 feature a kernel choice asks for, as NUMBA_CPU_FEATURES spells them.
X86_FEATURES = "+avx2,+fma,+avx512f,+avx512bw,+avx512vnni,+avx512bf16,+avxvnni"
CHOICES = (("avx2",), ("avx512vnni", "avx512bw"), ("avx512bf16", "avx512f"))

off_x86 = pytest.mark.skipif(base.X86_TARGET, reason="runs where numba compiles for aarch64")


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
def test_off_x86_every_choice_is_the_plain_path(monkeypatch):
    kernels = linears.load_kernels()
    assert not kernels.AVX2 and kernels.int8_matmul is kernels.int8_matmul_float
    assert arithmetic.int16_kernels() is None and arithmetic.bf16_kernels() is None
    monkeypatch.delenv(linears.INT8_KERNEL_ENV, raising=False)
    monkeypatch.delenv(arithmetic.ARITHMETIC_ENV, raising=False)
    assert linears.choose_int8_kernel() == "float"
    assert arithmetic.choose_arithmetic(None, "int8") == "fp32"


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
    env.pop(linears.INT8_KERNEL_ENV, None)
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
