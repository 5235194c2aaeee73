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
