"""Can it retrieve? A passkey task, trained at ``L``, evaluated out to ``8L``.

Every sequence is random filler with two *passkeys* planted in it: each of
two fixed marker tokens is followed by a random value. The last input is one
of the two markers again (the query); the model must answer with the value
that followed that marker. Only the answer is scored, in training and in
evaluation. A model can answer by finding the earlier copy of the query
marker and reading the token after it (an induction head, which uses
positions), but it need not: fillers, values and markers are disjoint sets of
tokens, and a test item holds one pair per marker, so a reader that sees, for
each value, only the *set* of markers before it (no order, no distance)
answers every item. Chapter 7 runs such a reader; the task measures whether
a model learned it and keeps it on longer inputs, not whether it can find a
key by its position.

The models are those of :data:`posenc_lib.experiment.MODELS`, built by
:func:`posenc_lib.experiment.build_model` (same architecture, same shared
initial weights per seed), trained from scratch on this task alone with
sequences of ``train_length`` positions (:func:`train_batch`: 2 to
``max_pairs`` pairs per sequence, each repeat of a marker scored). They are
evaluated on fixed test items, identical for every model and seed, in four
bands of the *distance* ``D`` between the queried value and the query:
``0-L``, ``L-2L``, ``2L-4L`` and ``4L-8L``. An item of band ``[lo, hi)`` is
``hi`` positions long with the query last, so the distance and the item's
length grow together; band ``0-L`` has the training length but not the
training distribution (one pair per marker, where training sequences hold 2
to ``max_pairs`` pairs). The trained RoPE model is also read, without
fine-tuning, with the inference-time extensions of
:data:`posenc_lib.experiment.EXTENSIONS`, each set up for the item's length
(only the last position is scored, so ``"dynamic"`` reads an item in one
pass with the NTK scale ``hi / L``: exactly ``"ntk"`` set up for ``hi``).

Run the study with::

    torchrun --standalone --nproc_per_node 2 -m posenc_lib.retrieval

(or ``python -m posenc_lib.retrieval``). Finished (model, seed) jobs are kept
under ``.cache/retrieval/``, keyed by what determines them, so an
interrupted run resumes. ``--smoke`` runs every code path in seconds.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import torch

from . import _validate, experiment, lm

__all__ = ["Config", "BANDS", "RESULTS_PATH", "CACHE_DIR", "SCHEMA_VERSION", "bands",
           "band_names", "make_items", "train_batch", "eval_items", "train_model",
           "accuracy_on", "run", "load_results", "outcomes", "main", "PositionTask",
           "make_position_items", "order_free_accuracy", "position_grid"]

#: Version of the results file's layout; :func:`load_results` refuses any other.
SCHEMA_VERSION = 2
RESULTS_PATH = experiment._ROOT / "results" / "retrieval.json"
CACHE_DIR = experiment._ROOT / ".cache" / "retrieval"
# Bump when training or evaluation code changes what it computes.
_TRAIN_CODE_VERSION = 1
_EVAL_CODE_VERSION = 1
#: Names of the distance bands, for ``max_multiplier`` 8.
BANDS = ("0-L", "L-2L", "2L-4L", "4L-8L")


@dataclass(frozen=True)
class Config:
    """Everything that determines the results. Its :meth:`hash` names the run.

    Token ids lie in the byte range of :data:`posenc_lib.lm.VOCAB_SIZE`, so
    the models are exactly those of the perplexity study: ``filler_symbols``
    fill the sequence, ``value_symbols`` are the passkeys, ``markers`` are
    the two keys.
    """

    models: tuple = ("nope", "sinusoidal", "learned", "t5", "alibi", "rope", "xpos")
    extensions: tuple = ("pi", "ntk", "yarn", "dynamic")
    seeds: tuple = (0, 1, 2)
    train_length: int = 64
    max_multiplier: int = 8
    filler_symbols: tuple = tuple(range(0, 32))
    value_symbols: tuple = tuple(range(64, 96))
    markers: tuple = (128, 129)
    max_pairs: int = 8
    test_items: int = 128
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    batch_size: int = 16
    steps: int = 2000
    lr: float = 3e-3
    warmup: int = 100
    weight_decay: float = 0.01
    t5_num_buckets: int = 16
    t5_max_distance: int = 32
    rope_base: float = 10000.0
    xpos_scale_base: float = 32.0
    threads: int = 1
    eval_batch: int = 32
    dynamic_chunk: int = 16
    log_every: int = 100

    def __post_init__(self):
        L = _validate.positive_int("train_length", self.train_length, minimum=8)
        m = _validate.positive_int("max_multiplier", self.max_multiplier, minimum=2)
        if m & (m - 1):
            raise ValueError(f"max_multiplier must be a power of 2, got {m}")
        _validate.positive_int("steps", self.steps)
        _validate.positive_int("test_items", self.test_items)
        if not self.seeds:
            raise ValueError("seeds must hold at least one seed")
        for name in self.models:
            _validate.one_of("models", name, list(experiment.MODELS))
        for name in self.extensions:
            _validate.one_of("extensions", name, list(experiment.EXTENSIONS))
        if self.extensions and "rope" not in self.models:
            raise ValueError("extensions need the 'rope' model in models")
        if len(self.markers) != 2 or len(set(self.markers)) != 2:
            raise ValueError(f"markers must be two distinct tokens, got {self.markers}")
        groups = (self.filler_symbols, self.value_symbols, self.markers)
        tokens = [t for g in groups for t in g]
        if len(set(tokens)) != len(tokens) or not all(
                0 <= t < lm.BOS for t in tokens):
            raise ValueError("filler_symbols, value_symbols and markers must be distinct "
                             f"token ids in [0, {lm.BOS})")
        if len(self.value_symbols) < 2 or not self.filler_symbols:
            raise ValueError("value_symbols needs two symbols and filler_symbols one")
        pairs = _validate.positive_int("max_pairs", self.max_pairs, minimum=2)
        if 2 * pairs > L - 2:
            raise ValueError(f"max_pairs ({pairs}) must be at most (train_length - 2) / 2")
        if L % self.dynamic_chunk:
            raise ValueError(f"dynamic_chunk ({self.dynamic_chunk}) must divide "
                             f"train_length ({L})")

    @classmethod
    def smoke(cls) -> "Config":
        """A tiny configuration of the same code, for tests (seconds)."""
        return cls(models=("nope", "alibi", "rope"), extensions=("pi", "dynamic"),
                   seeds=(0, 1), train_length=16, max_multiplier=4, max_pairs=3,
                   test_items=6,
                   d_model=16, n_layers=1, n_heads=2, batch_size=4, steps=6, warmup=2,
                   t5_num_buckets=8, t5_max_distance=8, xpos_scale_base=8.0,
                   eval_batch=4, dynamic_chunk=4, log_every=2)

    @property
    def eval_length(self) -> int:
        """The longest test item, ``max_multiplier · train_length`` positions."""
        return self.max_multiplier * self.train_length

    def to_dict(self) -> dict:
        """The configuration as plain JSON values (tuples become lists)."""
        return json.loads(json.dumps(dataclasses.asdict(self)))

    @classmethod
    def from_dict(cls, values: Mapping) -> "Config":
        """The configuration that :meth:`to_dict` describes."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise ValueError(f"values: unknown configuration fields {unknown}")
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})

    def hash(self) -> str:
        """SHA-256 of the canonical JSON of the configuration (first 16 hex digits)."""
        return experiment._digest(self.to_dict())


def bands(config: Config) -> list[tuple[int, int]]:
    """The distance bands ``[lo, hi)``: ``[0, L)``, then doublings up to ``8L``."""
    L, out, lo = config.train_length, [], 0
    hi = L
    while hi <= config.eval_length:
        out.append((lo, hi))
        lo, hi = hi, 2 * hi
    return out


def band_names(config: Config) -> list[str]:
    """``"0-L"``, ``"L-2L"``, ... for :func:`bands`."""
    L = config.train_length

    def at(p):
        return "0" if p == 0 else "L" if p == L else f"{p // L}L"

    return [f"{at(lo)}-{at(hi)}" for lo, hi in bands(config)]


# -- the task -------------------------------------------------------------------------

def make_items(config: Config, n: int, count: int, generator: torch.Generator, *,
               distances: Sequence[int] | torch.Tensor | None = None,
               bos: bool = True) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``count`` passkey sequences of ``n`` positions.

    Each holds the two markers, each followed by a random value, in random
    order at random places among random filler; its last input is a marker
    (the query, chosen at random). The *distance* ``D`` is the query's
    position minus the position of the value it asks for.

    Args:
        n: positions per sequence (the query sits at ``n - 1``).
        distances: ``(count,)`` distances in ``[1, n - 3]``; default: uniform
            in that range.
        bos: whether position 0 holds :data:`posenc_lib.lm.BOS` (else filler).

    Returns:
        ``inputs (count, n)`` int64, ``answers (count,)`` int64 and
        ``distances (count,)`` int64.
    """
    n = _validate.positive_int("n", n, minimum=8)
    count = _validate.positive_int("count", count)
    g = generator
    filler = torch.tensor(config.filler_symbols)
    values = torch.tensor(config.value_symbols)
    inputs = filler[torch.randint(0, len(filler), (count, n), generator=g)]
    if bos:
        inputs[:, 0] = lm.BOS
    if distances is None:
        distances = torch.randint(1, n - 2, (count,), generator=g)
    distances = torch.as_tensor(distances, dtype=torch.long)
    if distances.shape != (count,) or distances.min() < 1 or distances.max() > n - 3:
        raise ValueError(f"distances must be {count} integers in [1, {n - 3}]")
    answers = torch.empty(count, dtype=torch.long)
    query = torch.randint(0, 2, (count,), generator=g)
    pair = values[torch.multinomial(torch.ones(count, len(values)), 2, generator=g)]
    for i in range(count):
        q = int(query[i])
        value_pos = n - 1 - int(distances[i])
        # The other marker's pair: any two free positions in [1, n - 1).
        free = [p for p in range(1, n - 2) if p + 1 < value_pos - 1 or p > value_pos]
        other = free[int(torch.randint(0, len(free), (1,), generator=g))]
        inputs[i, value_pos - 1] = config.markers[q]
        inputs[i, value_pos] = pair[i, 0]
        inputs[i, other] = config.markers[1 - q]
        inputs[i, other + 1] = pair[i, 1]
        inputs[i, n - 1] = config.markers[q]
        answers[i] = pair[i, 0]
    return inputs, answers, distances


def train_batch(config: Config, generator: torch.Generator, *,
                bos: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """One training batch: ``batch_size`` sequences of ``train_length`` positions.

    A sequence holds ``k`` (marker, value) pairs, ``k`` uniform in
    ``[2, max_pairs]``, at random places among random filler, and ends with
    a marker that occurred before (the query). Within a sequence each marker
    keeps the value of its first occurrence, so every later occurrence of a
    marker is a query too: its target is that value. With ``k = 2`` and two
    different markers, a sequence is a test item of :func:`make_items`; more
    pairs give more scored answers per sequence.

    Returns:
        ``inputs (batch, L)`` int64 and ``targets (batch, L)`` int64, -100
        (ignored) except at the queries.
    """
    g, n, count = generator, config.train_length, config.batch_size
    filler = torch.tensor(config.filler_symbols)
    values = torch.tensor(config.value_symbols)
    inputs = filler[torch.randint(0, len(filler), (count, n), generator=g)]
    if bos:
        inputs[:, 0] = lm.BOS
    targets = torch.full((count, n), -100, dtype=torch.long)
    ks = torch.randint(2, config.max_pairs + 1, (count,), generator=g)
    for i in range(count):
        k = int(ks[i])
        # k pair starts p_1 < ... < p_k with gaps >= 2 in [1, n - 3]
        q = torch.randperm(n - 2 - k, generator=g)[:k].sort().values + 1
        starts = (q + torch.arange(k)).tolist()
        which = torch.randint(0, 2, (k,), generator=g).tolist()
        value = values[torch.multinomial(torch.ones(len(values)), 2, generator=g)]
        for p, m in zip(starts, which):
            if m in which[:starts.index(p)]:
                targets[i, p] = value[m]
            inputs[i, p], inputs[i, p + 1] = config.markers[m], value[m]
        m = which[int(torch.randint(0, k, (1,), generator=g))]
        inputs[i, n - 1], targets[i, n - 1] = config.markers[m], value[m]
    return inputs, targets


def eval_items(config: Config, band: int, bos: bool = True):
    """The fixed test items of ``band`` (an index into :func:`bands`):
    ``test_items`` sequences of ``hi`` positions, distances uniform in
    ``[max(lo, 1), hi - 3]``; the same for every model and seed."""
    lo, hi = bands(config)[band]
    g = torch.Generator().manual_seed(7_000 + band)
    distances = torch.randint(max(lo, 1), hi - 2, (config.test_items,), generator=g)
    inputs, answers, distances = make_items(config, hi, config.test_items, g,
                                            distances=distances)
    if not bos:   # the same items, with filler where BOS was
        inputs = inputs.clone()
        inputs[:, 0] = config.filler_symbols[0]
    return inputs, answers, distances


# -- a task that needs positions ------------------------------------------------------

@dataclass(frozen=True)
class PositionTask:
    """A retrieval task that an order-free reader cannot solve (not yet trained
    on: the stored results are of :func:`make_items`' task).

    A sequence holds ``pairs`` (key, value) pairs among filler; the keys come
    from ``keys``, a few similar tokens, and *every* key occurs in the first
    ``len(keys)`` pairs (a preamble), so the query key also occurs earlier,
    bound to another value: the strongest distractor, the key itself. The
    query is a key; the answer is the value that followed its *last*
    occurrence before the query (the most recent binding). The values of a
    sequence are distinct. The distance ``D`` (query position minus the
    answer's) and the sequence length ``n`` are chosen separately.

    An order-free reader fails: from the bag of tokens no value can be told
    from another (each key occurs at least once, each value once), and from
    the *set* of keys before each value (what :func:`order_free_accuracy`
    calls ``"prefix_sets"``) every value from the end of the preamble on looks
    alike, since all keys occurred before it.
    """

    keys: tuple = (128, 129, 130, 131)
    value_symbols: tuple = tuple(range(64, 96))
    filler_symbols: tuple = tuple(range(0, 32))
    pairs: int = 10

    def __post_init__(self):
        groups = (self.filler_symbols, self.value_symbols, self.keys)
        tokens = [t for g in groups for t in g]
        if len(set(tokens)) != len(tokens) or not all(0 <= t < lm.BOS for t in tokens):
            raise ValueError("filler_symbols, value_symbols and keys must be distinct "
                             f"token ids in [0, {lm.BOS})")
        if len(self.keys) < 2:
            raise ValueError(f"keys must hold at least 2 tokens, got {self.keys}")
        _validate.positive_int("pairs", self.pairs, minimum=len(self.keys) + 1)
        if self.pairs > len(self.value_symbols):
            raise ValueError(f"pairs ({self.pairs}) must be at most the number of "
                             f"value_symbols ({len(self.value_symbols)}): values are distinct")

    def after(self, distance: int) -> int:
        """How many pairs lie between the answer and the query at ``distance``:
        as many of the ``pairs - len(keys) - 1`` non-preamble pairs as fit."""
        return min(self.pairs - len(self.keys) - 1, (int(distance) - 1) // 2)

    def shortest(self, distance: int) -> int:
        """The fewest positions an item at ``distance`` needs: ``BOS``, the
        pairs before the answer's, the answer's pair, ``distance - 1``
        positions (holding :meth:`after` pairs) and the query."""
        before = self.pairs - 1 - self.after(distance)
        return 3 + int(distance) + 2 * before


def make_position_items(task: PositionTask, n: int, distances, generator: torch.Generator,
                        *, bos: bool = True):
    """Items of :class:`PositionTask`, ``n`` positions each, the query last.

    Args:
        n: positions per item.
        distances: ``(count,)`` distances ``D`` (query position minus the
            answer's), each ``>= 1`` with ``task.shortest(D) <= n``.
        bos: position 0 holds :data:`posenc_lib.lm.BOS` (else filler).

    Returns:
        ``inputs (count, n)`` int64, ``answers (count,)`` int64 and
        ``distances (count,)`` int64.
    """
    n = _validate.positive_int("n", n, minimum=task.shortest(1))
    distances = torch.as_tensor(distances, dtype=torch.long).reshape(-1)
    if distances.numel() == 0 or distances.min() < 1 or any(
            task.shortest(int(d)) > n for d in distances):
        raise ValueError(f"distances must be >= 1 with task.shortest(D) <= n ({n})")
    g, k = generator, len(task.keys)
    filler = torch.tensor(task.filler_symbols)
    count = distances.numel()
    inputs = filler[torch.randint(0, len(filler), (count, n), generator=g)]
    if bos:
        inputs[:, 0] = lm.BOS
    answers = torch.empty(count, dtype=torch.long)
    for i, d in enumerate(distances.tolist()):
        q = int(torch.randint(0, k, (1,), generator=g))
        values = torch.tensor(task.value_symbols)[
            torch.randperm(len(task.value_symbols), generator=g)[:task.pairs]]
        a = n - 1 - d                       # the answer's position; its key at a - 1
        after = task.after(d)
        # the pairs before the answer's: the first k (in position order) are
        # the preamble, every key once in random order; the others any key
        before = _pair_starts(1, a - 1, task.pairs - 1 - after, g)
        order = torch.randperm(k, generator=g).tolist()
        placed = [(p, order[j] if j < k else int(torch.randint(0, k, (1,), generator=g)))
                  for j, p in enumerate(before)]
        # between the answer and the query: any key but the query's, so the
        # answer stays the query's last binding
        others = [j for j in range(k) if j != q]
        placed += [(p, others[int(torch.randint(0, k - 1, (1,), generator=g))])
                   for p in _pair_starts(a + 1, n - 1, after, g)]
        placed.append((a - 1, q))
        for (p, key), value in zip(sorted(placed), values.tolist()):
            inputs[i, p], inputs[i, p + 1] = task.keys[key], value
        inputs[i, n - 1] = task.keys[q]
        answers[i] = inputs[i, a]
    return inputs, answers, distances


def _pair_starts(lo: int, hi: int, count: int, g: torch.Generator) -> list[int]:
    """``count`` starts ``p`` of non-overlapping pairs ``(p, p + 1)`` inside
    ``[lo, hi)``, uniform over all such placements: ``count`` sorted draws
    ``c_j`` from ``[0, hi - lo - count)``, shifted to ``lo + c_j + j``."""
    if count == 0:
        return []
    if 2 * count > hi - lo:
        raise ValueError(f"no room for {count} pairs in [{lo}, {hi})")
    c = torch.randperm(hi - lo - count, generator=g)[:count].sort().values
    return (lo + c + torch.arange(count)).tolist()


def position_grid(task: PositionTask, train_length: int, max_multiplier: int,
                  count: int, *, seed: int = 8_000) -> dict:
    """Fixed test items of :class:`PositionTask` on a grid of item lengths by
    distance bands, so that each is varied with the other held: lengths
    ``L, 2L, ..., max_multiplier L`` and the bands of :func:`bands`
    (distances ``[max(lo, 1), hi)``, less those too long for the length).

    Returns:
        ``{(length, band_name): (inputs, answers, distances)}`` for every
        cell where some distance of the band fits the length.
    """
    config = Config(train_length=train_length, max_multiplier=max_multiplier,
                    max_pairs=2, extensions=())
    out, lengths = {}, []
    n = train_length
    while n <= train_length * max_multiplier:
        lengths.append(n)
        n *= 2
    for i, n in enumerate(lengths):
        for b, ((lo, hi), name) in enumerate(zip(bands(config), band_names(config))):
            top = max((d for d in range(max(lo, 1), hi) if task.shortest(d) <= n),
                      default=None)
            if top is None:
                continue
            g = torch.Generator().manual_seed(seed + 100 * i + b)
            distances = torch.randint(max(lo, 1), top + 1, (count,), generator=g)
            out[n, name] = make_position_items(task, n, distances, g)
    return out


def order_free_accuracy(task: PositionTask, inputs: torch.Tensor,
                        answers: torch.Tensor) -> dict:
    """Expected accuracy of guessing and of readers that ignore order, on
    items ``inputs (count, n)`` with ``answers (count,)``.

    * ``"chance"``: one of the item's values picked at random;
    * ``"bag_of_tokens"``: the best reader of the item's bag of tokens. Each
      value occurs once and the bag holds no link between a key and a value,
      so the values are exchangeable given the bag: every reader scores
      ``1 / values``, chance;
    * ``"prefix_sets"``: a bound on every reader that sees each value with
      the *set* of keys before it (chapter 7's ``by_sets`` is one). Values
      with the same set are exchangeable given what it sees, so a reader
      that picks ``v`` is right with probability ``P(answer in G_v) / |G_v|``
      (``G_v``: the values with ``v``'s set); an oracle told the answer's
      set, guessing within it, scores ``E[1 / |G_answer|]``, at least as much.

    Each is an expectation over the readers' random choice (no draw).
    """
    keys, values = set(task.keys), set(task.value_symbols)
    bag, sets = [], []
    for row, answer in zip(inputs.tolist(), answers.tolist()):
        seen, prefix = set(), {}
        for t in row[:-1]:
            if t in keys:
                seen = seen | {t}
            elif t in values:
                prefix[t] = frozenset(seen)
        if answer not in prefix:
            raise ValueError("answers: an answer is not a value of its item")
        bag.append(1 / len(prefix))
        sets.append(1 / sum(s == prefix[answer] for s in prefix.values()))
    return {"chance": float(np.mean(bag)), "bag_of_tokens": float(np.mean(bag)),
            "prefix_sets": float(np.mean(sets))}


# -- training -------------------------------------------------------------------------

def train_model(config: Config, name: str, seed: int, *,
                device: str | torch.device = "cpu", progress: bool = False):
    """Train model ``name`` of :data:`posenc_lib.experiment.MODELS` on the task,
    with the perplexity study's training loop (:func:`posenc_lib.experiment.fit`).

    Batches of sequences of ``train_length`` positions depend on ``seed``
    only, so every model sees the same ones; the loss is the cross-entropy
    on the answers.

    Returns:
        ``(model, log)``; ``log`` holds the training loss and the batch
        accuracy every ``log_every`` steps and the wall time.
    """
    device = torch.device(device)
    model = experiment.build_model(config, name, seed).to(device)
    bos = experiment.MODELS[name].bos
    generator = torch.Generator().manual_seed(30_000 + seed)

    def log_row(step, loss, logits, targets):
        # accuracy on the last position's query, the test items' format
        acc = float((logits[:, -1].argmax(-1) == targets[:, -1]).float().mean())
        return [step, round(loss.item(), 4), round(acc, 4)]

    curve, seconds = experiment.fit(
        config, model, lambda: train_batch(config, generator, bos=bos), device=device,
        desc=f"train {name} seed {seed}", progress=progress, log_row=log_row)
    return model, {"seconds": seconds, "curve": curve}


# -- evaluation -----------------------------------------------------------------------

@torch.no_grad()
def accuracy_on(model: lm.DecoderLM, inputs: torch.Tensor, answers: torch.Tensor, *,
                evaluation: str = "full", chunk: int | None = None,
                batch_size: int = 32) -> np.ndarray:
    """Whether the model's top-1 prediction at the last position is the answer.

    ``evaluation`` and ``chunk`` are those of
    :func:`posenc_lib.experiment.position_losses` (only the last position
    is scored, so ``"reencode"`` is a single pass over the whole item).

    Returns:
        ``(items,)`` bool array.
    """
    n = inputs.shape[1]
    targets = torch.zeros_like(inputs)
    targets[:, -1] = answers
    _, hit = experiment.position_losses(model, inputs, targets, evaluation=evaluation,
                                        chunk=chunk, batch_size=batch_size,
                                        needed=[(n - 1, n)])
    return hit[:, -1].numpy()


def _evaluate_unit(config: Config, model, unit: str, bos: bool) -> np.ndarray:
    """``(bands, test_items)`` bool outcomes of one unit: ``"plain"`` or
    ``"ext:<name>"`` (the extension set up for each item's length)."""
    L, scheme, out = config.train_length, model.scheme, []
    extension = None if unit == "plain" else experiment.EXTENSIONS[unit.split(":")[1]]
    try:
        for b in range(len(bands(config))):
            inputs, answers, _ = eval_items(config, b, bos)
            evaluation = "full"
            if extension is not None:
                extension.configure(scheme, max(1.0, inputs.shape[1] / L), L)
                evaluation = extension.evaluation
            out.append(accuracy_on(model, inputs, answers, evaluation=evaluation,
                                   chunk=config.dynamic_chunk, batch_size=config.eval_batch))
    finally:
        if extension is not None:
            scheme.set_scaling("default")
            scheme.__dict__.pop("attention_hooks", None)
    return np.stack(out)


def _units(config: Config, name: str) -> list[str]:
    units = ["plain"]
    if name == "rope":
        units += [f"ext:{ext}" for ext in config.extensions]
    return units


def _train_key(config: Config, name: str, seed: int, device: torch.device) -> str:
    keys = ("train_length", "max_multiplier", "filler_symbols", "value_symbols", "markers",
            "max_pairs", "d_model", "n_layers", "n_heads", "batch_size", "steps", "lr",
            "warmup", "weight_decay", "t5_num_buckets", "t5_max_distance", "rope_base",
            "xpos_scale_base", "threads", "log_every")
    spec = experiment.MODELS[name]
    return experiment._digest({
        "config": json.loads(json.dumps({k: getattr(config, k) for k in keys})),
        "name": name, "scheme": spec.scheme, "bos": spec.bos, "options": dict(spec.options),
        "seed": seed, "torch": torch.__version__, "device": device.type,
        "code": _TRAIN_CODE_VERSION})


def _eval_key(config: Config, train_key: str, unit: str) -> str:
    keys = ("train_length", "max_multiplier", "filler_symbols", "value_symbols", "markers",
            "test_items", "dynamic_chunk")
    source = experiment.EXTENSIONS[unit.split(":")[1]].source() if ":" in unit else ""
    return experiment._digest({
        "config": json.loads(json.dumps({k: getattr(config, k) for k in keys})),
        "model": train_key, "unit": unit, "source": source, "code": _EVAL_CODE_VERSION})


def _run_job(config: Config, name: str, seed: int, cache_dir: Path | None,
             device: torch.device, progress: bool) -> dict:
    """Train (or load) one (model, seed) and evaluate (or load) every unit."""
    train_key = _train_key(config, name, seed, device)
    folder = None if cache_dir is None else cache_dir / f"{name}-seed{seed}-{train_key}"
    checkpoint = None if folder is None else folder / "model.pt"
    if checkpoint is not None and checkpoint.is_file():
        saved = torch.load(checkpoint, map_location="cpu", weights_only=False)
        model = experiment.build_model(config, name, seed)
        model.load_state_dict(saved["state_dict"])
        model, log = model.to(device).eval(), saved["log"]
    else:
        model, log = train_model(config, name, seed, device=device, progress=progress)
        if checkpoint is not None:
            state = {k: v.cpu() for k, v in model.state_dict().items()}
            experiment._save({"state_dict": state, "log": log}, checkpoint)
    units = {}
    for unit in _units(config, name):
        path = None
        if folder is not None:
            key = _eval_key(config, train_key, unit)
            path = folder / f"eval-{unit.replace(':', '-')}-{key}.pt"
        if path is not None and path.is_file():
            units[unit] = torch.load(path, weights_only=False)
            continue
        start = time.perf_counter()
        units[unit] = {"hit": _evaluate_unit(config, model, unit,
                                             experiment.MODELS[name].bos),
                       "seconds": round(time.perf_counter() - start, 2)}
        if path is not None:
            experiment._save(units[unit], path)
    return {"log": log, "units": units}


def run(config: Config, *, device: str | None = None, cache_dir: Path | None = CACHE_DIR,
        progress: bool = True, log_file: Path | None = None) -> dict | None:
    """Train and evaluate every (model, seed); return the results (``None`` on ranks > 0).

    Under ``torchrun`` every rank takes its share of the (model, seed) jobs
    (as :func:`posenc_lib.experiment.run` does) and rank 0 gathers them.
    ``log_file``: a line is appended per finished job.
    """
    start = time.perf_counter()
    rank, world, device = experiment._distributed(device)
    torch.set_num_threads(config.threads)
    jobs = [(name, seed) for name in config.models for seed in config.seeds]
    mine = [(i, jobs[i]) for i in experiment._share(config, jobs, world)[rank]]
    done = {}
    for index, (name, seed) in mine:
        t0 = time.perf_counter()
        done[index] = _run_job(config, name, seed, cache_dir, device, progress)
        if log_file is not None or progress:
            hit = done[index]["units"]["plain"]["hit"]
            line = (f"{time.strftime('%H:%M:%S')} rank {rank}: {name} seed {seed} "
                    f"({time.perf_counter() - t0:.0f} s) accuracy per band "
                    + " ".join(f"{a:.2f}" for a in hit.mean(1)))
            if log_file is not None:
                with open(log_file, "a") as f:
                    print(line, file=f)
            if progress:
                print(line, file=sys.stderr)
    if world > 1:
        import torch.distributed as dist

        gathered = [None] * world
        dist.all_gather_object(gathered, done)
        done = {k: v for part in gathered for k, v in part.items()}
        if rank != 0:
            return None
    results = _assemble(config, {jobs[i]: done[i] for i in sorted(done)})
    results["environment"] = experiment._environment(device, world)
    results["wall_time_s"] = round(time.perf_counter() - start, 1)
    return results


def _assemble(config: Config, jobs: dict) -> dict:
    """The results file's content from every job's log and outcomes.

    ``"outcomes"`` holds, per model and band, one string per seed of ``"0"``
    / ``"1"`` per test item (1: answered correctly), so that any interval can
    be recomputed; ``"accuracy"`` is their mean."""
    names, seeds = band_names(config), list(config.seeds)
    accuracy, outcome, training = {}, {}, {}
    readings = [(name, name, "plain") for name in config.models]
    if "rope" in config.models:
        readings += [(f"rope+{e}", "rope", f"ext:{e}") for e in config.extensions]
    for label, name, unit in readings:
        hits = [np.asarray(jobs[(name, s)]["units"][unit]["hit"]) for s in seeds]
        accuracy[label] = {band: [round(float(h[b].mean()), 4) for h in hits]
                           for b, band in enumerate(names)}
        outcome[label] = {band: ["".join("1" if x else "0" for x in h[b]) for h in hits]
                          for b, band in enumerate(names)}
    for name in config.models:
        logs = [jobs[(name, s)]["log"] for s in seeds]
        training[name] = {"seconds": [log["seconds"] for log in logs],
                          "steps": [row[0] for row in logs[0]["curve"]],
                          "loss": [[row[1] for row in log["curve"]] for log in logs],
                          "batch_accuracy": [[row[2] for row in log["curve"]]
                                             for log in logs]}
    return {"schema_version": SCHEMA_VERSION, "config": config.to_dict(),
            "config_hash": config.hash(), "bands": {n: list(b) for n, b in
                                                    zip(names, bands(config))},
            "accuracy": accuracy, "outcomes": outcome, "training": training,
            "train_seconds": round(sum(sum(t["seconds"]) for t in training.values()), 1)}


def load_results(path: str | Path = RESULTS_PATH, *, config: Config | None = None) -> dict:
    """Load stored results; refuse them (``ValueError``) if another schema
    version or another configuration (default :class:`Config` ()) made them."""
    config = Config() if config is None else config
    results = json.loads(Path(path).read_text())
    if results.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"path: {path} has schema_version {results.get('schema_version')}, "
                         f"expected {SCHEMA_VERSION}")
    if results.get("config_hash") != config.hash():
        raise ValueError(f"path: {path} was produced by configuration "
                         f"{results.get('config_hash')}, but the current one is "
                         f"{config.hash()}: re-run `python -m posenc_lib.retrieval`")
    return results


def outcomes(results: Mapping, name: str, band: str) -> np.ndarray:
    """``(seeds, test_items)`` 0/1 array: which test items of ``band`` model
    (or reading) ``name`` answered correctly, per seed; the outcomes that
    :func:`posenc_lib.experiment.accuracy_interval` reads."""
    if name not in results["outcomes"]:
        raise ValueError(f"name: {name!r} is not in the results; have "
                         f"{list(results['outcomes'])}")
    if band not in results["outcomes"][name]:
        raise ValueError(f"band: {band!r} is not one of {list(results['outcomes'][name])}")
    return np.array([[c == "1" for c in s] for s in results["outcomes"][name][band]],
                    dtype=np.float64)


# -- command line ---------------------------------------------------------------------

def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Train and evaluate the passkey "
                                     "retrieval study.")
    parser.add_argument("--out", type=Path, default=RESULTS_PATH,
                        help="where to write the JSON results (default: %(default)s)")
    parser.add_argument("--smoke", action="store_true", help="tiny configuration")
    parser.add_argument("--device", default=None,
                        help="torch device (default: cuda if available, else cpu)")
    parser.add_argument("--cache", type=Path, default=CACHE_DIR,
                        help="checkpoints and evaluations (default: %(default)s)")
    parser.add_argument("--no-cache", action="store_true", help="keep nothing on disk")
    parser.add_argument("--progress-file", type=Path, default=None,
                        help="append one line per finished job to this file")
    parser.add_argument("--quiet", action="store_true", help="no progress output")
    args = parser.parse_args(argv)
    config = Config.smoke() if args.smoke else Config()
    results = run(config, device=args.device, cache_dir=None if args.no_cache else args.cache,
                  progress=not args.quiet, log_file=args.progress_file)
    if results is None:   # not rank 0
        return
    experiment.write_results(results, args.out)
    if not args.quiet:
        print(f"wrote {args.out} (config {results['config_hash']}, "
              f"{results['wall_time_s']:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
