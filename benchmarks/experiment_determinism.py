"""Re-train models of the stored chapter 7 run and compare them bit for bit.

    python benchmarks/experiment_determinism.py [--models rope alibi]

For each named model, trains it again with the stored configuration (same
seeds, same thread count) and reports whether its training-loss curve and
every evaluation number equal the ones in ``results/length_generalization.json``
exactly. Each model takes about three minutes on two CPU cores. The test
suite checks the same property on a tiny configuration
(``tests/test_experiment.py``); this script measures it on the real one.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from posenc_lib import experiment  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["rope", "alibi"],
                        help="trained schemes to re-check (default: %(default)s)")
    args = parser.parse_args()
    stored = experiment.load_results()
    config = experiment.Config()
    torch.set_num_threads(config.threads)
    train, _ = experiment.load_bytes(config.train_files)
    held_out, _ = experiment.load_bytes(config.eval_files)
    print(f"configuration {config.hash()}, {config.threads} threads, torch {torch.__version__}")
    print(f"{'model':12s} {'loss curve':>11s} {'evaluation':>11s} {'seconds':>8s}")
    for name in args.models:
        if name not in config.schemes:
            parser.error(f"--models: {name!r} is not one of {list(config.schemes)}")
        start = time.perf_counter()
        model, log = experiment.train_model(config, name, train, progress=False)
        evaluation = experiment.evaluate(config, model, held_out)
        same_curve = log["loss_curve"] == stored["models"][name]["train"]["loss_curve"]
        same_eval = evaluation == stored["models"][name]["eval"]
        print(f"{name:12s} {'identical' if same_curve else 'DIFFERS':>11s} "
              f"{'identical' if same_eval else 'DIFFERS':>11s} "
              f"{time.perf_counter() - start:8.0f}")


if __name__ == "__main__":
    main()
