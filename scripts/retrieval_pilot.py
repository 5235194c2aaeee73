"""Pilot: can chapter 7's retrieval task be learned beside text, or alone?

Trains one model of chapter 7's study for ``steps`` steps with seed 0, either
on the retrieval task alone (``--mode task``: ``task_batch`` rows per step) or
on text with ``--rows`` task rows added to every text batch (``--mode mixed``:
the text's mean loss plus the answers' mean loss), and prints the test
accuracy per (length, band) cell of :func:`posenc_lib.experiment.retrieval_grid`.

    python scripts/retrieval_pilot.py rope --mode mixed --rows 16
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

import torch

from posenc_lib import experiment as ex


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", choices=list(ex.MODELS))
    parser.add_argument("--mode", choices=("task", "mixed"), default="task")
    parser.add_argument("--rows", type=int, default=16, help="task rows per text batch")
    parser.add_argument("--keys", type=int, default=None, help="number of task keys")
    parser.add_argument("--pairs", type=int, default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    config = ex.Config()
    if args.keys is not None:
        config = dataclasses.replace(config, task_keys=tuple(range(160, 160 + args.keys)),
                                     task_queries=args.keys)
    if args.pairs is not None:
        config = dataclasses.replace(config, task_pairs=args.pairs)
    model = ex.build_model(config, args.model, 0)
    bos, L = ex.MODELS[args.model].bos, config.train_length
    generator = torch.Generator().manual_seed(20_000)
    train, _ = ex.load_bytes(config.train_files)
    text = ex._batches(config, train, bos, generator, L, "text")

    def mixed():
        inputs, targets = text()
        extra, answers = ex._task_rows(config, L, args.rows, generator, bos)
        weights = torch.cat([torch.full(inputs.shape, 1.0 / inputs.numel()),
                             (answers != -100).float() / (answers != -100).sum()])
        return torch.cat([inputs, extra]), torch.cat([targets, answers]), weights

    batches = mixed if args.mode == "mixed" else ex._batches(config, train, bos, generator,
                                                             L, "task")
    start = time.perf_counter()
    curve, _ = ex.fit(config, model, batches, device=torch.device("cpu"),
                      log_row=ex._log_row)
    grid = ex.retrieval_grid(config)
    accuracy = {cell: round(float(ex.retrieval_hits(model, inputs, answers,
                                                    config.task_values, bos=bos).mean()), 4)
                for cell, (inputs, answers, _) in grid.items()}
    print(json.dumps({"model": args.model, "mode": args.mode, "rows": args.rows,
                      "keys": len(config.task_keys), "pairs": config.task_pairs,
                      "seconds": round(time.perf_counter() - start), "curve": curve[-3:],
                      "accuracy": accuracy}))


if __name__ == "__main__":
    main()
