"""Running the study: every (model, seed) job trained (or loaded from the
cache) and evaluated, shared among ``torchrun`` processes, and the command
line (:func:`main`, ``python -m posenc_lib experiment``).

Finished models are kept under the cache directory the caller passes
(``--cache``; the command line's default is ``.cache/experiment`` in the
current directory), keyed by a hash of everything that determines their
training, and every evaluation is kept keyed by what determines it: an
interrupted run resumes, and a change to the evaluation re-uses the trained
models.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Sequence

import torch

from .config import EXTENSIONS, FINETUNES, MODELS, RETRIEVAL_SKIP, Config, _digest
from .data import _check_pinned, _eval_rows, load_bytes, retrieval_grid
from .evaluation import _evaluate_unit
from .jobs import _distributed, _environment, _load_or_run, _run_shared, _save
from .results import (READERS_PATH, RESULTS_PATH, RETRIEVAL_PATH, _assemble,
                      reader_results, write_results)
from .training import STUDIES, build_model, finetune_model, train_model

#: Trained models and evaluations, one directory per (model, seed): relative,
#: so ``.cache/experiment`` under the current directory (the command line's
#: default for ``--cache``; :func:`run` takes ``cache_dir``).
CACHE_DIR = Path(".cache") / "experiment"
# Bump when the training or the evaluation code changes what it computes, so
# that cached checkpoints and evaluations are not reused.
_TRAIN_CODE_VERSION = 3
_EVAL_CODE_VERSION = 3


_STUDY_KEYS = {"text": ("batch_size", "probe_length", "probe_symbols",
                         "train_plant_fraction"),
               "task": ("task_keys", "task_values", "task_filler", "task_pairs",
                        "task_batch", "task_queries", "task_steps", "task_lengths")}


def _train_key(config: Config, name: str, seed: int, train_sha: str,
               device: torch.device, study: str = "text") -> str:
    keys = ("train_length", "max_multiplier", "d_model", "n_layers", "n_heads",
            "steps", "lr", "warmup", "weight_decay", "t5_num_buckets", "t5_max_distance",
            "rope_base", "xpos_scale_base", "threads", "log_every", "p_rope_fraction",
            "swa_window", "full_every") + _STUDY_KEYS[study]
    spec = MODELS[name]
    return _digest({"config": {k: getattr(config, k) for k in keys}, "name": name,
                    "study": study,
                    "scheme": spec.scheme, "bos": spec.bos, "options": dict(spec.options),
                    "seed": seed, "train_sha256": train_sha, "torch": torch.__version__,
                    "device": device.type, "code": _TRAIN_CODE_VERSION})


def _eval_key(config: Config, train_key: str, unit: str, eval_sha: str) -> str:
    keys = ("train_length", "max_multiplier", "factors", "eval_windows", "bucket",
            "dynamic_chunk", "probe_distances", "probe_count", "probe_length",
            "probe_offset", "probe_symbols", "task_keys", "task_values", "task_filler",
            "task_pairs", "retrieval_items", "eval_batch")
    name = unit.split(":")[-1]
    source = EXTENSIONS[name].source() if ":" in unit else ""
    return _digest({"config": json.loads(json.dumps({k: getattr(config, k) for k in keys})),
                    "model": train_key, "unit": unit, "source": source,
                    "eval_sha256": eval_sha, "code": _EVAL_CODE_VERSION})


def _units(config: Config, name: str, study: str = "text") -> list[str]:
    if study == "task":
        return ["retrieval"] + ([f"retrieval:{ext}" for ext in config.extensions
                                 if ext not in RETRIEVAL_SKIP] if name == "rope" else [])
    units = ["full", "sliding", "probe"]
    if name == "rope":
        units += [f"{kind}:{ext}" for ext in config.extensions for kind in ("ext", "probe")]
    return units


def _finetune_key(config: Config, train_key: str, name: str, study: str = "text") -> str:
    keys = ("finetune_steps", "finetune_lr", "finetune_warmup") + _STUDY_KEYS[study]
    return _digest({"config": {k: getattr(config, k) for k in keys}, "base": train_key,
                    "name": name, "source": FINETUNES[name].source(),
                    "code": _TRAIN_CODE_VERSION})


def _evaluate_units(config: Config, model, units: list[str], folder: Path | None,
                    model_key: str, data: dict, bos: bool) -> dict:
    """Evaluate (or load) every unit of one model."""
    out = {}
    for unit in units:
        path = None
        if folder is not None:
            key = _eval_key(config, model_key, unit, data["eval_sha256"])
            path = folder / f"eval-{unit.replace(':', '-')}-{key}.pt"
        if path is not None and path.is_file():
            out[unit] = torch.load(path, weights_only=False)
            continue
        out[unit] = _evaluate_unit(config, model, unit, data["eval_rows"], data["eval"], bos,
                                   data["grid"])
        if path is not None:
            _save(out[unit], path)
    return out


def _run_job(config: Config, name: str, seed: int, data: dict, cache_dir: Path | None,
             device: torch.device, progress: bool) -> dict:
    """Train (or load) one (model, seed) in both studies, and the fine-tunes of
    ``"rope"``, and evaluate (or load) every unit.

    Returns:
        ``{study: {"log", "units", "finetunes": {name: {"log", "units"}}}}``.
    """
    bos, out = MODELS[name].bos, {}
    for study in STUDIES:
        key = _train_key(config, name, seed, data["train_sha256"], device, study)
        tag = "" if study == "text" else "-task"
        folder = None if cache_dir is None else cache_dir / f"{name}{tag}-seed{seed}-{key}"
        model, log = _load_or_run(
            None if folder is None else folder / "model.pt",
            lambda: build_model(config, name, seed),
            lambda: train_model(config, name, seed, data["train"], study=study,
                                device=device, progress=progress), device)
        units = _evaluate_units(config, model, _units(config, name, study), folder, key, data,
                                bos)
        finetunes = {}
        for ft in (config.finetunes if name == "rope" else ()):
            ft_key = _finetune_key(config, key, ft, study)
            ft_folder = (None if cache_dir is None
                         else cache_dir / f"{ft}{tag}-seed{seed}-{ft_key}")

            def build(ft=ft):
                tuned = build_model(config, name, seed)
                FINETUNES[ft].configure(tuned, config.train_length)
                return tuned

            tuned, ft_log = _load_or_run(
                None if ft_folder is None else ft_folder / "model.pt", build,
                lambda ft=ft: finetune_model(config, ft, model, seed, data["train"],
                                             study=study, device=device, progress=progress),
                device)
            finetunes[ft] = {"log": ft_log, "units": _evaluate_units(
                config, tuned, ["retrieval"] if study == "task" else
                ["full", "sliding", "probe"], ft_folder, ft_key, data, bos)}
        out[study] = {"log": log, "units": units, "finetunes": finetunes}
    return out


def run(config: Config, *, device: str | None = None, cache_dir: Path | None = CACHE_DIR,
        progress: bool = True) -> dict | None:
    """Train and evaluate every (model, seed); return the results (``None`` on ranks > 0).

    Under ``torchrun`` (``WORLD_SIZE > 1``) every rank runs its share of the
    (model, seed) jobs and rank 0 gathers every job's results. Each job is
    seeded on its own, so the results do not depend on how jobs are shared.
    ``cache_dir=None`` keeps nothing on disk.
    """
    start = time.perf_counter()
    rank, world, device = _distributed(device)
    torch.set_num_threads(config.threads)
    train, train_sha = load_bytes(config.train_files)
    held_out, eval_sha = load_bytes(config.eval_files)
    _check_pinned(config, train_sha, eval_sha)
    data = {"train": train, "train_sha256": train_sha, "eval": held_out,
            "eval_sha256": eval_sha, "eval_rows": _eval_rows(config, held_out),
            "grid": retrieval_grid(config)}
    jobs_done = _run_shared(config, rank, world, lambda name, seed, show: _run_job(
        config, name, seed, data, cache_dir, device, show), progress=progress)
    if jobs_done is None:   # not rank 0
        return None
    results = _assemble(config, jobs_done)
    results.update({
        "environment": _environment(device, world),
        "data": {"train_bytes": train.numel(), "eval_bytes": held_out.numel(),
                 "train_sha256": train_sha, "eval_sha256": eval_sha},
        "wall_time_s": round(time.perf_counter() - start, 1),
    })
    return results


def _beside(out: Path, default: Path, suffix: str) -> Path:
    """Where a companion file of ``--out`` goes: ``default`` when ``--out`` is
    the default file (however it is spelled: the paths are compared resolved),
    else ``--out`` with ``suffix``."""
    if out.resolve() == RESULTS_PATH.resolve():
        return default
    return out.with_suffix(suffix)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m posenc_lib experiment [options]``: run the study and write its
    three results files (or only the reader panel, ``--readers``)."""
    parser = argparse.ArgumentParser(
        prog="python -m posenc_lib experiment",
        description="Train and evaluate the length-generalization experiment. "
        "Relative paths, the defaults included, start at the current directory "
        "(run it from the repository's root to update the stored results).")
    parser.add_argument("--out", type=Path, default=RESULTS_PATH,
                        help="where to write the JSON results (default: %(default)s)")
    parser.add_argument("--retrieval-out", type=Path, default=None,
                        help=f"where to write the retrieval results (default: "
                        f"{RETRIEVAL_PATH} with the default --out, else --out with "
                        f"the suffix .retrieval.json)")
    parser.add_argument("--readers-out", type=Path, default=None,
                        help=f"where to write the reader panel on the retrieval grid "
                        f"(default: {READERS_PATH} with the default --out, else --out "
                        f"with the suffix .readers.json)")
    parser.add_argument("--smoke", action="store_true", help="tiny configuration")
    parser.add_argument("--device", default=None,
                        help="torch device (default: cuda if available, else cpu)")
    parser.add_argument("--cache", type=Path, default=CACHE_DIR,
                        help="checkpoints and evaluations (default: %(default)s)")
    parser.add_argument("--no-cache", action="store_true", help="keep nothing on disk")
    parser.add_argument("--quiet", action="store_true", help="no progress output")
    parser.add_argument("--offset", action="store_true",
                        help="only the offset-retrieval study (every model trained on "
                        "OffsetTask, about as long as the retrieval study): writes "
                        "--offset-out")
    parser.add_argument("--offset-out", type=Path, default=None,
                        help="where to write the offset study's results (default: "
                        "results/retrieval_offset.json with the default --out, else "
                        "--out with the suffix .offset.json)")
    parser.add_argument("--readers", action="store_true",
                        help="only write the reader panel (see --readers-out); seconds, "
                        "no training")
    args = parser.parse_args(argv)
    config = Config.smoke() if args.smoke else Config()
    readers_out = args.readers_out
    if readers_out is None:
        readers_out = _beside(args.out, READERS_PATH, ".readers.json")
    if args.readers:
        write_results(reader_results(config), readers_out)
        return
    if args.offset:
        from .offset import OFFSET_PATH, OffsetStudy, run_offset

        study = OffsetStudy.smoke() if args.smoke else OffsetStudy()
        results = run_offset(study, device=args.device,
                             cache_dir=None if args.no_cache else args.cache,
                             progress=not args.quiet)
        if results is not None:     # rank 0
            out = args.offset_out or _beside(args.out, OFFSET_PATH, ".offset.json")
            write_results(results, out)
            if not args.quiet:
                print(f"wrote {out} (study {results['study_hash']}, "
                      f"{results['wall_time_s']:.0f} s)", file=sys.stderr)
        return
    results = run(config, device=args.device, cache_dir=None if args.no_cache else args.cache,
                  progress=not args.quiet)
    if results is None:   # not rank 0
        return
    retrieval_out = args.retrieval_out
    if retrieval_out is None:
        retrieval_out = _beside(args.out, RETRIEVAL_PATH, ".retrieval.json")
    write_results(results.pop("retrieval"), retrieval_out)
    write_results(results, args.out)
    write_results(reader_results(config), readers_out)
    if not args.quiet:
        print(f"wrote {args.out} (config {results['config_hash']}, "
              f"{results['wall_time_s']:.0f} s)", file=sys.stderr)
