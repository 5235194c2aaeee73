"""The study's configuration: what is trained and how it is extended.

The trained models (:data:`MODELS`), the fine-tunes of the trained RoPE model
(:data:`FINETUNES`), the inference-time context extensions (:data:`EXTENSIONS`,
a registry: adding a method is one function and one entry), and
:class:`Config`, everything that determines the results, whose
:meth:`Config.hash` names a run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
from dataclasses import dataclass, field
from typing import Callable, Mapping

import torch

from ... import _validate, corpus, lm, retrieval, rope, scaling

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


#: How the item length of a retrieval training row is drawn
#: (``Config.task_lengths``): ``"varied"``, uniformly from the shortest
#: item that holds the row's distance to the longest that fits, so the
#: query's position varies; ``"fixed"``, always the longest, so every query
#: sits at the same position (a model can then learn where the query is
#: rather than how to find its key).
TASK_LENGTHS = ("varied", "fixed")


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
    turns = scaling.rotations(rope.inv_freq(head_dim, base, dtype=torch.float64), length)
    return float((turns < 1).double().mean())
