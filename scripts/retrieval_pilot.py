"""Pilot: can chapter 7's retrieval task be learned beside text, or alone?

Trains one model of chapter 7's study, either on the retrieval task alone
(``--mode task``: the study's own task training,
:func:`posenc_lib.tools.experiment.train_model` with ``study="task"``, for
``task_steps`` steps) or on text with ``--rows`` task rows added to every text
batch (``--mode mixed``, ``steps`` steps: the text's mean loss plus the
answers' mean loss). It prints the test accuracy per (length, band) cell of
:func:`posenc_lib.tools.experiment.retrieval_grid`, and the accuracy on 256 fresh
items of each of the lengths L - 2, L and L + 2, distances uniform over what
fits. ``--task-lengths fixed`` trains on items of one length, L - 2, so that
every first query sits at one position: the design chapter 7 replaced.
``--steps`` overrides the number of steps and ``--seed`` sets the model's and
the batches' seed.

    python scripts/retrieval_pilot.py rope --mode mixed --rows 16
    python scripts/retrieval_pilot.py rope-b32 --task-lengths fixed --steps 5000 --seed 1
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

import torch

from posenc_lib.tools import experiment as ex
from posenc_lib import retrieval


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", choices=list(ex.MODELS))
    parser.add_argument("--mode", choices=("task", "mixed"), default="task")
    parser.add_argument("--rows", type=int, default=16, help="task rows per text batch")
    parser.add_argument("--keys", type=int, default=None, help="number of task keys")
    parser.add_argument("--pairs", type=int, default=None)
    parser.add_argument("--task-lengths", choices=ex.TASK_LENGTHS, default="varied")
    parser.add_argument("--steps", type=int, default=None, help="training steps")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    config = dataclasses.replace(ex.Config(), task_lengths=args.task_lengths)
    if args.steps is not None:
        config = dataclasses.replace(config, steps=args.steps, task_steps=args.steps)
    if args.keys is not None:
        config = dataclasses.replace(config, task_keys=tuple(range(160, 160 + args.keys)),
                                     task_queries=args.keys)
    if args.pairs is not None:
        config = dataclasses.replace(config, task_pairs=args.pairs)
    bos, L = ex.MODELS[args.model].bos, config.train_length
    generator = torch.Generator().manual_seed(20_000 + args.seed)
    train, _ = ex.load_bytes(config.train_files)
    text = ex.training._batches(config, train, bos, generator, L, "text")

    def mixed():
        inputs, targets = text()
        extra, answers = ex.training._task_rows(config, L, args.rows, generator, bos)
        weights = torch.cat([torch.full(inputs.shape, 1.0 / inputs.numel()),
                             (answers != -100).float() / (answers != -100).sum()])
        return torch.cat([inputs, extra]), torch.cat([targets, answers]), weights

    start = time.perf_counter()
    if args.mode == "mixed":
        model = ex.build_model(config, args.model, args.seed)
        curve, _ = ex.fit(config, model, mixed, device=torch.device("cpu"),
                          log_row=ex.training._log_row)
    else:
        model, log = ex.train_model(config, args.model, args.seed, train, study="task")
        curve = log["loss_curve"]
    grid = ex.retrieval_grid(config)
    accuracy = {cell: round(float(ex.retrieval_hits(model, inputs, answers,
                                                    config.task_values, bos=bos).mean()), 4)
                for cell, (inputs, answers, _) in grid.items()}
    task, fresh = config.task, {}
    for n in (L - 2, L, L + 2):
        g = torch.Generator().manual_seed(7)
        top = max(d for d in range(1, n) if task.shortest(d) <= n)
        distances = torch.randint(1, top + 1, (256,), generator=g)
        items, answers, _ = retrieval.make_position_items(task, n, distances, g, bos=bos)
        fresh[n] = round(float(ex.retrieval_hits(model, items, answers, config.task_values,
                                                 bos=bos).mean()), 4)
    print(json.dumps({"model": args.model, "seed": args.seed, "mode": args.mode,
                      "task_lengths": config.task_lengths, "rows": args.rows,
                      "keys": len(config.task_keys), "pairs": config.task_pairs,
                      "seconds": round(time.perf_counter() - start), "curve": curve[-3:],
                      "accuracy": accuracy, "fresh_items": fresh}))


if __name__ == "__main__":
    main()
