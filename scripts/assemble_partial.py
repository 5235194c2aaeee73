"""Assemble chapter 7's results from the seeds a running study has finished.

For developing the chapter while ``make experiment`` runs: reads only the
cache (trains and evaluates nothing; a missing unit is an error) and writes
both results files for the seeds whose every (model, seed) job is complete.
The files' configuration then lists those seeds only, so its hash differs
from the study's: read them with ``Config.from_dict(results["config"])``.

    python scripts/assemble_partial.py --cache /work/cache/experiment --out DIR
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from posenc_lib.tools import experiment


def _refuse(*args, **kwargs):
    raise LookupError("not in the cache")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=experiment.CACHE_DIR,
                        help="the study's cache (default: %(default)s, relative to the "
                        "current directory)")
    parser.add_argument("--out", type=Path, required=True, help="a directory")
    args = parser.parse_args(argv)
    config = experiment.Config()
    # run() calls these through experiment.running, where they are replaced
    experiment.running.train_model = experiment.running.finetune_model = _refuse
    experiment.running._evaluate_unit = _refuse
    seeds = []
    for seed in config.seeds:
        one = dataclasses.replace(config, seeds=(seed,))
        try:
            experiment.run(one, cache_dir=args.cache, progress=False)
        except LookupError:
            continue
        seeds.append(seed)
    if not seeds:
        sys.exit("no seed is complete yet")
    results = experiment.run(dataclasses.replace(config, seeds=tuple(seeds)),
                             cache_dir=args.cache, progress=False)
    args.out.mkdir(parents=True, exist_ok=True)
    experiment.write_results(results.pop("retrieval"), args.out / "retrieval.json")
    experiment.write_results(results, args.out / "length_generalization.json")
    print(f"seeds {seeds} -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
