"""The results files: assembling them from every job's logs and scores,
writing them, loading them (refusing stale ones), and reading them: losses by
position bucket and band, and the paired comparison of two models
(:func:`compare`, with the intervals of :mod:`~posenc_lib.tools.experiment.stats`).

Paths are the caller's: the defaults (:data:`RESULTS_PATH`,
:data:`RETRIEVAL_PATH`, :data:`READERS_PATH`) are relative, so they name files
under ``results/`` in the current directory, as the command line writes them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from pathlib import Path
from typing import Mapping

import numpy as np

from ... import _stale, retrieval
from .config import EXTENSIONS, FINETUNES, MODELS, RETRIEVAL_SKIP, Config
from .data import load_bytes, retrieval_grid, window_files
from .stats import Comparison, interval, p_value

#: Version of the results file's layout; :func:`load_results` refuses any other.
SCHEMA_VERSION = 3
#: The study's results (``--out`` of the command line), relative: under
#: ``results/`` in the current directory.
RESULTS_PATH = Path("results") / "length_generalization.json"
#: The retrieval study's results (``--retrieval-out``; what
#: :func:`load_retrieval_results` reads), beside :data:`RESULTS_PATH`:
#: :data:`posenc_lib.retrieval.RESULTS_PATH`.
RETRIEVAL_PATH = retrieval.RESULTS_PATH


def _rounded(array, decimals: int = 4) -> list:
    return np.round(np.asarray(array, dtype=np.float64), decimals).tolist()


def _train_entry(logs: list) -> dict:
    out = {"seconds": [log["seconds"] for log in logs],
           "steps": [row[0] for row in logs[0]["loss_curve"]],
           "loss_curve": [[row[1] for row in log["loss_curve"]] for log in logs]}
    if len(logs[0]["loss_curve"][0]) > 2:
        out["accuracy_curve"] = [[row[2] for row in log["loss_curve"]] for log in logs]
    return out


def _assemble(config: Config, jobs: dict) -> dict:
    """The results files' content from every job's logs and units (the
    retrieval study's under ``"retrieval"``)."""
    seeds = list(config.seeds)
    models, probe, outcomes, training = {}, {}, {}, {}
    scores = ("second_loss", "second_acc", "first_loss")

    def perplexity(per_seed, **entry):
        entry.update({
            "train": _train_entry([job["log"] for job in per_seed]),
            "loss": {str(config.eval_length): _rounded(
                [job["units"]["full"]["loss"] for job in per_seed])},
            "sliding": {str(config.eval_length): _rounded(
                [job["units"]["sliding"]["loss"] for job in per_seed])}})
        return entry

    for name in config.models:
        text = [jobs[(name, s)]["text"] for s in seeds]
        task = [jobs[(name, s)]["task"] for s in seeds]
        models[name] = perplexity(text, kind="trained", spec=dataclasses.asdict(MODELS[name]))
        if "table_norm_ratio" in text[0]["log"]:
            models[name]["train"]["table_norm_ratio"] = [
                job["log"]["table_norm_ratio"] for job in text]
        probe[name] = {k: _rounded([job["units"]["probe"][k] for job in text]) for k in scores}
        outcomes[name] = [job["units"]["retrieval"] for job in task]
        training[name] = _train_entry([job["log"] for job in task])
        if name != "rope":
            continue
        for ext in config.extensions:
            units = [job["units"][f"ext:{ext}"] for job in text]
            models[f"rope+{ext}"] = {
                "kind": "extension", "base_model": "rope", "extension": ext,
                "evaluation": EXTENSIONS[ext].evaluation,
                "loss": {length: _rounded([u[length] for u in units]) for length in units[0]},
            }
            probe[f"rope+{ext}"] = {k: _rounded([job["units"][f"probe:{ext}"][k]
                                                 for job in text]) for k in scores}
            if ext not in RETRIEVAL_SKIP:
                outcomes[f"rope+{ext}"] = [job["units"][f"retrieval:{ext}"] for job in task]
        for ft in config.finetunes:
            ft_text = [job["finetunes"][ft] for job in text]
            ft_task = [job["finetunes"][ft] for job in task]
            about = {"length": FINETUNES[ft].length * config.train_length,
                     "steps": config.finetune_steps}
            models[ft] = perplexity(ft_text, kind="finetuned", base_model="rope",
                                    finetune=about)
            probe[ft] = {k: _rounded([job["units"]["probe"][k] for job in ft_text])
                         for k in scores}
            outcomes[ft] = [job["units"]["retrieval"] for job in ft_task]
            training[ft] = _train_entry([job["log"] for job in ft_task])
    L = config.train_length
    bands, lo = [], 0
    for hi in [L] + [L * 2 ** i for i in range(1, int(math.log2(config.max_multiplier)) + 1)]:
        bands.append([lo, hi])
        lo = hi
    if lo != config.eval_length:
        bands.append([lo, config.eval_length])
    return {
        "schema_version": SCHEMA_VERSION, "config": config.to_dict(),
        "config_hash": config.hash(), "bands": bands, "bucket": config.bucket,
        "models": models,
        "probe": {"distances": list(config.probe_distances),
                  "window_lengths": [config.probe_offset + d + config.probe_length
                                     for d in config.probe_distances],
                  "models": probe},
        "retrieval": _retrieval_results(config, outcomes, training),
    }


def _retrieval_results(config: Config, outcomes: dict, training: dict) -> dict:
    """The retrieval results file's content (``results/retrieval.json``).

    ``"outcomes"``: per model and cell ``"<length>:<band>"``, one list of 0/1
    per seed (item order of :func:`retrieval_grid`); ``"accuracy"``: per model
    and band, per seed, over every cell of the band; ``"chance"`` and
    ``"controls"``: the expected accuracy of guessing among an item's values
    and of the order-free readers of
    :func:`posenc_lib.retrieval.order_free_accuracy`, per band.
    """
    grid = retrieval_grid(config)
    cells = {cell: {"length": inputs.shape[1], "band": cell.split(":", 1)[1],
                    "distances": distances.tolist()}
             for cell, (inputs, _, distances) in grid.items()}
    band_names = list(dict.fromkeys(c["band"] for c in cells.values()))
    by_band = {band: [cell for cell in cells if cells[cell]["band"] == band]
               for band in band_names}
    readers = {}
    for band, members in by_band.items():
        # each cell's readers, weighted by its items (cells differ in length)
        parts = [retrieval.order_free_accuracy(config.task, grid[c][0], grid[c][1])
                 for c in members]
        sizes = [len(grid[c][1]) for c in members]
        readers[band] = {kind: float(np.average([p[kind] for p in parts], weights=sizes))
                         for kind in parts[0]}
    table = {name: {cell: [np.asarray(seed[cell]).astype(int).tolist() for seed in per_seed]
                    for cell in cells} for name, per_seed in outcomes.items()}
    accuracy = {name: {band: [round(float(np.mean(np.concatenate(
        [np.asarray(seed[c], dtype=float) for c in members]))), 4) for seed in per_seed]
        for band, members in by_band.items()} for name, per_seed in outcomes.items()}
    return {
        "schema_version": retrieval.SCHEMA_VERSION, "config": config.to_dict(),
        "config_hash": config.hash(), "bands": band_names, "cells": cells,
        "accuracy": accuracy, "outcomes": table, "training": training,
        "chance": {band: round(r["chance"], 4) for band, r in readers.items()},
        "controls": {kind: {band: round(r[kind], 4) for band, r in readers.items()}
                     for kind in ("bag_of_tokens", "prefix_sets")},
    }


#: The reader panel's results (:func:`reader_results`, ``--readers-out``), beside
#: :data:`RESULTS_PATH`.
READERS_PATH = Path("results") / "retrieval_readers.json"
#: Version of that file's layout; :func:`load_reader_results` refuses any other.
READERS_SCHEMA_VERSION = 1


def grid_digest(grid: Mapping) -> str:
    """SHA-256 of the retrieval grid's items (:func:`retrieval_grid`): every
    cell's name, inputs and answers, in order, as little-endian int64."""
    h = hashlib.sha256()
    for cell, (inputs, answers, _) in grid.items():
        h.update(cell.encode())
        for t in (inputs, answers):
            h.update(np.ascontiguousarray(t.numpy(), dtype="<i8").tobytes())
    return h.hexdigest()


def reader_results(config: Config) -> dict:
    """The reader panel (:func:`posenc_lib.retrieval.reader_panel`) on the
    very test items the study scores (:func:`retrieval_grid`, regenerated
    from ``config``): per reader and cell ``"<length>:<band>"``, its mean
    expected accuracy (4 decimals), with the grid's digest
    (:func:`grid_digest`) and the configuration's hash, so that
    :func:`load_reader_results` refuses a file of other items. No model is
    trained; seconds."""
    grid = retrieval_grid(config)
    panel = {cell: retrieval.reader_panel(config.task, inputs, answers)
             for cell, (inputs, answers, _) in grid.items()}
    readers = list(next(iter(panel.values())))
    return {
        "schema_version": READERS_SCHEMA_VERSION, "config": config.to_dict(),
        "config_hash": config.hash(), "grid_sha256": grid_digest(grid),
        "cells": {cell: {"length": int(inputs.shape[1]), "band": cell.split(":", 1)[1],
                         "items": int(answers.numel())}
                  for cell, (inputs, answers, _) in grid.items()},
        "readers": {r: {cell: round(float(panel[cell][r].mean()), 4) for cell in grid}
                    for r in readers},
    }


def load_reader_results(path: str | Path = READERS_PATH, *,
                        config: Config | None = None) -> dict:
    """Load the reader panel at ``path`` (default :data:`READERS_PATH`,
    relative to the current directory) and refuse it (``ValueError``)
    if another schema version or configuration made it, or if the grid that
    ``config`` generates here has other items than the one it was computed
    on (its digest). Write it with ``python -m posenc_lib experiment
    --readers``."""
    config = Config() if config is None else config
    results = json.loads(_existing(path).read_text())
    _refuse_stale(results, path, config, READERS_SCHEMA_VERSION)
    here = grid_digest(retrieval_grid(config))
    if results.get("grid_sha256") != here:
        raise ValueError(f"path: {path} was computed on other test items (grid sha256 "
                         f"{str(results.get('grid_sha256'))[:12]}..., here {here[:12]}...): "
                         "re-run `python -m posenc_lib experiment --readers`")
    return results


def write_results(results: dict, path: str | Path = RESULTS_PATH) -> Path:
    """Write ``results`` as JSON (one line per innermost list, so the file stays small)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(results, separators=(",", ":"))
    path.write_text(text + "\n")
    return path


def _existing(path: str | Path) -> Path:
    """``path`` as a ``Path``, or ``FileNotFoundError`` saying where a relative
    path was looked for and how to get the file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"path: {path} does not exist (a relative path starts at the current "
            f"directory, {Path.cwd()}); pass the file's path, e.g. the repository's "
            "results/..., or write it with `python -m posenc_lib experiment`")
    return path


def _refuse_stale(results: Mapping, path, config: Config, schema_version: int) -> None:
    """Raise ``ValueError`` unless ``results`` (read from ``path``) carry
    ``schema_version`` and were produced by ``config``; every results file
    of a run is checked by this."""
    _stale.refuse_stale(results, path, config.hash(), schema_version)


def load_retrieval_results(path: str | Path = RETRIEVAL_PATH, *,
                           config: Config | None = None) -> dict:
    """:func:`posenc_lib.retrieval.load_results` with the study's
    configuration (default :class:`Config` ()); ``path`` defaults to
    ``results/retrieval.json``, relative to the current directory."""
    _existing(path)
    return retrieval.load_results(path, config=Config() if config is None else config)


def load_results(path: str | Path = RESULTS_PATH, *, config: Config | None = None,
                 check_environment: bool = True) -> dict:
    """Load stored results from ``path`` (default
    ``results/length_generalization.json``, relative to the current directory) and refuse them if they are stale.

    Stale means: another schema version, another configuration (default
    :class:`Config` ()), or, with ``check_environment``, other data bytes
    than the pinned corpus gives (its digest). The Python version is recorded
    but no longer checked: the data are the corpus's, not the interpreter's.

    Raises:
        ValueError: naming what differs.
        FileNotFoundError: if there is no file at ``path``.
    """
    config = Config() if config is None else config
    results = json.loads(_existing(path).read_text())
    _refuse_stale(results, path, config, SCHEMA_VERSION)
    if check_environment:
        for part, files in (("train", config.train_files), ("eval", config.eval_files)):
            digest = load_bytes(files)[1]
            if digest != results["data"][f"{part}_sha256"]:
                raise ValueError(f"path: {path} was produced from other {part} data "
                                 f"(sha256 {results['data'][f'{part}_sha256'][:12]}..., "
                                 f"here {digest[:12]}...): re-run "
                                 f"`python -m posenc_lib experiment`")
    return results


# -- reading the results: losses by position band, paired t-intervals -----------------

def losses(results: Mapping, name: str, length: int | None = None, *,
           sliding: bool = False) -> np.ndarray:
    """Stored losses of model ``name`` over the first ``length`` positions.

    For a trained model every length is a prefix of the one stored pass (the
    model is causal, so a position's loss does not depend on what follows); so
    it is for an extension that follows the length itself (dynamic NTK). A
    scaled ``"rope+<extension>"`` was set up for windows of ``length`` (at the
    training length it is plain RoPE).

    Returns:
        ``(seeds, windows, length / bucket)`` array of mean losses (nats) per bucket.
    """
    config, models = results["config"], results["models"]
    longest = config["max_multiplier"] * config["train_length"]
    length = longest if length is None else int(length)
    if name not in models:
        raise ValueError(f"name: {name!r} is not in the results; have {list(models)}")
    entry = models[name]
    if entry["kind"] == "extension":
        scaled = EXTENSIONS[entry["extension"]].scaled
        if sliding:
            raise ValueError("sliding: only trained models have sliding-window losses")
        if length == config["train_length"] and scaled:
            entry = models[entry["base_model"]]
        elif scaled and str(length) not in entry["loss"]:
            raise ValueError(f"length: {name} was evaluated at {sorted(entry['loss'], key=int)}"
                             f" (and {config['train_length']}), not {length}")
    table = entry["sliding" if sliding else "loss"]
    if str(length) in table:
        return np.asarray(table[str(length)])
    if length % results["bucket"] or not 0 < length <= longest:
        raise ValueError(f"length must be a multiple of {results['bucket']} up to {longest}, "
                         f"got {length}")
    return np.asarray(table[str(longest)])[..., :length // results["bucket"]]


def band_losses(results: Mapping, name: str, length: int | None = None, *,
                sliding: bool = False) -> np.ndarray:
    """Mean loss per position band (``results["bands"]``) inside ``length``.

    Returns:
        ``(seeds, windows, n_bands)`` array; band ``b`` covers positions
        ``bands[b][0] .. bands[b][1] - 1``.
    """
    buckets = losses(results, name, length, sliding=sliding)
    size, out = results["bucket"], []
    for lo, hi in results["bands"]:
        if hi > buckets.shape[-1] * size:
            break
        out.append(buckets[..., lo // size:hi // size].mean(-1))
    return np.stack(out, -1)


def compare(results: Mapping, a: str, b: str, band: int, *, length: int | None = None,
            sliding_a: bool = False, sliding_b: bool = False, clustered: bool = True,
            **options) -> Comparison:
    """Paired comparison of two models (or one model with and without the
    sliding window) on position band ``band``, same targets, same seeds.

    With ``clustered`` the windows count as a sample of text drawn by source
    file (:func:`window_files`; if they all come from one file, or without
    ``clustered``, the interval is about these windows, over seeds).
    ``options`` go to :func:`interval`."""
    x = band_losses(results, a, length, sliding=sliding_a)
    y = band_losses(results, b, length, sliding=sliding_b)
    if band >= min(x.shape[-1], y.shape[-1]):
        raise ValueError(f"band {band} lies beyond the evaluated length")
    clusters = window_files(results) if clustered else None
    if clusters is not None and len(set(clusters.tolist())) < 2:
        clusters = None   # one file: nothing to cluster over (tiny test runs)
    x, y = x[..., band], y[..., band]
    return Comparison(a, b, tuple(results["bands"][band]),
                      interval(x, y, clusters=clusters, **options),
                      p_value(x, y, clusters=clusters))
