"""Dependencies go one way: each top-level package imports only packages of the layers below its
own, as the layer table of docs/architecture.md says, and the modules of a package import each
other without a cycle (the command line's, among them).

Every import counts, a function's own included (a lazy import is still a dependency)."""

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


FOLDERS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]


def imported(path: Path) -> list[list[str]]:
    """Every gangsched module ``path`` imports, as its dotted parts after ``gangsched``
    (``from gangsched.cli import table`` names ``cli.table``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            modules = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        found += [module.split(".")[1:] for module in modules if module.startswith("gangsched.")]
    return found


def package_imports() -> dict[str, set[str]]:
    """Top-level package -> the other top-level packages it imports."""
    graph: dict[str, set[str]] = {}
    for package, folder in FOLDERS.items():
        name = package.removeprefix("gangsched.")
        graph[name] = {parts[0] for path in (ROOT / folder).rglob("*.py") for parts in imported(path)
                       if parts and parts[0] != name}
    return graph


def module_imports(package: str) -> dict[str, set[str]]:
    """Module of ``package`` -> the other modules of it that it imports; a sub-package counts as one module
    (``noded/process_managers/`` is ``process_managers``), its modules' imports its own."""
    folder = ROOT / FOLDERS[f"gangsched.{package}"]
    names = {path.relative_to(folder).parts[0].removesuffix(".py") for path in folder.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in folder.rglob("*.py"):
        name = path.relative_to(folder).parts[0].removesuffix(".py")
        graph.setdefault(name, set()).update(parts[1] for parts in imported(path)
                                             if len(parts) > 1 and parts[0] == package and parts[1] in names)
        graph[name].discard(name)
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


def documented_layers() -> dict[str, int]:
    """Package -> its layer, as the table of docs/architecture.md (its rows ``| N | `a`, `b` | ...``)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    table = text[text.index('<a id="layers"></a>'):]
    layers = {}
    for number, packages in re.findall(r"^\| (\d+) \| ([^|]+) \|", table, re.MULTILINE):
        for package in re.findall(r"`(\w+)`", packages):
            layers[package] = int(number)
    return layers


def test_every_package_imports_only_the_layers_below_its_own():
    layers, graph = documented_layers(), package_imports()
    assert set(layers) == set(graph), "the layer table names every package, and no other"
    wrong = [f"{package} (layer {layers[package]}) imports {other} (layer {layers[other]})"
             for package, imported_ in sorted(graph.items()) for other in sorted(imported_)
             if layers[other] >= layers[package]]
    assert not wrong, wrong


def test_the_packages_import_each_other_one_way():
    graph = package_imports()
    assert len(graph) >= 10
    found = cycle(graph)
    assert found is None, " -> ".join(found or [])


def test_tests_take_no_helper_from_the_benchmarks():
    """A test imports a module of bench/ only to test that benchmark (its module named in the test's name)."""
    found = []
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        for parts in imported(path):
            tested = BENCHMARKS_TESTED.get(path.stem, ())
            if parts and parts[0] == "bench" and len(parts) > 1 and parts[1] not in tested:
                found.append(f"{path.name} imports bench.{parts[1]}")
    assert not found, found


# the tests of a benchmark, and the benchmark's modules they test
BENCHMARKS_TESTED = {
    "test_bench_switch": ("switch",), "test_chaos": ("chaos", "chaos_checks"),
    "test_hostile": ("hostile", "hostile_load"),
    "test_scale": ("scale",), "test_epoll_poller": ("epoll_poller",), "test_floor": ("floor", "spawn_floor"),
    "test_live": ("restarts",), "test_live_policies": ("migration",), "test_docker": ("migration", "throughput"),
    "test_memory_policies": ("event",), "test_throughput": ("throughput",), "test_partitions": ("preempt",),
    "test_operations_live": ("operations_restarts",), "test_postgres_store": ("restarts",),
    "test_standby_masters": ("failover", "isolation"), "test_master_isolation": ("isolation",),
    "test_cli_start": ("cli_latency",), "test_srun_pty_live": ("terminal_echo",),
}


def test_the_modules_of_each_package_import_each_other_one_way():
    for package in (name.removeprefix("gangsched.") for name in FOLDERS):
        found = cycle(module_imports(package))
        assert found is None, f"{package}: " + " -> ".join(found or [])


def test_a_sub_package_is_seen_as_a_module_of_its_package():
    graph = module_imports("noded")
    assert "process_managers" in graph and "pmi1" not in graph


def test_no_test_takes_a_helper_from_the_conftest_or_another_test():
    """What tests share is in tests/helpers/ (the conftest keeps the fixtures)."""
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else \
                [f".{node.module or ''}"] if isinstance(node, ast.ImportFrom) else []
            found += [f"{path.relative_to(ROOT)} imports {module}" for module in modules
                      if re.fullmatch(r"(tests)?\.(conftest|test_\w+)", module)]
    assert not found, found


def test_the_cycle_finder_finds_a_cycle():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None
