"""Shared fixtures for the test suite."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def generator() -> torch.Generator:
    """A seeded generator, so every random draw in a test is reproducible."""
    return torch.Generator().manual_seed(1234)
