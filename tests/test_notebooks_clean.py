"""Notebooks are stored without outputs, and every one of them is in the book."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from conftest import ROOT


def _tracked_notebooks():
    try:
        listed = subprocess.run(["git", "ls-files", "*.ipynb"], cwd=ROOT, check=True,
                                capture_output=True, text=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        listed = []
    notebooks = sorted(ROOT / p for p in listed)
    # Outside a git checkout (an unpacked archive), fall back to the files on disk.
    return notebooks or sorted(ROOT.glob("book/**/*.ipynb"))


NOTEBOOKS = _tracked_notebooks()


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_has_no_stored_outputs(path):
    nb = json.loads(path.read_text())
    for index, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        assert cell.get("outputs") == [], f"{path.name}: cell {index} has stored outputs"
        assert cell.get("execution_count") is None, f"{path.name}: cell {index} has a count"
    assert "widgets" not in nb.get("metadata", {}), f"{path.name}: stored widget state"


def _toc_files(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("file", "root"):
                yield value
            yield from _toc_files(value)
    elif isinstance(node, list):
        for item in node:
            yield from _toc_files(item)


def test_every_notebook_is_in_the_table_of_contents():
    toc = set(_toc_files(yaml.safe_load((ROOT / "_toc.yml").read_text())))
    for path in NOTEBOOKS:
        entry = str(path.relative_to(ROOT).with_suffix(""))
        assert entry in toc, f"{entry} is not listed in _toc.yml"
