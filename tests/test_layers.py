"""posenc_lib's layers depend on each other in one direction only, and on what pyproject says.

numerics (every top-level module) -> tools -> figures -> widgets. Numerics and
tools import neither matplotlib nor ipywidgets; figures never import ipywidgets or
pyplot. (tests/test_import_graph.py checks the same order on the source, imports
inside functions counted; this test checks what importing really loads.)
Each layer imports no third-party package beyond the dependencies that
``pyproject.toml`` declares for it: the numerics need ``torch`` and ``numpy``
only, the figures and the widgets are extras.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib

import yaml

from helpers.paths import ROOT

LAYERED_PACKAGES = ("tools", "figures", "widgets")

# In one fresh interpreter: import what a layer may use (its declared
# distributions), then the layer, module by module, and record (1) after each
# module which higher layers have appeared so far (sys.modules only grows, so
# the first module after which a name appears is the one that imported it) and
# (2) which third-party top-level modules the layer added beyond the
# declared ones.
_PROBE = """
import importlib, importlib.metadata as md, json, pkgutil, re, sys
declared = json.loads(sys.argv[1])
tops_of = {}
for top, dists in md.packages_distributions().items():
    for dist in dists:
        tops_of.setdefault(dist.lower().replace("_", "-"), set()).add(top)
def closure(dists):
    seen, todo = set(), list(dists)
    while todo:
        dist = todo.pop()
        if dist in seen:
            continue
        seen.add(dist)
        try:
            needs = md.requires(dist) or []
        except md.PackageNotFoundError:
            continue
        todo += [re.split(r"[\\s<>=!~;\\[(]", r, maxsplit=1)[0].lower().replace("_", "-")
                 for r in needs if "extra ==" not in r]
    return set().union(*(tops_of.get(d, set()) for d in seen))
def tops():
    return {name.partition(".")[0] for name in sys.modules}
def allow(layer):
    for dist in declared[layer]:  # what a dependency imports itself is allowed too
        names = tops_of.get(dist, set())
        for top in ([dist] if dist in names else sorted(names)):
            if not top.startswith("_"):
                importlib.import_module(top)
    return tops() | closure(declared[layer])
def added(allowed):
    return sorted(t for t in tops() - allowed if not t.startswith("_")
                  and t != "posenc_lib" and t not in sys.stdlib_module_names)
report, packages = {}, {}
before = allow("numerics")
import posenc_lib
numerics = ["posenc_lib"] + sorted("posenc_lib." + m.name
    for m in pkgutil.iter_modules(posenc_lib.__path__) if m.name not in LAYERED)
for name in numerics:
    importlib.import_module(name)
    report[name] = sorted(m for m in ("matplotlib", "ipywidgets") if m in sys.modules)
packages["numerics"] = added(before)
before = allow("tools")
import posenc_lib.tools as tools
for name in ["posenc_lib.tools"] + sorted("posenc_lib.tools." + m.name
                                          for m in pkgutil.iter_modules(tools.__path__)):
    importlib.import_module(name)
    report[name] = sorted(m for m in ("matplotlib", "ipywidgets") if m in sys.modules)
packages["tools"] = added(before)
before = allow("figures")
import posenc_lib.figures as figures
for name in ["posenc_lib.figures"] + sorted("posenc_lib.figures." + m.name
                                            for m in pkgutil.iter_modules(figures.__path__)):
    importlib.import_module(name)
    report[name] = sorted(m for m in ("ipywidgets", "matplotlib.pyplot") if m in sys.modules)
packages["figures"] = added(before)
before = allow("widgets")
from posenc_lib.widgets import registry
registry()
packages["widgets"] = added(before)
print(json.dumps({"report": report, "packages": packages}))
""".replace("LAYERED", repr(set(LAYERED_PACKAGES)))

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _names(requirements) -> list[str]:
    """Distribution names of requirement strings, normalised (PEP 503)."""
    return [re.split(r"[\s<>=!~;\[]", r, maxsplit=1)[0].lower().replace("_", "-")
            for r in requirements]


DECLARED = {"numerics": _names(PROJECT["dependencies"]),
            **{layer: _names(PROJECT["dependencies"] + PROJECT["optional-dependencies"][layer])
               for layer in LAYERED_PACKAGES}}


def _probe() -> dict:
    out = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(DECLARED)], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


PROBE = _probe()


def test_layers_import_only_downwards():
    report = PROBE["report"]
    assert "posenc_lib.attention" in report and "posenc_lib.figures.absolute" in report
    assert "posenc_lib.tools.inspector" in report
    offenders = {module: loaded for module, loaded in report.items() if loaded}
    assert not offenders, f"modules that import a higher layer: {offenders}"


def test_the_numerics_need_only_torch_and_numpy():
    assert DECLARED["numerics"] == ["torch", "numpy"]
    extra = PROBE["packages"]["numerics"]
    assert not extra, f"the numerics import {extra} beyond torch and numpy: declare them " \
                      f"in pyproject.toml or import them where they are used"


def test_each_extra_covers_its_layer():
    for layer in LAYERED_PACKAGES:
        extra = PROBE["packages"][layer]
        assert not extra, f"the {layer} layer imports {extra} beyond pyproject's [{layer}]"
    extras = {k: set(_names(v)) for k, v in PROJECT["optional-dependencies"].items()}
    assert "matplotlib" in extras["figures"] and "ipywidgets" in extras["widgets"]
    assert extras["figures"] | extras["widgets"] | extras["tools"] <= extras["book"]


def test_the_probe_sees_an_undeclared_import():
    """The check above can fail: the numerics, allowed nothing, add torch and numpy."""
    out = subprocess.run([sys.executable, "-c", _PROBE,
                          json.dumps({**DECLARED, "numerics": []})],
                         check=True, capture_output=True, text=True).stdout
    assert {"torch", "numpy"} <= set(json.loads(out)["packages"]["numerics"])


def test_licences_and_citation():
    assert PROJECT["license"] == {"text": "MIT"}
    licence = (ROOT / "LICENSE").read_text()
    assert licence.startswith("MIT License") and "CC BY 4.0" in licence
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0"
    for key in ("message", "title", "authors"):  # required by CFF 1.2.0
        assert citation[key], key
    # The version's one source is posenc_lib.__version__ (pyproject reads it).
    import posenc_lib

    assert PROJECT["dynamic"] == ["version"] and "version" not in PROJECT
    assert citation["license"] == "MIT" and citation["version"] == posenc_lib.__version__
    readme = (ROOT / "README.md").read_text()
    assert "CC BY 4.0" in readme and "MIT" in readme
