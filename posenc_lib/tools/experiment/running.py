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

Run the whole study (a progress bar shows it) with::

    python -m posenc_lib experiment --out results/length_generalization.json

Finished models are kept under ``.cache/experiment/``, keyed by a hash of
everything that determines their training, and every evaluation is kept
keyed by what determines it: an interrupted run resumes, and a change to the
evaluation re-uses the trained models. ``--smoke`` runs every code path on a
tiny configuration in seconds (the test suite does this). ``--device`` picks
the device; under ``torchrun`` every process takes its share of the
(model, seed) jobs and rank 0 writes the results.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import inspect
import json
import math
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, NamedTuple, Sequence

import numpy as np
import torch
from torch import Tensor

from .. import _stale, _validate, corpus, lm, retrieval

__all__ = ["TRAIN_FILES", "EVAL_FILES", "MODELS", "ModelSpec", "EXTENSIONS", "Extension",
           "Config", "load_bytes", "build_model", "lr_factor", "fit", "train_model",
           "position_losses", "run", "write_results", "load_results", "RESULTS_PATH",
           "CACHE_DIR", "SCHEMA_VERSION", "Interval", "interval", "p_value", "holm",
           "accuracy_interval", "accuracy_p_value", "holm_levels", "degrees_of_freedom",
           "losses", "band_losses", "window_files", "Comparison", "adjust", "compare",
           "unclosed_fraction", "main", "READERS_PATH", "reader_results",
           "load_reader_results", "grid_digest", "load_retrieval_results"]

#: Version of the results file's layout; :func:`load_results` refuses any other.
SCHEMA_VERSION = 3
_ROOT = Path(__file__).resolve().parents[2]
RESULTS_PATH = _ROOT / "results" / "length_generalization.json"
#: Trained models and evaluations, one directory per (model, seed).
CACHE_DIR = _ROOT / ".cache" / "experiment"
# Bump when the training or the evaluation code changes what it computes, so
# that cached checkpoints and evaluations are not reused.
_TRAIN_CODE_VERSION = 3
_EVAL_CODE_VERSION = 3

#: Standard-library modules used for training (:data:`posenc_lib.corpus.TRAIN_FILES`,
#: read from the pinned corpus, CPython 3.11.7's sources stored in the
#: repository, not from the running interpreter).
TRAIN_FILES = corpus.TRAIN_FILES
#: Held-out modules, never seen in training (:data:`posenc_lib.corpus.EVAL_FILES`).
EVAL_FILES = corpus.EVAL_FILES


# -- the models -----------------------------------------------------------------------

@dataclass(frozen=True)
class ModelSpec:
    """One trained model: a scheme of :data:`posenc_lib.lm.SCHEMES`, whether its
    sequences start with :data:`posenc_lib.lm.BOS`, and options of
    :func:`posenc_lib.lm.make_scheme` that differ from the configuration's."""

    scheme: str
    bos: bool = True
    options: Mapping = field(default_factory=dict)


#: Every trained model, by name. ``"rope-b32"`` is RoPE with a base that leaves
#: about as large a fraction of its pairs short of a full turn within the
#: training length as Llama 2 does within its own (see :func:`unclosed_fraction`).
MODELS: dict[str, ModelSpec] = {
    "nope": ModelSpec("nope"),
    "nope-nobos": ModelSpec("nope", bos=False),
    "sinusoidal": ModelSpec("sinusoidal"),
    "learned": ModelSpec("learned"),
    "t5": ModelSpec("t5"),
    "alibi": ModelSpec("alibi"),
    "rope": ModelSpec("rope"),
    "rope-b32": ModelSpec("rope", options={"rope_base": 32.0}),
    "xpos": ModelSpec("xpos"),
    "xpos-sb512": ModelSpec("xpos", options={"xpos_scale_base": 512.0}),
    "p-rope": ModelSpec("p-rope"),
    "rnope-swa": ModelSpec("rnope-swa"),
}


@dataclass(frozen=True)
class FineTune:
    """A short continued training of the trained ``"rope"`` model, with the
    budget every fine-tune shares (``finetune_steps`` of the configuration).

    Attributes:
        configure: ``configure(model, train_length)`` changes the model
            before the fine-tune (and again when a checkpoint is loaded).
        length: the fine-tune's sequence length, in training lengths.
    """

    configure: Callable
    length: int = 1

    def source(self) -> str:
        try:
            return f"{self.length}|{inspect.getsource(self.configure)}"
        except (OSError, TypeError):
            return f"{self.length}|{getattr(self.configure, '__qualname__', '')}"


def _keep(model, train_length):
    pass


def _drop_rope(model, train_length):
    # DroPE: the rotation becomes the identity (no positions at all).
    model.scheme = lm.PositionScheme()


def _pi_2(model, train_length):
    model.scheme.set_scaling("linear", factor=2.0)


def _yarn_2(model, train_length):
    model.scheme.set_scaling("yarn", factor=2.0,
                             original_max_position_embeddings=train_length)


#: Fine-tunes of the trained ``"rope"`` model, by name (DroPE's recalibration,
#: RoPE continued for the same steps as DroPE's control, and PI and YaRN at
#: factor 2 fine-tuned on sequences of ``2L``, as they were designed).
FINETUNES: dict[str, FineTune] = {
    "drope": FineTune(_drop_rope),
    "rope-ft": FineTune(_keep),
    "rope+pi-ft": FineTune(_pi_2, length=2),
    "rope+yarn-ft": FineTune(_yarn_2, length=2),
}


# -- the inference-time extensions ------------------------------------------------------

@dataclass(frozen=True)
class Extension:
    """An inference-time change to a trained RoPE model (no training).

    Attributes:
        configure: ``configure(scheme, factor, train_length)`` sets up the
            :class:`~posenc_lib.lm.RopeScheme` for windows of
            ``factor · train_length`` positions (e.g. with
            :meth:`~posenc_lib.lm.RopeScheme.set_scaling`, or by replacing its
            ``attention_hooks``).
        evaluation: how a window is read. ``"full"``: one pass.
            ``"reencode"``: the sequence grows ``dynamic_chunk`` positions at a
            time and every step re-encodes the whole prefix. ``"kv"``: the
            same steps with a key-value cache, so keys keep the rotation they
            were cached with.
        scaled: whether the method takes a factor; if not (dynamic NTK follows
            the length itself) it is evaluated once, on the longest windows.
    """

    configure: Callable
    evaluation: str = "full"
    scaled: bool = True

    def __post_init__(self):
        _validate.one_of("evaluation", self.evaluation, ("full", "reencode", "kv"))

    def source(self) -> str:
        """What identifies the method in cache keys: its evaluation and its code."""
        try:
            code = inspect.getsource(self.configure)
        except (OSError, TypeError):
            code = getattr(self.configure, "__qualname__", repr(self.configure))
        return f"{self.evaluation}|{self.scaled}|{code}"


def _pi(scheme, factor, train_length):
    scheme.set_scaling("linear", factor=factor)


def _ntk(scheme, factor, train_length):
    scheme.set_scaling("ntk", factor=factor)


def _yarn(scheme, factor, train_length):
    scheme.set_scaling("yarn", factor=factor, original_max_position_embeddings=train_length)


def _yarn_no_temperature(scheme, factor, train_length):
    scheme.set_scaling("yarn", factor=factor, original_max_position_embeddings=train_length,
                       attention_factor=1.0)


def _ntk_yarn_temperature(scheme, factor, train_length):
    from .. import scaling

    scheme.set_scaling("ntk", factor=factor,
                       attention_factor=scaling.yarn_attention_factor(factor))


def _dynamic(scheme, factor, train_length):
    # factor 1: the NTK scale is exactly (current length) / train_length beyond it.
    scheme.set_scaling("dynamic", factor=1.0, max_position_embeddings=train_length)


def _dynamic_factor(scheme, factor, train_length):
    # the factor set to the extension ratio, as a served config would set it
    scheme.set_scaling("dynamic", factor=factor, max_position_embeddings=train_length)


#: Inference-time extensions of the trained ``"rope"`` model, by name.
EXTENSIONS: dict[str, Extension] = {
    "pi": Extension(_pi),
    "ntk": Extension(_ntk),
    "yarn": Extension(_yarn),
    "yarn-notemp": Extension(_yarn_no_temperature),
    "ntk-yarntemp": Extension(_ntk_yarn_temperature),
    "dynamic": Extension(_dynamic, evaluation="reencode", scaled=False),
    "dynamic-kv": Extension(_dynamic, evaluation="kv", scaled=False),
    "dynamic-f": Extension(_dynamic_factor, evaluation="reencode"),
}

#: The extensions not scored on retrieval (only the last position is scored
#: there, in one pass, where dynamic NTK with factor 1 is NTK-aware at the
#: item's length ratio, item by item).
RETRIEVAL_SKIP = ("dynamic", "dynamic-kv")


# -- the configuration ----------------------------------------------------------------

@dataclass(frozen=True)
class Config:
    """Everything that determines the results. Its :meth:`hash` names the run."""

    train_files: tuple = TRAIN_FILES
    eval_files: tuple = EVAL_FILES
    models: tuple = tuple(MODELS)
    extensions: tuple = tuple(EXTENSIONS)
    finetunes: tuple = tuple(FINETUNES)
    seeds: tuple = (0, 1, 2, 3, 4)
    train_length: int = 64
    max_multiplier: int = 8
    factors: tuple = (2, 4, 8)
    eval_windows: int = 64
    bucket: int = 32
    dynamic_chunk: int = 16
    probe_distances: tuple = (16, 32, 64, 128, 256, 448)
    probe_count: int = 48
    probe_length: int = 8
    probe_offset: int = 8
    train_plant_fraction: float = 0.5
    probe_symbols: tuple = tuple(range(128, 160))
    d_model: int = 64
    n_layers: int = 3
    n_heads: int = 4
    batch_size: int = 32
    steps: int = 2000
    lr: float = 3e-3
    warmup: int = 100
    weight_decay: float = 0.01
    t5_num_buckets: int = 16
    t5_max_distance: int = 32
    rope_base: float = 10000.0
    xpos_scale_base: float = 32.0
    p_rope_fraction: float = 0.25
    swa_window: int = 32
    full_every: int = 3
    task_keys: tuple = (160, 161)
    task_values: tuple = tuple(range(192, 224))
    task_filler: tuple = tuple(range(224, 256))
    task_pairs: int = 6
    task_batch: int = 32
    task_steps: int = 5000
    task_queries: int = 2
    task_lengths: str = "varied"
    retrieval_items: int = 128
    finetune_steps: int = 200
    finetune_lr: float = 3e-4
    finetune_warmup: int = 20
    threads: int = 1
    eval_batch: int = 16
    log_every: int = 100

    def __post_init__(self):
        L = _validate.positive_int("train_length", self.train_length, minimum=4)
        _validate.positive_int("steps", self.steps)
        _validate.positive_int("eval_windows", self.eval_windows)
        _validate.positive_int("max_multiplier", self.max_multiplier)
        if not self.seeds:
            raise ValueError("seeds must hold at least one seed")
        if self.d_model % self.n_heads or (self.d_model // self.n_heads) % 4:
            raise ValueError(f"d_model ({self.d_model}) / n_heads ({self.n_heads}) must be a "
                             "multiple of 4 (RoPE pairs; NTK-aware needs 4 features)")
        for name in self.models:
            _validate.one_of("models", name, list(MODELS))
        for name in self.extensions:
            _validate.one_of("extensions", name, list(EXTENSIONS))
        for name in self.finetunes:
            _validate.one_of("finetunes", name, list(FINETUNES))
        if (self.extensions or self.finetunes) and "rope" not in self.models:
            raise ValueError("extensions and finetunes need the 'rope' model in models")
        self.task   # validates the retrieval task
        _validate.positive_int("finetune_steps", self.finetune_steps)
        _validate.positive_int("retrieval_items", self.retrieval_items)
        _validate.positive_int("task_batch", self.task_batch)
        _validate.positive_int("task_steps", self.task_steps)
        _validate.positive_int("task_queries", self.task_queries)
        _validate.one_of("task_lengths", self.task_lengths, TASK_LENGTHS)
        if self.task_queries > len(self.task_keys):
            raise ValueError(f"task_queries ({self.task_queries}) must be at most the "
                             f"number of task_keys ({len(self.task_keys)})")
        if self.task.shortest(1) > L - 2 * (self.task_queries - 1):
            raise ValueError(f"task_pairs ({self.task_pairs}) do not fit in train_length "
                             f"({L}) positions")
        for f in self.factors:
            if f not in range(2, self.max_multiplier + 1) or self.max_multiplier % f:
                raise ValueError(f"factors must be integers >= 2 dividing max_multiplier "
                                 f"({self.max_multiplier}), got {f}")
        if L % 2 or L % self.bucket or (L // 2) % self.bucket:
            raise ValueError(f"bucket ({self.bucket}) must divide train_length / 2 "
                             f"({L // 2})")
        if L % self.dynamic_chunk:
            raise ValueError(f"dynamic_chunk ({self.dynamic_chunk}) must divide "
                             f"train_length ({L})")
        longest = max(self.probe_distances) + self.probe_offset + self.probe_length
        if not 0 <= self.train_plant_fraction <= 1:
            raise ValueError(f"train_plant_fraction must lie in [0, 1], got "
                             f"{self.train_plant_fraction}")
        if 3 * self.probe_length > L:
            raise ValueError(f"probe_length ({self.probe_length}) must be at most "
                             f"train_length / 3 (two copies must fit in a training window)")
        if longest > self.eval_length or min(self.probe_distances) < self.probe_length:
            raise ValueError(f"probe_distances must lie in [probe_length, "
                             f"{self.eval_length - self.probe_offset - self.probe_length}]")

    @classmethod
    def smoke(cls) -> "Config":
        """A tiny configuration of the same code, for tests (seconds)."""
        return cls(train_files=TRAIN_FILES[:2], eval_files=EVAL_FILES[:2], seeds=(0, 1),
                   train_length=16, max_multiplier=4, factors=(2, 4), eval_windows=4,
                   bucket=4, dynamic_chunk=4, probe_distances=(4, 8, 40), probe_count=3,
                   probe_length=4, probe_offset=2, train_plant_fraction=0.5, d_model=16,
                   n_layers=1, n_heads=2,
                   batch_size=4, steps=6, warmup=2, t5_num_buckets=8, t5_max_distance=8,
                   xpos_scale_base=8.0, swa_window=8, task_pairs=5, task_batch=3, task_queries=2, task_steps=8,
                   retrieval_items=3, finetune_steps=3, finetune_warmup=1, threads=1,
                   eval_batch=3, log_every=2)

    @property
    def task(self):
        """The retrieval task, a :class:`posenc_lib.retrieval.PositionTask`."""
        return retrieval.PositionTask(keys=self.task_keys, value_symbols=self.task_values,
                                      filler_symbols=self.task_filler,
                                      pairs=self.task_pairs)

    @property
    def eval_length(self) -> int:
        """The number of positions in an evaluation window,
        ``max_multiplier · train_length``."""
        return self.max_multiplier * self.train_length

    @property
    def eval_lengths(self) -> list[int]:
        """The training length and every ``factor · train_length``."""
        return [self.train_length] + [f * self.train_length for f in self.factors]

    def to_dict(self) -> dict:
        """The configuration as plain JSON values (tuples become lists)."""
        return json.loads(json.dumps(dataclasses.asdict(self)))

    @classmethod
    def from_dict(cls, values: Mapping) -> "Config":
        """The configuration that :meth:`to_dict` (e.g. a results file's
        ``"config"``) describes; JSON lists become tuples again."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise ValueError(f"values: unknown configuration fields {unknown}")
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})

    def hash(self) -> str:
        """SHA-256 of the canonical JSON of the configuration (first 16 hex digits)."""
        return _digest(self.to_dict())


def _digest(obj) -> str:
    canonical = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def unclosed_fraction(head_dim: int, base: float, length: int) -> float:
    """Fraction of RoPE pairs that do not complete one turn within ``length`` positions.

    Pair ``i`` turns ``length·θ_i / 2π`` times (:func:`posenc_lib.scaling.rotations`);
    a pair with fewer than one turn only ever sees part of the circle in training.
    """
    from .. import rope, scaling

    turns = scaling.rotations(rope.inv_freq(head_dim, base, dtype=torch.float64), length)
    return float((turns < 1).double().mean())


# -- data -----------------------------------------------------------------------------

def load_bytes(modules: Sequence[str]) -> tuple[Tensor, str]:
    """Concatenate the source of standard-library ``modules`` as a byte tensor,
    read from the pinned corpus (:func:`posenc_lib.corpus.read`: CPython
    3.11.7's sources, stored in the repository and checked against their
    SHA-256), so the bytes do not depend on the running interpreter.

    Returns:
        ``(n_bytes,)`` uint8 tensor and the SHA-256 of the bytes.
    """
    data = corpus.read(modules)
    return torch.frombuffer(bytearray(data), dtype=torch.uint8), hashlib.sha256(data).hexdigest()


def _check_pinned(config: Config, train_sha: str, eval_sha: str) -> None:
    """Before training: the study's own file lists must give the pinned bytes."""
    for part, files, found in (("train", config.train_files, train_sha),
                               ("eval", config.eval_files, eval_sha)):
        pinned = {"train": TRAIN_FILES, "eval": EVAL_FILES}[part]
        if tuple(files) == pinned and found != corpus.PINNED_SHA256[part]:
            raise ValueError(f"{part}_files: the corpus gives sha256 {found[:12]}..., "
                             f"pinned {corpus.PINNED_SHA256[part][:12]}...: restore "
                             "data/ from the repository")


def _split(rows: Tensor, bos: bool) -> tuple[Tensor, Tensor]:
    """``rows: (b, n + 1)`` bytes (the byte before the targets, then n targets)
    -> ``(inputs, targets)``, both ``(b, n)`` int64. With ``bos`` the first
    input is :data:`~posenc_lib.lm.BOS` instead of the byte before: every model
    predicts the same targets at the same positions."""
    rows = rows.long()
    inputs, targets = rows[:, :-1].clone(), rows[:, 1:]
    if bos:
        inputs[:, 0] = lm.BOS
    return inputs, targets


def _eval_rows(config: Config, data: Tensor) -> Tensor:
    """``(eval_windows, eval_length + 1)`` evenly spaced, non-overlapping windows."""
    n = config.eval_length
    if data.numel() < config.eval_windows * (n + 1) + 1:
        raise ValueError(f"the evaluation data ({data.numel()} bytes) is too short for "
                         f"{config.eval_windows} windows of {n + 1}")
    starts = torch.linspace(0, data.numel() - n - 1, config.eval_windows).long()
    return torch.stack([data[s:s + n + 1] for s in starts.tolist()])


def window_files(results: Mapping) -> np.ndarray:
    """The held-out file each evaluation window starts in, by index into
    ``eval_files``: ``(eval_windows,)`` int. Windows of one file share its
    style, so they are not independent draws of text."""
    c = results["config"]
    return _window_files(tuple(c["eval_files"]), c["eval_windows"],
                         c["max_multiplier"] * c["train_length"])


@functools.lru_cache(maxsize=8)
def _window_files(files: tuple, windows: int, length: int) -> np.ndarray:
    # load_bytes joins the files with two newlines
    ends = np.cumsum([size + 2 for size in corpus.sizes(files)])
    starts = torch.linspace(0, int(ends[-1]) - 2 - length - 1, windows).long().numpy()
    out = np.searchsorted(ends, starts, side="right")
    out.setflags(write=False)
    return out


def _probe_rows(config: Config, data: Tensor, distance: int) -> Tensor:
    """Rows of the retrieval probe at ``distance``: held-out text with one random
    string of ``probe_length`` symbols at ``probe_offset`` and again ``distance``
    later. Shape ``(probe_count, probe_offset + distance + probe_length + 1)``."""
    generator = torch.Generator().manual_seed(1_000 + distance)
    alphabet = torch.tensor(config.probe_symbols, dtype=torch.uint8)
    a, k = config.probe_offset, config.probe_length
    filler_len = a + distance - k + 1
    rows = []
    for _ in range(config.probe_count):
        start = int(torch.randint(0, data.numel() - filler_len, (1,), generator=generator))
        filler = data[start:start + filler_len]
        secret = alphabet[torch.randint(0, len(alphabet), (k,), generator=generator)]
        rows.append(torch.cat([filler[:a + 1], secret, filler[a + 1:], secret]))
    return torch.stack(rows)


# -- models and training --------------------------------------------------------------

def build_model(config: Config, name: str, seed: int) -> lm.DecoderLM:
    """The model ``name`` of :data:`MODELS` at initialisation.

    Every weight the models share (embedding, blocks, output) comes from a
    generator seeded with ``seed`` alone, so it is identical across encodings;
    the scheme's own parameters come from a separate generator.
    """
    _validate.one_of("name", name, list(MODELS))
    spec = MODELS[name]
    options = dict(d_model=config.d_model, n_heads=config.n_heads,
                   max_positions=config.eval_length,
                   t5_num_buckets=config.t5_num_buckets,
                   t5_max_distance=config.t5_max_distance, rope_base=config.rope_base,
                   xpos_scale_base=config.xpos_scale_base,
                   p_rope_fraction=config.p_rope_fraction, swa_window=config.swa_window,
                   full_every=config.full_every)
    options.update(spec.options)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(10_000 + seed)
        scheme = lm.make_scheme(spec.scheme, **options)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return lm.DecoderLM(lm.VOCAB_SIZE, config.d_model, config.n_layers,
                            config.n_heads, scheme)


def lr_factor(config: Config, step: int) -> float:
    """The learning-rate multiplier at ``step``: linear warm-up, then cosine to 10 %."""
    if step < config.warmup:
        return (step + 1) / config.warmup
    t = (step - config.warmup) / max(1, config.steps - config.warmup)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t))


def _plant(config: Config, rows: Tensor, generator: torch.Generator) -> Tensor:
    """The copy task mixed into training: in the first ``train_plant_fraction``
    of the rows ``(b, L + 1)``, a random string of ``probe_length`` symbols of
    ``probe_symbols`` replaces the text at a random target position and again
    at a random distance ``D`` (``probe_length <= D``, both copies inside the
    window). The retrieval probe asks for the same skill at distances up to
    ``8L``."""
    k, L = config.probe_length, config.train_length
    alphabet = torch.tensor(config.probe_symbols, dtype=torch.uint8)
    rows = rows.clone()
    for r in range(round(config.train_plant_fraction * rows.shape[0])):
        distance = int(torch.randint(k, L - k, (1,), generator=generator))
        start = 1 + int(torch.randint(0, L - distance - k, (1,), generator=generator))
        secret = alphabet[torch.randint(0, len(alphabet), (k,), generator=generator)]
        # row index = target index + 1 (the row starts with the byte before)
        rows[r, start + 1:start + 1 + k] = secret
        rows[r, start + distance + 1:start + distance + 1 + k] = secret
    return rows


def fit(config, model: lm.DecoderLM, next_batch: Callable[[], tuple[Tensor, Tensor]], *,
        device: torch.device, desc: str = "train", progress: bool = False,
        log_row: Callable | None = None) -> tuple[list, float]:
    """The training loop both studies share (the language model and the
    retrieval task, :func:`train_model`): AdamW, the learning rate of
    :func:`lr_factor`, cross-entropy on every target that is not -100,
    gradients clipped to norm 1, ``config.steps`` steps.

    Args:
        config: any object with ``lr``, ``weight_decay``, ``warmup``,
            ``steps`` and ``log_every`` (this module's :class:`Config`, or
            one with the fine-tune's schedule).
        next_batch: returns the next ``(inputs, targets)``, ``(b, n)`` int64
            on the CPU (-100: not scored), or ``(inputs, targets, weights)``
            with ``(b, n)`` float weights: the loss is then
            ``sum(weights · cross-entropy)`` (weights of unscored targets 0).
        log_row: ``log_row(step, loss, logits, targets)`` -> the row logged
            every ``log_every`` steps and at the last (default
            ``[step, loss rounded to 4 digits]``).

    Returns:
        ``(curve, seconds)``: the logged rows and the wall time.
    """
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr,
                                  weight_decay=config.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(config, s))
    if log_row is None:
        def log_row(step, loss, logits, targets):
            return [step, round(loss.item(), 4)]
    steps = range(config.steps)
    if progress:
        from tqdm.auto import tqdm

        steps = tqdm(steps, desc=desc, leave=False, file=sys.stderr)
    curve, start = [], time.perf_counter()
    model.train()
    for step in steps:
        batch = [t.to(device) for t in next_batch()]
        inputs, targets = batch[0], batch[1]
        logits = model(inputs)
        if len(batch) == 3:
            each = torch.nn.functional.cross_entropy(
                logits.reshape(-1, lm.VOCAB_SIZE), targets.reshape(-1),
                reduction="none").view(targets.shape)
            loss = (each * batch[2]).sum()
        else:
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, lm.VOCAB_SIZE),
                                                     targets.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        if step % config.log_every == 0 or step == config.steps - 1:
            curve.append(log_row(step, loss, logits, targets))
    model.eval()
    return curve, round(time.perf_counter() - start, 2)


#: How the item length of a retrieval training row is drawn
#: (``Config.task_lengths``): ``"varied"``, uniformly from the shortest
#: item that holds the row's distance to the longest that fits, so the
#: query's position varies; ``"fixed"``, always the longest, so every query
#: sits at the same position (a model can then learn where the query is
#: rather than how to find its key).
TASK_LENGTHS = ("varied", "fixed")


def _task_rows(config: Config, length: int, count: int, generator: torch.Generator,
               bos: bool) -> tuple[Tensor, Tensor]:
    """``count`` training rows of the retrieval task, ``length`` positions each.

    A row starts with an item of :func:`posenc_lib.retrieval.make_position_items`:
    its distance drawn uniformly from every distance that fits in
    ``m = length - 2 (task_queries - 1)`` positions, then (for
    ``task_lengths="varied"``) its length ``n`` uniformly from the shortest
    item that holds that distance to ``m``, else ``n = m``. The item is
    followed by ``task_queries - 1`` more queries: after the first query the
    row holds its answer, then another key, its answer, and so on, every query
    a different key. Each query's answer is the value of its key's last
    binding, so the later queries ask the same question of the same item
    (writing a query's answer after it binds that key to the value it already
    had). The rest of the row is filler. Only the answers are targets, and a
    causal model's answers do not depend on what follows them. A test item is
    the row up to its first query.

    Returns:
        ``(inputs, targets)``, ``(count, length)`` int64; -100 where not scored.
    """
    task, extra = config.task, config.task_queries - 1
    m = length - 2 * extra
    top = max(d for d in range(1, m) if task.shortest(d) <= m)
    distances = torch.randint(1, top + 1, (count,), generator=generator)
    if config.task_lengths == "varied":
        # n uniform in [shortest(D), m]
        low = torch.tensor([task.shortest(int(d)) for d in distances])
        lengths = low + (torch.rand(count, generator=generator) * (m + 1 - low)).long()
        filler = torch.tensor(task.filler_symbols)
        inputs = filler[torch.randint(0, len(filler), (count, length), generator=generator)]
    else:   # no filler after the queries: the rows of the first design, draw for draw
        lengths = torch.full((count,), m)
        inputs = torch.empty(count, length, dtype=torch.long)
    targets = torch.full((count, length), -100, dtype=torch.long)
    answers = torch.empty(count, dtype=torch.long)
    for n in sorted(set(lengths.tolist())):
        rows = (lengths == n).nonzero().flatten()
        items, answers[rows], _ = retrieval.make_position_items(
            task, n, distances[rows], generator, bos=bos)
        inputs[rows, :n] = items
        targets[rows, n - 1] = answers[rows]
    keys, values = torch.tensor(task.keys), set(task.value_symbols)
    for r in range(count):
        n = int(lengths[r])
        row = inputs[r, :n].tolist()
        last = {}                                   # key -> value of its last binding
        for p in range(n - 2):
            if row[p] in task.keys and row[p + 1] in values:
                last[row[p]] = row[p + 1]
        others = keys[torch.randperm(len(keys), generator=generator)].tolist()
        others = [k for k in others if k != row[-1]][:extra]
        answer = int(answers[r])
        for j, key in enumerate(others):
            at = n + 2 * j                          # the previous answer, then the key
            inputs[r, at], inputs[r, at + 1] = answer, key
            answer = last[key]
            targets[r, at + 1] = answer
    return inputs, targets


STUDIES = ("text", "task")


def _batches(config: Config, data: Tensor, bos: bool, generator: torch.Generator,
             length: int, study: str) -> Callable:
    """The training batches of a study, ``length`` positions per row.

    ``"text"``: ``batch_size`` windows of ``data`` (the copy task planted in
    some, :func:`_plant`), every target scored. ``"task"``: ``task_batch``
    rows of the retrieval task (:func:`_task_rows`), only the answers scored.
    """
    _validate.one_of("study", study, STUDIES)

    def text():
        starts = torch.randint(0, data.numel() - length - 1, (config.batch_size,),
                               generator=generator)
        rows = torch.stack([data[s:s + length + 1] for s in starts.tolist()])
        return _split(_plant(config, rows, generator), bos)

    def task():
        return _task_rows(config, length, config.task_batch, generator, bos)

    return text if study == "text" else task


def _log_row(step, loss, logits, targets):
    """Logged every ``log_every`` steps: step, loss, and the accuracy on the
    scored targets of a retrieval batch (every target of a text batch is
    scored; its row has no accuracy)."""
    row = [step, round(loss.item(), 4)]
    scored = targets != -100
    if not scored.all():
        hit = logits.argmax(-1)[scored] == targets[scored]
        row.append(round(float(hit.float().mean()), 4))
    return row


def train_model(config: Config, name: str, seed: int, data: Tensor, *, study: str = "text",
                device: str | torch.device = "cpu", progress: bool = False):
    """Train model ``name`` with ``seed`` (with :func:`fit`) for one study:
    ``"text"``, language modelling on random windows of ``data``, or
    ``"task"``, the retrieval task alone for ``task_steps`` steps (``data``
    unused; the learning-rate schedule of :func:`lr_factor` stretched to them).

    The batches (and the copy task planted in some text windows, ``_plant``)
    depend on ``seed`` and the study only, so every model sees the same ones.

    Returns:
        ``(model, log)``; ``log`` holds the training loss every ``log_every``
        steps (and, for the task, the batch accuracy), the wall time, and for
        the learned table the norm of its rows beyond ``train_length`` after
        training over their initial norm.
    """
    device = torch.device(device)
    model = build_model(config, name, seed).to(device)
    bos = MODELS[name].bos
    _validate.one_of("study", study, STUDIES)
    offset = 20_000 if study == "text" else 30_000
    generator = torch.Generator().manual_seed(offset + seed)
    table = getattr(model.scheme, "table", None)
    if table is not None:
        initial = table.table.weight.detach().clone()
    L = config.train_length
    schedule = config if study == "text" else dataclasses.replace(config,
                                                                  steps=config.task_steps)
    curve, seconds = fit(schedule, model, _batches(config, data, bos, generator, L, study),
                         device=device, progress=progress,
                         desc=f"train {name} seed {seed} ({study})", log_row=_log_row)
    log = {"seconds": seconds, "loss_curve": curve}
    if table is not None:
        final = table.table.weight.detach().cpu()
        initial = initial.cpu()
        log["table_norm_ratio"] = {
            "unused": float(final[L:].norm() / initial[L:].norm()),
            "unused_rowwise_spread": float(
                (final[L:].norm(dim=1) / initial[L:].norm(dim=1)).std()),
            "used": float(final[:L].norm() / initial[:L].norm()),
        }
    return model, log


def finetune_model(config: Config, name: str, model: lm.DecoderLM, seed: int, data: Tensor,
                   *, study: str = "text", device: str | torch.device = "cpu",
                   progress: bool = False):
    """Fine-tune a copy of the trained ``"rope"`` ``model`` of a study as
    :data:`FINETUNES` ``[name]`` says: ``finetune_steps`` steps at peak
    learning rate ``finetune_lr`` (warm-up ``finetune_warmup``, cosine to
    10 %), on the study's batches at ``length · train_length`` positions,
    drawn from a generator of their own (the same for every fine-tune).

    Returns:
        ``(model, log)`` as :func:`train_model`.
    """
    import copy

    _validate.one_of("name", name, list(FINETUNES))
    spec = FINETUNES[name]
    model = copy.deepcopy(model).to(torch.device(device))
    spec.configure(model, config.train_length)
    schedule = dataclasses.replace(config, steps=config.finetune_steps, lr=config.finetune_lr,
                                   warmup=config.finetune_warmup,
                                   log_every=max(1, config.finetune_steps // 10))
    _validate.one_of("study", study, STUDIES)
    offset = 40_000 if study == "text" else 50_000
    generator = torch.Generator().manual_seed(offset + seed)
    batches = _batches(config, data, MODELS["rope"].bos, generator,
                       spec.length * config.train_length, study)
    curve, seconds = fit(schedule, model, batches, device=torch.device(device),
                         progress=progress, desc=f"fine-tune {name} seed {seed} ({study})",
                         log_row=_log_row)
    return model, {"seconds": seconds, "loss_curve": curve}


# -- scoring --------------------------------------------------------------------------

@torch.no_grad()
def position_losses(model: lm.DecoderLM, inputs: Tensor, targets: Tensor, *,
                    evaluation: str = "full", chunk: int | None = None,
                    batch_size: int = 16,
                    needed: Sequence[tuple[int, int]] | None = None) -> tuple[Tensor, Tensor]:
    """Cross-entropy (nats) and top-1 hit at every position.

    Args:
        inputs, targets: ``(b, n)`` int64.
        evaluation: ``"full"`` (one pass), ``"reencode"`` (the loss at
            positions ``[e - chunk, e)`` comes from a pass over the prefix
            ``[0, e)``) or ``"kv"`` (the same steps through a key-value cache).
        chunk: positions added per step for ``"reencode"`` and ``"kv"``.
        needed: ``(start, stop)`` ranges of the positions whose losses are
            needed (default: all); ``"reencode"`` skips the passes that score
            none of them, and leaves their losses NaN.

    Returns:
        ``(b, n)`` float32 losses and ``(b, n)`` bool hits.
    """
    _validate.one_of("evaluation", evaluation, ("full", "reencode", "kv"))
    n = inputs.shape[1]
    if evaluation == "full":
        ends = [n]
    else:
        chunk = _validate.positive_int("chunk", chunk)
        ends = list(range(chunk, n, chunk)) + [n]
    device = next(model.parameters()).device
    loss = torch.full(inputs.shape, math.nan, dtype=torch.float32)
    hit = torch.zeros(inputs.shape, dtype=torch.bool)
    for b in range(0, inputs.shape[0], batch_size):
        x, y = inputs[b:b + batch_size].to(device), targets[b:b + batch_size].to(device)
        done, cache = 0, []
        for end in ends:
            if evaluation == "reencode" and needed is not None and not any(
                    lo < end and done < hi for lo, hi in needed):
                done = end
                continue
            if evaluation == "kv":
                logits = model(x[:, done:end], cache=cache)
            else:
                logits = model(x[:, :end])[:, done:end]
            part = torch.nn.functional.cross_entropy(
                logits.reshape(-1, lm.VOCAB_SIZE), y[:, done:end].reshape(-1),
                reduction="none").view(logits.shape[:2])
            loss[b:b + batch_size, done:end] = part.float().cpu()
            hit[b:b + batch_size, done:end] = (logits.argmax(-1) == y[:, done:end]).cpu()
            done = end
    return loss, hit


def _buckets(loss: Tensor, size: int) -> np.ndarray:
    """``(b, n)`` -> ``(b, n / size)`` means of consecutive positions."""
    return loss.view(loss.shape[0], -1, size).mean(-1).numpy()


def _sliding_losses(config: Config, model, rows: Tensor, bos: bool) -> Tensor:
    """Every target seen through a window of ``train_length`` positions
    (stride ``train_length / 2``): positions beyond the training length never occur."""
    L, n = config.train_length, rows.shape[1] - 1
    stride = L // 2
    out = torch.empty(rows.shape[0], n)
    for b in range(0, n - L + 1, stride):
        inputs, targets = _split(rows[:, b:b + L + 1], bos)
        loss, _ = position_losses(model, inputs, targets, batch_size=config.eval_batch)
        keep = 0 if b == 0 else L - stride
        out[:, b + keep:b + L] = loss[:, keep:]
    return out


def _probe_scores(config: Config, model, data: Tensor, bos: bool, *,
                  configure: Callable[[int], str] | None = None) -> dict:
    """Loss and hit rate on the second copy (and loss on the first) per probe.

    ``configure(window_length) -> evaluation`` sets up an extension for a
    window of that length and says how to read it.
    """
    a, k = config.probe_offset, config.probe_length
    second_loss, second_hit, first_loss = [], [], []
    for distance in config.probe_distances:
        inputs, targets = _split(_probe_rows(config, data, distance), bos)
        evaluation = "full" if configure is None else configure(inputs.shape[1])
        loss, hit = position_losses(model, inputs, targets, evaluation=evaluation,
                                    chunk=config.dynamic_chunk, batch_size=config.eval_batch,
                                    needed=[(a, a + k), (a + distance, a + distance + k)])
        # The first symbol of a copy cannot be predicted; score the other k - 1.
        second = slice(a + distance + 1, a + distance + k)
        second_loss.append(loss[:, second].mean(1))
        second_hit.append(hit[:, second].float().mean(1))
        first_loss.append(loss[:, a + 1:a + k].mean(1))
    stack = lambda xs: torch.stack(xs, 1).numpy()  # noqa: E731  (probes, distances)
    return {"second_loss": stack(second_loss), "second_acc": stack(second_hit),
            "first_loss": stack(first_loss)}


def retrieval_grid(config: Config) -> dict:
    """The retrieval task's fixed test items
    (:func:`posenc_lib.retrieval.position_grid`): ``retrieval_items`` per
    (item length, distance band), identical for every model and seed.

    Returns:
        ``{"<length>:<band>": (inputs, answers, distances)}``.
    """
    grid = retrieval.position_grid(config.task, config.train_length, config.max_multiplier,
                                   config.retrieval_items)
    return {f"{n}:{band}": items for (n, band), items in grid.items()}


@torch.no_grad()
def retrieval_hits(model: lm.DecoderLM, inputs: Tensor, answers: Tensor, values: Sequence[int],
                   *, bos: bool = True, batch_size: int = 16) -> np.ndarray:
    """Whether the model's answer to each item is right: the value of the item
    (a token of ``values`` in its row) with the largest logit at the last
    position, one full pass per item (a multiple choice among the item's own
    values, so guessing scores ``1 / values in the item``).

    Args:
        inputs: ``(items, n)`` int64, the query last; answers: ``(items,)``.
        bos: whether the model reads :data:`~posenc_lib.lm.BOS` first; else
            position 0 holds a copy of position 1, whatever that is (filler,
            or a key when the item's first pair starts there).

    Returns:
        ``(items,)`` bool.
    """
    inputs = inputs.clone()
    if not bos:
        inputs[:, 0] = inputs[:, 1]
    device = next(model.parameters(), torch.empty(0)).device
    allowed = torch.zeros(inputs.shape[0], lm.VOCAB_SIZE, dtype=torch.bool)
    is_value = torch.zeros(lm.VOCAB_SIZE, dtype=torch.bool)
    is_value[list(values)] = True
    allowed.scatter_(1, inputs, is_value[inputs])
    out = []
    for b in range(0, inputs.shape[0], batch_size):
        logits = model(inputs[b:b + batch_size].to(device))[:, -1].float().cpu()
        pick = logits.masked_fill(~allowed[b:b + batch_size], float("-inf")).argmax(-1)
        out.append(pick == answers[b:b + batch_size])
    return torch.cat(out).numpy()


def _retrieval_scores(config: Config, model, grid: dict, bos: bool, *,
                      configure: Callable[[int], None] | None = None) -> dict:
    out = {}
    for cell, (inputs, answers, _) in grid.items():
        if configure is not None:
            configure(inputs.shape[1])
        out[cell] = retrieval_hits(model, inputs, answers, config.task_values, bos=bos,
                                   batch_size=config.eval_batch)
    return out


def _evaluate_unit(config: Config, model, unit: str, eval_rows: Tensor, eval_data: Tensor,
                   bos: bool, grid: dict | None = None) -> dict:
    """One cached unit of evaluation: ``"full"``, ``"sliding"``, ``"probe"``,
    ``"retrieval"``, ``"ext:<name>"``, ``"probe:<name>"`` or ``"retrieval:<name>"``."""
    L, size = config.train_length, config.bucket
    if unit == "retrieval":
        return _retrieval_scores(config, model, grid, bos)
    if unit == "full":
        loss, _ = position_losses(model, *_split(eval_rows, bos), batch_size=config.eval_batch)
        return {"loss": _buckets(loss, size)}
    if unit == "sliding":
        return {"loss": _buckets(_sliding_losses(config, model, eval_rows, bos), size)}
    if unit == "probe":
        return _probe_scores(config, model, eval_data, bos)
    kind, name = unit.split(":")
    extension, scheme = EXTENSIONS[name], model.scheme
    try:
        if kind == "probe":
            def configure(length):
                extension.configure(scheme, max(1.0, length / L), L)
                return extension.evaluation
            return _probe_scores(config, model, eval_data, bos, configure=configure)
        if kind == "retrieval":
            return _retrieval_scores(config, model, grid, bos, configure=lambda n: (
                extension.configure(scheme, max(1.0, n / L), L)))
        out = {}
        factors = config.factors if extension.scaled else (config.max_multiplier,)
        for factor in factors:
            extension.configure(scheme, float(factor), L)
            inputs, targets = _split(eval_rows[:, :factor * L + 1], bos)
            loss, _ = position_losses(model, inputs, targets, evaluation=extension.evaluation,
                                      chunk=config.dynamic_chunk, batch_size=config.eval_batch)
            out[str(factor * L)] = _buckets(loss, size)
        return out
    finally:
        scheme.set_scaling("default")
        scheme.__dict__.pop("attention_hooks", None)   # an extension may replace it


# -- running the study ----------------------------------------------------------------

def _environment(device: torch.device, world_size: int) -> dict:
    from .. import __version__

    return {"posenc_lib": __version__, "torch": torch.__version__,
            "python": platform.python_version(), "platform": platform.platform(),
            "threads": torch.get_num_threads(), "device": str(device),
            "device_name": (torch.cuda.get_device_name(device) if device.type == "cuda"
                            else platform.processor() or platform.machine()),
            "world_size": world_size}


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


def _save(obj, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}")
    torch.save(obj, tmp)
    os.replace(tmp, path)   # atomic: an interrupted run never leaves half a file


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


def _load_or_run(checkpoint: Path | None, build: Callable, train: Callable, device):
    """A model from its checkpoint (``build()`` then the stored weights), or
    ``train()`` and store it."""
    if checkpoint is not None and checkpoint.is_file():
        saved = torch.load(checkpoint, map_location="cpu", weights_only=False)
        model = build()
        model.load_state_dict(saved["state_dict"])
        return model.to(device).eval(), saved["log"]
    model, log = train()
    if checkpoint is not None:
        state = {k: v.cpu() for k, v in model.state_dict().items()}
        _save({"state_dict": state, "log": log}, checkpoint)
    return model, log


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


def _distributed(device: str | None) -> tuple[int, int, torch.device]:
    """``(rank, world_size, device)``; joins the process group under torchrun."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(device)
    if world == 1:
        return 0, 1, device
    import torch.distributed as dist

    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", _local_gpu(int(os.environ.get("LOCAL_RANK", "0")),
                                                 torch.cuda.device_count()))
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        import datetime

        # Ranks may finish hours apart; the final gather must wait for all.
        # gloo even on GPUs: the only collective is that gather of Python
        # objects (through the CPU), and NCCL cannot put two ranks on one GPU.
        dist.init_process_group(backend="gloo", timeout=datetime.timedelta(hours=24))
    return dist.get_rank(), dist.get_world_size(), device


def _local_gpu(local_rank: int, gpus: int) -> int:
    """The GPU of a process: local rank ``k`` takes GPU ``k mod gpus``, so that
    several processes share each GPU when there are more processes than GPUs
    (``torchrun --nproc_per_node 8`` on one GPU: all eight on ``cuda:0``)."""
    if gpus < 1:
        raise ValueError("device: cuda was asked for, but no GPU is visible; pass "
                         "--device cpu")
    return int(local_rank) % int(gpus)


def _share(config: Config, jobs: list, world: int) -> list[list[int]]:
    """Job indices per rank: longest first, each to the least loaded rank.

    A RoPE job also evaluates every extension; count it as
    ``1 + len(extensions) / 4`` trainings (measured: about that)."""
    cost = [1 + ((len(config.extensions) + 3 * len(config.finetunes)) / 4
                 if name == "rope" else 0) for name, _ in jobs]
    load, share = [0.0] * world, [[] for _ in range(world)]
    for i in sorted(range(len(jobs)), key=lambda i: (-cost[i], i)):
        rank = min(range(world), key=lambda r: (load[r], r))
        share[rank].append(i)
        load[rank] += cost[i]
    return [sorted(s) for s in share]


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
    # seed by seed: an interrupted run has whole seeds done first
    jobs = [(name, seed) for seed in config.seeds for name in config.models]
    mine = [(i, jobs[i]) for i in _share(config, jobs, world)[rank]]
    bar = None
    if progress and rank == 0:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(mine), desc="models", file=sys.stderr)
    done = {}
    for index, (name, seed) in mine:
        if bar is not None:
            bar.set_postfix_str(f"{name} seed {seed}")
        done[index] = _run_job(config, name, seed, data, cache_dir, device, bar is not None)
        if bar is not None:
            bar.update()
    if bar is not None:
        bar.close()
    if world > 1:
        import torch.distributed as dist

        gathered = [None] * world
        dist.all_gather_object(gathered, done)
        done = {k: v for part in gathered for k, v in part.items()}
        if rank != 0:
            return None
    jobs_done = {jobs[i]: done[i] for i in sorted(done)}
    results = _assemble(config, jobs_done)
    results.update({
        "environment": _environment(device, world),
        "data": {"train_bytes": train.numel(), "eval_bytes": held_out.numel(),
                 "train_sha256": train_sha, "eval_sha256": eval_sha},
        "wall_time_s": round(time.perf_counter() - start, 1),
    })
    return results


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


#: The reader panel's results (:func:`reader_results`), beside ``results/retrieval.json``.
READERS_PATH = _ROOT / "results" / "retrieval_readers.json"
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
    """Load ``results/retrieval_readers.json`` and refuse it (``ValueError``)
    if another schema version or configuration made it, or if the grid that
    ``config`` generates here has other items than the one it was computed
    on (its digest). Write it with ``python -m posenc_lib experiment
    --readers``."""
    config = Config() if config is None else config
    results = json.loads(Path(path).read_text())
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


def _refuse_stale(results: Mapping, path, config: Config, schema_version: int) -> None:
    """Raise ``ValueError`` unless ``results`` (read from ``path``) carry
    ``schema_version`` and were produced by ``config``; every results file
    of a run is checked by this."""
    _stale.refuse_stale(results, path, config.hash(), schema_version)


def load_retrieval_results(path: str | Path = retrieval.RESULTS_PATH, *,
                           config: Config | None = None) -> dict:
    """:func:`posenc_lib.retrieval.load_results` with the study's
    configuration (default :class:`Config` ())."""
    return retrieval.load_results(path, config=Config() if config is None else config)


def load_results(path: str | Path = RESULTS_PATH, *, config: Config | None = None,
                 check_environment: bool = True) -> dict:
    """Load stored results and refuse them if they are stale.

    Stale means: another schema version, another configuration (default
    :class:`Config` ()), or, with ``check_environment``, other data bytes
    than the pinned corpus gives (its digest). The Python version is recorded
    but no longer checked: the data are the corpus's, not the interpreter's.

    Raises:
        ValueError: naming what differs.
    """
    config = Config() if config is None else config
    results = json.loads(Path(path).read_text())
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


class Interval(NamedTuple):
    """A mean and its confidence interval."""

    mean: float
    low: float
    high: float

    def excludes(self, value: float = 0.0) -> bool:
        return not self.low <= value <= self.high


class _TStatistic(NamedTuple):
    mean: float
    se: float       # standard error of the mean
    df: float       # degrees of freedom of its t distribution
    seed_se: float = math.nan   # the seed component alone (clustered only) ...
    seed_df: float = math.nan   # ... and its degrees of freedom, seeds - 1


def _difference(values, other) -> np.ndarray:
    x = np.asarray(values, dtype=np.float64)
    if other is not None:
        y = np.asarray(other, dtype=np.float64)
        if y.shape != x.shape:
            raise ValueError(f"other has shape {y.shape}, values {x.shape}: a paired "
                             "difference needs the same seeds and units")
        x = x - y
    if x.ndim != 2 or x.shape[1] < 1:
        raise ValueError(f"values must be (seeds, units), got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("values must be finite")
    return x


def _t_statistic(x: np.ndarray, clusters) -> _TStatistic:
    """The grand mean of ``x (seeds, units)``, its standard error and degrees of
    freedom: the seed component (per-seed means), plus, with ``clusters``, the
    component of the clusters of units (Satterthwaite's degrees of freedom,
    capped at the larger of ``seeds - 1`` and ``clusters - 1``: a variance
    estimated from ``G`` cluster totals has at most ``G - 1``)."""
    seeds, units = x.shape
    mean = float(x.mean())
    if clusters is None:
        if seeds < 2:
            raise ValueError("values need at least 2 seeds (rows) for a seed-level "
                             "interval; pass clusters to use the units instead")
        seed_var = x.mean(1).var(ddof=1) / seeds
        return _TStatistic(mean, math.sqrt(seed_var), float(seeds - 1))
    labels = np.asarray(clusters)
    if labels.shape != (units,):
        raise ValueError(f"clusters must hold one label per unit ({units}), got shape "
                         f"{labels.shape}")
    groups = np.unique(labels, return_inverse=True)[1]
    n_groups = int(groups.max()) + 1
    if n_groups < 2:
        raise ValueError("clusters must hold at least 2 distinct labels")
    # Units drawn in clusters: the cluster-robust variance of the mean over
    # units of the seed-averaged data, with the small-sample factor G / (G - 1).
    totals = np.bincount(groups, weights=x.mean(0) - mean, minlength=n_groups)
    unit_var = n_groups / (n_groups - 1) * (totals ** 2).sum() / units ** 2
    if seeds < 2:
        return _TStatistic(mean, math.sqrt(unit_var), float(n_groups - 1))
    # Both terms hold the seed-by-unit residual once; count it once (the
    # variance of a mean over a crossed two-way design, Owen 2007), and keep
    # the cluster term at 0 or above.
    residual = x - x.mean(1, keepdims=True) - x.mean(0, keepdims=True) + mean
    residual_var = ((residual ** 2).sum() / ((seeds - 1) * (units - 1))
                    if units > 1 else 0.0)
    seed_var = x.mean(1).var(ddof=1) / seeds
    cluster_var = max(0.0, unit_var - residual_var / (seeds * units))
    var = seed_var + cluster_var
    if var == 0.0:
        return _TStatistic(mean, 0.0, float(seeds - 1), 0.0, float(seeds - 1))
    df = var ** 2 / (seed_var ** 2 / (seeds - 1) + cluster_var ** 2 / (n_groups - 1))
    df = min(df, float(max(seeds - 1, n_groups - 1)))
    return _TStatistic(mean, math.sqrt(var), float(df), math.sqrt(seed_var),
                       float(seeds - 1))


def _half_width(t: _TStatistic, confidence: float) -> float:
    """Half the width of the t interval; a clustered one is never narrower
    than its seed component's own interval (``seeds - 1`` degrees of freedom)."""
    from scipy import stats

    half = float(stats.t.ppf(0.5 + confidence / 2, t.df)) * t.se
    if not math.isnan(t.seed_se):
        seed_half = float(stats.t.ppf(0.5 + confidence / 2, t.seed_df)) * t.seed_se
        half = max(half, seed_half)
    return half


def interval(values, other=None, *, confidence: float = 0.95,
             clusters=None, n_resamples: int | None = None,
             seed: int | None = None) -> Interval:
    """Mean of ``values - other`` (or of ``values``) with a t confidence interval.

    Args:
        values, other: ``(seeds, units)`` arrays on the same units (windows)
            and seeds, so the difference is paired.
        confidence: the interval's nominal coverage, in (0, 1).
        clusters: ``None``: the units are fixed, and the interval is the
            seed-level t-interval of the per-seed means (``seeds - 1`` degrees
            of freedom): it answers "on these units, over training seeds".
            Or one label per unit (the file a window comes from): the units
            are a sample of clusters, and the variation between clusters is
            added to the seed component (crossed seeds x clusters, with
            Satterthwaite's degrees of freedom, capped at the larger of
            ``seeds - 1`` and ``clusters - 1``). The result is never narrower
            than the seed component's own t-interval. One seed needs
            ``clusters``.
        n_resamples, seed: deprecated and ignored (nothing is resampled);
            passing either raises a :class:`DeprecationWarning`.

    The seed-level interval is exact for normal per-seed means, whatever the
    number of seeds; the clustered one is approximate (its coverage is
    simulated in ``tests/test_experiment.py``). Nothing is resampled, so
    neither depends on a random seed. For 0/1 outcomes use
    :func:`accuracy_interval`.
    """
    if n_resamples is not None or seed is not None:
        import warnings

        warnings.warn("interval: n_resamples and seed are ignored (nothing is "
                      "resampled); drop them", DeprecationWarning, stacklevel=2)
    confidence = _confidence(confidence)
    t = _t_statistic(_difference(values, other), clusters)
    half = _half_width(t, confidence)
    return Interval(t.mean, t.mean - half, t.mean + half)


def degrees_of_freedom(values, other=None, *, clusters=None) -> float:
    """The degrees of freedom of :func:`interval`'s t quantile for the same
    arguments (``seeds - 1`` without ``clusters``; with them, Satterthwaite's,
    capped at the larger of ``seeds - 1`` and ``clusters - 1``)."""
    return _t_statistic(_difference(values, other), clusters).df


def _confidence(confidence) -> float:
    confidence = _validate.finite_float("confidence", confidence, greater_than=0.0)
    if not confidence < 1:
        raise ValueError(f"confidence must be < 1, got {confidence}")
    return confidence


def p_value(values, other=None, *, clusters=None) -> float:
    """Two-sided p-value of "the mean of ``values - other`` is 0", from the same
    t statistic as :func:`interval` (so ``p < 1 - confidence`` exactly when
    the interval excludes 0; a clustered test also needs its seed component
    to reject, since the interval is never narrower than that one's)."""
    from scipy import stats

    t = _t_statistic(_difference(values, other), clusters)
    if t.se == 0.0:
        return 1.0 if t.mean == 0.0 else 0.0
    p = float(2 * stats.t.sf(abs(t.mean) / t.se, t.df))
    if not math.isnan(t.seed_se):
        seed_p = (1.0 if t.mean == 0.0 else 0.0) if t.seed_se == 0.0 else float(
            2 * stats.t.sf(abs(t.mean) / t.seed_se, t.seed_df))
        p = max(p, seed_p)
    return p


def _outcomes(name: str, values) -> np.ndarray:
    x = np.asarray(values)
    if x.ndim < 2 or x.shape[-2] < 2 or x.shape[-1] < 2:
        raise ValueError(f"{name} must be (seeds, items) with at least 2 of each, got "
                         f"shape {x.shape}")
    if not np.isin(x, (0, 1)).all():
        raise ValueError(f"{name} must hold 0/1 outcomes (1: a right answer)")
    return x.astype(np.float64)


def _crossed(x: np.ndarray):
    """Variance of the grand mean of ``x (..., seeds, items)`` when both seeds
    and items are draws (crossed random effects, Owen 2007): the seed
    component (the per-seed means' variance over ``seeds``) and the item
    component (the per-item means' variance over ``items``, less the
    residual counted in both, kept at 0 or above), each with its degrees of
    freedom."""
    seeds, items = x.shape[-2:]
    mean = x.mean((-2, -1))
    by_seed, by_item = x.mean(-1), x.mean(-2)
    seed_var = by_seed.var(-1, ddof=1) / seeds
    residual = x - by_seed[..., None] - by_item[..., None, :] + mean[..., None, None]
    residual_var = (residual ** 2).sum((-2, -1)) / ((seeds - 1) * (items - 1))
    item_var = np.maximum(0.0, by_item.var(-1, ddof=1) / items
                          - residual_var / (seeds * items))
    var = seed_var + item_var
    with np.errstate(divide="ignore", invalid="ignore"):
        df = var ** 2 / (seed_var ** 2 / (seeds - 1) + item_var ** 2 / (items - 1))
    # Satterthwaite lies between the components' degrees of freedom; with no
    # variance at all, count the seeds alone.
    df = np.where(var > 0, np.clip(df, seeds - 1, seeds + items - 2), seeds - 1)
    return mean, var, df


def _accuracy_bounds(x: np.ndarray, y: np.ndarray | None, confidence: float):
    """``(mean, low, high, se, df)`` of :func:`accuracy_interval`, for arrays
    ``(..., seeds, items)`` (vectorised: the coverage test draws thousands)."""
    from scipy import special, stats

    seeds, items = x.shape[-2:]
    n = seeds * items
    if y is None:
        p, var, df = _crossed(x)
        q = stats.t.ppf(0.5 + confidence / 2, df)
        binomial = p * (1 - p) / n
        # Wilson's score interval on the effective sample size n / deff,
        # deff = var / binomial (at least 1: never narrower than n
        # independent answers; with p at 0 or 1 there is nothing to estimate
        # deff from, and n is used).
        with np.errstate(divide="ignore", invalid="ignore"):
            n_eff = np.where(var > binomial, binomial * n / var, n)
        centre = (p + q ** 2 / (2 * n_eff)) / (1 + q ** 2 / n_eff)
        half = q / (1 + q ** 2 / n_eff) * np.sqrt(p * (1 - p) / n_eff
                                                  + q ** 2 / (4 * n_eff ** 2))
        # (Wilson's interval holds p; say so against rounding at p = 0 or 1)
        low, high = np.minimum(centre - half, p), np.maximum(centre + half, p)
        # Near 0 or 1 the mean of a few seeds' accuracies is skewed; the
        # interval on the logit scale (delta method, the proportion moved
        # towards 1/2 as Wilson's centre is) is wider on the open side, and
        # the union of the two is kept.
        adjusted = (p * n + q ** 2 / 2) / (n + q ** 2)
        spread = adjusted * (1 - adjusted)
        logit_se = np.sqrt(np.maximum(var, spread / n)) / spread
        low = np.minimum(low, special.expit(special.logit(adjusted) - q * logit_se))
        high = np.maximum(high, special.expit(special.logit(adjusted) + q * logit_se))
        se = np.sqrt(np.maximum(var, binomial))
        return p, np.clip(low, 0.0, 1.0), np.clip(high, 0.0, 1.0), se, df
    return _paired_bounds(x, y, confidence)


def _paired_bounds(x: np.ndarray, y: np.ndarray, confidence: float):
    """The seed-level paired interval of :func:`accuracy_interval` for
    ``x (..., seeds, items_x)`` and ``y (..., seeds, items_y)``: a t interval
    (``seeds - 1`` degrees of freedom) on the per-seed differences of
    accuracies, its variance at least the within-seed sampling variance of
    those differences (so that seeds which happen to agree exactly do not
    give a zero width)."""
    from scipy import stats

    seeds = x.shape[-2]
    nx, ny = x.shape[-1], y.shape[-1]
    per_seed = x.mean(-1) - y.mean(-1)                     # (..., seeds)
    d = per_seed.mean(-1)
    var = per_seed.var(-1, ddof=1) / seeds
    if nx == ny:
        # paired by item: a difference of 0/1 outcomes lies in {-1, 0, 1},
        # its variance at most its mean square, the share of discordant
        # items (moved off 0 by one discordance in n + 2, as Agresti and
        # Caffo 2000 move a proportion)
        discordant = (x != y).sum(-1)
        within = (discordant + 1) / (nx + 2) / nx
    else:
        px = (x.sum(-1) + 1) / (nx + 2)
        py = (y.sum(-1) + 1) / (ny + 2)
        within = px * (1 - px) / nx + py * (1 - py) / ny
    floor = within.mean(-1) / seeds
    se = np.sqrt(np.maximum(var, floor))
    df = np.full(np.shape(d), float(seeds - 1))
    half = stats.t.ppf(0.5 + confidence / 2, df) * se
    return d, np.clip(d - half, -1.0, 1.0), np.clip(d + half, -1.0, 1.0), se, df


def accuracy_interval(correct, other=None, *, confidence: float = 0.95) -> Interval:
    """Accuracy (or a paired difference of accuracies) with a confidence
    interval made for 0/1 outcomes.

    Args:
        correct: ``(seeds, items)`` 0/1 outcomes (1: a right answer) of
            training seeds on test items, at least 2 of each.
        other: ``None``, or the outcomes of another model (or band) on the
            same seeds, ``(seeds, items')``: the interval is then that of the
            difference ``correct - other``, paired by seed (the items may be
            other items, and as many or not).
        confidence: nominal coverage, in (0, 1).

    **One accuracy.** The target is the expected accuracy over training
    seeds *and* items drawn as the test items were: the variance of the mean
    is that of a crossed seeds x items design (Owen 2007). The interval is
    Wilson's score interval on the effective sample size that this variance
    implies, with a t quantile (Satterthwaite's degrees of freedom, at least
    ``seeds - 1``), joined with the logit-scale interval; it stays inside
    [0, 1] and is never of zero width (a perfect score is not certainty).
    Its coverage under a logistic model with seed and item effects (item
    effect 1 on the logit scale, 5 seeds) is simulated in
    ``tests/test_experiment.py`` at the study's band sizes, 128 to 512
    items: at least 0.92 for seed effects up to 1; for seed effects of 2
    (seeds whose accuracies range from about 1/2 to 1) it falls to about
    0.85 near the ceiling (centre 0.99), which five seeds cannot avoid
    without a far wider interval.

    **A difference.** The target is the expected difference over training
    seeds *on these items*: a t interval with ``seeds - 1`` degrees of
    freedom on the per-seed differences of accuracies, so that what a seed
    does to both models (they share initial weights and batches) cancels.
    Its variance is at least the within-seed sampling variance of a
    difference (paired by item where the items are the same), so it is never
    of zero width. Its coverage is simulated in ``tests/test_experiment.py``
    (5 seeds, 128 to 512 items, seed effects up to 2, collapsed seeds): at
    least 0.94 where the true difference is 0, at least 0.91 elsewhere
    without collapses, at least 0.86 where seeds of both models collapse to
    chance (probability 0.2 each); a seed that collapses in one model only,
    with probability 0.2, is missed by all five seeds a third of the time,
    and then no interval from them covers (simulated: 0.65 to 0.88).

    Returns:
        ``Interval(mean, low, high)``.
    """
    confidence = _confidence(confidence)
    x = _outcomes("correct", correct)
    if x.ndim != 2:
        raise ValueError(f"correct must be (seeds, items), got shape {x.shape}")
    y = None
    if other is not None:
        y = _outcomes("other", other)
        if y.ndim != 2 or y.shape[0] != x.shape[0]:
            raise ValueError(f"other has shape {y.shape}, correct {x.shape}: a paired "
                             "difference needs the same seeds (rows)")
    mean, low, high, _, _ = _accuracy_bounds(x, y, confidence)
    return Interval(float(mean), float(low), float(high))


def accuracy_p_value(correct, other) -> float:
    """Two-sided p-value of "the accuracies of ``correct`` and ``other`` are
    equal", from the same t statistic as :func:`accuracy_interval` of the
    difference (``seeds - 1`` degrees of freedom), so ``p < 1 - confidence``
    exactly when that interval excludes 0."""
    from scipy import stats

    x, y = _outcomes("correct", correct), _outcomes("other", other)
    if x.ndim != 2 or y.ndim != 2 or y.shape[0] != x.shape[0]:
        raise ValueError(f"correct {x.shape} and other {y.shape} must be (seeds, items) "
                         "with the same seeds (rows)")
    d, _, _, se, df = _paired_bounds(x, y, 0.95)
    if float(d) == 0.0:
        return 1.0
    return float(2 * stats.t.sf(abs(float(d)) / float(se), float(df)))


def holm_levels(p_values: Sequence[float], alpha: float = 0.05) -> list[float]:
    """The confidence level at which Holm's method (:func:`holm`) tests each
    hypothesis: ``1 - alpha / (m - k)`` at step ``k`` for those it rejects,
    and the level of the first step that stopped it for the rest. An interval
    at that level excludes 0 exactly when Holm rejects, so printed intervals
    and verdicts cannot disagree. They are not simultaneous confidence
    intervals."""
    alpha = _validate.finite_float("alpha", alpha, greater_than=0.0)
    reject = holm(p_values, alpha)
    p, m = [float(v) for v in p_values], len(p_values)
    levels = [math.nan] * m
    stop = None
    for k, i in enumerate(sorted(range(m), key=lambda i: p[i])):
        if reject[i]:
            levels[i] = 1 - alpha / (m - k)
        else:
            stop = 1 - alpha / (m - k) if stop is None else stop
            levels[i] = stop
    return levels


def holm(p_values: Sequence[float], alpha: float = 0.05) -> list[bool]:
    """Holm's step-down method: which of the hypotheses to reject so that the
    probability of any false rejection among them is at most ``alpha``.

    The ``k``-th smallest p-value (from 0) is compared with
    ``alpha / (m - k)``, stopping at the first that exceeds it (S. Holm, "A
    simple sequentially rejective multiple test procedure", Scandinavian
    Journal of Statistics 6 (1979) 65-70).
    """
    alpha = _validate.finite_float("alpha", alpha, greater_than=0.0)
    p = [float(v) for v in p_values]
    if any(not 0.0 <= v <= 1.0 for v in p):
        raise ValueError(f"p_values must lie in [0, 1], got {p}")
    reject, m = [False] * len(p), len(p)
    for k, i in enumerate(sorted(range(m), key=lambda i: p[i])):
        if p[i] > alpha / (m - k):
            break
        reject[i] = True
    return reject


class Comparison(NamedTuple):
    """``a`` minus ``b`` in mean loss (nats per byte) over one position band.

    ``p`` is the two-sided p-value of a zero difference; ``rejected`` is set
    by :func:`adjust` when the comparison is one of a family (``None``: the
    interval alone decides)."""

    a: str
    b: str
    band: tuple
    difference: Interval
    p: float = math.nan
    rejected: bool | None = None

    @property
    def verdict(self) -> str:
        """``"lower"`` / ``"higher"`` if the difference is declared non-zero
        (by the family's Holm test, or else by the interval excluding 0),
        otherwise ``"not distinguishable here"``."""
        d = self.difference
        nonzero = d.excludes(0.0) if self.rejected is None else self.rejected
        if not nonzero:
            return "not distinguishable here"
        return "lower" if d.mean < 0 else "higher"

    @property
    def ratio(self) -> Interval:
        """The perplexity ratio ``ppl_a / ppl_b = exp(difference)`` with its interval."""
        return Interval(*(math.exp(v) for v in self.difference))


def adjust(comparisons: Sequence[Comparison], alpha: float = 0.05) -> list[Comparison]:
    """The ``comparisons`` as one family: each verdict from Holm's method
    (:func:`holm`) over all their p-values, so that the chance of any false
    "lower" or "higher" among them is at most ``alpha``."""
    comparisons = list(comparisons)
    if any(math.isnan(c.p) for c in comparisons):
        raise ValueError("comparisons need p-values (from compare)")
    reject = holm([c.p for c in comparisons], alpha)
    return [c._replace(rejected=r) for c, r in zip(comparisons, reject)]


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


# -- command line ---------------------------------------------------------------------

def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Train and evaluate the length-"
                                     "generalization experiment.")
    parser.add_argument("--out", type=Path, default=RESULTS_PATH,
                        help="where to write the JSON results (default: %(default)s)")
    parser.add_argument("--retrieval-out", type=Path, default=None,
                        help="where to write the retrieval results (default: "
                        "results/retrieval.json beside the default --out, else "
                        "--out with the suffix .retrieval.json)")
    parser.add_argument("--smoke", action="store_true", help="tiny configuration")
    parser.add_argument("--device", default=None,
                        help="torch device (default: cuda if available, else cpu)")
    parser.add_argument("--cache", type=Path, default=CACHE_DIR,
                        help="checkpoints and evaluations (default: %(default)s)")
    parser.add_argument("--no-cache", action="store_true", help="keep nothing on disk")
    parser.add_argument("--quiet", action="store_true", help="no progress output")
    parser.add_argument("--readers", action="store_true",
                        help="only write the reader panel on the retrieval grid "
                        "(results/retrieval_readers.json beside the default --out, else "
                        "--out with the suffix .readers.json); seconds, no training")
    args = parser.parse_args(argv)
    config = Config.smoke() if args.smoke else Config()
    readers_out = (READERS_PATH if args.out == RESULTS_PATH
                   else args.out.with_suffix(".readers.json"))
    if args.readers:
        write_results(reader_results(config), readers_out)
        return
    results = run(config, device=args.device, cache_dir=None if args.no_cache else args.cache,
                  progress=not args.quiet)
    if results is None:   # not rank 0
        return
    retrieval_out = args.retrieval_out
    if retrieval_out is None:
        retrieval_out = (RESULTS_PATH.with_name("retrieval.json") if args.out == RESULTS_PATH
                         else args.out.with_suffix(".retrieval.json"))
    write_results(results.pop("retrieval"), retrieval_out)
    write_results(results, args.out)
    write_results(reader_results(config), readers_out)
    if not args.quiet:
        print(f"wrote {args.out} (config {results['config_hash']}, "
              f"{results['wall_time_s']:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
