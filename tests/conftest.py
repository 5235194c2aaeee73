"""Shared fixtures for the test suite (shared constants and helpers: tests/helpers/)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch


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
