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
(:data:`KNOWN_CYCLES`); any other cycle fails, the cycle printed.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Strongly connected groups that exist today, and why each is kept.
KNOWN_CYCLES = {
    frozenset({"posenc_lib._config", "posenc_lib._validate_config",
               "posenc_lib.per_layer", "posenc_lib.scaling", "posenc_lib.serving"}):
        "_validate_config's checks import _config, per_layer, scaling and "
        "serving inside functions, and each of those imports _validate_config: "
        "the validator sits below its own users; breaking it splits the "
        "validator, a refactor of the whole config layer",
}


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
                       and not name.startswith(d + ".")}
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


def test_no_import_cycle_but_the_named_ones():
    graph = import_graph()
    bad = unexplained_cycles(graph)
    assert not bad, "import cycle(s) in posenc_lib: " + "; ".join(bad)
    # a listed cycle that is gone must be unlisted
    found = {frozenset(g) for g in cycles(graph)}
    assert not set(KNOWN_CYCLES) - found, set(KNOWN_CYCLES) - found


@pytest.mark.parametrize("into, planted, back", [
    # scaling imports _validate: _validate importing scaling closes a cycle
    ("_validate", "scaling", "posenc_lib.scaling"),
    # inspect.main imports crosscheck: crosscheck importing inspect again
    ("crosscheck", "inspect", "posenc_lib.inspect"),
])
def test_a_planted_cycle_inside_a_function_is_caught(tmp_path, into, planted, back):
    """An import planted inside a function of posenc_lib.<into> that closes a
    cycle is reported, the cycle's modules named."""
    import shutil

    shutil.copytree(ROOT / "posenc_lib", tmp_path / "posenc_lib",
                    ignore=shutil.ignore_patterns("data", "__pycache__", "_vendor*"))
    graph = import_graph(tmp_path)
    assert not unexplained_cycles(graph)
    assert f"posenc_lib.{into}" in _reaching(graph, back)
    target = tmp_path / "posenc_lib" / f"{into}.py"
    target.write_text(target.read_text() + "\n\ndef _planted():\n"
                      f"    from . import {planted}  # noqa: F401\n")
    bad = unexplained_cycles(import_graph(tmp_path))
    assert any(f"posenc_lib.{into}" in c and back in c for c in bad), bad


def _reaching(graph, start):
    """Every module ``start`` imports, directly or not."""
    seen, todo = set(), [start]
    while todo:
        for w in graph[todo.pop()] - seen:
            seen.add(w)
            todo.append(w)
    return seen
