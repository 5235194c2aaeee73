"""Shared fixtures for the test suite (shared constants and helpers: tests/helpers/)."""

from __future__ import annotations

import os
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


def _shard_key(item) -> str:
    """The page a browser test loads (its parameter, as ``book/04_rope``), so
    that one page's tests stay in one shard and it loads once; else the test."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    page = params.get("page", params.get("name"))
    return str(page) if page is not None else item.nodeid


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in QUICK_FILES:
            item.add_marker(pytest.mark.quick)
    # POSENC_BROWSER_SHARD=k/n keeps the k-th of n shards of the browser tests,
    # by page (make test runs two side by side once the book is built)
    shard = os.environ.get("POSENC_BROWSER_SHARD")
    if not shard:
        return
    k, n = (int(x) for x in shard.split("/"))
    browser = [i for i in items if i.get_closest_marker("browser")]
    keys = sorted({_shard_key(i) for i in browser})
    dropped = [i for i in browser if keys.index(_shard_key(i)) % n != k]
    if dropped:
        gone = set(map(id, dropped))
        config.hook.pytest_deselected(items=dropped)
        items[:] = [i for i in items if id(i) not in gone]
