"""The reader panel of :class:`posenc_lib.retrieval.OffsetTask`, before any
model is trained on it: writes ``results/retrieval_readers_v2.json``.

For every cell of :func:`posenc_lib.retrieval.offset_grid` (distance band by
answer position) it stores the items' SHA-256, and for every reader of
:func:`posenc_lib.retrieval.offset_reader_panel` its expected number of hits
(ties broken uniformly, as an expectation), its accuracy, and the exact
(Clopper-Pearson) 99 % interval of the rounded hits. The margin of chance
(:func:`posenc_lib.retrieval.offset_margin`) is computed from the cell size,
the width and the number of reader-cell comparisons only, before any reader
runs, and stored beside them with the readers above it (``"above_margin"``,
empty when the task holds). ``tests/test_retrieval_v2.py`` regenerates a
slice and checks it against this file. About 6 s::

    PYTHONPATH=. .venv/bin/python scripts/retrieval_readers_v2.py
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import torch

from posenc_lib import retrieval

OUT = Path(__file__).resolve().parents[1] / "results" / "retrieval_readers_v2.json"
SCHEMA_VERSION = 1
#: The grid: chapter 7's training length and longest item, 512 items a cell, one
#: cell per distance band (the answer positions [task.first_answer, L) in each).
GRID = {"train_length": 64, "max_multiplier": 8, "count": 512, "seed": 9_000,
        "max_length": 512, "bins": 1}
LEVEL = 0.01
#: What the later training run compares with (no model is trained here).
COMPARE_WITH = (
    "Kazemnejad et al. 2023 (NeurIPS), 'The Impact of Positional Encoding on Length "
    "Generalization in Transformers', Section 4: on their synthetic tasks, decoder-only "
    "models with no positional encoding (NoPE) generalize to longer inputs on par with or "
    "better than T5's relative bias, the best explicit encoding, and ALiBi, Rotary and "
    "absolute (sinusoidal) embeddings generalize worse (their aggregate ranking of the five). "
    "The comparable band is L-2L (they test up to twice the training length). The task "
    "differs: one query answered by a single token rather than a generated sequence, "
    "distances up to 7 times the training length, a 3-layer model, and an answer fixed by "
    "an offset from a key: the positional variant of multi-query associative recall "
    "(Arora et al. 2023, 'Zoology', whose results compare architectures, not encodings).")


digest = retrieval.offset_items_digest
held_readers = retrieval.offset_held_readers


def cell_record(task, items, margin) -> dict:
    panel = retrieval.offset_reader_panel(task, items[0], items[1], items[2])
    n = len(items[2])
    readers = {}
    for name, acc in panel.items():
        hits = float(acc.sum())
        readers[name] = {"hits": round(hits, 9), "accuracy": round(hits / n, 9),
                         "ci99": [round(x, 9) for x in
                                  retrieval.clopper_pearson(int(round(hits)), n, 0.99)]}
    above = [r for r in held_readers(task) if readers[r]["hits"] > margin["max_successes"]]
    return {"sha256": digest(items), "readers": readers, "above_margin": above}


def build(task: retrieval.OffsetTask | None = None, grid: dict | None = None,
          only: list[str] | None = None) -> dict:
    """The file's content; ``only`` restricts it to some cells (the tests)."""
    task = retrieval.OffsetTask() if task is None else task
    grid = dict(GRID if grid is None else grid)
    count = grid.pop("count")
    cells = retrieval.offset_grid_cells(task, count=count, **grid)
    margin = retrieval.offset_margin(count, task.width,
                                     len(held_readers(task)) * len(cells), LEVEL)
    grid_items = retrieval.offset_grid(task, count=count, cells=only, **grid)
    out_cells = {name: {**cells[name], **cell_record(task, items, margin)}
                 for name, items in grid_items.items()}
    content = {"schema_version": SCHEMA_VERSION, "task": dataclasses.asdict(task),
               "grid": {**grid, "count": count}, "margin": margin,
               "held_readers": held_readers(task), "compare_with": COMPARE_WITH,
               "cells": out_cells}
    return json.loads(json.dumps(content))      # tuples as lists, as in the file


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    content = build()
    args.out.write_text(json.dumps(content, indent=1) + "\n")
    worst = max((c["readers"][r]["accuracy"], r, name) for name, c in content["cells"].items()
                for r in content["held_readers"])
    print(f"wrote {args.out}; margin {content['margin']['upper_accuracy']:.4f}; "
          f"highest held reader {worst[1]} {worst[0]:.4f} in {worst[2]}; above the margin: "
          f"{[(n, c['above_margin']) for n, c in content['cells'].items() if c['above_margin']]}")


if __name__ == "__main__":
    main()
