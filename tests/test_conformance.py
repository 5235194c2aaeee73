"""The conformance sweep's stored results against the current library.

``make conformance`` (scripts/conformance.py) builds a tiny model of every
causal-LM type transformers registers and stores what each did in
``results/conformance*.json``. Here, fast: the stored observations are judged
again by the current library (a fix or a regression changes a verdict, and the
stored file must be regenerated), the file covers every registered type, and a
few types are built live to show the stored observations are still what
transformers does.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from posenc_lib import conformance

ROOT = Path(__file__).resolve().parents[1]
RESULTS = sorted((ROOT / "results").glob("conformance*.json"))


def _load(path):
    return json.loads(path.read_text())


@pytest.fixture(scope="module", params=RESULTS, ids=[p.name for p in RESULTS])
def stored(request):
    return _load(request.param)


def test_results_exist():
    assert RESULTS, "results/conformance*.json missing: run make conformance"


def test_every_registered_type_listed_with_a_verdict(stored):
    types = stored["types"]
    assert len(types) == stored["registered"]
    for name, entry in types.items():
        assert entry["verdict"] in ("agree", "disagree", "partly compared",
                                    "not built"), name
        if entry["verdict"] == "not built":
            assert entry["reason"], name
        if entry["verdict"] in ("disagree", "partly compared"):
            assert all(d["reason"] for d in entry["differences"]), name
    counts = {}
    for entry in types.values():
        counts[entry["verdict"]] = counts.get(entry["verdict"], 0) + 1
    assert counts == stored["counts"]


def test_stored_verdicts_are_the_current_library_s(stored):
    """Each stored observation, judged by the library as it is now, gives the
    stored differences (the file is regenerated whenever a fix changes one)."""
    changed = {}
    for name, entry in stored["types"].items():
        if entry["verdict"] == "not built":
            continue
        diffs = conformance.compare(entry["observed"], entry["config"])
        now = sorted(d["what"] for d in diffs)
        then = sorted(d["what"] for d in entry["differences"])
        if now != then:
            changed[name] = {"stored": then, "now": now}
    assert not changed, f"re-run make conformance: {changed}"


def _agreeing(stored, name):
    entry = stored["types"].get(name)
    if entry is None or entry["verdict"] != "agree":
        pytest.skip(f"{name} does not agree in {stored['transformers']}")
    return entry


@pytest.mark.parametrize("name", ["llama", "gemma3_text", "granitemoehybrid"])
def test_planted_differences_are_caught(stored, name):
    """The comparison can fail: a cos/sin row off by a tiny angle, a scale
    off by 1 %, one layer's RoPE dropped, a byte more per token."""
    entry = _agreeing(stored, name)
    obs = entry["observed"]
    if obs["cos_sin"]:
        bad = copy.deepcopy(obs)
        key = next(iter(bad["cos_sin"]))
        bad["cos_sin"][key]["cos"][1] += 1e-4
        assert any("cos/sin" in d["what"] for d in
                   conformance.compare(bad, entry["config"]))
        bad = copy.deepcopy(obs)
        bad["rope_layers"] = bad["rope_layers"][1:]
        assert any(d["what"] == "layers with RoPE" for d in
                   conformance.compare(bad, entry["config"]))
    bad = copy.deepcopy(obs)
    bad["scales"] = {k: v * 1.01 for k, v in bad["scales"].items()}
    if bad["scales"]:
        assert any(d["what"] == "softmax scale" for d in
                   conformance.compare(bad, entry["config"]))
    bad = copy.deepcopy(obs)
    bad["kv_per_token"] += 4
    assert any(d["what"] == "KV bytes/token" for d in
               conformance.compare(bad, entry["config"]))


def test_live_subset_matches_the_stored_observations():
    """Two types built now with the installed transformers (a plain one and a
    hybrid with a fixed state): what they do is what the stored file says they
    did, so the file describes this version (a few seconds)."""
    transformers = pytest.importorskip("transformers")
    path = ROOT / "results" / f"conformance-{transformers.__version__.split('.')[0]}.json"
    if not path.exists():
        pytest.skip(f"no stored results for transformers {transformers.__version__}")
    data = _load(path)
    if data["transformers"] != transformers.__version__:
        pytest.skip(f"stored for {data['transformers']}")
    from posenc_lib import tiny_model

    for name in ("llama", "qwen3_next"):
        run = tiny_model.run_model(name)
        stored = data["types"][name]["observed"]
        assert run["observed"]["rope_layers"] == stored["rope_layers"], name
        assert run["observed"]["kv_per_token"] == stored["kv_per_token"], name
        assert run["observed"]["fixed_state"] == stored["fixed_state"], name
        assert run["observed"]["scales"] == stored["scales"], name
        assert conformance.compare(run["observed"], run["config"]) == \
            conformance.compare(stored, data["types"][name]["config"]), name
