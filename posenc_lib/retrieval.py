"""Can it retrieve? A key-value retrieval task, the readers that solve it
without positions, and its results.

:class:`PositionTask` is a key-value retrieval task: a few similar keys,
every key bound to a value early on (so the query key also occurs earlier,
bound to another value), the answer the value of the query key's *most
recent* binding. Its test items (:func:`position_grid`) vary the item's
length and the distance ``D`` between the answer and the query separately.
:func:`reader_panel` runs readers that use no positional encoding on items:
a reader that counts the keys before each value answers every item, so the
task measures whether a trained model found a retrieval procedure that keeps
working on longer inputs, not whether an encoding is needed for it.
:func:`order_free_accuracy` gives the expected accuracy of guessing and of
two order-free readers (bag of tokens, sets of keys).

Chapter 7's study trains and scores the models on it: the models of
:data:`posenc_lib.experiment.MODELS`, trained by
:func:`posenc_lib.experiment.train_model` with ``study="task"`` (one trainer
and one configuration, :class:`posenc_lib.experiment.Config`, for both
studies), and ``python -m posenc_lib.experiment`` writes
``results/retrieval.json`` (and the reader panel on the same items,
``results/retrieval_readers.json``). This module reads the results file
back (:func:`load_results`, :func:`outcomes`, :func:`cell_outcomes`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import torch

from . import _stale, _validate, lm

__all__ = ["RESULTS_PATH", "SCHEMA_VERSION", "bands", "band_names", "PositionTask",
           "make_position_items", "order_free_accuracy", "position_grid", "load_results",
           "outcomes", "cell_outcomes", "cells_of", "READERS", "answer_of",
           "reader_panel"]

#: Version of the results file's layout; :func:`load_results` refuses any other.
SCHEMA_VERSION = 2
RESULTS_PATH = Path(__file__).resolve().parents[1] / "results" / "retrieval.json"


def bands(train_length: int, max_multiplier: int) -> list[tuple[int, int]]:
    """The distance bands ``[lo, hi)``: ``[0, L)``, then doublings up to
    ``max_multiplier · L``."""
    L = _validate.positive_int("train_length", train_length)
    longest = L * _validate.positive_int("max_multiplier", max_multiplier)
    out, lo, hi = [], 0, L
    while hi <= longest:
        out.append((lo, hi))
        lo, hi = hi, 2 * hi
    return out


def band_names(train_length: int, max_multiplier: int) -> list[str]:
    """``"0-L"``, ``"L-2L"``, ... for :func:`bands`."""
    L = train_length

    def at(p):
        return "0" if p == 0 else "L" if p == L else f"{p // L}L"

    return [f"{at(lo)}-{at(hi)}" for lo, hi in bands(train_length, max_multiplier)]


# -- the task -------------------------------------------------------------------------

@dataclass(frozen=True)
class PositionTask:
    """A key-value retrieval task (the most recent binding of a key).

    A sequence holds ``pairs`` (key, value) pairs among filler; the keys come
    from ``keys``, a few similar tokens, and *every* key occurs in the first
    ``len(keys)`` pairs (a preamble), so the query key also occurs earlier,
    bound to another value: the strongest distractor, the key itself. The
    query is a key; the answer is the value that followed its *last*
    occurrence before the query (the most recent binding). The values of a
    sequence are distinct. The distance ``D`` (query position minus the
    answer's) and the sequence length ``n`` are chosen separately.

    A reader of the bag of tokens cannot tell one value from another (each
    key occurs at least once, each value once), nor can one of the *set* of
    keys before each value (what :func:`order_free_accuracy` calls
    ``"prefix_sets"``) from the end of the preamble on. But a reader of the
    *counts* of keys before each value, which a causal model without
    positions can compute, answers every item (:func:`reader_panel`): the
    answer is the first value with the most occurrences of the query key
    before it. With ``pairs - len(keys) - 1`` pairs after the answer's, every
    item at a distance that holds them all has one order of pairs, and the
    answer is always the same ordinal value.
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
    out, lengths = {}, []
    n = train_length
    while n <= train_length * max_multiplier:
        lengths.append(n)
        n *= 2
    for i, n in enumerate(lengths):
        for b, ((lo, hi), name) in enumerate(zip(bands(train_length, max_multiplier),
                                                 band_names(train_length, max_multiplier))):
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


# -- the reader panel: what readers that need no positional encoding score ---------------

#: The readers of :func:`reader_panel`, by name (``"ordinal_k"``: the k-th value).
READERS = ("chance", "bag_of_tokens", "counting", "prefix_proportions",
           "second_occurrence", "recency")


def answer_of(task: PositionTask, row: Sequence[int]) -> int:
    """The answer of one item by its definition, brute force: the token after
    the query key's (the last input's) last earlier occurrence."""
    row = [int(t) for t in row]
    query = row[-1]
    if query not in task.keys:
        raise ValueError(f"row: the last input ({query}) is not a key of the task")
    last = max((i for i, t in enumerate(row[:-1]) if t == query), default=None)
    if last is None or last + 1 >= len(row) - 1:
        raise ValueError("row: the query key has no earlier binding")
    return row[last + 1]


def _pick(scores: list, answer_at: int) -> float:
    """Expected accuracy of picking the largest score (ties broken uniformly
    at random) when the answer is the ``answer_at``-th candidate."""
    best = max(scores)
    tied = [i for i, s in enumerate(scores) if s == best]
    return 1.0 / len(tied) if answer_at in tied else 0.0


def reader_panel(task: PositionTask, inputs: torch.Tensor, answers: torch.Tensor, *,
                 ordinals: bool = True) -> dict:
    """What readers that use no positional encoding score on items of
    :class:`PositionTask`: per reader, ``(items,)`` expected accuracies (an
    expectation over the reader's uniform choice among tied candidates, so
    no random draw). Every reader chooses among the item's values.

    * ``"chance"``: a value picked at random, ``1 / values``;
    * ``"bag_of_tokens"``: a reader of the bag of tokens (the multiset, no
      order): the value with the smallest token id. Values are drawn without
      regard to their role, so any reader of the bag scores chance in
      expectation; a departure shows a generator that ties the answer to a
      token;
    * ``"counting"``: for each value, the number of occurrences of the query
      key before it, and of the other keys; the value with the most query
      keys, then the fewest other keys. Counts over the prefix are what a
      causal attention layer without positions computes (uniform attention
      gives proportions, and ``BOS``'s share ``1 / (p + 1)`` turns them
      into counts);
    * ``"prefix_proportions"``: for each value, the share of the query key
      among the tokens before it, the value with the largest share (what
      uniform causal attention carries without ``BOS``);
    * ``"second_occurrence"``: the value after the query key's second
      occurrence (the last one if it occurs once);
    * ``"recency"``: the last value before the query;
    * ``"ordinal_k"`` (with ``ordinals``), ``k = 1 .. pairs``: the item's
      k-th value, whatever the keys.

    Raises:
        ValueError: if an answer is not what :func:`answer_of` finds.
    """
    keys, values = set(task.keys), set(task.value_symbols)
    out = {name: [] for name in READERS}
    if ordinals:
        out.update({f"ordinal_{k}": [] for k in range(1, task.pairs + 1)})
    for row, answer in zip(inputs.tolist(), answers.tolist()):
        if answer_of(task, row) != answer:
            raise ValueError("answers: an answer is not the value after the query "
                             "key's last earlier occurrence")
        query = row[-1]
        found, q_count, o_count, q_seen = [], 0, 0, []   # value, counts before it
        for p, t in enumerate(row[:-1]):
            if t in values:
                found.append((t, q_count, o_count, p))
            elif t == query:
                q_count += 1
                q_seen.append(p)
            elif t in keys:
                o_count += 1
        tokens = [v for v, *_ in found]
        at = tokens.index(answer)
        out["chance"].append(1.0 / len(tokens))
        out["bag_of_tokens"].append(float(min(tokens) == answer))
        out["counting"].append(_pick([(q, -o) for _, q, o, _ in found], at))
        # the prefix of a value at position p holds p tokens (BOS included)
        out["prefix_proportions"].append(
            _pick([q / p if p else 0.0 for _, q, _, p in found], at))
        second = q_seen[min(1, len(q_seen) - 1)]
        nxt = row[second + 1]
        out["second_occurrence"].append(float(nxt == answer))
        out["recency"].append(float(tokens[-1] == answer))
        if ordinals:
            for k in range(1, task.pairs + 1):
                out[f"ordinal_{k}"].append(float(len(tokens) >= k and tokens[k - 1] == answer))
    return {name: np.asarray(v, dtype=np.float64) for name, v in out.items()}


# -- reading the results ---------------------------------------------------------------

def load_results(path: str | Path = RESULTS_PATH, *, config) -> dict:
    """Load ``results/retrieval.json`` (written by ``python -m
    posenc_lib.experiment``) and refuse it (``ValueError``) if another schema
    version or another configuration made it.

    Args:
        config: the configuration the file must come from, any object with
            a ``hash()`` (a :class:`posenc_lib.experiment.Config`;
            :func:`posenc_lib.experiment.load_retrieval_results` passes the
            study's own). This module does not import the trainer.
    """
    if not callable(getattr(config, "hash", None)):
        raise ValueError("config: pass the configuration the file must come from "
                         "(e.g. posenc_lib.experiment.Config())")
    results = json.loads(Path(path).read_text())
    _stale.refuse_stale(results, path, config.hash(), SCHEMA_VERSION)
    return results


def _model(results: Mapping, name: str) -> Mapping:
    if name not in results["outcomes"]:
        raise ValueError(f"name: {name!r} is not in the results; have "
                         f"{list(results['outcomes'])}")
    return results["outcomes"][name]


def cell_outcomes(results: Mapping, name: str, cell: str) -> np.ndarray:
    """``(seeds, items)`` 0/1 array: which test items of ``cell``
    (``"<length>:<band>"``) model (or reading) ``name`` answered correctly,
    per seed; what :func:`posenc_lib.experiment.accuracy_interval` reads."""
    table = _model(results, name)
    if cell not in table:
        raise ValueError(f"cell: {cell!r} is not one of {list(table)}")
    return np.asarray(table[cell], dtype=np.float64)


def cells_of(results: Mapping, band: str, lengths: Sequence[int] | None = None) -> list[str]:
    """The cells of distance band ``band``, shortest item first, optionally
    only those of the item ``lengths``."""
    cells = results["cells"]
    if band not in results["bands"]:
        raise ValueError(f"band: {band!r} is not one of {results['bands']}")
    out = sorted((c for c in cells if cells[c]["band"] == band),
                 key=lambda c: cells[c]["length"])
    if lengths is not None:
        out = [c for c in out if cells[c]["length"] in set(lengths)]
        if not out:
            raise ValueError(f"lengths: band {band!r} has no cell of lengths "
                             f"{list(lengths)}")
    return out


def outcomes(results: Mapping, name: str, band: str,
             lengths: Sequence[int] | None = None) -> np.ndarray:
    """``(seeds, items)`` 0/1 array of model ``name`` on every test item of
    distance band ``band`` (its cells side by side, shortest item first), or
    on those of the item ``lengths`` only. Its mean per seed is the stored
    ``"accuracy"`` of the band."""
    return np.concatenate([cell_outcomes(results, name, c)
                           for c in cells_of(results, band, lengths)], axis=1)
