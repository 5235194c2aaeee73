"""Store what transformers 5.24.0 logs for the "transformers warns" checks.

``make test`` runs transformers 4.57.6 only; 5.24.0 lives in a second
interpreter. This script builds the configs of
``tests/test_transformers_warnings.py`` (the generated population of
``tests/helpers/rope_population.py`` and the table's models with and without probe
blocks), has ``scripts/transformers_rope_log.py`` log them under the other
interpreter, and writes ``tests/data/transformers_5_rope_log.json`` (the
version, a hash of the configs, one list of messages per config)::

    PYTHONPATH=. .venv/bin/python scripts/capture_transformers_warnings.py \\
        --python5 .cache/transformers5-venv/bin/python
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CAPTURE = ROOT / "tests" / "data" / "transformers_5_rope_log.json"
WORKER = ROOT / "scripts" / "transformers_rope_log.py"


def configs_hash(configs: list[dict]) -> str:
    return hashlib.sha256(json.dumps(configs, sort_keys=True).encode()).hexdigest()


def run_worker(python: str, configs: list[dict]) -> dict:
    """``{"version", "logs"}`` from the worker under ``python``."""
    done = subprocess.run([python, str(WORKER)], input=json.dumps(configs),
                          capture_output=True, text=True, check=True, timeout=600)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python5", required=True,
                        help="an interpreter with transformers 5.24.0 installed")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    from helpers import rope_population

    configs = rope_population.all_configs()
    result = run_worker(args.python5, configs)
    CAPTURE.parent.mkdir(exist_ok=True)
    CAPTURE.write_text(json.dumps({"version": result["version"],
                                   "configs_sha256": configs_hash(configs),
                                   "logs": result["logs"]}, indent=0) + "\n")
    print(f"{len(configs)} configs, transformers {result['version']}: {CAPTURE}")


if __name__ == "__main__":
    main()
