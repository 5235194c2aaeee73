"""Does it extrapolate? Train small byte-level language models, evaluate them long.

Every model of :data:`MODELS` is trained, with several seeds, on windows of
``train_length`` positions of Python standard-library source code (CPython
3.11.7's, stored in the repository: :mod:`posenc_lib.corpus`), and scored
on the *same* held-out target bytes at every position up to
``max_multiplier`` times that length: each held-out window is read once, from
its first byte, and its losses are stored per position bucket, per window and
per seed, so that every comparison is paired (same targets, same seeds).

Besides the full-context pass, each model is scored

* with a **sliding window** of ``train_length`` positions (stride half of
  it): the same targets, seen with in-distribution positions only. The paired
  difference tells whether the positions beyond ``train_length`` help or hurt;
* on a **retrieval probe**: a random string planted twice at distance ``D``;
  the loss on the second copy measures whether the model can use what lies
  ``D`` bytes back.

The trained RoPE model is also scored, without fine-tuning, with the
inference-time context extensions of :data:`EXTENSIONS`, a registry: adding a
method is one function and one entry, and costs evaluation only.

Run the whole study (a progress bar shows it) from the repository's root with::

    python -m posenc_lib experiment --out results/length_generalization.json

Relative paths start at the current directory: the results go to ``results/``
and finished models to ``.cache/experiment/`` there unless ``--out``,
``--retrieval-out``, ``--readers-out`` and ``--cache`` say otherwise, and the
functions that read or write a file take its path. Finished models are kept
keyed by a hash of everything that determines their training, and every
evaluation is kept keyed by what determines it: an interrupted run resumes,
and a change to the evaluation re-uses the trained models. ``--smoke`` runs
every code path on a tiny configuration in seconds (the test suite does
this). ``--device`` picks the device; under ``torchrun`` every process takes
its share of the (model, seed) jobs and rank 0 writes the results.

The package, one module per concern (every public name is re-exported here):

* ``config``: the models, fine-tunes and extensions, and :class:`Config`;
* ``data``: the corpus's bytes, the evaluation windows, the probes' rows and
  the retrieval task's test items;
* ``training``: building and training the models (:func:`fit`);
* ``evaluation``: scoring them (:func:`position_losses`);
* ``running``: :func:`run`, the cache, ``torchrun``, and the command line
  (``main``);
* ``results``: the results files, written, loaded and read;
* ``stats``: the intervals and tests, with no torch;
* ``offset``: the offset-retrieval study (:class:`OffsetStudy`,
  ``--offset``), every model trained on
  :class:`posenc_lib.retrieval.OffsetTask`;
* ``jobs``: what the runs share (processes, devices, checkpoints).
"""

from __future__ import annotations

from . import config as _config
from . import results as _results
from . import stats as _stats
from .config import (TASK_LENGTHS, Config, Extension, FineTune, ModelSpec,
                     unclosed_fraction)
from .data import load_bytes, retrieval_grid, window_files
from .evaluation import position_losses, retrieval_hits
from .results import (READERS_SCHEMA_VERSION, RESULTS_PATH, RETRIEVAL_PATH,
                      SCHEMA_VERSION, band_losses, compare, grid_digest,
                      load_reader_results, load_results, load_retrieval_results, losses,
                      reader_results, write_results)
from .offset import (OFFSET_PATH, OffsetStudy, load_offset_results, offset_cells,
                     offset_hits, row_ranges, run_offset)
from .running import CACHE_DIR, main, run
from .stats import (Comparison, Interval, accuracy_interval, accuracy_p_value, adjust,
                    degrees_of_freedom, holm, holm_levels, interval, p_value)
from .training import STUDIES, build_model, finetune_model, fit, lr_factor, train_model

# The data documented on the API page, with their comments (autodoc reads a
# variable's comment where the page's module assigns it).

#: Standard-library modules used for training (:data:`posenc_lib.corpus.TRAIN_FILES`,
#: read from the pinned corpus, CPython 3.11.7's sources stored in the
#: repository, not from the running interpreter).
TRAIN_FILES = _config.TRAIN_FILES
#: Held-out modules, never seen in training (:data:`posenc_lib.corpus.EVAL_FILES`).
EVAL_FILES = _config.EVAL_FILES
#: Every trained model, by name. ``"rope-b32"`` is RoPE with a base that leaves
#: about as large a fraction of its pairs short of a full turn within the
#: training length as Llama 2 does within its own (see :func:`unclosed_fraction`).
MODELS: dict[str, ModelSpec] = _config.MODELS
#: Fine-tunes of the trained ``"rope"`` model, by name (DroPE's recalibration,
#: RoPE continued for the same steps as DroPE's control, and PI and YaRN at
#: factor 2 fine-tuned on sequences of ``2L``, as they were designed).
FINETUNES: dict[str, FineTune] = _config.FINETUNES
#: Inference-time extensions of the trained ``"rope"`` model, by name.
EXTENSIONS: dict[str, Extension] = _config.EXTENSIONS
#: The extensions not scored on retrieval (only the last position is scored
#: there, in one pass, where dynamic NTK with factor 1 is NTK-aware at the
#: item's length ratio, item by item).
RETRIEVAL_SKIP = _config.RETRIEVAL_SKIP
#: The reader panel's results (:func:`reader_results`, ``--readers-out``):
#: ``results/retrieval_readers.json``, relative to the current directory.
READERS_PATH = _results.READERS_PATH

# The public classes say they live here, where the API page documents them (so
# that type hints name them by the path the page gives).
for _class in (Config, ModelSpec, FineTune, Extension, _stats.Interval,
               _stats.Comparison, OffsetStudy):
    _class.__module__ = __name__
del _class

__all__ = ["TRAIN_FILES", "EVAL_FILES", "MODELS", "ModelSpec", "EXTENSIONS",
           "Extension", "Config", "load_bytes", "build_model", "lr_factor", "fit",
           "train_model", "position_losses", "run", "write_results", "load_results",
           "RESULTS_PATH", "CACHE_DIR", "SCHEMA_VERSION", "Interval", "interval",
           "p_value", "holm", "accuracy_interval", "accuracy_p_value", "holm_levels",
           "degrees_of_freedom", "losses", "band_losses", "window_files", "Comparison",
           "adjust", "compare", "unclosed_fraction", "main", "READERS_PATH",
           "reader_results", "load_reader_results", "grid_digest",
           "load_retrieval_results", "OffsetStudy", "OFFSET_PATH", "run_offset",
           "load_offset_results", "offset_cells", "offset_hits", "row_ranges"]
