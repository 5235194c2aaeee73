"""The model types whose default tiny model the stored conformance sweeps find
the library wrong on, or could not build, for the inspector to say so in its
report.

Reads ``results/conformance-4.json`` and ``results/conformance-5.json`` (``make
conformance``) and writes ``posenc_lib/data/known_disagreements.json``:
per transformers version, each disagreeing type (by the text model's type)
with the sweep's reasons. ``tests/test_known_disagreements.py`` fails when
the file is not what the stored sweeps say::

    python scripts/known_disagreements.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "posenc_lib" / "data" / "known_disagreements.json"


def derive() -> dict:
    versions = {}
    for major in (4, 5):
        stored = json.loads((ROOT / "results" / f"conformance-{major}.json").read_text())
        found = {}
        for entry in stored["types"].values():
            if entry["verdict"] == "not built":
                # a model the sweep could not build is not verified either
                reasons = [f"the conformance sweep could not build its tiny model "
                           f"({entry['reason'][:160]})"]
                found.setdefault(entry["model_type"], reasons)
                continue
            if entry["verdict"] != "disagree":
                continue
            reasons = [d["reason"][:240] for d in entry["differences"]]
            for name in {entry["model_type"], entry["text_model_type"]}:
                found.setdefault(name, [])
                found[name] += [r for r in reasons if r not in found[name]]
        versions[stored["transformers"]] = dict(sorted(found.items()))
    return {"source": "results/conformance-4.json, results/conformance-5.json "
                      "(make conformance), by scripts/known_disagreements.py",
            "versions": versions}


def main() -> int:
    OUT.write_text(json.dumps(derive(), indent=1, sort_keys=True) + "\n")
    print(f"-> {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
