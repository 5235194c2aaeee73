"""Paths the tests share."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

#: The repository's root (the checkout under test).
ROOT = Path(__file__).resolve().parents[2]
#: An interpreter with transformers 5.x, for the tests that compare with it
#: live (skipped without one): $PY5, else the venv `make conformance` and
#: `make designs-v5` create. CI has none; stored captures stand in for it.
PYTHON5 = Path(os.environ.get("PY5") or ROOT / ".cache/transformers5-venv/bin/python")


def script(name: str):
    """``scripts/<name>.py`` imported as a module (the scripts are not a
    package), for the tests that judge what a script stores."""
    spec = importlib.util.spec_from_file_location(f"{name}_script",
                                                  ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
