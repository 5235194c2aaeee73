"""Probe the partial-RoPE layout of every model of posenc_lib.conventions.PROBES.

Runs each model's own attention code (tiny random weights, float64) in the
transformers this interpreter has and writes what it found as JSON::

    PYTHONPATH=. .cache/transformers5-venv/bin/python scripts/probe_conventions.py --out results/conventions.json

(``make conventions``). tests/test_conventions.py checks the stored file against
posenc_lib.designs.rotation_plan; the models transformers 4.57 also has are probed
live there and in chapter 6.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import transformers  # noqa: E402

from posenc_lib import conventions  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    args = parser.parse_args()
    probes = conventions.probe_all()
    for name, probe in probes.items():
        print(f"{name:36s} {probe['model_type']:12s} -> {conventions.match_layouts(probe)}"
              f" (far error {probe['far_error']:.1e})")
    # 12 significant digits: the solve's last bits vary with the thread count, and the
    # tests' tolerances (float32's) are ten thousand times coarser
    for probe in probes.values():
        for side in ("query", "key"):
            for pair in probe[side]["pairs"]:
                pair[2] = float(f"{pair[2]:.12g}")
        probe["far_error"] = float(f"{probe['far_error']:.3g}")
    payload = {"transformers": transformers.__version__, "torch": torch.__version__,
               "probes": probes}
    args.out.write_text(json.dumps(payload, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
