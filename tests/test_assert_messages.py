"""Every check in the book says what failed.

A reader who changes a parameter in a live notebook and breaks a check should
see the measured value(s) and what was expected, not a bare ``AssertionError``.
So every ``assert`` in a code cell of the chapters (``book/01_*.ipynb`` to
``book/10_*.ipynb``), the tour and the recipes carries a message. The asserts are found with ``ast`` (asserts inside loops,
functions and branches included; text in strings, comments and markdown cells
is not code), and each one without a message is reported as
``notebook cell-id:line: assert ...``.

Chapters still being given their messages are listed in ``PENDING``; the set
only shrinks: a chapter listed there that has no bare assert left fails, so that
it is taken off the list and enforced from then on.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from helpers.paths import ROOT

BOOK = ROOT / "book"
CHAPTERS = [f"{n:02d}" for n in range(1, 11)] + ["tour"]  # chapters 1 to 10, the tour
PENDING: set[str] = set()  # chapters still being given their messages


def _code(source: str) -> str:
    """The cell's Python, with IPython magics and shell lines commented out."""
    return "\n".join(
        "#" + line if re.match(r"\s*[%!]", line) else line for line in source.splitlines()
    )


def bare_asserts(source: str) -> list[tuple[int, str]]:
    """(line, first line of the statement) of each assert without a message."""
    code = _code(source)
    return [
        (node.lineno, ast.get_source_segment(code, node).splitlines()[0])
        for node in ast.walk(ast.parse(code))
        if isinstance(node, ast.Assert) and node.msg is None
    ]


def notebook_bare_asserts(path: Path) -> list[str]:
    """``name cell-id:line: assert ...`` for each bare assert in a code cell."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    found = []
    for index, cell in enumerate(cells):
        if cell["cell_type"] != "code":
            continue
        source = cell["source"]
        source = "".join(source) if isinstance(source, list) else source
        cell_id = cell.get("id", f"#{index}")
        found += [f"{path.name} {cell_id}:{line}: {text}"
                  for line, text in bare_asserts(source)]
    return found


def chapter_notebook(chapter: str) -> Path:
    if chapter == "tour":
        return BOOK / "tour.ipynb"
    (path,) = BOOK.glob(f"{chapter}_*.ipynb")  # exactly one notebook per chapter
    return path


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_assert_in_the_chapter_has_a_message(chapter):
    bare = notebook_bare_asserts(chapter_notebook(chapter))
    if chapter in PENDING:
        assert bare, (f"chapter {chapter} has no bare assert left: take it off PENDING "
                      "in tests/test_assert_messages.py so that it stays that way")
        pytest.skip(f"chapter {chapter} is pending: {len(bare)} bare asserts")
    assert not bare, (
        f"{len(bare)} asserts without a message (give each one the measured value(s) "
        "and what was expected):\n" + "\n".join(bare))


def test_pending_lists_only_chapters():
    assert PENDING <= set(CHAPTERS), PENDING - set(CHAPTERS)


@pytest.mark.parametrize("source, lines", [
    ("assert x\n", [1]),
    ("assert x, 'x should hold'\n", []),
    ("assert (x, 'a tuple is not a message')\n", [1]),
    ("for i in range(3):\n    assert i < 3\n", [2]),
    ("def f(t):\n    if t:\n        assert t > 0\n    return t\n", [3]),
    ("assert torch.allclose(\n    a, b\n), f'{(a - b).abs().max():.1e}'\n", []),
    ("x = 'assert y'\n# assert z\n", []),
    ("%time y = 1\nassert y\n", [2]),
    ("with ctx:\n    assert a == b, (\n        f'{a} != {b}'\n    )\n    assert c\n", [5]),
])
def test_the_scanner_catches_planted_bare_asserts(source, lines):
    assert [line for line, _ in bare_asserts(source)] == lines


def test_a_planted_bare_assert_in_a_notebook_is_reported(tmp_path):
    """A copy of chapter 5 with one bare assert planted in a code cell (and one in a
    markdown cell, which is text): the code cell's is reported, by cell id and line."""
    notebook = json.loads(chapter_notebook("05").read_text(encoding="utf-8"))
    code = next(c for c in notebook["cells"] if c["cell_type"] == "code")
    markdown = next(c for c in notebook["cells"] if c["cell_type"] == "markdown")
    code["source"] = "".join(code["source"]) + "\nfor n in range(2):\n    assert n < 2\n"
    markdown["source"] = "assert this_is_text\n"
    planted = tmp_path / "05_planted.ipynb"
    planted.write_text(json.dumps(notebook), encoding="utf-8")
    found = notebook_bare_asserts(planted)
    line = "".join(code["source"]).splitlines().index("    assert n < 2") + 1
    assert found == [f"05_planted.ipynb {code['id']}:{line}: assert n < 2"], found


RECIPES = sorted(p.name for p in (BOOK / "recipes").glob("*.ipynb"))


@pytest.mark.parametrize("recipe", RECIPES)
def test_every_assert_in_the_recipe_has_a_message(recipe):
    """The recipes, where a reader brings their own config or kernel, too."""
    bare = notebook_bare_asserts(BOOK / "recipes" / recipe)
    assert not bare, (
        f"{len(bare)} asserts without a message (give each one the measured value(s) "
        "and what was expected):\n" + "\n".join(bare))
