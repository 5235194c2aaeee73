"""The offset-retrieval study (posenc_lib.tools.experiment.offset): its rows'
targets against the task's definition, its scoring against a dense pass, its
cache, its results file and the command line, on the smoke study."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from posenc_lib import lm, retrieval
from posenc_lib.tools import experiment
from posenc_lib.tools.experiment import offset

FULL = offset.OffsetStudy()
SMOKE = offset.OffsetStudy.smoke()


def brute_answer(row: list, width: int) -> int:
    """The definition: the token ``width`` after the query key's first occurrence."""
    return row[row.index(row[-1]) + width]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), bos=st.booleans(), extra=st.integers(0, 6),
       queries=st.sampled_from([1, 2]))
def test_every_scored_target_is_the_value_width_after_its_key(seed, bos, extra, queries):
    import dataclasses

    study = dataclasses.replace(FULL, config=dataclasses.replace(FULL.config,
                                                                 task_queries=queries))
    length = study.config.train_length + extra
    inputs, targets = offset.offset_rows(study, length, 24,
                                         torch.Generator().manual_seed(seed), bos)
    assert inputs.shape == targets.shape == (24, length)
    assert ((targets != -100).sum(1) == queries).all()
    assert ((inputs[:, 0] == lm.BOS) == bos).all()
    for r in range(24):
        row = inputs[r].tolist()
        for q in (targets[r] != -100).nonzero().flatten().tolist():
            assert row[q] in study.task.keys
            assert int(targets[r, q]) == brute_answer(row[:q + 1], study.width)
        keys = [row[q] for q in (targets[r] != -100).nonzero().flatten().tolist()]
        assert len(set(keys)) == len(keys)          # every query a different key


def test_training_pairs_are_uniform_over_every_pair_that_fits():
    task, room = FULL.task, FULL.row_room(FULL.config.train_length)
    pairs = retrieval.offset_pairs(task, room)
    # brute force over every (a, D) of a row of `room` positions
    fits = {(a, d) for a in range(room) for d in range(room)
            if a >= task.first_answer and d >= task.shortest_distance and a + d + 1 <= room}
    assert {tuple(p) for p in pairs.tolist()} == fits and len(pairs) == len(fits)
    _, lengths, _, distances, positions = retrieval.offset_fitting_items(
        task, room, 9_100, torch.Generator().manual_seed(3))
    assert int(lengths.max()) <= room
    index = {p: i for i, p in enumerate(sorted(fits))}
    counts = np.bincount([index[(a, d)] for a, d in zip(positions.tolist(),
                                                           distances.tolist())],
                         minlength=len(fits))
    # level fixed in advance: a uniform draw fails 1 run in 10^6
    assert stats.chisquare(counts).pvalue > 1e-6, counts


def test_a_row_that_holds_no_item_is_refused_naming_the_length():
    with pytest.raises(ValueError, match="length"):
        retrieval.offset_pairs(FULL.task, 40)
    with pytest.raises(ValueError, match="width"):
        offset.OffsetStudy(width=12)
    with pytest.raises(TypeError, match="config"):
        offset.OffsetStudy(config={"train_length": 64})


def dense_hits(model, items, task, bos):
    """One padded pass over all items, read at each item's query (causal:
    what follows the query cannot change it)."""
    inputs, lengths, answers = items[0], items[1], items[2]
    if not bos:
        inputs = offset._without_bos(inputs, task)
    with torch.no_grad():
        logits = model(inputs)[torch.arange(len(lengths)), lengths - 1]
    present = torch.zeros_like(logits, dtype=torch.bool)
    for i in range(len(lengths)):
        row = inputs[i, :lengths[i]].tolist()
        present[i, [t for t in row if t in task.value_symbols]] = True
    return (logits.masked_fill(~present, float("-inf")).argmax(-1) == answers).numpy()


@pytest.mark.parametrize("name", ["rope", "nope-nobos", "learned"])
def test_scoring_by_length_agrees_with_one_dense_pass(name):
    torch.manual_seed(0)
    model = experiment.build_model(FULL.config, name, 0).eval()
    g = torch.Generator().manual_seed(1)
    task = FULL.task
    items = retrieval.make_offset_items(task, torch.randint(24, 90, (40,), generator=g),
                                        torch.randint(25, 64, (40,), generator=g), g)
    bos = experiment.MODELS[name].bos
    got = offset.offset_hits(model, items, task, bos=bos, batch_size=7)
    want = dense_hits(model, items, task, bos)
    assert got.dtype == bool and (got == want).all()
    # hits and misses both occur, so the comparison is not vacuous
    assert want.any() and not want.all(), want
    seen = []
    offset.offset_hits(model, items, task, bos=bos, configure=seen.append)
    assert seen == sorted(set(items[1].tolist()))


def test_reading_the_padded_last_position_is_caught():
    """A planted bug: reading every item at the padded batch's last column."""
    model = experiment.build_model(FULL.config, "rope", 0).eval()
    g = torch.Generator().manual_seed(2)
    items = retrieval.make_offset_items(FULL.task, torch.randint(24, 200, (64,), generator=g),
                                        torch.randint(25, 64, (64,), generator=g), g)
    wrong = (items[0], torch.full_like(items[1], items[0].shape[1]), *items[2:])
    with torch.no_grad():
        good = dense_hits(model, items, FULL.task, True)
        bad = dense_hits(model, wrong, FULL.task, True)
    assert (good != bad).any()


def test_the_smoke_study_runs_resumes_and_is_refused_when_stale(tmp_path):
    cache = tmp_path / "cache"
    first = offset.run_offset(SMOKE, device="cpu", cache_dir=cache, progress=False)
    again = offset.run_offset(SMOKE, device="cpu", cache_dir=cache, progress=False)
    for part in ("outcomes", "accuracy", "cells", "readers", "rows", "study_hash"):
        assert first[part] == again[part], part
    names = set(first["outcomes"])
    assert set(SMOKE.config.models) | set(SMOKE.config.finetunes) <= names
    assert {f"rope+{e}" for e in SMOKE.config.extensions
            if e not in experiment.RETRIEVAL_SKIP} <= names
    assert list(first["cells"])[0] == offset.IN_TRAIN
    for model, cells in first["outcomes"].items():
        for cell, per_seed in cells.items():
            assert len(per_seed) == len(SMOKE.config.seeds)
            assert all(len(s) == SMOKE.items for s in per_seed)
            assert first["accuracy"][model][cell] == [round(float(np.mean(s)), 4)
                                                      for s in per_seed]
    path = experiment.write_results(first, tmp_path / "offset.json")
    assert offset.load_offset_results(path, study=SMOKE)["study_hash"] == SMOKE.hash()
    import dataclasses

    with pytest.raises(ValueError, match="re-run"):
        offset.load_offset_results(path, study=dataclasses.replace(SMOKE, items=7))
    tampered = json.loads(path.read_text())
    tampered["cells"][offset.IN_TRAIN]["sha256"] = "0" * 64
    path.write_text(json.dumps(tampered))
    with pytest.raises(ValueError, match="other items"):
        offset.load_offset_results(path, study=SMOKE)


def test_the_command_line_writes_the_offset_file(tmp_path):
    out = tmp_path / "lg.json"
    experiment.main(["--offset", "--smoke", "--quiet", "--out", str(out), "--cache",
                     str(tmp_path / "cache")])
    results = json.loads(out.with_suffix(".offset.json").read_text())
    assert results["study_hash"] == SMOKE.hash()
    assert not out.exists()                    # the main study did not run


def test_the_panel_on_the_full_study_matches_the_stored_panel_and_holds():
    """The panel the study stores, on its own items: the bands' cells are the
    stored reader panel's (results/retrieval_readers_v2.json, written by
    another script), item for item (digest) and reader for reader, and no
    reader without distances passes the margin there; the in-train cell is
    reported, not held (position and distance readers pass it there: its
    answers span 13 positions and 13 distances, about one block)."""
    from helpers.paths import ROOT

    stored = json.loads((ROOT / "results" / "retrieval_readers_v2.json").read_text())
    cells = offset.offset_cells(FULL)
    panel = offset.offset_panel(FULL, cells)
    assert panel["held_cells"] == list(stored["cells"])
    assert panel["margin"] == pytest.approx(stored["margin"])
    for cell in panel["held_cells"]:
        digest = retrieval.offset_items_digest(cells[cell])
        assert digest == stored["cells"][cell]["sha256"]
        assert panel["cells"][cell]["above_margin"] == [], cell
        for reader, hits in panel["cells"][cell]["hits"].items():
            assert hits == pytest.approx(stored["cells"][cell]["readers"][reader]["hits"])
    in_train = panel["cells"][offset.IN_TRAIN]
    assert in_train["hits"]["oracle_offset"] == FULL.items
    assert set(in_train["above_margin"]) <= {"position_learned", "distance_learned"}


def test_partial_results_read_finished_seeds_from_the_cache_and_train_nothing(tmp_path):
    cache = tmp_path / "cache"
    with pytest.raises(LookupError, match="not all of its checkpoints"):
        offset.partial_results(SMOKE, cache, [0])       # nothing cached yet
    full = offset.run_offset(SMOKE, device="cpu", cache_dir=cache, progress=False)
    part = offset.partial_results(SMOKE, cache, [1])
    assert part["partial"] == {"seeds": [1], "of_study_hash": SMOKE.hash()}
    assert part["study_hash"] != SMOKE.hash()          # load_offset_results refuses it
    for model, cells in full["outcomes"].items():
        for cell, per_seed in cells.items():
            assert part["outcomes"][model][cell] == [per_seed[1]], (model, cell)
    with pytest.raises(ValueError, match="seeds"):
        offset.partial_results(SMOKE, cache, [7])


def test_the_offset_figure_draws_the_stored_accuracy(tmp_path):
    from posenc_lib.figures import experiment as figures

    results = offset.run_offset(SMOKE, device="cpu", cache_dir=None, progress=False)
    names = ["rope", "nope"]
    fig = figures.offset_accuracy(results, names, chance=0.25)
    containers = fig.axes[0].containers
    assert len(containers) == len(names)
    # each marker sits at the cell's accuracy: the mean of the stored per-seed
    # accuracies (every seed scores the same items), cell by cell
    for container, name in zip(containers, names):
        y = container.lines[0].get_ydata()
        stored = [np.mean(results["accuracy"][name][c]) for c in results["cells"]]
        assert np.allclose(y, stored, atol=5e-5), (name, y, stored)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "readers' margin" in labels and "chance (0.25)" in labels
    with pytest.raises(ValueError, match="not in the offset results"):
        figures.offset_accuracy(results, ["rope+dynamic-kv"])
    with pytest.raises(ValueError, match="models is empty"):
        figures.offset_accuracy(results, [])


def test_the_stored_offset_run_is_of_this_study_and_holds_its_panel():
    """results/retrieval_offset.json, which chapter 7 reads: refused unless
    this code's study and items made it (load_offset_results); five seeds of
    every item in every cell; each stored accuracy the mean of its stored
    outcomes; and the panel stored with it is the separately written reader
    panel (results/retrieval_readers_v2.json) on the same band cells."""
    from helpers.paths import ROOT

    stored = offset.load_offset_results(ROOT / offset.OFFSET_PATH, study=FULL)
    assert "partial" not in stored
    seeds, items = len(FULL.config.seeds), FULL.items
    for model, cells in stored["outcomes"].items():
        assert list(cells) == list(stored["cells"]), model
        for cell, per_seed in cells.items():
            outcomes = np.asarray(per_seed)
            assert outcomes.shape == (seeds, items), (model, cell, outcomes.shape)
            assert set(np.unique(outcomes)) <= {0, 1}, (model, cell)
            assert np.allclose(outcomes.mean(1), stored["accuracy"][model][cell],
                               atol=5e-5), (model, cell)
    panel = json.loads((ROOT / "results" / "retrieval_readers_v2.json").read_text())
    assert stored["readers"]["held_cells"] == list(panel["cells"])
    for cell in panel["cells"]:
        assert stored["cells"][cell]["sha256"] == panel["cells"][cell]["sha256"]
        hits = stored["readers"]["cells"][cell]["hits"]
        for reader, entry in panel["cells"][cell]["readers"].items():
            assert hits[reader] == pytest.approx(entry["hits"]), (cell, reader)


@pytest.mark.parametrize("multiple", [1, 2])
def test_row_ranges_lie_inside_the_rows_they_measure(multiple):
    """row_ranges at L and at 2L (the fine-tunes' rows): every scored query's
    answer lies after BOS and before its query, inside the row; longer rows
    reach longer distances; a bad length is refused by name."""
    L = FULL.config.train_length * multiple
    got = offset.row_ranges(FULL, rows=256, length=L)
    for part in ("first_query", "every_query"):
        (d_lo, d_hi), (a_lo, a_hi) = got[part]["distances"], got[part]["answer_positions"]
        assert 1 <= a_lo <= a_hi and a_hi + d_lo < L and d_hi < L, (part, got)
        assert d_lo >= 1
    if multiple == 2:
        at_l = offset.row_ranges(FULL, rows=256)
        assert got["first_query"]["distances"][1] > at_l["first_query"]["distances"][1]
    with pytest.raises(ValueError, match="length"):
        offset.row_ranges(FULL, length=0)
