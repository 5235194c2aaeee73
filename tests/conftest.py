"""Shared fixtures for the test suite (shared constants and helpers: tests/helpers/)."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture
def generator() -> torch.Generator:
    """A seeded generator, so every random draw in a test is reproducible."""
    return torch.Generator().manual_seed(1234)
