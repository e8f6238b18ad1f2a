"""Dependencies between the top-level packages go one way: the import graph has no cycle.

Every import counts, a function's own included (a lazy import is still a dependency)."""

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def package_imports() -> dict[str, set[str]]:
    """Top-level package -> the other top-level packages it imports."""
    folders = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    graph: dict[str, set[str]] = {}
    for package, folder in folders.items():
        name = package.removeprefix("gangsched.")
        graph[name] = set()
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                modules = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                           else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                for module in modules:
                    parts = module.split(".")
                    if parts[0] == "gangsched" and len(parts) > 1 and parts[1] != name:
                        graph[name].add(parts[1])
    return graph


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph, as the packages along it, or None."""
    state: dict[str, str] = {}

    def visit(package: str, path: list[str]) -> list[str] | None:
        state[package] = "open"
        for other in sorted(graph.get(package, ())):
            if state.get(other) == "open":
                return path[path.index(other):] + [other] if other in path else [package, other]
            if other not in state and (found := visit(other, path + [other])):
                return found
        state[package] = "done"
        return None

    for package in sorted(graph):
        if package not in state and (found := visit(package, [package])):
            return found
    return None


def test_the_packages_import_each_other_one_way():
    graph = package_imports()
    assert len(graph) >= 10
    found = cycle(graph)
    assert found is None, " -> ".join(found or [])


def test_the_cycle_finder_finds_a_cycle():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None
