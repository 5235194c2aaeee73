"""The graph of posenc_lib's imports has no cycle, imports inside functions
counted (read with ast, nothing imported).

A module's edges are every ``import``/``from ... import`` of a posenc_lib
module anywhere in its file (module level, functions, classes), except under
``if __name__ == "__main__":``: that block runs only when the file is the
program (``python -m``), as the module ``__main__``, so an import there cannot
re-enter the module being imported. ``from . import x`` is an edge to
``posenc_lib.x`` where that is a module, else to the package. Edges to a
module's own parent packages are not counted (importing a submodule always
imports its package first).

Known cycles, each named with the reason it is not broken yet
(:data:`KNOWN_CYCLES`, empty today: there are none); any other cycle fails,
the cycle printed.

The same graph checks the layers (:func:`layer_of`): base -> numerics -> tools ->
figures -> widgets -> command line, each module importing only its own layer or
the ones before it. And no file of the repository imports a module by the path it
had before it moved (``posenc_lib._moved.MOVED``): those aliases are for readers'
code only.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Strongly connected groups that exist today, and why each is kept. None:
#: the last one (the config validator importing the reader, per_layer,
#: scaling and serving inside functions) was broken by moving the class
#: defaults it reads into posenc_lib._defaults and its YaRN warning into
#: scaling. A cycle added here must say why it cannot be broken yet.
KNOWN_CYCLES: dict[frozenset, str] = {}


#: The layers in import order; :func:`layer_of` places every module.
LAYERS = ("base", "numerics", "tools", "figures", "widgets", "command line")
BASE = {"posenc_lib._validate", "posenc_lib._stale", "posenc_lib._defaults",
        "posenc_lib._versions",
        "posenc_lib.config_reader", "posenc_lib._validate_config"}


def layer_of(module: str) -> int:
    """The index in :data:`LAYERS` of a posenc_lib module."""
    if module in BASE:
        return 0
    if module in ("posenc_lib.__main__", "posenc_lib._moved"):
        return 5
    if module == "posenc_lib":  # the package imports four numerics and _moved
        return 5
    for i, package in ((2, "tools"), (3, "figures"), (4, "widgets")):
        if module == f"posenc_lib.{package}" or module.startswith(f"posenc_lib.{package}."):
            return i
    return 1


def _modules(root: Path) -> dict[str, Path]:
    out = {}
    for path in (root / "posenc_lib").rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _is_main_guard(node: ast.AST) -> bool:
    return (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
            and isinstance(node.test.left, ast.Name)
            and node.test.left.id == "__name__"
            and any(isinstance(c, ast.Constant) and c.value == "__main__"
                    for c in node.test.comparators))


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """``{module: modules it imports}`` over posenc_lib."""
    modules = _modules(root)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        if name.startswith("posenc_lib._vendor"):
            continue
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        tree = ast.parse(path.read_text(), filename=str(path))
        tree.body = [n for n in tree.body if not _is_main_guard(n)]
        deps: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[:len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    deps.add(sub if sub in modules else target)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
        graph[name] = {d for d in deps if d in modules and d != name
                       and not name.startswith(d + ".")
                       and not d.startswith("posenc_lib._vendor")}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each
    as one cycle through all of its members where found, else its members."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


def _path(graph, group) -> str:
    """One cycle inside ``group``, as ``a -> b -> ... -> a``."""
    start = group[0]
    members = set(group)
    seen, queue = {start: None}, [start]
    while queue:  # breadth-first from start back to start
        v = queue.pop(0)
        for w in sorted(graph[v] & members):
            if w == start:
                path = [v]
                while seen[path[-1]] is not None:
                    path.append(seen[path[-1]])
                return " -> ".join([start] + path[::-1][1:] + [start]) \
                    if len(path) > 1 else f"{start} -> {v} -> {start}"
            if w not in seen:
                seen[w] = v
                queue.append(w)
    return " <-> ".join(group)


def unexplained_cycles(graph) -> list[str]:
    return [f"{_path(graph, g)} (modules in the cycle: {', '.join(g)})"
            for g in cycles(graph) if frozenset(g) not in KNOWN_CYCLES]


def test_no_import_cycle():
    """No cycle at all (:data:`KNOWN_CYCLES` is empty)."""
    graph = import_graph()
    bad = unexplained_cycles(graph)
    assert not bad, "import cycle(s) in posenc_lib: " + "; ".join(bad)
    # a listed cycle that is gone must be unlisted
    found = {frozenset(g) for g in cycles(graph)}
    assert not set(KNOWN_CYCLES) - found, set(KNOWN_CYCLES) - found


@pytest.mark.parametrize("into, planted, back", [
    # scaling imports _validate: _validate importing scaling closes a cycle
    ("_validate", "scaling", "posenc_lib.scaling"),
    # inspector.main imports crosscheck: crosscheck importing inspector again
    ("tools/crosscheck", "inspector", "posenc_lib.tools.inspector"),
    # the reader imports the validator: the validator reading the reader's
    # tables from it again (the cycle posenc_lib._defaults broke)
    ("_validate_config", "config_reader", "posenc_lib.config_reader"),
])
def test_a_planted_cycle_inside_a_function_is_caught(tmp_path, into, planted, back):
    """An import planted inside a function of posenc_lib.<into> that closes a
    cycle is reported, the cycle's modules named."""
    import shutil

    shutil.copytree(ROOT / "posenc_lib", tmp_path / "posenc_lib",
                    ignore=shutil.ignore_patterns("data", "__pycache__", "_vendor*"))
    graph = import_graph(tmp_path)
    assert not unexplained_cycles(graph)
    module = "posenc_lib." + into.replace("/", ".")
    assert module in _reaching(graph, back)
    target = tmp_path / "posenc_lib" / f"{into}.py"
    target.write_text(target.read_text() + "\n\ndef _planted():\n"
                      f"    from . import {planted}  # noqa: F401\n")
    bad = unexplained_cycles(import_graph(tmp_path))
    assert any(module in c and back in c for c in bad), bad


def _reaching(graph, start):
    """Every module ``start`` imports, directly or not."""
    seen, todo = set(), [start]
    while todo:
        for w in graph[todo.pop()] - seen:
            seen.add(w)
            todo.append(w)
    return seen


def layer_violations(graph) -> list[str]:
    """Imports from a layer into a later one."""
    return sorted(f"{a} ({LAYERS[layer_of(a)]}) imports {b} ({LAYERS[layer_of(b)]})"
                  for a, deps in graph.items() for b in deps
                  if layer_of(b) > layer_of(a))


def test_the_layers_import_one_way():
    graph = import_graph()
    assert {layer_of(m) for m in graph} == set(range(len(LAYERS)))
    bad = layer_violations(graph)
    assert not bad, "imports against the layers: " + "; ".join(bad)


@pytest.mark.parametrize("into, planted", [
    # a numerics module reaching up into a tool, inside a function
    ("rope", "from .tools import diagnose"),
    # a tool reaching up into the figures
    ("tools/engines/compare", "from ...figures import models"),
    # the config reader (base) reaching up into the numerics
    ("config_reader", "from . import rope"),
    # the validator (base) fetching a table from the numerics again
    ("_validate_config", "from .per_layer import LAYER_DEFAULTS"),
])
def test_a_planted_upward_import_is_caught(tmp_path, into, planted):
    import shutil

    shutil.copytree(ROOT / "posenc_lib", tmp_path / "posenc_lib",
                    ignore=shutil.ignore_patterns("data", "__pycache__", "_vendor*"))
    assert not layer_violations(import_graph(tmp_path))
    target = tmp_path / "posenc_lib" / f"{into}.py"
    target.write_text(target.read_text() + "\n\ndef _planted():\n"
                      f"    {planted}  # noqa: F401\n")
    bad = layer_violations(import_graph(tmp_path))
    assert any(b.startswith("posenc_lib." + into.replace("/", ".")) for b in bad), bad


def _old_path_uses(text: str) -> list[str]:
    """Old module paths (``posenc_lib.inspect``, ``posenc_lib/inspect.py``,
    ``from posenc_lib import inspect``, ``-m posenc_lib.inspect``) in ``text``."""
    import re

    from posenc_lib._moved import MOVED

    leaves = sorted((old.split(".", 1)[1] for old in MOVED), key=len, reverse=True)
    alt = "|".join(map(re.escape, leaves))
    found = re.findall(rf"posenc_lib[./](?:{alt})(?![\w])", text)
    for names in re.findall(r"^\s*from posenc_lib import ([^\n#]*)", text, re.M):
        found += [n for n in re.split(r"[\s,()]+", names) if n in leaves]
    return found


def test_nothing_in_the_repository_uses_an_old_path():
    """The aliases of posenc_lib._moved are for readers' code: the book, the
    library, the tests and the scripts use the new paths."""
    import subprocess

    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    skip = ("results/", "posenc_lib/_vendor/", "posenc_lib/_moved.py",
            "tests/test_import_graph.py", "tests/test_moved.py")
    bad = {}
    for name in files:
        path = ROOT / name
        if name.startswith(skip) or not path.is_file() or path.suffix not in (
                ".py", ".ipynb", ".md", ".yml", ".toml", ".txt", ".sh", ".cff") \
                and path.name != "Makefile":
            continue
        uses = _old_path_uses(path.read_text(errors="replace"))
        if uses:
            bad[name] = sorted(set(uses))
    assert not bad, f"old module paths (see posenc_lib/_moved.py): {bad}"


def test_the_old_path_check_can_fail():
    assert _old_path_uses("from posenc_lib import rope, inspect\n") == ["inspect"]
    assert _old_path_uses("python -m posenc_lib.experiment --smoke") == [
        "posenc_lib.experiment"]
    assert _old_path_uses("see posenc_lib/_config.py") == ["posenc_lib/_config"]
    assert not _old_path_uses("from posenc_lib.tools import inspector\n"
                              "posenc_lib.tools.experiment, posenc_lib.config_reader")
