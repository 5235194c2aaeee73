"""Shared fixtures for the test suite."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
#: An interpreter with transformers 5.x, for the tests that compare with it
#: live (skipped without one): $PY5, else the venv `make conformance` and
#: `make designs-v5` create. CI has none; stored captures stand in for it.
PYTHON5 = Path(os.environ.get("PY5") or ROOT / ".cache/transformers5-venv/bin/python")


@pytest.fixture
def generator() -> torch.Generator:
    """A seeded generator, so every random draw in a test is reproducible."""
    return torch.Generator().manual_seed(1234)


#: The test files `make quick` runs, by basename (tests/quick.txt says how they
#: were chosen); their tests get the `quick` marker, so `pytest -m quick` runs them.
QUICK_FILES = frozenset(
    line.split()[0]
    for line in (Path(__file__).parent / "quick.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#"))


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in QUICK_FILES:
            item.add_marker(pytest.mark.quick)
