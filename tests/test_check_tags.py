"""Every code cell of the book that asserts carries the tag ``check`` (its
printed output is styled as a check, book/_ext/posenc.css), and no other
cell does: ``python scripts/tag_checks.py`` sets the tags."""

from __future__ import annotations

import importlib.util

import nbformat

from helpers.paths import ROOT


def _tagger():
    spec = importlib.util.spec_from_file_location("tag_checks",
                                                  ROOT / "scripts" / "tag_checks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_cell_that_asserts_is_tagged_check_and_no_other(capsys):
    assert _tagger().main(["--check"]) == 0, (
        "cells whose tag `check` is missing or wrong (run "
        "`python scripts/tag_checks.py`):\n" + capsys.readouterr().out)


def test_the_rule_sees_asserts_in_loops_and_functions_not_in_strings():
    asserts = _tagger().asserts
    assert asserts("for i in range(3):\n    assert i < 3, i\n")
    assert asserts("def f(x):\n    assert x\n%matplotlib inline\n")
    assert not asserts("print('assert x')\n# assert y\n")
    assert not asserts("x = 1\n")


def test_a_removed_tag_is_caught(tmp_path, monkeypatch):
    """A planted bug: one check cell's tag removed, in a copy of a chapter."""
    tagger = _tagger()
    book = tmp_path / "book"
    book.mkdir()
    nb = nbformat.read(ROOT / "book" / "05_multidim.ipynb", as_version=4)
    cell = next(c for c in nb.cells if "check" in c.metadata.get("tags", []))
    cell.metadata["tags"].remove("check")
    nbformat.write(nb, book / "05_multidim.ipynb")
    monkeypatch.setattr(tagger, "BOOK", book)
    assert tagger.main(["--check"]) == 1
