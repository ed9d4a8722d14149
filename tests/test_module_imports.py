"""Every module of the package imports on its own (no import circle hidden by import order),
and every registered backend declares its pack layout and loader."""

from __future__ import annotations

import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pipecat_pocket_tts
from pipecat_pocket_tts.engine.backends import BACKEND_CLASSES, backend_class
from pipecat_pocket_tts.engine.backends.base import Backend

REPO_ROOT = Path(__file__).resolve().parents[1]


def _modules() -> list[str]:
    names = [pipecat_pocket_tts.__name__]
    for info in pkgutil.walk_packages(pipecat_pocket_tts.__path__, prefix="pipecat_pocket_tts."):
        names.append(info.name)
    return sorted(names)


#: Runs in a fresh interpreter that has imported none of the package: third-party libraries
#: are imported once, then each module is imported in a forked child of its own (cheap), so
#: every module starts from an empty ``pipecat_pocket_tts`` as ``python -c "import m"`` would.
_CHECKER = """
import importlib, os, sys, traceback
for lib in ("numpy", "safetensors", "huggingface_hub", "soxr", "pipecat.frames.frames"):
    try:
        importlib.import_module(lib)
    except ImportError:
        pass
assert not any(m.startswith("pipecat_pocket_tts") for m in sys.modules)
failed = []
for module in sys.argv[1:]:
    pid = os.fork()
    if pid == 0:
        try:
            importlib.import_module(module)
        except BaseException:
            traceback.print_exc()
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        failed.append(module)
print("FAILED:" + ",".join(failed))
"""


def test_every_module_imports_alone() -> None:
    modules = _modules()
    assert "pipecat_pocket_tts.engine.backends.coreml.files" in modules
    assert "pipecat_pocket_tts.engine.model.packs" in modules
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", _CHECKER, *modules],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "FAILED:", result.stderr


def test_every_registered_backend_declares_its_layout_and_loader() -> None:
    for kind in BACKEND_CLASSES:
        cls = backend_class(kind)
        assert cls.find_pack_files.__func__ is not Backend.find_pack_files.__func__, kind
        assert cls.from_pack.__func__ is not Backend.from_pack.__func__, kind
        assert "capabilities" not in getattr(cls, "__abstractmethods__", ()), kind


def test_no_backend_attribute_is_read_with_a_default() -> None:
    # A backend declares what it has (capabilities, precision); a getattr default would let a
    # new backend silently "have" a feature.
    import ast

    found = []
    for path in Path(pipecat_pocket_tts.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr")
                and "backend" in ast.unparse(node.args[0]).lower()
                and (node.func.id == "hasattr" or len(node.args) == 3)
            ):
                found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    assert found == []
