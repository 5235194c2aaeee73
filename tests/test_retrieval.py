"""The passkey retrieval study: the task's items, a smoke run of every code
path, resumption from the cache, the evaluation modes, and the results file."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc_lib import experiment, lm, retrieval

SMOKE = retrieval.Config.smoke()


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("retrieval-cache")


@pytest.fixture(scope="module")
def smoke_results(cache_dir):
    return retrieval.run(SMOKE, device="cpu", cache_dir=cache_dir, progress=False)


def _answer_by_search(config, row):
    """The answer and distance found by reading the sequence: the token after
    the first earlier occurrence of the last input."""
    row = row.tolist()
    query = row[-1]
    where = row.index(query)
    return row[where + 1], len(row) - 1 - (where + 1)


def test_items_hold_the_answer_after_the_query_marker():
    config = retrieval.Config()
    g = torch.Generator().manual_seed(0)
    inputs, answers, distances = retrieval.make_items(config, 64, 200, g)
    assert inputs.shape == (200, 64) and (inputs[:, 0] == lm.BOS).all()
    for row, answer, distance in zip(inputs, answers, distances):
        assert (int(answer), int(distance)) == _answer_by_search(config, row)
        body = row[1:].tolist()
        # each marker exactly once before the query, each followed by a value
        for marker in config.markers:
            assert body[:-1].count(marker) == 1
            assert body[body.index(marker) + 1] in config.value_symbols
        values = [t for t in body if t in config.value_symbols]
        assert len(values) == 2
    # both markers are queried, distances cover [1, n - 3]
    assert set(inputs[:, -1].tolist()) == set(config.markers)
    assert int(distances.min()) >= 1 and int(distances.max()) <= 61


def test_training_targets_are_the_values_first_seen_after_each_marker():
    config = retrieval.Config()
    inputs, targets = retrieval.train_batch(config, torch.Generator().manual_seed(1))
    assert inputs.shape == targets.shape == (config.batch_size, config.train_length)
    for row, target in zip(inputs.tolist(), targets.tolist()):
        first = {}    # marker -> the value after its first occurrence
        for p, token in enumerate(row):
            if token in config.markers and token in first:
                assert target[p] == first[token], (p, row)
            else:
                assert target[p] == -100
                if token in config.markers:
                    first[token] = row[p + 1]
        assert target[-1] != -100 and row[-1] in config.markers
        # a marker's value never changes within a sequence
        for p, token in enumerate(row[:-1]):
            if token in config.markers:
                assert row[p + 1] == first[token]


def test_test_items_are_fixed_and_in_their_band():
    config = retrieval.Config()
    for b, (lo, hi) in enumerate(retrieval.bands(config)):
        inputs, answers, distances = retrieval.eval_items(config, b)
        again = retrieval.eval_items(config, b)
        assert torch.equal(inputs, again[0]) and torch.equal(answers, again[1])
        assert inputs.shape == (config.test_items, hi)
        assert int(distances.min()) >= max(lo, 1) and int(distances.max()) < hi
        for row, answer, distance in zip(inputs[:8], answers, distances):
            assert (int(answer), int(distance)) == _answer_by_search(config, row)
        plain, _, _ = retrieval.eval_items(config, b, bos=False)
        assert torch.equal(plain[:, 1:], inputs[:, 1:]) and not (plain[:, 0] == lm.BOS).any()
    assert retrieval.band_names(config) == list(retrieval.BANDS)


def test_parameters_are_validated():
    with pytest.raises(ValueError, match="markers"):
        retrieval.Config(markers=(128, 128))
    with pytest.raises(ValueError, match="max_multiplier"):
        retrieval.Config(max_multiplier=6)
    with pytest.raises(ValueError, match="models"):
        retrieval.Config(models=("nope", "bogus"))
    with pytest.raises(ValueError, match="max_pairs"):
        retrieval.Config(max_pairs=40)
    with pytest.raises(ValueError, match="distances"):
        retrieval.make_items(retrieval.Config(), 16, 2, torch.Generator(),
                             distances=[1, 14])


def test_smoke_run_covers_every_model_extension_and_band(smoke_results):
    names = list(SMOKE.models) + [f"rope+{e}" for e in SMOKE.extensions]
    bands = retrieval.band_names(SMOKE)
    assert list(smoke_results["accuracy"]) == names
    assert list(smoke_results["bands"]) == bands == ["0-L", "L-2L", "2L-4L"]
    for name in names:
        for band in bands:
            hits = retrieval.outcomes(smoke_results, name, band)
            assert hits.shape == (len(SMOKE.seeds), SMOKE.test_items)
            assert np.allclose(hits.mean(1), smoke_results["accuracy"][name][band],
                               atol=1e-4)
    # at L every scaled extension is plain RoPE
    for ext in ("pi",):
        assert smoke_results["outcomes"][f"rope+{ext}"]["0-L"] == \
            smoke_results["outcomes"]["rope"]["0-L"]
    assert smoke_results["config_hash"] == SMOKE.hash()


def test_a_cached_run_trains_and_evaluates_nothing(smoke_results, cache_dir, monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("the cache was not used")

    monkeypatch.setattr(retrieval, "train_model", fail)
    monkeypatch.setattr(retrieval, "_evaluate_unit", fail)
    again = retrieval.run(SMOKE, device="cpu", cache_dir=cache_dir, progress=False)
    assert again["outcomes"] == smoke_results["outcomes"]
    assert again["training"] == smoke_results["training"]


def test_runs_are_deterministic(smoke_results):
    small = dataclasses.replace(SMOKE, models=("alibi",), extensions=(), seeds=(1,))
    fresh = retrieval.run(small, device="cpu", cache_dir=None, progress=False)
    assert fresh["outcomes"]["alibi"] == {
        band: values[1:] for band, values in smoke_results["outcomes"]["alibi"].items()}


def test_reencode_and_kv_read_the_last_position_as_one_pass_does():
    """Plain RoPE: re-encoding skips to one pass over the whole item, and the
    key-value cache rotates each key once with its own position, so all
    three readings give the same logits (compared through the hits on
    answers set to the full pass's own predictions)."""
    config = SMOKE
    torch.manual_seed(0)
    model = experiment.build_model(config, "rope", 0).eval()
    inputs, _, _ = retrieval.eval_items(config, 2)
    with torch.no_grad():
        predicted = model(inputs)[:, -1].argmax(-1)
    for evaluation in ("full", "reencode", "kv"):
        hit = retrieval.accuracy_on(model, inputs, predicted, evaluation=evaluation,
                                    chunk=config.dynamic_chunk, batch_size=4)
        assert hit.all(), evaluation


def test_command_line_smoke_and_load_results(tmp_path):
    out, log = tmp_path / "smoke.json", tmp_path / "log.txt"
    retrieval.main(["--smoke", "--no-cache", "--quiet", "--device", "cpu",
                    "--out", str(out), "--progress-file", str(log)])
    results = retrieval.load_results(out, config=SMOKE)
    assert results["wall_time_s"] > 0 and results["environment"]["device"] == "cpu"
    assert len(log.read_text().splitlines()) == len(SMOKE.models) * len(SMOKE.seeds)
    with pytest.raises(ValueError, match="configuration"):
        retrieval.load_results(out)   # made by the smoke configuration, not the default
    stale = json.loads(out.read_text())
    stale["schema_version"] = 0
    (tmp_path / "stale.json").write_text(json.dumps(stale))
    with pytest.raises(ValueError, match="schema_version"):
        retrieval.load_results(tmp_path / "stale.json", config=SMOKE)


def test_stored_results_are_current_and_complete():
    results = retrieval.load_results()   # refuses another configuration
    config = retrieval.Config()
    names = list(config.models) + [f"rope+{e}" for e in config.extensions]
    assert list(results["accuracy"]) == names and len(config.models) >= 6
    for name in names:
        for band in retrieval.BANDS:
            hits = retrieval.outcomes(results, name, band)
            assert hits.shape == (len(config.seeds), config.test_items)
            assert np.allclose(hits.mean(1), results["accuracy"][name][band], atol=1e-4)


# -- the task that needs positions ------------------------------------------------------

def _last_binding(row, keys):
    """Brute force: the token after the last occurrence of the query key."""
    query = row[-1]
    last = max(i for i, t in enumerate(row[:-1]) if t == query)
    return row[last + 1]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([64, 128, 512]), st.data())
def test_position_items_answer_the_last_binding_of_the_query(seed, n, data):
    task = retrieval.PositionTask()
    top = max(d for d in range(1, n) if task.shortest(d) <= n)
    d = data.draw(st.integers(1, top))
    g = torch.Generator().manual_seed(seed)
    inputs, answers, distances = retrieval.make_position_items(task, n, [d, d], g)
    assert inputs.shape == (2, n) and distances.tolist() == [d, d]
    keys, values = set(task.keys), set(task.value_symbols)
    for row, answer in zip(inputs.tolist(), answers.tolist()):
        assert row[0] == lm.BOS and row[-1] in keys
        assert _last_binding(row, keys) == answer == row[n - 1 - d]
        # every key once in the first len(keys) pairs: the query key occurs
        # earlier, bound to another value (the distractor that is the key)
        pair_keys = [t for t in row[:-1] if t in keys]
        assert set(pair_keys[:len(task.keys)]) == keys
        assert pair_keys.count(row[-1]) >= 2
        present = [t for t in row if t in values]
        assert len(present) == len(set(present)) == task.pairs
        # each key is followed by a value, each value preceded by a key
        for i, t in enumerate(row[:-1]):
            assert (t in keys) == (row[i + 1] in values)


def _by_sets(row, task):
    # chapter 7's order-free reader: the value whose set of earlier keys holds
    # the query and is smallest (first such, to be deterministic)
    seen, best = set(), None
    for t in row[:-1]:
        if t in task.keys:
            seen = seen | {t}
        elif t in task.value_symbols and row[-1] in seen:
            if best is None or len(seen) < best[0]:
                best = (len(seen), t)
    return best[1]


def test_order_free_readers_score_near_chance_on_every_cell_of_the_grid():
    task = retrieval.PositionTask()
    grid = retrieval.position_grid(task, 64, 8, 64)
    # length and distance vary separately: the band 0-L at every length, and
    # at the longest length every band
    assert {n for n, band in grid if band == "0-L"} == {64, 128, 256, 512}
    assert {band for n, band in grid if n == 512} == set(retrieval.BANDS)
    for (n, band), (inputs, answers, distances) in grid.items():
        control = retrieval.order_free_accuracy(task, inputs, answers)
        # a mean of len(answers) equal terms: that many roundings at most
        exact = pytest.approx(1 / task.pairs, rel=len(answers) * 2.0**-52)
        assert control["bag_of_tokens"] == control["chance"] == exact
        assert control["prefix_sets"] <= control["chance"] + 0.1
        # the bound holds the chapter's reader, measured
        right = np.mean([_by_sets(r, task) == a
                         for r, a in zip(inputs.tolist(), answers.tolist())])
        assert right <= control["prefix_sets"]
        lo, hi = retrieval.bands(retrieval.Config())[retrieval.BANDS.index(band)]
        assert distances.min() >= max(lo, 1) and distances.max() < hi


def test_order_free_bound_against_a_brute_force_count():
    # E[1 / |G_answer|], counted by hand on one item: keys 128-131 then
    # values 64-73; the preamble's last value and every later one share the
    # full set of keys: 10 - 4 + 1 = 7 values
    task = retrieval.PositionTask()
    g = torch.Generator().manual_seed(3)
    inputs, answers, _ = retrieval.make_position_items(task, 64, [20], g)
    assert retrieval.order_free_accuracy(task, inputs, answers)["prefix_sets"] == 1 / 7


def test_position_task_validates_its_parameters():
    with pytest.raises(ValueError, match="distinct"):
        retrieval.PositionTask(keys=(0, 129))
    with pytest.raises(ValueError, match="pairs"):
        retrieval.PositionTask(pairs=4)
    task = retrieval.PositionTask()
    g = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match="distances"):
        retrieval.make_position_items(task, 64, [60], g)
    with pytest.raises(ValueError, match="distances"):
        retrieval.make_position_items(task, 64, [0], g)
