"""The offset task (:class:`posenc_lib.retrieval.OffsetTask`): its items, its
reader panel and the stored panel ``results/retrieval_readers_v2.json``
(written by ``scripts/retrieval_readers_v2.py``), checked before any model
is trained on it."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc_lib import lm, retrieval

ROOT = Path(__file__).resolve().parents[1]
STORED = ROOT / "results" / "retrieval_readers_v2.json"


def _script():
    spec = importlib.util.spec_from_file_location(
        "retrieval_readers_v2", ROOT / "scripts" / "retrieval_readers_v2.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SCRIPT = _script()


@pytest.fixture(scope="module")
def stored():
    return json.loads(STORED.read_text())


# -- the stored panel -----------------------------------------------------------------

def test_a_regenerated_slice_matches_the_stored_panel(stored):
    cells = list(stored["cells"])
    slice_ = [cells[-1]]                           # the farthest cell, the longest items
    fresh = SCRIPT.build(only=slice_)
    grid = {k: v for k, v in stored["grid"].items() if k != "count"}
    nearest = retrieval.offset_grid(retrieval.OffsetTask(), count=stored["grid"]["count"],
                                    cells=cells[:1], **grid)[cells[0]]
    assert SCRIPT.digest(nearest) == stored["cells"][cells[0]]["sha256"]
    for key in ("schema_version", "task", "grid", "margin", "held_readers"):
        assert fresh[key] == stored[key], key
    assert list(fresh["cells"]) == slice_
    for name in slice_:
        old, new = stored["cells"][name], fresh["cells"][name]
        assert new["sha256"] == old["sha256"], name
        assert set(new["readers"]) == set(old["readers"])
        for reader, rec in new["readers"].items():
            assert rec["hits"] == pytest.approx(old["readers"][reader]["hits"], abs=1e-6)
            assert rec["ci99"] == pytest.approx(old["readers"][reader]["ci99"], abs=1e-8)
        assert new["above_margin"] == old["above_margin"]


def test_the_stored_grid_is_the_whole_grid(stored):
    grid = dict(stored["grid"])
    count = grid.pop("count")
    cells = retrieval.offset_grid_cells(retrieval.OffsetTask(**{
        k: tuple(v) for k, v in stored["task"].items() if k != "width"},
        width=stored["task"]["width"]), count=count, **grid)
    assert list(cells) == list(stored["cells"])
    for name, spec in cells.items():
        assert {k: stored["cells"][name][k] for k in spec} == spec
    # the answer's position range is the same in every band: it is not fixed by distance
    positions = {tuple(c["answer_positions"]) for c in stored["cells"].values()}
    assert len(positions) == grid["bins"]


def test_every_reader_without_distances_is_within_the_margin_in_every_cell(stored):
    margin, w = stored["margin"], stored["task"]["width"]
    # the margin comes from the cell size, the width and the number of comparisons,
    # not from any reader: a brute-force binomial tail at p0 = 1 / width
    n, k, held = stored["grid"]["count"], margin["max_successes"], stored["held_readers"]
    assert margin["comparisons"] == len(held) * len(stored["cells"])
    alpha, p0 = margin["level"] / margin["comparisons"], 1 / w

    def tail(m):                                   # P(X > m), X ~ Binomial(n, p0)
        return sum(math.comb(n, j) * p0 ** j * (1 - p0) ** (n - j) for j in range(m + 1, n + 1))

    assert tail(k) <= alpha < tail(k - 1)
    assert {"counting", "prefix_proportions", "primacy", "recency", "bag_most_frequent",
            "bag_learned", "order_learned"} <= set(held)
    for cell in stored["cells"].values():      # every reader but two is held to it
        assert set(cell["readers"]) - set(held) == {"chance", "oracle_offset"}
    for name, cell in stored["cells"].items():
        assert cell["items"] == n
        for reader in held:
            rec = cell["readers"][reader]
            assert rec["hits"] <= k, (name, reader, rec["accuracy"], k / n)
            lo, hi = rec["ci99"]
            assert lo <= rec["accuracy"] <= hi
        assert cell["above_margin"] == []
        # the position-aware reader solves every item
        assert cell["readers"]["oracle_offset"]["hits"] == n
        assert cell["readers"]["chance"]["accuracy"] == pytest.approx(
            1 / (len(stored["task"]["keys"]) * w))


def test_clopper_pearson_against_the_beta_quantiles():
    from scipy import stats
    for k, n in ((0, 256), (16, 256), (55, 256), (256, 256), (7, 128)):
        lo, hi = retrieval.clopper_pearson(k, n, 0.99)
        assert lo == pytest.approx(0.0 if k == 0 else stats.beta.ppf(0.005, k, n - k + 1))
        assert hi == pytest.approx(1.0 if k == n else stats.beta.ppf(0.995, k + 1, n - k))
    with pytest.raises(ValueError, match="successes"):
        retrieval.clopper_pearson(5, 4)


# -- planted shortcuts: the panel must catch each -------------------------------------

CELL = "L-2L:a25-64"


def test_answer_always_first_after_the_key_is_caught(monkeypatch):
    monkeypatch.setattr(retrieval, "_offset_rank", lambda width, g: 1)
    above = SCRIPT.build(only=[CELL])["cells"][CELL]["above_margin"]
    assert {"prefix_proportions", "after_query_1", "order_learned", "primacy"} <= set(above)
    assert "counting" not in above      # it ties the block's values: blind to the rank


def test_offsets_drawn_as_a_plain_subset_are_caught(monkeypatch):
    # the centre's rank is then hypergeometric (mode in the middle), not uniform
    def subset(width, rank, g):
        others = [o for o in range(1, 2 * width) if o != width]
        pick = torch.randperm(len(others), generator=g)[:width - 1].tolist()
        return sorted([others[i] for i in pick] + [width])

    monkeypatch.setattr(retrieval, "_window_offsets", subset)
    above = set(SCRIPT.build(only=[CELL])["cells"][CELL]["above_margin"])
    assert above & {"after_query_4", "after_query_5", "order_learned"}


def _leaky_items(leak):
    """The cell's items with the answer's token replaced by ``leak(item)`` (the
    token swapped with that value where it already occurs)."""
    task, count = retrieval.OffsetTask(), SCRIPT.GRID["count"]
    grid = {k: v for k, v in SCRIPT.GRID.items() if k != "count"}
    inputs, lengths, answers, d, a = retrieval.offset_grid(task, count=count, cells=[CELL],
                                                           **grid)[CELL]
    for i in range(count):
        n, token = int(lengths[i]), leak(i, int(d[i]), inputs[i])
        where = (inputs[i, :n] == token).nonzero().flatten()
        inputs[i, where] = answers[i]
        inputs[i, a[i]] = token
        answers[i] = token
    return task, (inputs, lengths, answers, d, a)


def _above(task, items):
    cells = retrieval.offset_grid_cells(task, **SCRIPT.GRID)
    margin = retrieval.offset_margin(len(items[2]), task.width,
                                     len(SCRIPT.held_readers(task)) * len(cells))
    return SCRIPT.cell_record(task, items, margin)["above_margin"]


def test_the_distance_leaking_into_the_answer_token_is_caught():
    task, items = _leaky_items(lambda i, d, row: task_values()[d % 2])
    assert "bag_learned" in _above(task, items)


def test_the_answer_as_the_smallest_value_is_caught():
    values = set(task_values())
    task, items = _leaky_items(lambda i, d, row: min(t for t in row.tolist() if t in values))
    assert "bag_smallest_id" in _above(task, items)


def task_values():
    return retrieval.OffsetTask().value_symbols


# -- the items ----------------------------------------------------------------------

def _kinds(task, row):
    keys, values = set(task.keys), set(task.value_symbols)
    return "".join("K" if t in keys else "V" if t in values else "B" if t == lm.BOS else ""
                   for t in row)


@settings(max_examples=40, deadline=None)
@given(width=st.integers(2, 5), keys=st.integers(2, 3), seed=st.integers(0, 2 ** 31),
       extra_d=st.integers(0, 40), extra_a=st.integers(0, 20))
def test_items_have_one_structure_and_the_answer_at_the_offset(width, keys, seed,
                                                               extra_d, extra_a):
    task = retrieval.OffsetTask(keys=tuple(range(160, 160 + keys)), width=width)
    d, a = task.shortest_distance + extra_d, task.first_answer + extra_a
    g = torch.Generator().manual_seed(seed)
    inputs, lengths, answers, _, _ = retrieval.make_offset_items(task, [d, d], [a, a], g)
    for row, n, answer in zip(inputs.tolist(), lengths.tolist(), answers.tolist()):
        assert n == a + d + 1
        row = row[:n]
        assert row[a] == answer == retrieval.offset_answer_of(task, row)
        # every key once, each followed by its width values within 2 width - 1 positions
        assert _kinds(task, row) == "B" + ("K" + "V" * width) * keys + "K"
        for key in task.keys:
            p = row.index(key)
            window = row[p + 1:p + 2 * width]
            assert sum(t in task.value_symbols for t in window) == width
            assert window[width - 1] in task.value_symbols
        tokens = [t for t in row if t in task.value_symbols]
        assert len(set(tokens)) == len(tokens)


@settings(max_examples=25, deadline=None)
@given(width=st.integers(2, 6), seed=st.integers(0, 2 ** 31), extra_d=st.integers(0, 30))
def test_what_a_reader_without_distances_sees_does_not_depend_on_the_answers_rank(
        width, seed, extra_d):
    """With the same draws, items whose answers have ranks 1 .. width have one
    and the same sequence of keys and values (the filler dropped): a reader
    that sees no distance cannot tell them apart, so it scores 1 / width at
    best when the rank is uniform, whatever else it reads."""
    task = retrieval.OffsetTask(width=width)
    d, a = task.shortest_distance + extra_d, task.first_answer + 3
    views, answers = set(), set()
    original = retrieval._offset_rank
    for rank in range(1, width + 1):
        def fixed(w, g, rank=rank):
            original(w, g)                       # the same draws as the real one
            return rank
        retrieval._offset_rank, saved = fixed, retrieval._offset_rank
        try:
            inputs, lengths, ans, _, _ = retrieval.make_offset_items(
                task, [d], [a], torch.Generator().manual_seed(seed))
        finally:
            retrieval._offset_rank = saved
        row = inputs[0, :int(lengths[0])].tolist()
        keep = set(task.keys) | set(task.value_symbols)
        views.add(tuple(t for t in row if t in keep))
        answers.add(int(ans[0]))
    assert len(views) == 1 and len(answers) == width


def test_each_reader_on_a_hand_built_item():
    task = retrieval.OffsetTask(width=2)
    F = task.filler_symbols[0]
    # BOS, key 160 + values 192 (offset 1) and 193 (offset 2: the answer), filler,
    # key 161 + filler, 194 (its centre), 195, filler, the query 160
    row = [lm.BOS, 160, 192, 193, F, 161, F, 194, 195, F, 160]
    panel = retrieval.offset_reader_panel(task, torch.tensor([row]), torch.tensor([11]),
                                          torch.tensor([193]))
    want = {"chance": 0.25, "bag_most_frequent": 0.25, "bag_smallest_id": 0.0,
            "counting": 0.5,              # 192 and 193: one query key, no other key before
            "prefix_proportions": 0.0,    # 192: 1 query key among 2 tokens
            "primacy": 0.0, "recency": 0.0, "oracle_offset": 1.0, "ordinal_2": 1.0,
            "ordinal_1": 0.0, "after_query_1": 0.0, "after_query_2": 1.0}
    for name, value in want.items():
        assert panel[name][0] == value, name
    with pytest.raises(ValueError, match="answers"):
        retrieval.offset_reader_panel(task, torch.tensor([row]), torch.tensor([11]),
                                      torch.tensor([192]))


def test_bad_parameters_are_refused_by_name():
    with pytest.raises(ValueError, match="width"):
        retrieval.OffsetTask(width=1)
    with pytest.raises(ValueError, match="width"):
        retrieval.OffsetTask(width=17)             # 2 keys x 17 > 32 values
    with pytest.raises(ValueError, match="distinct"):
        retrieval.OffsetTask(keys=(192, 193))
    task = retrieval.OffsetTask()
    g = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match="shortest_distance"):
        retrieval.make_offset_items(task, [task.shortest_distance - 1], [30], g)
    with pytest.raises(ValueError, match="first_answer"):
        retrieval.make_offset_items(task, [30], [task.first_answer - 1], g)
    with pytest.raises(ValueError, match="one length"):
        retrieval.make_offset_items(task, [30, 31], [30], g)
    with pytest.raises(ValueError, match="max_length"):
        retrieval.offset_grid_cells(task, 64, 8, 4, max_length=100)
    with pytest.raises(ValueError, match="train_length"):
        retrieval.offset_grid_cells(task, 26, 8, 4)
    with pytest.raises(ValueError, match="level"):
        retrieval.offset_margin(256, 8, 10, level=1.5)


def test_the_panel_refuses_mismatched_shapes():
    task = retrieval.OffsetTask()
    inputs, lengths, answers, _, _ = retrieval.make_offset_items(
        task, [30], [30], torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="lengths and answers"):
        retrieval.offset_reader_panel(task, inputs, lengths, answers[:0])
    with pytest.raises(ValueError, match="lengths must be"):
        retrieval.offset_reader_panel(task, inputs, lengths + 5, answers)
