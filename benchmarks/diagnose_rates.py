"""Detection and naming rates of diagnose_rope on generated bugs.

Samples ``--n`` perturbed kernels (tests/helpers/diagnose_generated.py: one component
of a correct kernel perturbed at a time) with a seeded random.Random, runs
diagnose_rope on each and counts: detected (some finding), named (a finding
that names the perturbed component), and, for the unperturbed ones, clean.
Writes results/diagnose_rates.json (``--out``), which
book/recipes/check_your_port.ipynb reports and tests/test_diagnose_generated.py
checks.

    PYTHONPATH=. .venv/bin/python benchmarks/diagnose_rates.py --n 300 --seed 0
"""

import argparse
import json
import random
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from helpers.diagnose_generated import judge, make_case, sample  # noqa: E402

from posenc_lib.tools.diagnose import diagnose_rope  # noqa: E402


def run(n, seed, threads=2, verbose=False):
    torch.set_num_threads(threads)
    warnings.simplefilter("ignore")
    rng = random.Random(seed)
    per_bug = {}
    misses = []
    start = time.perf_counter()
    for _ in range(n):
        params = sample(rng)
        fn, kw, accepted, text = make_case(params)
        result = diagnose_rope(fn, **kw)
        detected, named = judge(result, accepted)
        bug = params["bug"] if accepted else "clean"
        if params["bug"] == "none":
            bug = "none"
        row = per_bug.setdefault(bug, Counter())
        row["cases"] += 1
        row["detected"] += detected
        row["named"] += named
        if not named:
            misses.append({"case": text, "findings": result.findings,
                           "accepted": sorted(accepted)})
        if verbose:
            print(("ok   " if named else "MISS ") + text, result.findings, flush=True)
    buggy = [c for b, c in per_bug.items() if b not in ("clean", "none")]
    total = sum(c["cases"] for c in buggy)
    summary = {
        "command": f"PYTHONPATH=. .venv/bin/python benchmarks/diagnose_rates.py --n {n} "
                   f"--seed {seed}",
        "cases": n, "perturbed": total,
        "detected": sum(c["detected"] for c in buggy),
        "named": sum(c["named"] for c in buggy),
        "clean_cases": sum(per_bug.get(b, Counter())["cases"] for b in ("clean", "none")),
        "clean_clean": sum(per_bug.get(b, Counter())["named"] for b in ("clean", "none")),
        "per_perturbation": {b: dict(c) for b, c in sorted(per_bug.items())},
        "misses": misses, "seconds": round(time.perf_counter() - start, 1),
    }
    summary["detection_rate"] = summary["detected"] / max(total, 1)
    summary["naming_rate"] = summary["named"] / max(total, 1)
    return summary


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default="results/diagnose_rates.json")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    summary = run(args.n, args.seed, args.threads, args.verbose)
    Path(args.out).write_text(json.dumps(summary, indent=1) + "\n")
    print(f"{summary['perturbed']} perturbed: detected {summary['detected']} "
          f"({summary['detection_rate']:.1%}), named {summary['named']} "
          f"({summary['naming_rate']:.1%}); clean {summary['clean_clean']} of "
          f"{summary['clean_cases']}; {summary['seconds']} s")


if __name__ == "__main__":
    main()
