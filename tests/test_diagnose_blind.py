"""Blind RoPE cases (tests/helpers/diagnose_blind.py): kernels written as
practitioners write their own, with the findings that name each bug decided
before diagnose_rope was run on them. Every bug must be named, every correct
kernel must come back clean.

All the cases take about 25 s, so the fast tests check the stored run
(results/diagnose_blind.json, written by benchmarks/diagnose_blind.py) against
the cases and re-run a few of them live, the ones the fixes after the first
measurement changed among them; ``make slow`` re-runs every case."""

import json
from pathlib import Path

import pytest

from helpers.diagnose_blind import CASES, LATER, THIRD, outcome

from posenc_lib.tools.diagnose import CODES, diagnose_rope

RESULTS = Path(__file__).resolve().parent.parent / "results" / "diagnose_blind.json"
ALL = {c.name: c for c in CASES + LATER + THIRD}

#: re-run live in the fast tests: the cases the fixes changed, and correct ones
#: in three styles (clean needs every check to pass)
LIVE = ["freq-dropped", "output-permuted", "later-llama3-smooth-inverted",
        "third-llama3-double-divide", "ok-yarn", "ok-bshd", "ok-partial-last"]


def _stored():
    return json.loads(RESULTS.read_text())


def test_cases_are_well_formed():
    assert len(CASES) >= 50 and len(LATER) >= 10
    assert len(ALL) == len(CASES) + len(LATER) + len(THIRD), "case names must be unique"
    for case in ALL.values():
        assert case.accepted | case.amended <= set(CODES), case.name
        assert not case.amended or case.why, f"{case.name}: an amendment needs its reason"
        assert case.visible or not case.accepted, case.name
    assert sum(1 for c in CASES if not c.accepted) >= 10


def test_stored_run_names_every_bug():
    after = _stored()["after"]["cases"]
    assert set(after) == set(ALL), "rerun benchmarks/diagnose_blind.py: the cases changed"
    for name, row in after.items():
        want = "clean" if not ALL[name].accepted else "named"
        assert outcome(ALL[name], row["findings"]) == want, (
            f"{name}: stored findings {row['findings']}, expected {want} "
            f"({sorted(ALL[name].accepted | ALL[name].amended) or 'clean'})")


def test_stored_before_is_the_first_list():
    """The first measurement covers exactly the first list, and its totals are
    recomputed from its stored findings (not typed)."""
    stored = _stored()
    before = stored["before"]
    assert set(before["cases"]) == {c.name for c in CASES}
    from helpers.diagnose_blind import totals
    found = {n: r["findings"] for n, r in before["cases"].items()}
    assert totals(CASES, found, amended=False) == before["first_list_as_decided"]
    assert totals(CASES, found) == before["first_list"]


@pytest.mark.parametrize("name", LIVE)
def test_live(name):
    case = ALL[name]
    found = diagnose_rope(case.fn, **case.kwargs)
    want = "clean" if not case.accepted else "named"
    assert outcome(case, found.findings) == want, f"{name} ({case.text}): {found}"
    assert found.findings == _stored()["after"]["cases"][name]["findings"], name
    if want == "clean":
        # a clean answer says what it could not see
        top = found.fitted["probed_positions"][1]
        assert f"Not probed: positions above {top}" in found.explanation, found.explanation


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ALL))
def test_every_case_live(name):
    case = ALL[name]
    found = diagnose_rope(case.fn, **case.kwargs)
    assert found.findings == _stored()["after"]["cases"][name]["findings"], (
        f"{name} ({case.text}): {found}")
