"""diagnose_rope on the blind cases of tests/helpers/diagnose_blind.py.

Runs every case of ``CASES``, ``LATER`` and ``THIRD`` and stores, under ``--section``
(``after`` by default) of results/diagnose_blind.json, each case's findings,
its outcome and the totals; tests/test_diagnose_blind.py checks the stored
file against the cases and re-runs a few of them live.

The ``before`` section is the first measurement: diagnose as it was at commit
f0985f6, before the fixes, on the same first list:

    mkdir -p /tmp/old && git archive f0985f6 posenc_lib | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old .venv/bin/python benchmarks/diagnose_blind.py --section before

and the ``after`` section, both lists, on the current code:

    PYTHONPATH=. .venv/bin/python benchmarks/diagnose_blind.py
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from helpers.diagnose_blind import CASES, LATER, THIRD, outcome, run, totals  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--section", choices=("before", "after"), default="after")
    parser.add_argument("--out", default=str(ROOT / "results" / "diagnose_blind.json"))
    args = parser.parse_args()
    out = Path(args.out)
    stored = json.loads(out.read_text()) if out.exists() else {}
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    start = time.perf_counter()
    cases = CASES + (LATER + THIRD if args.section == "after" else [])
    found = run(cases)
    seconds = time.perf_counter() - start
    section = {
        "command": ("PYTHONPATH=/tmp/old (posenc_lib of f0985f6) " if args.section ==
                    "before" else "PYTHONPATH=. ")
        + f".venv/bin/python benchmarks/diagnose_blind.py --section {args.section}",
        "commit": "f0985f6" if args.section == "before" else commit,
        "seconds": round(seconds, 1),
        "cases": {c.name: {"findings": found[c.name],
                           "accepted": sorted(c.accepted | c.amended),
                           "list": ("first" if c in CASES else
                                    "later" if c in LATER else "third"),
                           "text": c.text,
                           "outcome": outcome(c, found[c.name]),
                           "outcome_as_decided": outcome(c, found[c.name], amended=False)}
                  for c in cases},
        "first_list": totals(CASES, found),
        "first_list_as_decided": totals(CASES, found, amended=False),
    }
    if args.section == "after":
        section["later_list"] = totals(LATER, found)
        section["third_list"] = totals(THIRD, found)
    stored[args.section] = section
    out.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n")
    for key in ("first_list_as_decided", "first_list", "later_list", "third_list"):
        if key in section:
            print(key, section[key])
    for name, row in section["cases"].items():
        if row["outcome"] not in ("named", "clean"):
            print(row["outcome"], name, row["findings"])


if __name__ == "__main__":
    main()
