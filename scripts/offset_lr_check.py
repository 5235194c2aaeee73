"""A learning-rate check for the offset-retrieval study, before it runs.

For ``nope``, ``learned`` and ``rope`` (seed 0) and each peak learning rate of
:data:`RATES`, the model is trained on :class:`posenc_lib.retrieval.OffsetTask`
exactly as the study trains it (:func:`posenc_lib.tools.experiment.train_model`
with the study's batches, ``task_steps`` steps), and scored on the study's
cells. The rule, fixed before any run: the study uses one learning rate for
every encoding, the configuration's, unless another rate of :data:`RATES` gives
one of these encodings a higher accuracy on the ``in-train`` cell (the training
distribution; never a band beyond it) by more than 0.05.

Each run writes one file under ``--parts`` (resumable); ``--assemble`` writes
``results/offset_lr_check.json``::

    PYTHONPATH=. python scripts/offset_lr_check.py --worker 0 --workers 2 &
    PYTHONPATH=. python scripts/offset_lr_check.py --worker 1 --workers 2
    PYTHONPATH=. python scripts/offset_lr_check.py --assemble
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import torch

from posenc_lib.tools.experiment import MODELS, offset, train_model, write_results

ENCODINGS = ("nope", "learned", "rope")
RATES = (1e-3, 3e-3, 1e-2)
SEED = 0
OUT = Path("results") / "offset_lr_check.json"


def runs() -> list[tuple[str, float]]:
    return [(name, lr) for lr in RATES for name in ENCODINGS]


def one(name: str, lr: float, study: offset.OffsetStudy) -> dict:
    config = dataclasses.replace(study.config, lr=lr)
    tuned = dataclasses.replace(study, config=config)

    def batches(generator, length, bos):
        return lambda: offset.offset_rows(tuned, length, config.task_batch, generator, bos)

    torch.set_num_threads(1)
    model, log = train_model(config, name, SEED, torch.empty(0), study="offset",
                             batches=batches)
    hits = offset._score(tuned, model, offset.offset_cells(tuned), MODELS[name].bos)
    return {"name": name, "lr": lr, "seed": SEED, "seconds": log["seconds"],
            "loss_curve": log["loss_curve"],
            "accuracy": {cell: round(float(h.mean()), 4) for cell, h in hits.items()}}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--parts", type=Path, default=Path(".cache") / "offset-lr")
    parser.add_argument("--assemble", action="store_true")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    study = offset.OffsetStudy()
    if args.assemble:
        parts = [json.loads((args.parts / f"{n}-{lr:g}.json").read_text())
                 for n, lr in runs()]
        default = study.config.lr
        chosen = {}
        for name in ENCODINGS:
            base = next(p for p in parts if p["name"] == name and p["lr"] == default)
            best = max((p for p in parts if p["name"] == name),
                       key=lambda p: p["accuracy"][offset.IN_TRAIN])
            gain = best["accuracy"][offset.IN_TRAIN] - base["accuracy"][offset.IN_TRAIN]
            chosen[name] = best["lr"] if gain > 0.05 else default
        write_results({"schema_version": 1, "study_hash": study.hash(), "rates": RATES,
                       "seed": SEED, "rule_margin": 0.05, "runs": parts,
                       "chosen": chosen}, args.out)
        print(json.dumps(chosen))
        return
    args.parts.mkdir(parents=True, exist_ok=True)
    for i, (name, lr) in enumerate(runs()):
        path = args.parts / f"{name}-{lr:g}.json"
        if i % args.workers != args.worker or path.is_file():
            continue
        part = one(name, lr, study)
        path.write_text(json.dumps(part) + "\n")
        print(name, lr, part["accuracy"], flush=True)


if __name__ == "__main__":
    main()
