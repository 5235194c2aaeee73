"""The M-RoPE population's stored results against the current inspector.

``make mrope-population`` (scripts/mrope_population.py, transformers 5.x) runs
every M-RoPE module's own rotary code on one-hot probes and stores what it did
in ``results/mrope-5.json``. Here, fast and without transformers 5.x: the file
covers every module that mentions ``mrope_section`` in its transformers, and
each stored observation is judged again by the inspector as it is now (a fix
or a regression changes a verdict; the file is then regenerated).
"""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path

import pytest

from helpers import mrope_probe

ROOT = Path(__file__).resolve().parents[1]
PATH = ROOT / "results" / "mrope-5.json"


@pytest.fixture(scope="module")
def stored():
    assert PATH.exists(), "results/mrope-5.json missing: run make mrope-population"
    return json.loads(PATH.read_text())


def test_every_module_of_its_transformers_is_probed(stored):
    assert stored["transformers"].startswith("5."), stored["transformers"]
    probed = {c["module"] for c in stored["cases"]}
    assert probed == set(stored["modules"]), (
        f"modules without cases: {sorted(set(stored['modules']) - probed)}")
    assert not [c for c in stored["cases"] if "unprobed" in c]
    for module in stored["modules"]:
        flags = {c["flag"] for c in stored["cases"] if c["module"] == module}
        assert flags == {True, False, None}, (module, flags)
    assert stored["agree"] == len(stored["cases"])


def test_the_installed_transformers_has_no_module_the_file_lacks(stored):
    """4.57.6's M-RoPE modules are all among 5.24.0's (the modeling files are
    read, not imported)."""
    if importlib.util.find_spec("transformers") is None:
        pytest.skip("transformers is not installed")
    missing = set(mrope_probe.mrope_modules()) - set(stored["modules"])
    assert not missing, f"M-RoPE modules not in results/mrope-5.json: {sorted(missing)}"


def test_the_current_inspector_agrees_with_every_stored_observation(stored):
    wrong = {}
    for case in stored["cases"]:
        reading = mrope_probe.inspector_reading(case["config"])
        verdict = mrope_probe.judge(case["observed"], reading, case["axis_names"])
        if verdict:
            key = f"{case['module']} {case['form']} {case['variant']} {case['flag']}"
            wrong[key] = verdict[:200]
    assert not wrong, f"{len(wrong)} cases disagree: {wrong}"


def _case(stored, module, variant="checkpoint"):
    return next(c for c in stored["cases"] if c["module"] == module
                and c["variant"] == variant and c["flag"] is None)


@pytest.mark.parametrize("module", ["qwen2_5_vl", "qwen3_vl", "ernie4_5_vl_moe",
                                    "glm4v"])
def test_the_judgement_can_fail(stored, module):
    """A row moved, a pair's frequency swapped with its neighbour's, the other
    pair layout: each is a disagreement."""
    case = _case(stored, module)
    reading = mrope_probe.inspector_reading(case["config"])
    names = case["axis_names"]
    assert mrope_probe.judge(case["observed"], reading, names) is None
    bad = copy.deepcopy(case["observed"])
    bad["axes"][0] = (bad["axes"][0] + 1) % 3
    assert "rows" in mrope_probe.judge(bad, reading, names)
    bad = copy.deepcopy(case["observed"])
    bad["angles"][0], bad["angles"][1] = bad["angles"][1], bad["angles"][0]
    assert "frequencies" in mrope_probe.judge(bad, reading, names)
    bad = copy.deepcopy(case["observed"])
    bad["layout"] = {"half": "interleaved", "interleaved": "half"}[bad["layout"]]
    assert "pairs" in mrope_probe.judge(bad, reading, names)


def test_a_config_transformers_refuses_must_be_refused(stored):
    """ERNIE-4.5-VL with unequal height and width sections fails in
    transformers; the inspector must not describe it."""
    case = _case(stored, "ernie4_5_vl_moe", "reversed")
    assert "error" in case["observed"], case["observed"]
    assert mrope_probe.inspector_reading(case["config"]).get("refused")
