"""posenc_lib's layers depend on each other in one direction only."""

from __future__ import annotations

import subprocess
import sys

import pytest

NUMERICS = ["posenc_lib", "posenc_lib.attention", "posenc_lib.absolute", "posenc_lib.toy"]


def _loaded_after_import(module):
    code = f"import sys, {module}; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout
    return set(out.split())


@pytest.mark.parametrize("module", NUMERICS)
def test_numerics_import_neither_plotting_nor_widgets(module):
    loaded = _loaded_after_import(module)
    assert "matplotlib" not in loaded and "ipywidgets" not in loaded


def test_figures_do_not_import_widgets_or_pyplot():
    loaded = _loaded_after_import("posenc_lib.figures")
    assert "matplotlib" in loaded
    assert "ipywidgets" not in loaded
    assert "matplotlib.pyplot" not in loaded
