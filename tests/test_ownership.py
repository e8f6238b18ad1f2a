"""One owner for each piece of the master's state, read from the code as tests/test_layers.py reads its
imports: a module assigns or mutates the attributes of ``self`` and of the records it defines, never
another part's. A job's fields in particular are changed by ``master/job_record.py`` alone, through its
named transitions (docs/architecture.md, "The life of a job")."""

import ast
import pathlib

import pytest

MASTER = pathlib.Path(__file__).resolve().parent.parent / "master"
# what changes the container it is called on
_MUTATORS = {"append", "appendleft", "extend", "add", "discard", "remove", "pop", "popleft", "clear", "update",
             "setdefault", "insert", "sort"}


def _fields_defined(tree: ast.Module) -> set[str]:
    """The attributes of the classes a module defines: annotated fields and what their methods assign."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in ast.walk(node):
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(item.target.id)
                if isinstance(item, ast.Attribute) and isinstance(item.ctx, ast.Store) and \
                        isinstance(item.value, ast.Name) and item.value.id == "self":
                    names.add(item.attr)
    return names


def _owner(target: ast.expr) -> ast.Attribute | None:
    """The attribute a target changes, if it is not one of ``self``'s own: ``job.state``, ``self._a.b``."""
    while isinstance(target, ast.Subscript):
        target = target.value
    if not isinstance(target, ast.Attribute):
        return None
    if isinstance(target.value, ast.Name) and target.value.id in ("self", "cls"):
        return None
    return target


def _changes(tree: ast.Module) -> list[tuple[int, ast.Attribute]]:
    found = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MUTATORS \
                and isinstance(node.func.value, ast.Attribute):
            targets = [node.func.value]
        for target in targets:
            for each in target.elts if isinstance(target, ast.Tuple) else [target]:
                owner = _owner(each)
                if owner is not None:
                    found.append((node.lineno, owner))
    return found


def test_no_module_of_the_master_changes_the_state_of_another_part():
    foreign = []
    for path in sorted(MASTER.glob("*.py")):
        tree = ast.parse(path.read_text())
        own = _fields_defined(tree)
        for line, attribute in _changes(tree):
            if attribute.attr not in own:
                foreign.append(f"master/{path.name}:{line}: {ast.unparse(attribute)}")
    assert not foreign, "changed outside their owner:\n" + "\n".join(foreign)


def test_only_the_job_record_changes_a_job():
    job_fields = _fields_defined(ast.parse((MASTER / "job_record.py").read_text()))
    writers = set()
    for path in sorted(MASTER.glob("*.py")):
        if path.name == "job_record.py":
            continue
        tree = ast.parse(path.read_text())
        own = _fields_defined(tree)
        writers |= {path.name for _, attribute in _changes(tree)
                    if attribute.attr in job_fields and attribute.attr not in own}
    assert writers == set()


@pytest.mark.parametrize("source", [
    "def f(job):\n    job.state = 1\n",
    "def f(self):\n    self._table.jobs[3] = None\n",
    "def f(job):\n    job.steps[0] = None\n",
    "def f(self):\n    self._retry.postponed.append(1)\n",
    "def f(job):\n    job.fences.setdefault(1, {})\n",
])
def test_the_reading_sees_each_way_of_changing_another_s_state(source):
    assert _changes(ast.parse(source))
