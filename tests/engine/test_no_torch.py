"""The package runs without torch: no module of pipecat_pocket_tts imports it."""

import ast
import subprocess
import sys

from paths import REPO_ROOT

PACKAGE = REPO_ROOT / "pipecat_pocket_tts"


def test_no_module_imports_torch():
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(name == "torch" or name.startswith("torch.") for name in names):
                offenders.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert not offenders, f"torch imported in: {offenders}"


def test_importing_the_engine_loads_no_torch():
    code = (
        "import sys, pipecat_pocket_tts.engine, pipecat_pocket_tts.engine.backends.numpy.backend; "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
