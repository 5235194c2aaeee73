"""A second panel of readers without distances for
:class:`posenc_lib.retrieval.OffsetTask`, written apart from the first
(``scripts/retrieval_readers_v2.py``) and run on the very items that chapter 7
scores (:func:`posenc_lib.tools.experiment.offset_cells`): writes
``results/retrieval_readers_blind.json``.

What a reader may use (the chapter's definition): the item's keys and values
in order *without the filler between them* (``kv``), the multiset of the
item's tokens (``bag``: BOS, filler, keys, values, query) and every token's
identity. No position, distance or adjacency. Every reader answers one value of
the item; a tie counts as a uniform guess among the tied values (expected
hits). Families: bag and identity statistics, checksums and parities,
the k-th value in order, and readers *trained* on the training rows of the
offset study (the batches of seed 0's training, :func:`offset_rows` with the
training stream) by logistic regression or a small MLP.

Controls that must pass the margin, so that the harness can see a leak: a
reader of the distance (the token ``width`` after the query key) and the
candidate reader given the key-to-candidate distance as one more feature.
Planted generators (``--planted``) check that the panel catches a non-uniform
answer rank and an answer tied to its block's smallest id.

About 2 min of CPU (1 thread)::

    PYTHONPATH=. .venv/bin/python scripts/retrieval_readers_blind.py
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections import Counter
from pathlib import Path

import numpy as np
import torch

from posenc_lib import retrieval
from posenc_lib.tools import experiment
from posenc_lib.tools.experiment.offset import IN_TRAIN, offset_rows

OUT = Path(__file__).resolve().parents[1] / "results" / "retrieval_readers_blind.json"
SCHEMA_VERSION = 1
#: Training rows for the learned readers: batches of the offset study's training
#: stream for seed 0 (``_STREAMS["offset"][0] + seed`` in training.py).
TRAIN_STREAM = 60_000
TRAIN_SEED = 0
TRAIN_BATCHES = 400           # 12,800 rows, their first query
FIT_SEED = 1234
VOCAB = 257


# -- what a reader sees ----------------------------------------------------------------

def view(task, row):
    """``(kv, bag, blocks, query, qblock)`` of one item (``row`` up to its
    query): ``blocks`` is ``[(key, [values in order]), ...]`` in the item's
    order and ``qblock`` the index of the query key's block."""
    keys, values = set(task.keys), set(task.value_symbols)
    kv = [t for t in row if t in keys or t in values]
    query = kv[-1]
    blocks = []
    for t in kv[:-1]:
        if t in keys:
            blocks.append((t, []))
        else:
            blocks[-1][1].append(t)
    qblock = [k for k, _ in blocks].index(query)
    return kv, Counter(row), blocks, query, qblock


def expected_hit(scores, answer_index):
    """1/|argmax| if the answer is among the best-scored candidates."""
    scores = np.asarray(scores, dtype=float)
    best = np.flatnonzero(scores == scores.max())
    return 1.0 / len(best) if answer_index in best else 0.0


def pick_rank(rank, size):
    s = np.zeros(size)
    s[rank % size] = 1
    return s


# -- the rule-based readers -------------------------------------------------------------

def rule_readers(task, row, answer):
    """{reader: expected hit} for one item."""
    _, bag, blocks, query, qb = view(task, row)
    vals = blocks[qb][1]
    other = [v for i, (_, vs) in enumerate(blocks) if i != qb for v in vs]
    every = [v for _, vs in blocks for v in vs]
    w = len(vals)
    ai = vals.index(answer)
    ae = every.index(answer)
    filler = set(task.filler_symbols)
    n = len(row)
    out = {}
    out["bag_min_value"] = expected_hit([-v for v in every], ae)
    out["bag_max_value"] = expected_hit(every, ae)
    out["block_min"] = expected_hit([-v for v in vals], ai)
    out["block_max"] = expected_hit(vals, ai)
    order = sorted(vals)
    out["block_4th_smallest"] = expected_hit([v == order[3] for v in vals], ai)
    out["block_5th_smallest"] = expected_hit([v == order[4] for v in vals], ai)
    out["value_most_frequent"] = expected_hit([bag[v] for v in every], ae)
    out["value_rarest"] = expected_hit([-bag[v] for v in every], ae)
    left = [v not in other and v not in task.keys and v not in filler for v in vals]
    out["set_difference"] = expected_hit(left, ai)
    out["key_matched_id"] = expected_hit([v == query + 32 for v in vals], ai)
    out["checksum_sum"] = expected_hit(pick_rank(sum(row), w), ai)
    n_filler = sum(c for t, c in bag.items() if t in filler)
    out["checksum_filler"] = expected_hit(pick_rank(n_filler, w), ai)
    out["checksum_length"] = expected_hit(pick_rank(n, w), ai)
    x = 0
    for v in vals:
        x ^= v
    out["parity_xor"] = expected_hit(pick_rank(x, w), ai)
    fills = [(c, -t) for t, c in bag.items() if t in filler]
    mode = -max(fills)[1] if fills else 0
    out["mode_filler"] = expected_hit(pick_rank(mode - min(filler), w), ai)
    for k in range(w):
        out[f"kth_in_block_{k + 1}"] = expected_hit(pick_rank(k, w), ai)
    for k in range(len(every)):
        out[f"kth_from_end_{k + 1}"] = expected_hit(pick_rank(len(every) - 1 - k,
                                                              len(every)), ae)
    # controls: they read a distance
    key_at = row.index(query)
    out["control_distance"] = float(row[key_at + task.width] == answer)
    return out


# -- features of the learned readers ----------------------------------------------------

def item_features(task, row):
    """Per item: bag counts over the vocabulary (divided by the item's length),
    the item's length / 512, the query key one-hot, the query block's place."""
    _, bag, blocks, query, qb = view(task, row)
    f = np.zeros(VOCAB + 1 + len(task.keys) + len(blocks), dtype=np.float32)
    for t, c in bag.items():
        f[t] = c / len(row)
    f[VOCAB] = len(row) / 512
    f[VOCAB + 1 + task.keys.index(query)] = 1
    f[VOCAB + 1 + len(task.keys) + qb] = 1
    return f


def candidate_features(task, row, distance=False):
    """Per candidate of the query block (``(w, F)``): its id one-hot, its rank
    one-hot, the ids of its neighbours in ``kv`` one-hot (a key or none
    included), the query key and block place; ``distance``: the control, plus
    the key-to-candidate distance one-hot (a position feature)."""
    kv, _, blocks, query, qb = view(task, row)
    vals = blocks[qb][1]
    nv, w = len(task.value_symbols), len(vals)
    base = task.value_symbols[0]
    ids = {t: i for i, t in enumerate(task.value_symbols)}
    nbr = nv + len(task.keys) + 1             # a value, a key, or nothing
    size = nv + w + 2 * nbr + len(task.keys) + len(blocks) + (2 * w if distance else 0)

    def nb(t):
        if t is None:
            return nv + len(task.keys)
        return ids[t] if t in ids else nv + task.keys.index(t)

    key_at = row.index(query)
    out = np.zeros((w, size), dtype=np.float32)
    kv_q = kv[:-1]
    start = kv_q.index(query)
    for r, v in enumerate(vals):
        j = start + 1 + r
        prev_t = kv_q[j - 1] if j - 1 >= 0 else None
        next_t = kv_q[j + 1] if j + 1 < len(kv_q) else None
        o = 0
        out[r, o + v - base] = 1
        o += nv
        out[r, o + r] = 1
        o += w
        out[r, o + nb(prev_t)] = 1
        o += nbr
        out[r, o + nb(next_t)] = 1
        o += nbr
        out[r, o + task.keys.index(query)] = 1
        o += len(task.keys)
        out[r, o + qb] = 1
        o += len(blocks)
        if distance:
            out[r, o + row.index(v, key_at) - key_at - 1] = 1
    return out


def answer_rank(task, row, answer):
    _, _, blocks, _, qb = view(task, row)
    return blocks[qb][1].index(answer)


# -- training data: the offset study's rows ---------------------------------------------

def training_items(study, batches=TRAIN_BATCHES, seed=TRAIN_SEED):
    """The first query of each training row of ``batches`` batches drawn as
    the offset training of ``seed`` draws them: ``[(row up to the query,
    answer)]``."""
    g = torch.Generator().manual_seed(TRAIN_STREAM + seed)
    c = study.config
    out = []
    for _ in range(batches):
        inputs, targets = offset_rows(study, c.train_length, c.task_batch, g,
                                                 True)
        for r in range(inputs.shape[0]):
            at = int((targets[r] != -100).nonzero()[0])
            out.append((inputs[r, :at + 1].tolist(), int(targets[r, at])))
    return out


def _adam(net, loss_of, steps, lr=1e-2, weight_decay=1e-4, betas=(0.9, 0.999),
          eps=1e-8):
    """Adam with an L2 penalty (as ``torch.optim.Adam(weight_decay=...)``),
    written out: ``torch.optim`` costs seconds to import on first use."""
    params = list(net.parameters())
    m = [torch.zeros_like(p) for p in params]
    v = [torch.zeros_like(p) for p in params]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)          # small problems: threads only contend
    try:
        _adam_steps(params, m, v, loss_of, steps, lr, weight_decay, betas, eps)
    finally:
        torch.set_num_threads(threads)
    return net


def _adam_steps(params, m, v, loss_of, steps, lr, weight_decay, betas, eps):
    for t in range(1, steps + 1):
        grads = torch.autograd.grad(loss_of(), params)
        with torch.no_grad():
            for p, g, m_, v_ in zip(params, grads, m, v):
                g = g + weight_decay * p
                m_.mul_(betas[0]).add_(g, alpha=1 - betas[0])
                v_.mul_(betas[1]).addcmul_(g, g, value=1 - betas[1])
                step = lr / (1 - betas[0] ** t)
                denom = (v_ / (1 - betas[1] ** t)).sqrt_().add_(eps)
                p.addcdiv_(m_, denom, value=-step)


def fit_item_model(x, y, classes, hidden=0, steps=600, seed=FIT_SEED):
    """A multinomial logistic regression (or a network of one hidden layer)
    from item features to classes, full batch."""
    torch.manual_seed(seed)
    x, y = torch.tensor(np.asarray(x)), torch.tensor(np.asarray(y))
    if hidden:
        net = torch.nn.Sequential(torch.nn.Linear(x.shape[1], hidden), torch.nn.ReLU(),
                                  torch.nn.Linear(hidden, classes))
    else:
        net = torch.nn.Linear(x.shape[1], classes)
    return _adam(net, lambda: torch.nn.functional.cross_entropy(net(x), y), steps)


def fit_candidate_model(xs, ys, hidden=0, steps=600, seed=FIT_SEED):
    """A conditional logit (or MLP scorer) over each item's candidates."""
    torch.manual_seed(seed)
    x = torch.tensor(np.stack(xs))            # (items, w, F)
    y = torch.tensor(np.asarray(ys))
    if hidden:
        net = torch.nn.Sequential(torch.nn.Linear(x.shape[2], hidden), torch.nn.ReLU(),
                                  torch.nn.Linear(hidden, 1))
    else:
        net = torch.nn.Linear(x.shape[2], 1)
    return _adam(net, lambda: torch.nn.functional.cross_entropy(net(x).squeeze(-1), y),
                 steps)


def priors(task, train):
    """The most frequent answer rank given (query key, block place), and the
    most frequent answer token given the query key, as counts over ``train``."""
    rank_prior, id_prior = {}, {}
    for r, a in train:
        _, _, blocks, q, qb = view(task, r)
        rank_prior.setdefault((q, qb), Counter())[blocks[qb][1].index(a)] += 1
        id_prior.setdefault(q, Counter())[a] += 1
    return rank_prior, id_prior


def rank_prior_hit(task, rank_prior, row, answer):
    _, _, blocks, q, qb = view(task, row)
    prior = rank_prior.get((q, qb), Counter())
    return expected_hit([prior[i] for i in range(task.width)],
                        blocks[qb][1].index(answer))


def learned_readers(task, train, test_rows, steps=600):
    """Train every learned reader on ``train`` and return ``{reader: (items,)
    expected hits}`` for ``test_rows`` ``[(row, answer)]``, plus the
    readers' accuracy on their own training items (``"fit"``)."""
    w = task.width
    xi = [item_features(task, r) for r, _ in train]
    yr = [answer_rank(task, r, a) for r, a in train]
    models = {
        "learned_bag_logreg": fit_item_model(xi, yr, w, steps=steps),
        "learned_bag_mlp": fit_item_model(xi, yr, w, hidden=64, steps=steps),
    }
    xc = [candidate_features(task, r) for r, _ in train]
    bag_dim = VOCAB + 1
    xcb = [np.concatenate([c, np.repeat(i[None, :bag_dim], len(c), 0)], 1)
           for c, i in zip(xc, xi)]
    cand = {
        "learned_candidate": (fit_candidate_model(xc, yr, steps=steps), False, False),
        "learned_candidate_mlp": (fit_candidate_model(xcb, yr, hidden=64, steps=steps),
                                  True, False),
        "control_learned_distance": (
            fit_candidate_model([candidate_features(task, r, True) for r, _ in train],
                                yr, steps=steps), False, True),
    }
    rank_prior, id_prior = priors(task, train)

    def score(rows):
        ranks = np.asarray([answer_rank(task, r, a) for r, a in rows])
        fi = np.stack([item_features(task, r) for r, _ in rows])
        fc = np.stack([candidate_features(task, r) for r, _ in rows])
        fd = np.stack([candidate_features(task, r, True) for r, _ in rows])
        fb = np.concatenate([fc, np.repeat(fi[:, None, :bag_dim], w, 1)], 2)
        inputs = {"learned_candidate": fc, "learned_candidate_mlp": fb,
                  "control_learned_distance": fd}
        out = {}
        with torch.no_grad():
            for name, net in models.items():
                s = net(torch.tensor(fi)).numpy()
                out[name] = np.asarray([expected_hit(x, k) for x, k in zip(s, ranks)])
            for name, (net, _, _) in cand.items():
                s = net(torch.tensor(inputs[name])).squeeze(-1).numpy()
                out[name] = np.asarray([expected_hit(x, k) for x, k in zip(s, ranks)])
        rp, ip = [], []
        for (r, a), k in zip(rows, ranks):
            _, _, blocks, q, qb = view(task, r)
            rp.append(rank_prior_hit(task, rank_prior, r, a))
            ids = id_prior.get(q, Counter())
            ip.append(expected_hit([ids[v] for v in blocks[qb][1]], k))
        out["rank_prior"], out["id_prior"] = np.asarray(rp), np.asarray(ip)
        return out

    fit = {name: float(v.mean()) for name, v in score(train[:2048]).items()}
    return score, fit


# -- the first task: readers of the bag of tokens ---------------------------------------

#: Training rows of the first task (:class:`posenc_lib.retrieval.PositionTask`):
#: the retrieval study's stream for seed 0 (``_STREAMS["task"][0] + seed``).
POSITION_STREAM = 30_000


def position_bag_readers(task, row, answer):
    """{reader: expected hit} of the order-free readers on one item of the
    first task (``row`` up to its query): they see the multiset of tokens."""
    bag = Counter(row)
    vals = sorted(t for t in bag if t in task.value_symbols)
    ai = vals.index(answer)
    query = row[-1]
    return {"bag_min_value": expected_hit([-v for v in vals], ai),
            "bag_max_value": expected_hit(vals, ai),
            "value_most_frequent": expected_hit([bag[v] for v in vals], ai),
            "value_rarest": expected_hit([-bag[v] for v in vals], ai),
            "key_matched_id": expected_hit([v == query + 32 for v in vals], ai),
            "checksum_sum": expected_hit(pick_rank(sum(row), len(vals)), ai)}


def position_bag_features(task, row):
    f = np.zeros(VOCAB + 1, dtype=np.float32)
    for t, c in Counter(row).items():
        f[t] = c / len(row)
    f[VOCAB] = len(row) / 512
    return f


def position_panel(config, batches=TRAIN_BATCHES, steps=600):
    """The bag readers, and two trained on the counts of the first task's
    training rows (a logistic regression and a network of one hidden layer
    over the 32 value tokens, restricted to the item's values), on every cell
    of its grid (:func:`posenc_lib.tools.experiment.retrieval_grid`)."""
    from posenc_lib.tools.experiment.training import _task_rows

    task = config.task
    g = torch.Generator().manual_seed(POSITION_STREAM + TRAIN_SEED)
    train = []
    for _ in range(batches):
        inputs, targets = _task_rows(config, config.train_length, config.task_batch, g,
                                     True)
        for r in range(inputs.shape[0]):
            at = int((targets[r] != -100).nonzero()[0])
            train.append((inputs[r, :at + 1].tolist(), int(targets[r, at])))
    base = task.value_symbols[0]
    x = [position_bag_features(task, r) for r, _ in train]
    y = [a - base for _, a in train]
    nets = {"learned_bag_logreg": fit_item_model(x, y, len(task.value_symbols),
                                                 steps=steps),
            "learned_bag_mlp": fit_item_model(x, y, len(task.value_symbols), hidden=64,
                                              steps=steps)}
    cells = {}
    for name, (inputs, answers, _) in experiment.retrieval_grid(config).items():
        rows = [(row, int(a)) for row, a in zip(inputs.tolist(), answers.tolist())]
        hits = [position_bag_readers(task, r, a) for r, a in rows]
        out = {k: float(sum(h[k] for h in hits)) for k in hits[0]}
        f = torch.tensor(np.stack([position_bag_features(task, r) for r, _ in rows]))
        with torch.no_grad():
            for k, net in nets.items():
                s = net(f).numpy()
                got = 0.0
                for (r, a), sc in zip(rows, s):
                    vals = sorted(t for t in set(r) if t in task.value_symbols)
                    got += expected_hit([sc[v - base] for v in vals], vals.index(a))
                out[k] = got
        cells[name] = {"items": len(rows), "sha256": digest((inputs, answers)),
                       "hits": out}
    return {"train_rows": len(train), "cells": cells}


def position_summary(panel, p0, level=0.01):
    """Per reader, over every item of the grid: hits, items, the two-sided
    binomial test's p-value against ``p0`` (the chapter's rule for readers of
    the bag) and the exact 99 % interval."""
    from scipy import stats

    items = sum(c["items"] for c in panel["cells"].values())
    out = {}
    for k in next(iter(panel["cells"].values()))["hits"]:
        hits = sum(c["hits"][k] for c in panel["cells"].values())
        p = stats.binomtest(int(round(hits)), items, p0).pvalue
        out[k] = {"hits": hits, "items": items, "accuracy": hits / items,
                  "p_value": float(p), "rejects": bool(p < level),
                  "ci99": list(retrieval.clopper_pearson(int(round(hits)), items, 0.99))}
    return out


# -- the run ----------------------------------------------------------------------------

def cell_rows(items):
    inputs, lengths, answers = items[0], items[1], items[2]
    return [(inputs[i, :int(lengths[i])].tolist(), int(answers[i]))
            for i in range(inputs.shape[0])]


def digest(items):
    h = hashlib.sha256()
    for t in items:
        h.update(np.ascontiguousarray(t.numpy().astype("<i8")).tobytes())
    return h.hexdigest()


def run(study, cells, train):
    task = study.task
    score, fit = learned_readers(task, train, [])
    per_cell = {}
    for name, items in cells.items():
        rows = cell_rows(items)
        rule = [rule_readers(task, r, a) for r, a in rows]
        hits = {k: np.asarray([h[k] for h in rule]) for k in rule[0]}
        hits.update(score(rows))
        per_cell[name] = {"items": len(rows), "sha256": digest(items),
                          "hits": {k: float(v.sum()) for k, v in hits.items()}}
    return per_cell, fit


def summarise(per_cell, margin_hits, level):
    out = {}
    for cell, d in per_cell.items():
        n = d["items"]
        readers = {}
        for k, h in d["hits"].items():
            lo, hi = retrieval.clopper_pearson(int(round(h)), n, level=level)
            readers[k] = {"hits": h, "accuracy": h / n, "ci99": [lo, hi],
                          "above_margin": h > margin_hits}
        out[cell] = {"items": n, "sha256": d["sha256"], "readers": readers}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--batches", type=int, default=TRAIN_BATCHES)
    args = ap.parse_args()
    torch.set_num_threads(1)
    study = experiment.OffsetStudy()
    cells = experiment.offset_cells(study)
    train = training_items(study, args.batches)
    stored = json.loads((OUT.parent / "retrieval_readers_v2.json").read_text())
    margin = stored["margin"]
    per_cell, fit = run(study, cells, train)
    bands = [c for c in per_cell if c != IN_TRAIN]
    n_readers = len(next(iter(per_cell.values()))["hits"])
    # the margin of the chapter's panel, and one recomputed for this panel's own
    # number of reader-band comparisons
    own = retrieval.offset_margin(study.items, study.width, n_readers * len(bands),
                                  level=study.level)
    out = {"schema_version": SCHEMA_VERSION, "study_hash": study.hash(),
           "train": {"stream": TRAIN_STREAM, "seed": TRAIN_SEED, "rows": len(train),
                     "fit_accuracy": fit},
           "margin_chapter": margin, "margin_own": own,
           "cells": summarise(per_cell, margin["max_successes"], 0.99)}
    above = {c: [k for k, v in out["cells"][c]["readers"].items()
                 if v["above_margin"] and not k.startswith("control")] for c in bands}
    out["above_margin"] = above
    config = experiment.Config()
    position = position_panel(config, args.batches)
    position["p0"] = 1 / config.task.pairs
    position["readers"] = position_summary(position, position["p0"])
    out["position_task"] = position
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    for c in out["cells"]:
        best = sorted(((v["hits"], k) for k, v in out["cells"][c]["readers"].items()
                       if not k.startswith("control")), reverse=True)[:5]
        print(c, [(k, round(h / 512, 3)) for h, k in best],
              {k: round(v["accuracy"], 3) for k, v in out["cells"][c]["readers"].items()
               if k.startswith("control")})
    print("fit on training items:", {k: round(v, 3) for k, v in fit.items()})
    print("above the margin:", above)
    print("first task, bag readers over the grid:",
          {k: (round(v["accuracy"], 3), round(v["p_value"], 3))
           for k, v in position["readers"].items()})


if __name__ == "__main__":
    main()
