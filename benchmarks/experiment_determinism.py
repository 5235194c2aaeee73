"""Re-train models of the stored chapter 7 study and compare them with the file.

    python benchmarks/experiment_determinism.py [--models rope alibi] [--seed 0]

For each named model, trains it again from scratch with the stored
configuration and seed (no cache), in one thread as the study does, and
reports whether its training-loss curve, its full-context losses and its
sliding-window losses equal the ones in ``results/length_generalization.json``
(as stored: rounded to 4 decimals). Each model takes a few minutes on an idle
core. The test suite checks the same property, bit for bit, on a tiny
configuration (``tests/test_experiment.py``); this script measures it on the
real one.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from posenc_lib.tools import experiment  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["rope", "alibi"],
                        help="trained models to re-check (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="which stored seed")
    args = parser.parse_args()
    stored = experiment.load_results(ROOT / experiment.RESULTS_PATH)
    config = experiment.Config()
    torch.set_num_threads(config.threads)
    train, _ = experiment.load_bytes(config.train_files)
    held_out, _ = experiment.load_bytes(config.eval_files)
    rows = experiment.data._eval_rows(config, held_out)
    k = list(config.seeds).index(args.seed)
    print(f"configuration {config.hash()}, seed {args.seed}, {config.threads} thread(s), "
          f"torch {torch.__version__}")
    print(f"{'model':12s} {'loss curve':>11s} {'full':>11s} {'sliding':>11s} {'seconds':>8s}")
    for name in args.models:
        if name not in config.models:
            parser.error(f"--models: {name!r} is not one of {list(config.models)}")
        start = time.perf_counter()
        model, log = experiment.train_model(config, name, args.seed, train)
        entry = stored["models"][name]
        same = {"curve": [v for _, v in log["loss_curve"]] == entry["train"]["loss_curve"][k]}
        for unit, table in (("full", "loss"), ("sliding", "sliding")):
            fresh = experiment.evaluation._evaluate_unit(
                config, model, unit, rows, held_out, experiment.MODELS[name].bos)["loss"]
            saved = np.asarray(entry[table][str(config.eval_length)][k])
            same[unit] = np.array_equal(np.round(fresh.astype(np.float64), 4), saved)
        print(f"{name:12s} " + " ".join(
            f"{'identical' if same[key] else 'DIFFERS':>11s}"
            for key in ("curve", "full", "sliding"))
            + f" {time.perf_counter() - start:8.0f}")


if __name__ == "__main__":
    main()
