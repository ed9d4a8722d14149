"""The server imports the engine only, and the client imports no Pipecat (issue 32)."""

from __future__ import annotations

import subprocess
import sys

from paths import REPO_ROOT
from test_import_graph import PACKAGE, import_graph


def test_the_server_imports_neither_the_service_nor_pipecat() -> None:
    graph = import_graph()
    server = [name for name in graph if name.startswith(f"{PACKAGE}.server")]
    assert server
    upward = {name: sorted(m for m in graph[name] if ".service" in m) for name in server}
    assert not {k: v for k, v in upward.items() if v}


def test_the_client_and_the_app_load_without_pipecat() -> None:
    code = (
        "import sys; import pipecat_pocket_tts.client, pipecat_pocket_tts.server.app; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pipecat'))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO_ROOT
    )
    assert result.stdout.strip() == "[]"
