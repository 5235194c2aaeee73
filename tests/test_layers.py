"""posenc_lib's layers depend on each other in one direction only.

numerics (every top-level module) -> figures -> widgets. Numerics import
neither matplotlib nor ipywidgets; figures never import ipywidgets or pyplot.
"""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import posenc_lib

LAYERED_PACKAGES = ("figures", "widgets")

# Imports the numerics first, then the figures, in one fresh interpreter, and
# records after each module which forbidden modules have appeared so far. Since
# sys.modules only grows, the first module after which a name appears is the
# one that imported it.
_PROBE = """
import importlib, json, pkgutil, sys
import posenc_lib
numerics = ["posenc_lib"] + sorted("posenc_lib." + m.name
    for m in pkgutil.iter_modules(posenc_lib.__path__) if m.name not in {layered})
report = {{}}
for name in numerics:
    importlib.import_module(name)
    report[name] = sorted(m for m in ("matplotlib", "ipywidgets") if m in sys.modules)
import posenc_lib.figures as figures
for name in ["posenc_lib.figures"] + sorted("posenc_lib.figures." + m.name
                                            for m in pkgutil.iter_modules(figures.__path__)):
    importlib.import_module(name)
    report[name] = sorted(m for m in ("ipywidgets", "matplotlib.pyplot") if m in sys.modules)
print(json.dumps(report))
""".format(layered=repr(set(LAYERED_PACKAGES)))


def test_layers_import_only_downwards():
    out = subprocess.run([sys.executable, "-c", _PROBE], check=True, capture_output=True,
                         text=True).stdout
    report = json.loads(out)
    assert "posenc_lib.attention" in report and "posenc_lib.figures.absolute" in report
    offenders = {module: loaded for module, loaded in report.items() if loaded}
    assert not offenders, f"modules that import a higher layer: {offenders}"
