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
:data:`posenc_lib.tools.experiment.MODELS`, trained by
:func:`posenc_lib.tools.experiment.train_model` with ``study="task"`` (one trainer
and one configuration, :class:`posenc_lib.tools.experiment.Config`, for both
studies), and ``python -m posenc_lib experiment`` writes
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
#: Where ``python -m posenc_lib experiment`` writes the results by default:
#: relative, so ``results/retrieval.json`` under the current directory.
RESULTS_PATH = Path("results") / "retrieval.json"


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

def _check_symbols(keys, value_symbols, filler_symbols) -> None:
    """A task's token groups are distinct ids below ``lm.BOS``, with 2+ keys."""
    tokens = [t for g in (filler_symbols, value_symbols, keys) for t in g]
    if len(set(tokens)) != len(tokens) or not all(0 <= t < lm.BOS for t in tokens):
        raise ValueError("filler_symbols, value_symbols and keys must be distinct "
                         f"token ids in [0, {lm.BOS})")
    if len(keys) < 2:
        raise ValueError(f"keys must hold at least 2 tokens, got {keys}")


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
        _check_symbols(self.keys, self.value_symbols, self.filler_symbols)
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
    posenc_lib.tools.experiment``) and refuse it (``ValueError``) if another schema
    version or another configuration made it.

    Args:
        config: the configuration the file must come from, any object with
            a ``hash()`` (a :class:`posenc_lib.tools.experiment.Config`;
            :func:`posenc_lib.tools.experiment.load_retrieval_results` passes the
            study's own). This module does not import the trainer.
    """
    if not callable(getattr(config, "hash", None)):
        raise ValueError("config: pass the configuration the file must come from "
                         "(e.g. posenc_lib.tools.experiment.Config())")
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
    per seed; what :func:`posenc_lib.tools.experiment.accuracy_interval` reads."""
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


# -- a second task: the value at a fixed offset after a key (not yet trained) -------------

@dataclass(frozen=True)
class OffsetTask:
    """Multi-query associative recall in a positional variant: the answer is
    the token ``width`` positions after the query key.

    An item holds one *block* per key (each key once, the blocks in random
    order, filler between them): the key, then a window of ``2 width - 1``
    positions holding ``width`` distinct values, among filler. The value at
    offset ``width`` from the key (the window's centre) is always present: it
    is the key's answer. The query (the item's last token) is one of the
    keys; its answer is that key's centre value.

    What the construction guarantees, and :func:`offset_reader_panel` checks
    on the items: the answer's rank among its block's values is uniform on
    ``1 .. width`` and drawn independently of everything else (the order of
    keys and values, the tokens, the block's place), so a reader of the
    item's keys and values *in order but without the filler between them*
    (without distances) can do no better than ``1 / width``; the offset,
    that is the relative position, decides the answer. A causal model can
    still count positions without a positional encoding (it sees the filler):
    the task measures whether a model finds and keeps the offset on longer
    inputs, not whether an encoding is needed.

    With ``k`` keys an item needs ``(k - 1) 2 width`` positions of other
    blocks on either side of the query's block (it may come first or last),
    hence :attr:`first_answer` and :attr:`shortest_distance`, the same for
    every distance, so that every item has the same structure.
    """

    keys: tuple = (160, 161)
    value_symbols: tuple = tuple(range(192, 224))
    filler_symbols: tuple = tuple(range(224, 256))
    width: int = 8

    def __post_init__(self):
        _check_symbols(self.keys, self.value_symbols, self.filler_symbols)
        if not self.filler_symbols:
            raise ValueError("filler_symbols must hold at least one token")
        _validate.positive_int("width", self.width, minimum=2)
        if len(self.keys) * self.width > len(self.value_symbols):
            raise ValueError(f"width ({self.width}) times the number of keys "
                             f"({len(self.keys)}) must be at most the number of "
                             f"value_symbols ({len(self.value_symbols)}): values are distinct")

    @property
    def block(self) -> int:
        """The number of positions of one block, ``2 width`` (the key and its
        window)."""
        return 2 * self.width

    @property
    def first_answer(self) -> int:
        """The smallest answer position (``BOS``, the other blocks, then the
        query's key ``width`` positions before the answer)."""
        return 1 + (len(self.keys) - 1) * self.block + self.width

    @property
    def shortest_distance(self) -> int:
        """The smallest distance, the query's position minus the answer's (the
        rest of the answer's window and the other blocks)."""
        return self.width + (len(self.keys) - 1) * self.block


def _block_starts(lo: int, hi: int, count: int, size: int, g: torch.Generator) -> list[int]:
    """``count`` starts of non-overlapping blocks of ``size`` positions inside
    ``[lo, hi)``, uniform over all placements: ``count`` sorted distinct
    draws ``c_j`` from ``[0, hi - lo - count (size - 1))``, shifted to
    ``lo + c_j + j (size - 1)``."""
    if count == 0:
        return []
    room = hi - lo - count * (size - 1)
    if room < count:
        raise ValueError(f"no room for {count} blocks of {size} in [{lo}, {hi})")
    c = torch.randperm(room, generator=g)[:count].sort().values
    return (lo + c + torch.arange(count) * (size - 1)).tolist()


def _offset_rank(width: int, g: torch.Generator) -> int:
    """The rank (1-based) of a block's centre value among its ``width``
    values: uniform on ``1 .. width``."""
    return 1 + int(torch.randint(0, width, (1,), generator=g))


def _window_offsets(width: int, rank: int, g: torch.Generator) -> list[int]:
    """Offsets from the key of a block's ``width`` values: the centre
    ``width``, ``rank - 1`` of ``1 .. width - 1`` and ``width - rank`` of
    ``width + 1 .. 2 width - 1``, each subset uniform."""
    before = (1 + torch.randperm(width - 1, generator=g)[:rank - 1]).tolist()
    after = (width + 1 + torch.randperm(width - 1, generator=g)[:width - rank]).tolist()
    return sorted(before + [width] + after)


def make_offset_items(task: OffsetTask, distances, answer_positions,
                      generator: torch.Generator, *, bos: bool = True):
    """Items of :class:`OffsetTask`, one per (distance, answer position).

    Args:
        distances: ``(count,)`` distances ``D`` (query position minus the
            answer's), each ``>= task.shortest_distance``.
        answer_positions: ``(count,)`` positions ``a`` of the answers, each
            ``>= task.first_answer``. The item has ``a + D + 1`` positions,
            the query last, so ``a`` and ``D`` are chosen separately.
        bos: position 0 holds :data:`posenc_lib.lm.BOS` (else filler).

    Returns:
        ``inputs (count, longest)`` int64 (after an item's query, filler up
        to the longest item: a causal model's answer at the query does not
        depend on it), ``lengths (count,)``, ``answers (count,)``,
        ``distances (count,)`` and ``answer_positions (count,)``, int64.
    """
    distances = torch.as_tensor(distances, dtype=torch.long).reshape(-1)
    answer_positions = torch.as_tensor(answer_positions, dtype=torch.long).reshape(-1)
    if distances.numel() == 0 or distances.shape != answer_positions.shape:
        raise ValueError("distances and answer_positions must be non-empty and of one "
                         f"length, got {tuple(distances.shape)} and "
                         f"{tuple(answer_positions.shape)}")
    if int(distances.min()) < task.shortest_distance:
        raise ValueError(f"distances must be >= task.shortest_distance "
                         f"({task.shortest_distance}), got {int(distances.min())}")
    if int(answer_positions.min()) < task.first_answer:
        raise ValueError(f"answer_positions must be >= task.first_answer "
                         f"({task.first_answer}), got {int(answer_positions.min())}")
    g, k, w = generator, len(task.keys), task.width
    lengths = answer_positions + distances + 1
    count, longest = distances.numel(), int(lengths.max())
    filler = torch.tensor(task.filler_symbols)
    inputs = filler[torch.randint(0, len(filler), (count, longest), generator=g)]
    if bos:
        inputs[:, 0] = lm.BOS
    symbols = torch.tensor(task.value_symbols)
    answers = torch.empty(count, dtype=torch.long)
    for i, (d, a) in enumerate(zip(distances.tolist(), answer_positions.tolist())):
        n = a + d + 1
        order = torch.randperm(k, generator=g).tolist()       # the keys' blocks in order
        q = int(torch.randint(0, k, (1,), generator=g))       # the query's block
        starts = (_block_starts(1, a - w, q, task.block, g) + [a - w]
                  + _block_starts(a + w, n - 1, k - 1 - q, task.block, g))
        values = symbols[torch.randperm(len(symbols), generator=g)[:k * w]].tolist()
        for b, (start, key) in enumerate(zip(starts, order)):
            inputs[i, start] = task.keys[key]
            for o, v in zip(_window_offsets(w, _offset_rank(w, g), g),
                            values[b * w:(b + 1) * w]):
                inputs[i, start + o] = v
        inputs[i, n - 1] = task.keys[order[q]]
        answers[i] = inputs[i, a]
    return inputs, lengths, answers, distances, answer_positions


def offset_answer_of(task: OffsetTask, row: Sequence[int]) -> int:
    """The answer of one item (``row`` up to its query) by its definition,
    brute force: the token ``width`` positions after the query key's only
    earlier occurrence."""
    row = [int(t) for t in row]
    query = row[-1]
    if query not in task.keys:
        raise ValueError(f"row: the last input ({query}) is not a key of the task")
    seen = [i for i, t in enumerate(row[:-1]) if t == query]
    if len(seen) != 1 or seen[0] + task.width >= len(row) - 1:
        raise ValueError("row: the query key must occur once, more than width "
                         "positions before the query")
    return row[seen[0] + task.width]


def offset_pairs(task: OffsetTask, length: int) -> torch.Tensor:
    """Every (answer position ``a``, distance ``D``) of an item of
    :class:`OffsetTask` that fits in ``length`` positions
    (``a >= task.first_answer``, ``D >= task.shortest_distance``,
    ``a + D + 1 <= length``), ``a`` first, then ``D``.

    Returns:
        ``(pairs, 2)`` int64.

    Raises:
        ValueError: if no item fits in ``length`` positions.
    """
    length = _validate.positive_int("length", length)
    a0, d0 = task.first_answer, task.shortest_distance
    pairs = [(a, d) for a in range(a0, length) for d in range(d0, length - a)]
    if not pairs:
        raise ValueError(f"length ({length}) holds no item of the task: the shortest has "
                         f"{a0 + d0 + 1} positions (task.first_answer + "
                         "task.shortest_distance + 1)")
    return torch.tensor(pairs, dtype=torch.long)


def offset_fitting_items(task: OffsetTask, length: int, count: int,
                         generator: torch.Generator, *, bos: bool = True):
    """``count`` items of :func:`make_offset_items` that fit in ``length``
    positions, their (answer position, distance) drawn uniformly from
    :func:`offset_pairs`: the items a model is trained on when its rows have
    ``length`` positions. Returns what :func:`make_offset_items` returns."""
    pairs = offset_pairs(task, length)
    pick = pairs[torch.randint(0, len(pairs), (_validate.positive_int("count", count),),
                               generator=generator)]
    return make_offset_items(task, pick[:, 1], pick[:, 0], generator, bos=bos)


def offset_grid(task: OffsetTask, train_length: int, max_multiplier: int, count: int, *,
                seed: int = 9_000, max_length: int | None = None, bins: int = 2,
                cells: Sequence[str] | None = None) -> dict:
    """Fixed items of :class:`OffsetTask` on a grid of distance bands
    (:func:`bands`) by answer positions.

    The answer's position is uniform on ``[task.first_answer, train_length)``
    in every band, cut into ``bins`` equal ranges (one cell each), so the
    band does not fix where the answer sits; distances are uniform on the
    band ``[lo, hi)`` less what is shorter than ``task.shortest_distance``
    or makes an item longer than ``max_length`` (default
    ``max_multiplier · train_length``) for the latest answer. ``cells``:
    only these cells (each cell's items come from its own seed).

    Returns:
        ``{"<band>:a<lo>-<hi>": items}`` (answer positions ``[lo, hi)``;
        the items as :func:`make_offset_items` returns them), the cells of
        :func:`offset_grid_cells`.
    """
    out, specs = {}, offset_grid_cells(task, train_length, max_multiplier, count,
                                       seed=seed, max_length=max_length, bins=bins)
    unknown = set(cells or ()) - set(specs)
    if unknown:
        raise ValueError(f"cells: {sorted(unknown)} are not cells of the grid {list(specs)}")
    for name, spec in specs.items():
        if cells is not None and name not in cells:
            continue
        g = torch.Generator().manual_seed(spec["seed"])
        distances = torch.randint(*spec["distances"], (count,), generator=g)
        positions = torch.randint(*spec["answer_positions"], (count,), generator=g)
        out[name] = make_offset_items(task, distances, positions, g)
    return out


def offset_grid_cells(task: OffsetTask, train_length: int, max_multiplier: int,
                      count: int, *, seed: int = 9_000, max_length: int | None = None,
                      bins: int = 2) -> dict:
    """The cells of :func:`offset_grid`: ``{name: {"band", "distances": [lo,
    hi), "answer_positions": [lo, hi), "items", "seed"}}``."""
    L = _validate.positive_int("train_length", train_length)
    _validate.positive_int("count", count)
    bins = _validate.positive_int("bins", bins)
    top = L * _validate.positive_int("max_multiplier", max_multiplier)
    max_length = top if max_length is None else _validate.positive_int("max_length",
                                                                         max_length)
    a_lo, a_hi = task.first_answer, L
    if a_hi - a_lo < bins:
        raise ValueError(f"train_length ({L}) leaves no room for {bins} answer bins after "
                         f"task.first_answer ({a_lo}); use a longer train_length or a "
                         "smaller width")
    edges = [a_lo + (a_hi - a_lo) * j // bins for j in range(bins + 1)]
    cells = {}
    for b, ((lo, hi), band) in enumerate(zip(bands(L, max_multiplier),
                                             band_names(L, max_multiplier))):
        d_lo, d_hi = max(lo, task.shortest_distance), min(hi, max_length - a_hi + 1)
        if d_lo >= d_hi:
            raise ValueError(f"band {band} holds no distance in [{task.shortest_distance}, "
                             f"{max_length - a_hi}]: raise max_length ({max_length})")
        for j in range(bins):
            cells[f"{band}:a{edges[j]}-{edges[j + 1]}"] = {
                "band": band, "distances": [d_lo, d_hi],
                "answer_positions": [edges[j], edges[j + 1]], "items": count,
                "seed": seed + 100 * b + j}
    return cells


#: The shortcut readers of :func:`offset_reader_panel` (each is held to
#: :func:`offset_margin`; all but the last two see no distance), besides ``"ordinal_k"`` (the item's k-th
#: value, ``k = 1 .. keys · width``) and ``"after_query_k"`` (the k-th value
#: after the query key, ``k = 1 .. width``).
OFFSET_READERS = ("bag_most_frequent", "bag_smallest_id", "bag_learned", "counting",
                  "prefix_proportions", "primacy", "recency", "order_learned",
                  "position_learned", "distance_learned")


def _offset_parse(task: OffsetTask, row: list) -> tuple:
    """``(values, q_before, o_before, query block index)`` of one item up to
    its query: the values in order as ``(token, position)``, and per value
    the number of query keys and of other keys before it."""
    keys, vals, query = set(task.keys), set(task.value_symbols), row[-1]
    values, q_before, o_before, q, o, block = [], [], [], 0, 0, None
    for p, t in enumerate(row[:-1]):
        if t in vals:
            values.append((t, p))
            q_before.append(q)
            o_before.append(o)
        elif t == query:
            q += 1
            block = q + o - 1
        elif t in keys:
            o += 1
    return values, q_before, o_before, block


def _best(scores: Sequence, at: int) -> float:
    """Expected accuracy of picking the largest score, ties uniform."""
    return _pick(list(scores), at)


def offset_reader_panel(task: OffsetTask, inputs: torch.Tensor, lengths: torch.Tensor,
                        answers: torch.Tensor) -> dict:
    """What readers score on items of :class:`OffsetTask`: per reader,
    ``(items,)`` expected accuracies (ties broken uniformly, as an
    expectation, so no random draw). Every reader picks one of the item's
    values.

    Readers that see no distance (the filler between tokens is invisible to
    them, or only its count before a value, for ``prefix_proportions``):

    * ``"chance"``: a value at random, ``1 / (keys · width)``;
    * ``"bag_most_frequent"``: the most frequent value token;
    * ``"bag_smallest_id"``: the value with the smallest token id;
    * ``"bag_learned"``: for every (query key, value token), the share of
      items where the token is the answer when present, learned on the
      other half of the items (even items from odd ones and back); picks
      the item's value with the largest share: any tie between a token and
      the answer shows here;
    * ``"counting"``: the value with the most query keys before it, then the
      fewest other keys (the reader that solves :class:`PositionTask`);
    * ``"prefix_proportions"``: the value with the largest share of query
      keys among the tokens before it (what uniform causal attention
      carries);
    * ``"primacy"`` / ``"recency"``: the item's first / last value;
    * ``"ordinal_k"``: the item's k-th value; ``"after_query_k"``: the k-th
      value after the query key;
    * ``"order_learned"``: the best reader of the item's keys and values in
      order: for every place of the query's block among the blocks, the
      answer's most frequent rank among the item's values, learned on the
      other half of the items.

    Two readers of positions that ignore the key's position (shortcuts
    through the answer's absolute position or its distance to the query):

    * ``"position_learned"``: the value nearest the most frequent answer
      position of the other half of the items;
    * ``"distance_learned"``: the value nearest the most frequent distance
      (query position minus the answer's) of the other half.

    And one reader that knows positions: ``"oracle_offset"``, the value
    whose position is the query key's plus ``width``, scoring 1 on valid
    items (it shows the task is solvable).

    Raises:
        ValueError: if an answer is not what :func:`offset_answer_of` finds.
    """
    if inputs.dim() != 2 or lengths.shape != (inputs.shape[0],) or \
            answers.shape != (inputs.shape[0],):
        raise ValueError("inputs must be (items, n), lengths and answers (items,): got "
                         f"{tuple(inputs.shape)}, {tuple(lengths.shape)} and "
                         f"{tuple(answers.shape)}")
    if int(lengths.min()) < 1 or int(lengths.max()) > inputs.shape[1]:
        raise ValueError(f"lengths must be in [1, {inputs.shape[1]}] (the columns of inputs)")
    w, k = task.width, len(task.keys)
    names = (("chance",) + OFFSET_READERS + ("oracle_offset",)
             + tuple(f"ordinal_{j}" for j in range(1, k * w + 1))
             + tuple(f"after_query_{j}" for j in range(1, w + 1)))
    out = {name: [] for name in names}
    parsed = []
    for row, n, answer in zip(inputs.tolist(), lengths.tolist(), answers.tolist()):
        row = row[:n]
        if offset_answer_of(task, row) != answer:
            raise ValueError("answers: an answer is not the token width positions after "
                             "the query key")
        values, q_before, o_before, block = _offset_parse(task, row)
        tokens = [t for t, _ in values]
        if tokens.count(answer) != 1:
            raise ValueError("answers: an answer must occur once among the item's values")
        parsed.append((row, values, tokens, tokens.index(answer), block))
        at = tokens.index(answer)
        counts = [tokens.count(t) for t in tokens]
        out["chance"].append(1.0 / len(tokens))
        out["bag_most_frequent"].append(_best(counts, at))
        out["bag_smallest_id"].append(_best([-t for t in tokens], at))
        out["counting"].append(_best(list(zip(q_before, [-o for o in o_before])), at))
        out["prefix_proportions"].append(
            _best([q / p for q, (_, p) in zip(q_before, values)], at))
        out["primacy"].append(float(at == 0))
        out["recency"].append(float(at == len(tokens) - 1))
        key_at = row[:-1].index(row[-1])
        out["oracle_offset"].append(float(row[key_at + w] == answer))
        for j in range(1, k * w + 1):
            out[f"ordinal_{j}"].append(float(at == j - 1))
        after = [i for i, (_, p) in enumerate(values) if p > key_at]
        for j in range(1, w + 1):
            out[f"after_query_{j}"].append(float(len(after) >= j and after[j - 1] == at))
    # the learned readers, cross-fitted: each half is scored by what the other taught
    seen, hits, ranks = ({}, {}), ({}, {}), ({}, {})
    where, far = ([], []), ([], [])
    for i, (row, values, tokens, at, block) in enumerate(parsed):
        fold, query = i % 2, row[-1]
        where[fold].append(values[at][1])
        far[fold].append(len(row) - 1 - values[at][1])
        for t in tokens:
            seen[fold][query, t] = seen[fold].get((query, t), 0) + 1
        hits[fold][query, tokens[at]] = hits[fold].get((query, tokens[at]), 0) + 1
        ranks[fold].setdefault(block, []).append(at)
    mode = [[max(set(x), key=lambda v: (x.count(v), -v)) if x else 0 for x in fold]
            for fold in (where, far)]
    for i, (row, values, tokens, at, block) in enumerate(parsed):
        other, query = 1 - i % 2, row[-1]
        out["position_learned"].append(
            _best([-abs(p - mode[0][other]) for _, p in values], at))
        out["distance_learned"].append(
            _best([-abs(len(row) - 1 - p - mode[1][other]) for _, p in values], at))
        share = [hits[other].get((query, t), 0) / seen[other][query, t]
                 if (query, t) in seen[other] else 0.0 for t in tokens]
        out["bag_learned"].append(_best(share, at))
        taught = ranks[other].get(block, [])
        out["order_learned"].append(_best([taught.count(r) for r in range(len(tokens))], at))
    return {name: np.asarray(v, dtype=np.float64) for name, v in out.items()}


def offset_held_readers(task: OffsetTask) -> list[str]:
    """The readers of :func:`offset_reader_panel` held to :func:`offset_margin`:
    every reader that sees no distance (the named ones, ``ordinal_k`` and
    ``after_query_k``)."""
    k, w = len(task.keys), task.width
    return (list(OFFSET_READERS) + [f"ordinal_{j}" for j in range(1, k * w + 1)]
            + [f"after_query_{j}" for j in range(1, w + 1)])


def offset_items_digest(items) -> str:
    """SHA-256 of items of :func:`make_offset_items` (each tensor, in order, as
    little-endian int64): what names a cell's items in a results file."""
    import hashlib

    h = hashlib.sha256()
    for t in items:
        h.update(np.ascontiguousarray(t.numpy().astype("<i8")).tobytes())
    return h.hexdigest()


def offset_margin(items: int, width: int, comparisons: int, level: float = 0.01) -> dict:
    """The margin of chance for readers that see no distance, fixed before
    any reader runs: a reader at the bound ``p0 = 1 / width`` (what the
    construction allows a reader without distances) makes more than
    ``max_successes`` hits in a cell of ``items`` with probability at most
    ``level / comparisons`` (a one-sided binomial tail, Bonferroni over the
    ``comparisons`` reader-cell pairs, so that all readers at the bound pass
    together with probability at least ``1 - level``).

    Returns:
        ``{"p0", "level", "comparisons", "per_comparison", "max_successes",
        "upper_accuracy"}``.
    """
    from scipy import stats

    items = _validate.positive_int("items", items)
    width = _validate.positive_int("width", width, minimum=2)
    comparisons = _validate.positive_int("comparisons", comparisons)
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    p0, alpha = 1.0 / width, level / comparisons
    k = int(stats.binom.isf(alpha, items, p0))      # smallest k with P(X > k) <= alpha
    return {"p0": p0, "level": level, "comparisons": comparisons, "per_comparison": alpha,
            "max_successes": k, "upper_accuracy": k / items}


def clopper_pearson(successes: int, items: int, level: float = 0.99) -> tuple:
    """The exact (Clopper-Pearson) two-sided ``level`` interval of a binomial
    proportion with ``successes`` of ``items``."""
    from scipy import stats

    items = _validate.positive_int("items", items)
    if not 0 <= successes <= items:
        raise ValueError(f"successes must be in [0, items={items}], got {successes}")
    r = stats.binomtest(int(successes), items).proportion_ci(level, method="exact")
    return float(r.low), float(r.high)


__all__ += [
    "OFFSET_READERS",
    "OffsetTask",
    "clopper_pearson",
    "make_offset_items",
    "offset_answer_of",
    "offset_grid",
    "offset_grid_cells",
    "offset_held_readers",
    "offset_items_digest",
    "offset_fitting_items",
    "offset_margin",
    "offset_pairs",
    "offset_reader_panel",
]
