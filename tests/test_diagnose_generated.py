"""Generated bugs (tests/helpers/diagnose_generated.py): one component of a correct RoPE
kernel perturbed at a time; diagnose_rope must detect every one and name its
cause. A small hypothesis slice runs here; benchmarks/diagnose_rates.py runs a
larger sample and stores the rates in results/diagnose_rates.json, which is
checked below."""

import json
import warnings
from pathlib import Path

from hypothesis import HealthCheck, given, settings

from helpers.diagnose_generated import PERTURBATIONS, judge, make_case, strategy

from posenc_lib.tools.diagnose import CODES, diagnose_rope  # noqa: E402

RESULTS = Path(__file__).resolve().parent.parent / "results" / "diagnose_rates.json"


@settings(max_examples=8, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(strategy())
def test_generated_bug_is_detected_and_named(params):
    fn, kw, accepted, text = make_case(params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = diagnose_rope(fn, **kw)
    detected, named = judge(result, accepted)
    assert detected, f"{text}: {result}"
    assert named, f"{text}: got {result.findings}, want one of {sorted(accepted)}\n{result}"


def test_every_accepted_code_exists():
    for codes in PERTURBATIONS.values():
        assert codes <= set(CODES)


def test_stored_rates():
    """The stored run: its counts add up, every perturbation kind was sampled,
    and the rates are what the recipe quotes (detection 100 %, naming >= 95 %)."""
    stored = json.loads(RESULTS.read_text())
    rows = stored["per_perturbation"]
    assert set(rows) <= set(PERTURBATIONS) | {"clean"}
    assert set(PERTURBATIONS) - {"none"} <= set(rows)
    buggy = [r for b, r in rows.items() if b not in ("clean", "none")]
    assert sum(r["cases"] for r in buggy) == stored["perturbed"]
    assert sum(r["detected"] for r in buggy) == stored["detected"]
    assert sum(r["named"] for r in buggy) == stored["named"]
    assert len(stored["misses"]) == stored["perturbed"] - stored["named"] + (
        stored["clean_cases"] - stored["clean_clean"])
    assert stored["detected"] == stored["perturbed"]
    assert stored["named"] >= 0.95 * stored["perturbed"]
