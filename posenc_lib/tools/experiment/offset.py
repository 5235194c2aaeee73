"""The offset-retrieval study: every model of the study trained on
:class:`posenc_lib.retrieval.OffsetTask` and scored on its grid.

The task (positional multi-query associative recall) is the study's second
retrieval measure: its answer is the value ``width`` positions after the
query key, and the construction holds every reader that sees no distance to
``1 / width`` (:func:`posenc_lib.retrieval.offset_reader_panel`, whose
readers are run here on the very items that are scored and stored beside
the models' outcomes).

* **Training rows** (:func:`offset_rows`): ``train_length`` positions; an
  item of :func:`posenc_lib.retrieval.offset_fitting_items` (its answer
  position and distance drawn uniformly from every pair that fits before the
  extra queries), then, as in the first task's rows, ``task_queries - 1``
  more queries, each of another key: the previous answer, then the key;
  the rest filler. Only the answers are scored.
* **Test items** (:func:`offset_cells`): the cell ``"in-train"`` (fresh
  items of the training rows' distribution, their first query), and one
  cell per distance band of :func:`posenc_lib.retrieval.offset_grid`, where
  the answer's position is uniform on ``[task.first_answer, train_length)``
  in every band, so that the band does not fix where the answer sits.
* **Scoring** (:func:`offset_hits`): the model's prediction at the query,
  among the item's values; an item is read at its own length (items of one
  length are batched together), so the filler after a shorter item's query
  is never read, and an extension is configured for the item's length.

Everything else (models, fine-tunes, extensions, the optimiser, the steps)
is the study's :class:`~posenc_lib.tools.experiment.config.Config`; its
results go to :data:`OFFSET_PATH` (``--offset`` of the command line).
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np
import torch

from ... import _stale, _validate, lm, retrieval
from .config import EXTENSIONS, FINETUNES, MODELS, RETRIEVAL_SKIP, Config, _digest
from .training import build_model, finetune_model, train_model

#: The study's results (``--offset-out``), relative: under ``results/`` in the
#: current directory.
OFFSET_PATH = Path("results") / "retrieval_offset.json"
#: Version of that file's layout; :func:`load_offset_results` refuses any other.
OFFSET_SCHEMA_VERSION = 1
# Bump when training changes what it computes (the checkpoints' keys), or
# when scoring does (the scores' file names), so that nothing stale is reused.
_TRAIN_VERSION = 1
_SCORE_VERSION = 1
#: The cell of items drawn like the training rows' first query.
IN_TRAIN = "in-train"


@dataclass(frozen=True)
class OffsetStudy:
    """Everything that determines the offset study's results: the study's
    :class:`Config` and the task's own parameters. Its :meth:`hash` names the
    run.

    Attributes:
        config: the models, training and extensions (its ``task_keys``,
            ``task_values``, ``task_filler``, ``task_batch``, ``task_steps``,
            ``task_queries`` and ``finetune_*`` are used; ``task_pairs``,
            ``task_lengths`` and ``retrieval_items`` belong to the first task).
        width: the task's width (answer offset; ``1 / width`` bounds readers
            without distances).
        items: test items per cell.
        grid_seed: the seed of :func:`posenc_lib.retrieval.offset_grid`.
        in_train_seed: the seed of the ``"in-train"`` cell.
        level: the family-wise level of the reader panel's margin
            (:func:`posenc_lib.retrieval.offset_margin`), fixed before any
            reader runs.
    """

    config: Config = field(default_factory=Config)
    width: int = 8
    items: int = 512
    grid_seed: int = 9_000
    in_train_seed: int = 9_900
    level: float = 0.01

    def __post_init__(self):
        if not isinstance(self.config, Config):
            raise TypeError(f"config must be a Config, got {type(self.config).__name__}")
        _validate.positive_int("items", self.items)
        if not 0 < self.level < 1:
            raise ValueError(f"level must lie in (0, 1), got {self.level}")
        task = self.task       # validates width against the symbols
        L, m = self.config.train_length, self.row_room(self.config.train_length)
        if task.first_answer + task.shortest_distance + 1 > m:
            raise ValueError(
                f"width ({self.width}): an item needs {task.first_answer} + "
                f"{task.shortest_distance} + 1 positions, but a training row of "
                f"train_length ({L}) leaves {m} before its extra queries; use a smaller "
                "width or a longer train_length")
        if task.first_answer >= L:
            raise ValueError(f"width ({self.width}): task.first_answer "
                             f"({task.first_answer}) must be below train_length ({L})")

    @classmethod
    def smoke(cls) -> "OffsetStudy":
        """A tiny study of the same code, for tests (seconds)."""
        return cls(config=Config.smoke(), width=2, items=6)

    @property
    def task(self) -> retrieval.OffsetTask:
        """The task, with the configuration's symbols."""
        c = self.config
        return retrieval.OffsetTask(keys=c.task_keys, value_symbols=c.task_values,
                                    filler_symbols=c.task_filler, width=self.width)

    def row_room(self, length: int) -> int:
        """Positions of a training row of ``length`` left for its item: the
        extra queries take two each (the previous answer and the key)."""
        return length - 2 * (self.config.task_queries - 1)

    def to_dict(self) -> dict:
        """The study as plain JSON values."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["config"] = self.config.to_dict()
        return json.loads(json.dumps(out))

    @classmethod
    def from_dict(cls, values: Mapping) -> "OffsetStudy":
        """The study that :meth:`to_dict` describes."""
        values = dict(values)
        return cls(config=Config.from_dict(values.pop("config")), **values)

    def hash(self) -> str:
        """SHA-256 of the canonical JSON of the study (first 16 hex digits)."""
        return _digest(self.to_dict())


# -- rows, items, scores ----------------------------------------------------------------

def offset_rows(study: OffsetStudy, length: int, count: int, generator: torch.Generator,
                bos: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """``count`` training rows of ``length`` positions (see the module's
    docstring).

    Returns:
        ``(inputs, targets)``, ``(count, length)`` int64; -100 where not scored.
    """
    task, extra = study.task, study.config.task_queries - 1
    items, lengths, answers, _, _ = retrieval.offset_fitting_items(
        task, study.row_room(length), count, generator, bos=bos)
    filler = torch.tensor(task.filler_symbols)
    inputs = filler[torch.randint(0, len(filler), (count, length), generator=generator)]
    inputs[:, :items.shape[1]] = items
    targets = torch.full((count, length), -100, dtype=torch.long)
    for r in range(count):
        n = int(lengths[r])
        row = inputs[r, :n].tolist()
        targets[r, n - 1] = answers[r]
        asked = [row[-1]]
        others = [task.keys[int(i)] for i in torch.randperm(len(task.keys),
                                                            generator=generator)]
        answer = int(answers[r])
        for j, key in enumerate([k for k in others if k not in asked][:extra]):
            at = n + 2 * j                      # the previous answer, then the key
            inputs[r, at], inputs[r, at + 1] = answer, key
            answer = row[row.index(key) + task.width]
            targets[r, at + 1] = answer
    return inputs, targets


def offset_cells(study: OffsetStudy) -> dict:
    """The fixed test items, identical for every model and seed:
    ``{cell: (inputs, lengths, answers, distances, answer_positions)}``, the
    ``"in-train"`` cell first, then one cell per distance band."""
    c, task = study.config, study.task
    g = torch.Generator().manual_seed(study.in_train_seed)
    cells = {IN_TRAIN: retrieval.offset_fitting_items(
        task, study.row_room(c.train_length), study.items, g)}
    grid = retrieval.offset_grid(task, c.train_length, c.max_multiplier, study.items,
                                 seed=study.grid_seed, max_length=c.eval_length, bins=1)
    cells.update(grid)
    return cells


def row_ranges(study: OffsetStudy, rows: int = 4096, seed: int = 0,
               length: int | None = None) -> dict:
    """What the training rows hold, measured on ``rows`` of them (``seed``):
    the ranges ``[min, max]`` of the scored queries' distances (query
    position minus the answer's) and answer positions, for the first query
    and for every query (a later query's block may lie after the first's, so
    it reaches shorter and longer distances). ``length``: the rows' length,
    the training length by default (a fine-tune at ``2L`` reads rows of
    ``2L``)."""
    task = study.task
    L = study.config.train_length if length is None else length
    _validate.positive_int("length", L)
    inputs, targets = offset_rows(study, L, rows, torch.Generator().manual_seed(seed), True)
    first, every = [], []
    for r in range(rows):
        row = inputs[r].tolist()
        for j, q in enumerate((targets[r] != -100).nonzero().flatten().tolist()):
            a = row.index(row[q]) + task.width
            (first if j == 0 else every).append((q - a, a))
    every += first
    return {part: {"distances": [min(d for d, _ in got), max(d for d, _ in got)],
                   "answer_positions": [min(a for _, a in got), max(a for _, a in got)]}
            for part, got in (("first_query", first), ("every_query", every))}


def _without_bos(inputs: torch.Tensor, task: retrieval.OffsetTask) -> torch.Tensor:
    """Items for a model trained without BOS: position 0 holds filler, drawn
    from a generator of its own (the same for every model and seed), as in
    its training rows; never a copy of a neighbour, which may be a key."""
    g = torch.Generator().manual_seed(7)
    filler = torch.tensor(task.filler_symbols)
    inputs = inputs.clone()
    inputs[:, 0] = filler[torch.randint(0, len(filler), (inputs.shape[0],), generator=g)]
    return inputs


def offset_hits(model, items: tuple, task: retrieval.OffsetTask, *, bos: bool = True,
                batch_size: int = 16, configure=None) -> np.ndarray:
    """Whether ``model`` answers each item: its prediction at the query
    (position ``length - 1``), among the values in the item.

    Args:
        items: ``(inputs, lengths, answers, ...)`` as
            :func:`posenc_lib.retrieval.make_offset_items` returns.
        bos: whether the model was trained with :data:`~posenc_lib.lm.BOS`
            (else position 0 holds filler, ``_without_bos``).
        configure: ``configure(n)`` before the items of length ``n`` are
            read (an extension set for that length), or ``None``.

    Returns:
        ``(items,)`` bool, in the items' order.
    """
    inputs, lengths, answers = items[0], items[1], items[2]
    if not bos:
        inputs = _without_bos(inputs, task)
    device = next(model.parameters(), torch.empty(0)).device
    is_value = torch.zeros(lm.VOCAB_SIZE, dtype=torch.bool)
    is_value[list(task.value_symbols)] = True
    out = np.zeros(len(answers), dtype=bool)
    with torch.no_grad():
        for n in sorted(set(lengths.tolist())):
            rows = (lengths == n).nonzero().flatten()
            if configure is not None:
                configure(n)
            for b in range(0, len(rows), batch_size):
                at = rows[b:b + batch_size]
                x = inputs[at, :n]
                allowed = torch.zeros(len(at), lm.VOCAB_SIZE, dtype=torch.bool)
                allowed.scatter_(1, x, is_value[x])
                logits = model(x.to(device))[:, -1].float().cpu()
                pick = logits.masked_fill(~allowed, float("-inf")).argmax(-1)
                out[at.numpy()] = (pick == answers[at]).numpy()
    return out


def _score(study: OffsetStudy, model, cells: dict, bos: bool, extension: str | None = None):
    c = study.config
    if extension is None:
        return {cell: offset_hits(model, items, study.task, bos=bos, batch_size=c.eval_batch)
                for cell, items in cells.items()}
    scheme, L = model.scheme, c.train_length
    try:
        return {cell: offset_hits(model, items, study.task, bos=bos,
                                  batch_size=c.eval_batch,
                                  configure=lambda n: EXTENSIONS[extension].configure(
                                      scheme, max(1.0, n / L), L))
                for cell, items in cells.items()}
    finally:
        scheme.set_scaling("default")
        scheme.__dict__.pop("attention_hooks", None)


# -- the run ----------------------------------------------------------------------------

def _key(study: OffsetStudy, *parts) -> str:
    return _digest({"study": study.to_dict(), "parts": list(parts), "torch": torch.__version__,
                    "code": _TRAIN_VERSION})


def _scores_file(folder: Path | None, label: str) -> Path | None:
    return None if folder is None else folder / f"{label}-v{_SCORE_VERSION}.pt"


def _cached(path: Path | None, make):
    from .jobs import _save

    if path is not None and path.is_file():
        return torch.load(path, map_location="cpu", weights_only=False)
    value = make()
    if path is not None:
        _save(value, path)
    return value


def _job(study: OffsetStudy, name: str, seed: int, cells: dict, cache_dir: Path | None,
         device: torch.device, progress: bool, only_cached: bool = False) -> dict:
    """Train (or load) ``name`` with ``seed`` and, for ``"rope"``, its
    fine-tunes; score every model and extension (or load the scores).

    Returns:
        ``{model name: {"log", "hits": {cell: (items,) bool}}}``; the
        extensions as ``"rope+<name>"`` (no log).
    """
    from .jobs import _load_or_run as load_or_run

    c, bos = study.config, MODELS[name].bos
    if only_cached:
        def missing(*_, **__):
            raise LookupError(f"{name} seed {seed}: not all of its checkpoints and scores "
                              f"are in the cache {cache_dir}")

        def _load_or_run(checkpoint, build, train, device):
            return load_or_run(checkpoint, build, missing, device)

        def _cached(path, make):
            return globals()["_cached"](path, missing)
    else:
        _load_or_run, _cached = load_or_run, globals()["_cached"]

    def batches(generator, length, bos_):
        return lambda: offset_rows(study, length, c.task_batch, generator, bos_)

    def folder(label, key):
        return None if cache_dir is None else cache_dir / f"{label}-offset-seed{seed}-{key}"

    key = _key(study, "train", name, seed, device.type)
    base = folder(name, key)
    model, log = _load_or_run(
        None if base is None else base / "model.pt", lambda: build_model(c, name, seed),
        lambda: train_model(c, name, seed, torch.empty(0), study="offset", device=device,
                            progress=progress, batches=batches), device)
    out = {name: {"log": log, "hits": _cached(
        _scores_file(base, "hits"), lambda: _score(study, model, cells, bos))}}
    if name != "rope":
        return out
    for ext in c.extensions:
        if ext not in RETRIEVAL_SKIP:
            out[f"rope+{ext}"] = {"log": None, "hits": _cached(
                _scores_file(base, f"hits-{ext}"),
                lambda ext=ext: _score(study, model, cells, bos, ext))}
    for ft in c.finetunes:
        ft_folder = folder(ft, _key(study, "finetune", key, ft, FINETUNES[ft].source()))

        def build(ft=ft):
            tuned = build_model(c, name, seed)
            FINETUNES[ft].configure(tuned, c.train_length)
            return tuned

        tuned, ft_log = _load_or_run(
            None if ft_folder is None else ft_folder / "model.pt", build,
            lambda ft=ft: finetune_model(c, ft, model, seed, torch.empty(0), study="offset",
                                         device=device, progress=progress,
                                         batches=batches), device)
        out[ft] = {"log": ft_log, "hits": _cached(
            _scores_file(ft_folder, "hits"),
            lambda tuned=tuned: _score(study, tuned, cells, bos))}
    return out


def run_offset(study: OffsetStudy, *, device: str | None = None,
               cache_dir: Path | None = None, progress: bool = True) -> dict | None:
    """Train and score every (model, seed) of the offset study; return the
    results file's content (``None`` on ranks > 0 under ``torchrun``).

    Jobs are shared among ``torchrun`` processes as the main study's are; each
    is seeded on its own, so the results do not depend on how they are
    shared. ``cache_dir``: checkpoints and scores (an interrupted run
    resumes); ``None`` keeps nothing on disk.
    """
    from .jobs import _distributed, _environment, _run_shared

    start = time.perf_counter()
    c = study.config
    rank, world, device = _distributed(device)
    torch.set_num_threads(c.threads)
    cells = offset_cells(study)
    done = _run_shared(c, rank, world, lambda name, seed, show: _job(
        study, name, seed, cells, cache_dir, device, show), progress=progress,
        desc="models (offset)")
    if done is None:   # not rank 0
        return None
    results = offset_results(study, done, cells)
    results["environment"] = _environment(device, world)
    results["wall_time_s"] = round(time.perf_counter() - start, 1)
    return results


def partial_results(study: OffsetStudy, cache_dir: Path, seeds) -> dict:
    """The results file's content from the seeds that a run of ``study`` has
    finished, read from its cache, training nothing (``LookupError`` if a
    checkpoint or score of these seeds is missing). For following a run that
    is still going: the content names the seeds under ``"partial"`` and
    carries the hash of a study with only those seeds, so that
    :func:`load_offset_results` refuses it in place of the full run's."""
    seeds = tuple(int(s) for s in seeds)
    unknown = sorted(set(seeds) - set(study.config.seeds))
    if not seeds or unknown:
        raise ValueError(f"seeds must be some of the study's {study.config.seeds}, got "
                         f"{list(seeds)}")
    cells = offset_cells(study)
    jobs = {(name, seed): _job(study, name, seed, cells, Path(cache_dir), torch.device("cpu"),
                               False, only_cached=True)
            for seed in seeds for name in study.config.models}
    part = dataclasses.replace(study, config=dataclasses.replace(study.config, seeds=seeds))
    results = offset_results(part, jobs, cells)
    results["partial"] = {"seeds": list(seeds), "of_study_hash": study.hash()}
    return results


def offset_panel(study: OffsetStudy, cells: dict) -> dict:
    """The reader panel on the scored items.

    The margin is fixed by the cell size, the width, ``level`` and the number
    of reader-cell comparisons over the distance bands' cells (the
    ``"held_cells"``): there every reader without distances must stay within
    it. The ``"in-train"`` cell is reported, not held: its answer positions
    and distances span only what fits in a training row (13 values each at
    the study's sizes, about one block), so readers of the answer's absolute
    position or of its distance score above ``1 / width`` there; it shows
    whether a model learned the training task, not how far it retrieves.

    Returns:
        ``{"margin", "held", "held_cells", "cells": {cell: {"hits",
        "above_margin"}}}``; ``"hits"`` are expected hits (ties broken
        uniformly).
    """
    task = study.task
    w, held = task.width, retrieval.offset_held_readers(task)
    held_cells = [cell for cell in cells if cell != IN_TRAIN]
    margin = retrieval.offset_margin(study.items, w, len(held) * len(held_cells),
                                     study.level)
    out = {}
    for cell, items in cells.items():
        panel = retrieval.offset_reader_panel(task, items[0], items[1], items[2])
        hits = {r: round(float(acc.sum()), 6) for r, acc in panel.items()}
        out[cell] = {"hits": hits,
                     "above_margin": [r for r in held if hits[r] > margin["max_successes"]]}
    return {"margin": margin, "held": held, "held_cells": held_cells, "cells": out}


def offset_results(study: OffsetStudy, jobs: Mapping, cells: dict) -> dict:
    """The results file's content from every job (``{(name, seed): job}``).

    ``"outcomes"``: per model and cell, one list of 0/1 per seed (the items'
    order); ``"accuracy"``: per model and cell, per seed; ``"training"``:
    per trained or fine-tuned model, its wall time and loss and batch
    accuracy curves per seed; ``"cells"``: each cell's ranges and items'
    digest; ``"readers"``: :func:`offset_panel`.
    """
    from .results import _train_entry

    c = study.config
    names = list(next(iter(jobs.values())))
    for (name, seed) in jobs:
        for model in jobs[name, seed]:
            if model not in names:
                names.append(model)
    outcomes, accuracy, training = {}, {}, {}
    for model in names:
        per_seed = [next(job[model] for (n, s), job in jobs.items() if s == seed and model in job)
                    for seed in c.seeds]
        outcomes[model] = {cell: [np.asarray(p["hits"][cell]).astype(int).tolist()
                                  for p in per_seed] for cell in cells}
        accuracy[model] = {cell: [round(float(np.mean(p["hits"][cell])), 4)
                                  for p in per_seed] for cell in cells}
        if per_seed[0]["log"] is not None:
            training[model] = _train_entry([p["log"] for p in per_seed])
    specs = retrieval.offset_grid_cells(study.task, c.train_length, c.max_multiplier,
                                        study.items, seed=study.grid_seed,
                                        max_length=c.eval_length, bins=1)
    about = {IN_TRAIN: {"band": IN_TRAIN, "seed": study.in_train_seed,
                        "row_room": study.row_room(c.train_length)}}
    about.update({cell: {k: v for k, v in spec.items() if k != "items"}
                  for cell, spec in specs.items()})
    for cell, items in cells.items():
        about[cell].update({
            "sha256": retrieval.offset_items_digest(items),
            "distances": [int(items[3].min()), int(items[3].max())],
            "answer_positions": [int(items[4].min()), int(items[4].max())],
            "lengths": [int(items[1].min()), int(items[1].max())]})
    return {"schema_version": OFFSET_SCHEMA_VERSION, "study": study.to_dict(),
            "study_hash": study.hash(), "cells": about, "outcomes": outcomes,
            "accuracy": accuracy, "training": training, "rows": row_ranges(study),
            "readers": offset_panel(study, cells)}


def load_offset_results(path: str | Path = OFFSET_PATH, *,
                        study: OffsetStudy | None = None) -> dict:
    """Load the offset study's results from ``path`` (relative to the current
    directory) and refuse them (``ValueError``) if another schema version or
    study made them, or if the items ``study`` generates here differ from
    the scored ones (each cell's digest)."""
    from .results import _existing

    study = OffsetStudy() if study is None else study
    results = json.loads(_existing(path).read_text())
    _stale.refuse_stale({**results, "config_hash": results.get("study_hash")}, path,
                        study.hash(), OFFSET_SCHEMA_VERSION)
    for cell, items in offset_cells(study).items():
        stored = results["cells"].get(cell, {}).get("sha256")
        if stored != retrieval.offset_items_digest(items):
            raise ValueError(f"path: {path} was scored on other items in cell {cell!r} "
                             "than this code generates: re-run `python -m posenc_lib "
                             "experiment --offset`")
    return results


__all__ = ["IN_TRAIN", "OFFSET_PATH", "OffsetStudy", "load_offset_results", "offset_cells",
           "partial_results", "row_ranges",
           "offset_hits", "offset_panel", "offset_results", "offset_rows", "run_offset"]
