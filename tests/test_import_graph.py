"""The package's imports form no circle: every import, lazy or for type checking, is an arrow.

Modules are read as text (nothing is imported), each ``import`` / ``from … import`` resolved to
the module it names (a name that is a submodule counts as that submodule), and the graph's
strongly connected components must all be single modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "pipecat_pocket_tts"
PACKAGE = PACKAGE_DIR.name


def module_files() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    modules = {}
    for path in PACKAGE_DIR.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules ``name`` imports anywhere in its text."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target not in modules:
                continue
            submodules = {f"{target}.{a.name}" for a in node.names} & set(modules)
            found.update(submodules)
            if len(submodules) < len(node.names):
                found.add(target)
    found.discard(name)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = module_files()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            advanced = False
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_package_has_no_import_circle():
    found = circles(import_graph())
    assert not found, "import circles:\n" + "\n".join(" -> ".join(c) for c in found)


def imports_between(graph: dict[str, set[str]], wing: str, others: list[str]) -> dict:
    """The modules of ``wing`` (a subpackage) that import any of the ``others``, with what."""
    found = {}
    for name, targets in graph.items():
        if name == f"{PACKAGE}.{wing}" or name.startswith(f"{PACKAGE}.{wing}."):
            bad = sorted(
                t
                for t in targets
                for o in others
                if t == f"{PACKAGE}.{o}" or t.startswith(f"{PACKAGE}.{o}.")
            )
            if bad:
                found[name] = bad
    return found


def test_the_engine_imports_neither_the_service_nor_the_client_nor_the_server():
    assert imports_between(import_graph(), "engine", ["service", "client", "server", "wire"]) == {}


def test_the_service_never_imports_the_server():
    """The Pipecat side speaks to any engine through the engine contract; the remote one is
    the client's (``client/``), never the server's code."""
    assert imports_between(import_graph(), "service", ["server"]) == {}


def test_server_and_client_never_import_each_other_and_only_share_the_wire():
    graph = import_graph()
    assert imports_between(graph, "server", ["client", "service"]) == {}
    assert imports_between(graph, "client", ["server", "service"]) == {}
    assert imports_between(graph, "wire", ["server", "client", "service", "engine"]) == {}


def test_the_wings_checks_find_an_import_across():
    graph = {f"{PACKAGE}.service.x": {f"{PACKAGE}.server.app"}, f"{PACKAGE}.server.app": set()}
    assert imports_between(graph, "service", ["server"]) == {
        f"{PACKAGE}.service.x": [f"{PACKAGE}.server.app"]
    }


def test_the_circle_finder_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]


FRONT_DOOR = {f"{PACKAGE}.engine", f"{PACKAGE}.engine.contract", f"{PACKAGE}.engine.errors"}


def past_the_front_door(graph: dict[str, set[str]], wing: str) -> dict[str, list[str]]:
    """The modules of ``wing`` that import an engine module other than its front door."""
    found = imports_between(graph, wing, ["engine"])
    return {
        name: inner
        for name, targets in found.items()
        if (inner := [t for t in targets if t not in FRONT_DOOR])
    }


def test_the_wings_enter_the_engine_by_its_front_door():
    """The service, the client and the server import the engine only from
    ``pipecat_pocket_tts.engine``, ``engine.contract`` and ``engine.errors``."""
    graph = import_graph()
    for wing in ("service", "client", "server"):
        assert past_the_front_door(graph, wing) == {}, wing


def test_the_front_door_check_finds_an_inner_import():
    graph = {
        f"{PACKAGE}.server.x": {f"{PACKAGE}.engine", f"{PACKAGE}.engine.model.config"},
        f"{PACKAGE}.server.y": {f"{PACKAGE}.engine.errors"},
    }
    assert past_the_front_door(graph, "server") == {
        f"{PACKAGE}.server.x": [f"{PACKAGE}.engine.model.config"]
    }
