"""The test suite's own layout: tests share code through ``tests/helpers/`` and
fixtures in ``conftest.py``, never by importing one another.

A test file that imports another test file runs that file's module-level code
(and, under pytest's default import mode, depends on the order in which the
files are collected); ``from conftest import ...`` imports pytest's plugin file
as a plain module. Every import is read with ``ast``, imports inside functions
included. ``test_the_scanner_catches_planted_imports`` plants each forbidden
form (and the allowed ones) in a scratch file and checks the verdict.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

from helpers.paths import ROOT

TESTS = ROOT / "tests"


def _forbidden(name: str) -> bool:
    top = name.split(".")[0]
    return top == "conftest" or top.startswith("test_")


def forbidden_imports(path: Path) -> list[str]:
    """``file:line: import`` for each import of a test module or of conftest."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            # `from test_x import y`, `from .test_x import y`, `from . import test_x`
            names = [node.module] if node.module else [a.name for a in node.names]
        else:
            continue
        found += [f"{path.name}:{node.lineno}: {name}" for name in names
                  if _forbidden(name)]
    return found


def python_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "data" not in p.relative_to(TESTS).parts)


def test_no_test_file_imports_another_or_conftest():
    found = [hit for path in python_files() for hit in forbidden_imports(path)]
    assert not found, ("shared code belongs in tests/helpers/ (or a fixture in "
                       f"tests/conftest.py); these import a test module or conftest: {found}")


def test_helpers_hold_no_tests_and_test_names_are_unique():
    """pytest's default import mode imports each test file by its bare name, so two
    test files with one name in different folders would collide."""
    tests = [p for p in TESTS.rglob("test_*.py") if "data" not in p.relative_to(TESTS).parts]
    assert not [p for p in tests if "helpers" in p.relative_to(TESTS).parts]
    twice = [name for name, n in Counter(p.name for p in tests).items() if n > 1]
    assert not twice, f"test files with the same name in two folders: {twice}"
    assert (TESTS / "figures" / "test_widgets.py").is_file()


@pytest.mark.parametrize("source, caught", [
    ("from test_models import assert_same\n", True),
    ("import test_per_layer\n", True),
    ("import test_per_layer as pl\n", True),
    ("from conftest import ROOT\n", True),
    ("import conftest\n", True),
    ("def f():\n    from test_models import hf_rope\n", True),
    ("from .test_models import hf_rope\n", True),
    ("from . import test_models\n", True),
    ("from helpers.paths import ROOT\n", False),
    ("from helpers import mutation\n", False),
    ("import pytest\nfrom posenc_lib import rope\n", False),
    ("'''from test_models import x'''\n", False),
])
def test_the_scanner_catches_planted_imports(tmp_path, source, caught):
    planted = tmp_path / "test_planted.py"
    planted.write_text(source)
    assert bool(forbidden_imports(planted)) is caught
