"""The length-generalization study: smoke run of every code path, determinism,
resumption, the distributed path, the bootstrap, and the stored results."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from posenc_lib import lm
from posenc_lib.tools import experiment

ROOT = Path(__file__).resolve().parents[1]

SMOKE = experiment.Config.smoke()


def _strip(results):
    """Everything except wall-clock times and where it ran."""
    results = json.loads(json.dumps(results))
    results.pop("wall_time_s")
    results.pop("environment")
    for entry in results["models"].values():
        entry.get("train", {}).pop("seconds", None)
    for entry in results.get("retrieval", {}).get("training", {}).values():
        entry.pop("seconds", None)
    return results


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("experiment-cache")


@pytest.fixture(scope="module")
def smoke_results(cache_dir):
    return experiment.run(SMOKE, cache_dir=cache_dir, progress=False)


def test_smoke_run_covers_every_model_extension_and_probe(smoke_results):
    models = smoke_results["models"]
    expected = (set(experiment.MODELS) | {f"rope+{e}" for e in experiment.EXTENSIONS}
                | set(experiment.FINETUNES))
    assert set(models) == expected
    assert set(smoke_results["probe"]["models"]) == expected
    seeds, windows = len(SMOKE.seeds), SMOKE.eval_windows
    n_buckets = SMOKE.eval_length // SMOKE.bucket
    for name in [*experiment.MODELS, *experiment.FINETUNES]:
        for table in ("loss", "sliding"):
            array = np.asarray(models[name][table][str(SMOKE.eval_length)])
            assert array.shape == (seeds, windows, n_buckets), (name, table)
            assert np.isfinite(array).all() and (array > 0).all()
    for name, spec in experiment.EXTENSIONS.items():
        lengths = ([f * SMOKE.train_length for f in SMOKE.factors] if spec.scaled
                   else [SMOKE.eval_length])
        assert sorted(models[f"rope+{name}"]["loss"], key=int) == [str(n) for n in lengths]
        for n in lengths:
            array = np.asarray(models[f"rope+{name}"]["loss"][str(n)])
            assert array.shape == (seeds, windows, n // SMOKE.bucket) and np.isfinite(array).all()
    for name, scores in smoke_results["probe"]["models"].items():
        for key in ("second_loss", "second_acc", "first_loss"):
            array = np.asarray(scores[key])
            assert array.shape == (seeds, SMOKE.probe_count, len(SMOKE.probe_distances))
            assert np.isfinite(array).all(), (name, key)
    assert smoke_results["config_hash"] == SMOKE.hash()
    assert smoke_results["bands"] == [[0, 16], [16, 32], [32, 64]]


def test_seeded_runs_are_bitwise_deterministic_and_resume_from_the_cache(
        smoke_results, cache_dir, monkeypatch):
    again = experiment.run(SMOKE, cache_dir=None, progress=False)
    assert _strip(again) == _strip(smoke_results)

    def no_training(*args, **kwargs):
        raise AssertionError("a cached model was trained again")

    def no_evaluation(*args, **kwargs):
        raise AssertionError("a cached evaluation was run again")

    monkeypatch.setattr(experiment.running, "train_model", no_training)
    monkeypatch.setattr(experiment.running, "finetune_model", no_training)
    monkeypatch.setattr(experiment.running, "_evaluate_unit", no_evaluation)
    assert _strip(experiment.run(SMOKE, cache_dir=cache_dir, progress=False)) == \
        _strip(smoke_results)


def test_a_new_extension_costs_evaluation_only(tmp_path, monkeypatch):
    """Adding an extension (and changing how evaluation reads windows) re-uses
    the trained checkpoints and the other extensions' cached evaluations."""
    small = dataclasses.replace(SMOKE, models=("rope",), seeds=(0,),
                                extensions=("pi", "dynamic"), finetunes=())
    first = experiment.run(small, cache_dir=tmp_path, progress=False)
    evaluated = []
    real = experiment.evaluation._evaluate_unit
    monkeypatch.setattr(experiment.running, "train_model",
                        lambda *a, **k: pytest.fail("retrained a cached model"))
    monkeypatch.setattr(experiment.running, "_evaluate_unit",
                        lambda config, model, unit, *a: evaluated.append(unit)
                        or real(config, model, unit, *a))
    more = dataclasses.replace(small, extensions=("pi", "dynamic", "yarn"))
    second = experiment.run(more, cache_dir=tmp_path, progress=False)
    assert evaluated == ["ext:yarn", "probe:yarn", "retrieval:yarn"]
    assert second["models"]["rope+pi"] == first["models"]["rope+pi"]
    evaluated.clear()
    experiment.run(dataclasses.replace(more, eval_windows=3), cache_dir=tmp_path,
                   progress=False)
    assert "full" in evaluated   # the evaluation changed: re-evaluated, not retrained


@pytest.mark.slow
def test_two_processes_with_gloo_give_the_results_of_one(smoke_results, tmp_path):
    """The torchrun path (the command line, rank-sharded jobs, gathered with gloo)
    on the CPU, against the one-process run of the same configuration.

    Slow for a unit test (7 s on an idle 2-core machine), and not for the work
    (the smoke study takes 3 s in one process, shared here by two ranks): the
    rest is start-up, three interpreters importing torch (the launcher and two
    ranks) and their rendezvous. A smaller configuration saves nothing
    measurable; starting the ranks without torchrun would test less than the
    command the README gives.
    """
    out = tmp_path / "distributed.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                    "--nproc_per_node", "2", "-m", "posenc_lib.tools.experiment", "--smoke",
                    "--no-cache", "--quiet", "--device", "cpu", "--out", str(out)],
                   check=True, env=env, cwd=ROOT, capture_output=True)
    distributed = json.loads(out.read_text())
    assert distributed["environment"]["world_size"] == 2
    jobs = [(n, s) for n in SMOKE.models for s in SMOKE.seeds]
    assert all(experiment.jobs._share(SMOKE, jobs, 2))   # both ranks had work
    expected = _strip(smoke_results)
    retrieval = expected.pop("retrieval")
    assert _strip(distributed) == expected
    assert _strip({"retrieval": json.loads(out.with_suffix(".retrieval.json").read_text()),
                   "wall_time_s": 0, "environment": 0, "models": {}})["retrieval"] == retrieval


def test_jobs_are_shared_out_completely():
    jobs = [(n, s) for n in SMOKE.models for s in SMOKE.seeds]
    for world in (1, 2, 3, 40):
        shares = experiment.jobs._share(SMOKE, jobs, world)
        assert sorted(i for share in shares for i in share) == list(range(len(jobs)))


def test_every_model_predicts_the_same_targets():
    rows = torch.arange(10, dtype=torch.uint8).view(2, 5)
    with_bos, targets = experiment.data._split(rows, bos=True)
    without, targets_again = experiment.data._split(rows, bos=False)
    assert torch.equal(targets, targets_again) and torch.equal(targets, rows[:, 1:].long())
    assert (with_bos[:, 0] == lm.BOS).all() and torch.equal(without[:, 0], rows[:, 0].long())
    assert torch.equal(with_bos[:, 1:], without[:, 1:])


def test_probe_plants_the_same_string_twice_at_the_distance():
    data, _ = experiment.load_bytes(SMOKE.eval_files)
    a, k = SMOKE.probe_offset, SMOKE.probe_length
    for distance in SMOKE.probe_distances:
        rows = experiment.data._probe_rows(SMOKE, data, distance)
        _, targets = experiment.data._split(rows, bos=True)
        assert targets.shape == (SMOKE.probe_count, a + distance + k)
        first, second = targets[:, a:a + k], targets[:, a + distance:a + distance + k]
        assert torch.equal(first, second)
        assert set(first.flatten().tolist()) <= set(SMOKE.probe_symbols)
        assert not torch.equal(first[0], first[1])


def test_the_copy_task_planted_in_training():
    config = experiment.Config()
    k, L = config.probe_length, config.train_length
    rows = torch.full((32, L + 1), 0, dtype=torch.uint8)
    generator = torch.Generator().manual_seed(0)
    distances = set()
    n = round(config.train_plant_fraction * 32)
    for _ in range(50):
        planted = experiment.training._plant(config, rows, generator)
        assert (planted[n:] == 0).all() and (rows == 0).all()   # the first rows, a copy
        for row in planted[:n, 1:]:
            where = row.nonzero().flatten()   # the alphabet has no byte 0
            first, last = int(where[0]), int(where[-1])
            distance = last + 1 - k - first
            assert first >= 1 and last < L and k <= distance
            assert torch.equal(row[first:first + k], row[first + distance:last + 1])
            distances.add(distance)
    assert min(distances) == k and max(distances) > L - 2 * k


def test_evaluation_modes_agree_where_they_must():
    """For a scheme that does not depend on the length, re-encoding the prefix and
    the key-value cache both equal one pass; the sliding window equals one pass
    inside the training length."""
    torch.manual_seed(0)
    model = experiment.build_model(SMOKE, "rope", 0).eval()
    rows = torch.randint(0, 256, (3, 65), dtype=torch.uint8,
                         generator=torch.Generator().manual_seed(2))
    inputs, targets = experiment.data._split(rows, bos=True)
    whole, hits = experiment.position_losses(model, inputs, targets)
    for evaluation in ("reencode", "kv"):
        loss, again = experiment.position_losses(model, inputs, targets,
                                                 evaluation=evaluation, chunk=5)
        assert torch.allclose(loss, whole, atol=1e-5) and torch.equal(again, hits)
    sliding = experiment.evaluation._sliding_losses(SMOKE, model, rows, bos=True)
    L = SMOKE.train_length
    assert torch.allclose(sliding[:, :L], whole[:, :L], atol=1e-5)
    assert not torch.allclose(sliding[:, L:], whole[:, L:], atol=1e-3)
    partial, _ = experiment.position_losses(model, inputs, targets, evaluation="reencode",
                                            chunk=8, needed=[(40, 44)])
    assert torch.isnan(partial[:, :40]).all() and torch.allclose(partial[:, 40:48],
                                                                 whole[:, 40:48], atol=1e-5)


def test_dynamic_ntk_at_the_extension_factor():
    # Within L it is plain RoPE at any factor; at factor 1 it is "dynamic";
    # at factor 2 on 2L it differs from both (the bracket f·n/L - (f - 1)).
    model = experiment.build_model(SMOKE, "rope", 0).eval()
    L, g = SMOKE.train_length, torch.Generator().manual_seed(3)
    short, long = torch.randint(0, 256, (2, L), generator=g), torch.randint(
        0, 256, (2, 2 * L), generator=g)
    ext = experiment.EXTENSIONS
    with torch.no_grad():
        plain_short, plain_long = model(short), model(long)
        ext["dynamic"].configure(model.scheme, 2.0, L)
        dynamic_long = model(long)
        ext["dynamic-f"].configure(model.scheme, 4.0, L)
        assert torch.allclose(model(short), plain_short, atol=1e-5)
        ext["dynamic-f"].configure(model.scheme, 1.0, L)
        assert torch.equal(model(long), dynamic_long)
        ext["dynamic-f"].configure(model.scheme, 2.0, L)
        two = model(long)
        assert not torch.allclose(two, dynamic_long, atol=1e-5)
        assert not torch.allclose(two, plain_long, atol=1e-5)


@pytest.mark.parametrize("name", [n for n, e in experiment.EXTENSIONS.items()
                                  if e.scaled and n != "dynamic-f"])
def test_every_extension_at_factor_one_is_plain_rope(name):
    model = experiment.build_model(SMOKE, "rope", 0).eval()
    tokens = torch.randint(0, 256, (2, SMOKE.train_length),
                           generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        reference = model(tokens)
        experiment.EXTENSIONS[name].configure(model.scheme, 1.0, SMOKE.train_length)
        assert torch.allclose(model(tokens), reference, atol=1e-5), name
        experiment.EXTENSIONS[name].configure(model.scheme, 2.0, SMOKE.train_length)
        assert not torch.allclose(model(tokens), reference, atol=1e-5), name


def test_unused_learned_rows_decay_as_adamw_predicts(smoke_results):
    """Rows beyond the training length get no gradient, so only AdamW's decoupled
    decay acts on them: they shrink by the product of (1 - lr_t · weight_decay)."""
    expected = math.prod(1 - SMOKE.lr * experiment.lr_factor(SMOKE, t) * SMOKE.weight_decay
                         for t in range(SMOKE.steps))
    for ratio in smoke_results["models"]["learned"]["train"]["table_norm_ratio"]:
        # float32: one rounding per multiplication, relative 2^-24 each.
        assert abs(ratio["unused"] - expected) <= 2 * SMOKE.steps * 2.0 ** -24 * expected
        assert ratio["unused_rowwise_spread"] < 1e-6
        assert abs(ratio["used"] - expected) > 1e-3


def test_interval_is_the_seed_level_t_interval_of_the_paired_means():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(3, 50))
    b = rng.normal(size=(3, 50))
    got = experiment.interval(a, b)
    # scipy's one-sample t-test on the per-seed means of the difference
    ref = stats.ttest_1samp((a - b).mean(1), 0.0).confidence_interval(0.95)
    assert got.mean == pytest.approx((a - b).mean())
    assert (got.low, got.high) == pytest.approx((ref.low, ref.high), rel=1e-12)
    assert experiment.p_value(a, b) == pytest.approx(
        stats.ttest_1samp((a - b).mean(1), 0.0).pvalue, rel=1e-12)
    shifted = experiment.interval(a + 0.25, a)     # a constant paired difference
    assert shifted.mean == pytest.approx(0.25) and shifted.high - shifted.low < 1e-12
    # The keywords of the old bootstrap change nothing, and say so.
    for resampling_seed in range(5):
        with pytest.warns(DeprecationWarning, match="n_resamples and seed"):
            assert experiment.interval(a, b, seed=resampling_seed, n_resamples=99) == got
    with pytest.raises(ValueError, match="paired"):
        experiment.interval(a, a[:, :10])
    with pytest.raises(ValueError, match="seeds, units"):
        experiment.interval(a[0])
    with pytest.raises(ValueError, match="2 seeds"):
        experiment.interval(a[:1])
    with pytest.raises(ValueError, match="clusters"):
        experiment.interval(a, clusters=np.zeros(49))
    with pytest.raises(ValueError, match="confidence"):
        experiment.interval(a, confidence=1.0)


def _coverage(seeds, seed_sd, cluster_sd, cell_sd, clustered, trials=1000):
    """Fraction of intervals that hold the true mean 0 over ``trials`` draws of
    a (seeds, 64) matrix: seed effects, effects of 20 clusters of unequal
    size shared by every seed, and independent cell noise."""
    rng = np.random.default_rng(1234 + seeds)
    labels = np.repeat(np.arange(20), np.arange(20) % 6 + 1)[:64]
    labels = np.concatenate([labels, np.full(64 - labels.size, 19)])
    hits = 0
    for _ in range(trials):
        x = (seed_sd * rng.normal(size=(seeds, 1))
             + cluster_sd * rng.normal(size=20)[labels][None]
             + cell_sd * rng.normal(size=(seeds, 64)))
        ci = experiment.interval(x, clusters=labels if clustered else None)
        hits += ci.low <= 0.0 <= ci.high
    return hits / trials


@pytest.mark.parametrize("seeds", [3, 5])
@pytest.mark.parametrize("seed_sd, cell_sd", [(1.0, 1.0), (0.02, 1.0)],
                         ids=["seed-dominated", "unit-dominated"])
def test_seed_level_interval_covers_at_the_nominal_rate(seeds, seed_sd, cell_sd):
    # 1000 draws: the binomial standard error of a 0.95 rate is 0.007.
    assert abs(_coverage(seeds, seed_sd, 0.0, cell_sd, False) - 0.95) < 0.025


@pytest.mark.parametrize("seeds", [3, 5])
@pytest.mark.parametrize("seed_sd, cluster_sd", [(0.0, 1.0), (1.0, 1.0), (0.3, 1.0)],
                         ids=["cluster-dominated", "equal", "mixed"])
def test_clustered_interval_covers_near_the_nominal_rate(seeds, seed_sd, cluster_sd):
    # Shared cluster effects: the seed-level interval ignores them and covers
    # far less (here 0.4 at most for the first case), the clustered one about
    # 0.95 (Satterthwaite and 20 clusters: approximate).
    assert 0.91 < _coverage(seeds, seed_sd, cluster_sd, 0.5, True) < 0.99
    if seed_sd == 0.0:
        assert _coverage(seeds, seed_sd, cluster_sd, 0.5, False, trials=200) < 0.6


@pytest.mark.parametrize("seeds", [3, 5])
@pytest.mark.parametrize("cluster_sd", [0.1, 0.3])
def test_clustered_interval_covers_when_the_seeds_dominate(seeds, cluster_sd):
    # Shared file effects under a dominant seed effect: Satterthwaite's
    # degrees of freedom alone let the added component make the interval
    # narrower than the seed-level one (coverage 0.927-0.931). Never narrower
    # than that one: at least 0.94 (4000 draws: the binomial standard error
    # of a 0.95 rate is 0.0034, so 0.94 is 3 of them below it).
    assert _coverage(seeds, 1.0, cluster_sd, 0.5, True, trials=4000) >= 0.94


def test_clustered_interval_is_never_narrower_than_its_seed_part_nor_its_df_above_the_clusters():
    rng = np.random.default_rng(3)
    labels = np.sort(np.arange(64) % 25)      # 25 files of 2 or 3 windows
    for _ in range(50):
        x = (rng.normal(size=(3, 1)) + 0.2 * rng.normal(size=25)[labels][None]
             + 0.5 * rng.normal(size=(3, 64)))
        seeds_only = experiment.interval(x)
        both = experiment.interval(x, clusters=labels)
        assert both.high - both.low >= seeds_only.high - seeds_only.low - 1e-12
        # the p-value agrees with the interval: 0 is excluded iff p < 0.05
        p = experiment.p_value(x, clusters=labels)
        assert both.excludes(0.0) == (p < 0.05)
        assert experiment.stats._t_statistic(x, labels).df <= 24 + 1e-9
    # Seed and file components in the ratio that maximises Satterthwaite's
    # degrees of freedom (2 + 24 = 26 at most); 25 files allow 24. Additive
    # effects, so the residual is 0 and the components are computed here
    # directly: the seed part from the row means, the file part from the
    # file totals of the column means (cluster-robust, factor G / (G - 1)).
    files = np.linspace(-1.0, 1.0, 25)[labels]
    exceeded = False
    for scale in np.geomspace(1e-3, 1.0, 40):
        x = scale * np.array([-1.0, 0.0, 1.0])[:, None] + files[None]
        seed_var = x.mean(1).var(ddof=1) / 3
        totals = np.bincount(labels, weights=x.mean(0) - x.mean())
        file_var = 25 / 24 * (totals ** 2).sum() / 64 ** 2
        satterthwaite = (seed_var + file_var) ** 2 / (seed_var ** 2 / 2
                                                      + file_var ** 2 / 24)
        exceeded |= satterthwaite > 24.5
        assert experiment.degrees_of_freedom(x, clusters=labels) <= 24 + 1e-9
    assert exceeded   # the cap was needed somewhere on the way


# -- intervals for 0/1 outcomes -------------------------------------------------------

_GH_X, _GH_W = np.polynomial.hermite_e.hermegauss(80)
_GH_W = _GH_W / _GH_W.sum()


def _expected_accuracy(logit, seed_sd, item_sd):
    """E[expit(logit + seed_sd a + item_sd b)], a and b standard normal
    (Gauss-Hermite, 80 x 80 nodes: exact to far below the Monte Carlo error)."""
    from scipy import special

    z = logit + seed_sd * _GH_X[:, None] + item_sd * _GH_X[None, :]
    return float((special.expit(z) * _GH_W[:, None] * _GH_W[None, :]).sum())


def _accuracy_coverage(seeds, p, seed_sd, item_sd, shift=None, trials=4000, items=128):
    """Fraction of ``trials`` intervals holding the expected accuracy (or the
    expected difference) under a logistic model: logit ``logit(p)`` plus a
    normal effect per seed and per item; ``shift``: a second model, with the
    logit moved by ``shift``, sharing the first's effects and adding its own
    (half their size), on the same seeds and items."""
    from scipy import special

    rng = np.random.default_rng([seeds, round(1000 * p), round(10 * seed_sd),
                                 round(10 * item_sd), 0 if shift is None else 1])
    mu = special.logit(p)
    a = seed_sd * rng.normal(size=(trials, seeds, 1))
    b = item_sd * rng.normal(size=(trials, 1, items))
    x = (rng.random((trials, seeds, items)) < special.expit(mu + a + b)).astype(float)
    truth, y = _expected_accuracy(mu, seed_sd, item_sd), None
    if shift is not None:
        a2 = a + 0.5 * seed_sd * rng.normal(size=(trials, seeds, 1))
        b2 = b + 0.5 * item_sd * rng.normal(size=(trials, 1, items))
        y = (rng.random((trials, seeds, items))
             < special.expit(mu + shift + a2 + b2)).astype(float)
        truth -= _expected_accuracy(mu + shift, math.hypot(seed_sd, seed_sd / 2),
                                    math.hypot(item_sd, item_sd / 2))
    _, low, high, _, _ = experiment.stats._accuracy_bounds(x, y, 0.95)
    assert (high > low).all()
    return float(((low <= truth) & (truth <= high)).mean())


@pytest.mark.parametrize("seeds", [3, 5])
@pytest.mark.parametrize("p", [0.7, 0.95, 0.99])
@pytest.mark.parametrize("seed_sd, item_sd", [(1.0, 0.0), (1.0, 1.0), (0.3, 1.0)],
                         ids=["seeds", "both", "items"])
def test_accuracy_interval_covers(seeds, p, seed_sd, item_sd):
    # 4000 draws of (seeds, 128) outcomes: the Monte Carlo standard error of
    # a coverage of 0.95 is 0.0034, so the floor of 0.93 lies 5.8 of
    # them below the nominal rate.
    assert _accuracy_coverage(seeds, p, seed_sd, item_sd) >= 0.93


def _paired_coverage(rng, trials, items, mu_x, mu_y, seed_sd, collapse_x=0.0,
                     collapse_y=0.0, rho=0.0, same_items=True, seeds=5):
    """Coverage of :func:`experiment.accuracy_interval`'s paired difference
    under a logistic model: per model a logit ``mu``, a normal seed effect
    (``seed_sd``; the two models' effects correlated ``rho``, as models that
    share a seed's weights and batches are), item effects of 1 fixed per
    study (the same items for both, or other items), and with probability
    ``collapse`` a seed that scores chance (1/6) on every item. The target is
    the expected difference over seeds *on these items* (Gauss-Hermite)."""
    from scipy import special

    def expected(mu, v, collapse):
        p = special.expit(mu + seed_sd * _GH_X[:, None] + v[None, :])
        return ((1 - collapse) * (_GH_W[:, None] * p).sum(0) + collapse / 6).mean()

    v = rng.normal(size=items)
    w = v if same_items else rng.normal(size=items)
    truth = expected(mu_x, v, collapse_x) - expected(mu_y, w, collapse_y)
    ux = seed_sd * rng.normal(size=(trials, seeds, 1))
    uy = rho * ux + math.sqrt(1 - rho ** 2) * seed_sd * rng.normal(size=(trials, seeds, 1))

    def draw(mu, u, z, collapse):
        p = special.expit(mu + u + z[None, None, :])
        p = np.where(rng.random((trials, seeds, 1)) < collapse, 1 / 6, p)
        return (rng.random(p.shape) < p).astype(float)

    x, y = draw(mu_x, ux, v, collapse_x), draw(mu_y, uy, w, collapse_y)
    _, low, high, _, _ = experiment.stats._paired_bounds(x, y, 0.95)
    return float(((low <= truth) & (truth <= high)).mean())


# The study's sizes: bands of 128 to 512 items, 5 seeds. (logit_x, logit_y,
# seed effect, collapse probability of x and of y)
_NULL = [(0.0, 0.0, 2.0, 0.0, 0.0), (3.0, 3.0, 1.0, 0.0, 0.0),
         (3.0, 3.0, 2.0, 0.2, 0.2), (4.5, 4.5, 2.0, 0.0, 0.0)]
_EFFECT = [(3.0, 1.0, 2.0, 0.0, 0.0), (4.0, 0.0, 2.0, 0.0, 0.0),
           (3.0, 1.0, 1.0, 0.0, 0.0), (4.0, 0.0, 0.5, 0.0, 0.0)]
# both models' seeds collapse, each with probability 0.2, and they differ
_BOTH = [(4.0, 0.0, 1.0, 0.2, 0.2), (4.0, 0.0, 0.5, 0.2, 0.2)]
_FLOOR = {"null": (0.935, 0.92), "effect": (0.905, 0.89), "both": (0.855, 0.84)}


def _kind(case):
    return "null" if case in _NULL else "effect" if case in _EFFECT else "both"


@pytest.mark.parametrize("items", [128, 512])
@pytest.mark.parametrize("case", _NULL + _EFFECT + _BOTH)
def test_paired_accuracy_difference_covers(items, case):
    # 1000 studies each (Monte Carlo s.e. of a coverage of 0.95: 0.007).
    # Measured with 4000 (the slow test): at least 0.94 at a true difference
    # of 0, at least 0.91 elsewhere without collapses, at least 0.86 when
    # both models collapse; the floors lie 2-3 s.e. below those.
    mu_x, mu_y, sd, cx, cy = case
    rng = np.random.default_rng([items, *(round(10 * v) for v in case)])
    coverage = _paired_coverage(rng, 1000, items, mu_x, mu_y, sd, cx, cy, rho=0.5,
                                same_items=items == 128)
    assert coverage >= _FLOOR[_kind(case)][1]


def test_paired_accuracy_difference_misses_a_rare_collapse():
    # A seed that collapses in one model only, with probability 0.2: five
    # seeds show none in 0.8 ** 5 = 33 % of studies, and then the interval,
    # which sees no collapse, misses the target. The docstring says so.
    rng = np.random.default_rng(7)
    coverage = _paired_coverage(rng, 1000, 512, 3.0, 3.0, 1.0, collapse_x=0.2)
    assert 0.55 < coverage < 0.85


@pytest.mark.slow
@pytest.mark.parametrize("items", [128, 256, 384, 512])
def test_paired_accuracy_difference_covers_slow(items):
    rng = np.random.default_rng(items)
    for case in _NULL + _EFFECT + _BOTH:
        for rho in (0.0, 0.8):
            for same in (True, False):
                c = _paired_coverage(rng, 4000, items, *case, rho=rho, same_items=same)
                assert c >= _FLOOR[_kind(case)][0], (case, rho, same, c)


def test_paired_accuracy_interval_is_the_t_interval_on_per_seed_differences():
    # Where the seeds' spread exceeds the within-seed floor, the interval is
    # scipy's one-sample t interval on the per-seed differences of accuracy.
    rng = np.random.default_rng(3)
    p = rng.uniform(0.3, 1.0, size=(5, 1))
    x = (rng.random((5, 256)) < p).astype(float)
    y = (rng.random((5, 200)) < 0.5).astype(float)          # other items, fewer
    ci = experiment.accuracy_interval(x, y)
    ref = stats.ttest_1samp(x.mean(1) - y.mean(1), 0.0)
    assert np.allclose([ci.low, ci.high], list(ref.confidence_interval()), rtol=1e-10)
    assert math.isclose(experiment.accuracy_p_value(x, y), ref.pvalue, rel_tol=1e-9)


@pytest.mark.parametrize("items, p, seed_sd, floor", [
    (512, 0.95, 1.0, 0.90), (384, 0.99, 1.0, 0.90), (512, 0.99, 2.0, 0.82)])
def test_accuracy_interval_covers_at_the_studys_band_sizes(items, p, seed_sd, floor):
    # 5 seeds, item effect 1, 1500 draws (Monte Carlo s.e. about 0.006-0.009).
    # Measured with 2000 draws at 128-512 items: at least 0.926 for seed
    # effects up to 1, 0.849-0.87 near the ceiling (0.99) with seed effect 2;
    # the floors lie about 3 s.e. below.
    assert _accuracy_coverage(5, p, seed_sd, 1.0, trials=1500, items=items) >= floor


def test_accuracy_interval_for_perfect_and_nearly_perfect_scores():
    perfect = np.ones((3, 128))
    one_miss_each = perfect.copy()
    one_miss_each[[0, 1, 2], [41, 63, 120]] = 0   # three different items
    ci = experiment.accuracy_interval(perfect)
    assert ci.mean == 1.0 and ci.high == 1.0 and ci.low < 1.0   # not certainty
    # Wilson's bound for 384 independent answers at the seed-level quantile
    # is the least it may claim
    q = stats.t.ppf(0.975, 2)
    assert ci.low <= 384 / (384 + q ** 2)
    diff = experiment.accuracy_interval(one_miss_each, perfect)
    assert diff.low < 0.0 < diff.high                       # 3 in 384 is no difference
    assert experiment.accuracy_p_value(one_miss_each, perfect) > 0.05
    # ... and Fisher's exact test agrees that it is none
    assert stats.fisher_exact([[381, 3], [384, 0]]).pvalue > 0.05
    assert experiment.accuracy_p_value(perfect, perfect) == 1.0
    # a large, consistent drop is one
    half = np.zeros((3, 128))
    half[:, ::2] = 1
    assert experiment.accuracy_interval(half, perfect).high < 0.0
    assert experiment.accuracy_p_value(half, perfect) < 0.05


def test_accuracy_p_value_agrees_with_the_interval():
    rng = np.random.default_rng(5)
    for _ in range(30):
        p = rng.uniform(0.5, 1.0, size=(2, 3, 1))
        x, y = (rng.random((2, 3, 40)) < p).astype(float)
        pv = experiment.accuracy_p_value(x, y)
        for confidence in (0.9, 0.95, 0.99):
            ci = experiment.accuracy_interval(x, y, confidence=confidence)
            if abs(pv - (1 - confidence)) > 1e-9:
                assert ci.excludes(0.0) == (pv < 1 - confidence)


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 5), st.integers(2, 12), st.data())
def test_accuracy_intervals_stay_in_range_and_never_have_zero_width(seeds, items, data):
    cells = st.lists(st.integers(0, 1), min_size=seeds * items, max_size=seeds * items)
    x = np.array(data.draw(cells), dtype=float).reshape(seeds, items)
    y = np.array(data.draw(cells), dtype=float).reshape(seeds, items)
    one = experiment.accuracy_interval(x)
    assert 0.0 <= one.low <= one.mean <= one.high <= 1.0 and one.high > one.low
    two = experiment.accuracy_interval(x, y)
    assert -1.0 <= two.low <= two.mean <= two.high <= 1.0 and two.high > two.low


def test_accuracy_interval_validates_its_input():
    x = np.ones((3, 10))
    with pytest.raises(ValueError, match="0/1"):
        experiment.accuracy_interval(x * 0.5)
    with pytest.raises(ValueError, match="seeds, items"):
        experiment.accuracy_interval(x[:1])
    with pytest.raises(ValueError, match="same seeds"):
        experiment.accuracy_interval(x, x[:2])
    with pytest.raises(ValueError, match="confidence"):
        experiment.accuracy_interval(x, confidence=1.0)


def test_holm_levels_agree_with_holm():
    p = [0.001, 0.2, 0.012, 0.04, 0.02]
    levels = experiment.holm_levels(p)
    reject = experiment.holm(p)
    assert reject == [True, False, True, False, False]
    # an interval at each level excludes 0 exactly when p < 1 - level
    assert [pi < 1 - lv for pi, lv in zip(p, levels)] == reject
    assert levels[0] == pytest.approx(1 - 0.05 / 5) and levels[2] == pytest.approx(
        1 - 0.05 / 4)
    assert levels[3] == levels[1] == levels[4] == pytest.approx(1 - 0.05 / 3)


def test_window_files_name_the_file_each_window_starts_in():
    import sysconfig
    from pathlib import Path

    config = experiment.Config()
    results = {"config": config.to_dict()}
    files = experiment.window_files(results)
    assert files.shape == (config.eval_windows,)
    rows = experiment.data._eval_rows(config, experiment.load_bytes(config.eval_files)[0])
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for row, f in zip(rows, files.tolist()):
        text = (stdlib / f"{config.eval_files[f]}.py").read_bytes()
        assert bytes(row[:12].tolist()) in text      # the window starts there


def test_compare_adjusts_a_family_with_holm(smoke_results):
    comparisons = [experiment.compare(smoke_results, a, "t5", 0)
                   for a in ("nope", "alibi", "rope")]
    adjusted = experiment.adjust(comparisons)
    assert [c.rejected for c in adjusted] == experiment.holm(
        [c.p for c in comparisons])
    for c in comparisons:   # alone, the verdict follows the interval
        assert (c.verdict != "not distinguishable here") == (c.p < 0.05)
    with pytest.raises(ValueError, match="p-values"):
        experiment.adjust([comparisons[0]._replace(p=math.nan)])


def test_holm_rejects_step_down():
    # sorted: 0.005 <= 0.05/4, 0.01 <= 0.05/3, 0.03 > 0.05/2: stop
    assert experiment.holm([0.01, 0.04, 0.03, 0.005]) == [True, False, False, True]
    assert experiment.holm([0.04, 0.04]) == [False, False]
    assert experiment.holm([0.02, 0.04]) == [True, True]
    assert experiment.holm([]) == []
    with pytest.raises(ValueError, match="p_values"):
        experiment.holm([1.5])


def test_band_losses_and_comparisons(smoke_results):
    full = experiment.losses(smoke_results, "t5")
    assert full.shape == (2, 4, 16)
    bands = experiment.band_losses(smoke_results, "t5")
    assert np.allclose(bands[..., 1], full[..., 4:8].mean(-1))
    assert experiment.band_losses(smoke_results, "t5", 32).shape == (2, 4, 2)
    assert np.array_equal(experiment.losses(smoke_results, "rope+pi", 16),
                          experiment.losses(smoke_results, "rope", 16))
    with pytest.raises(ValueError, match="length"):
        experiment.losses(smoke_results, "rope+pi", 48)
    assert np.array_equal(experiment.losses(smoke_results, "rope+dynamic", 32),
                          experiment.losses(smoke_results, "rope+dynamic")[..., :8])
    same = experiment.compare(smoke_results, "t5", "t5", 2)
    assert same.difference.mean == 0 and same.verdict == "not distinguishable here"
    wrapped = experiment.compare(smoke_results, "t5", "alibi", 0)
    assert wrapped.ratio.mean == pytest.approx(math.exp(wrapped.difference.mean))
    sliding = experiment.compare(smoke_results, "rope", "rope", 0, sliding_b=True)
    assert sliding.difference.mean == pytest.approx(0.0, abs=1e-4)


def test_unclosed_fraction_matches_a_direct_count():
    def direct(head_dim, base, length):
        pairs = head_dim // 2
        return sum(length * base ** (-2 * i / head_dim) < 2 * math.pi
                   for i in range(pairs)) / pairs

    for args in [(128, 1e4, 4096), (16, 1e4, 64), (16, 32.0, 64), (64, 5e5, 8192)]:
        assert experiment.unclosed_fraction(*args) == direct(*args)


def test_stored_results_match_the_current_configuration():
    """The book reads results/: they must come from this configuration, this
    Python and these data bytes."""
    results = experiment.load_results(ROOT / experiment.RESULTS_PATH)
    config = experiment.Config()
    assert results["config"] == config.to_dict()
    for name in config.models:
        shape = np.asarray(results["models"][name]["loss"][str(config.eval_length)]).shape
        assert shape == (len(config.seeds), config.eval_windows,
                         config.eval_length // config.bucket)
    # The file grows with models x seeds x windows; what must not grow is the
    # cost of a number: stored to 4 decimals it takes about 7 bytes, a float
    # written in full about 19. And the whole stays a small file for git.
    text = (ROOT / experiment.RESULTS_PATH).read_text()

    def numbers(x):
        if isinstance(x, dict):
            return sum(numbers(v) for v in x.values())
        if isinstance(x, list):
            return sum(numbers(v) for v in x)
        return isinstance(x, (int, float)) and not isinstance(x, bool)

    assert len(text) / numbers(json.loads(text)) < 8
    assert len(text) < 5_000_000


def test_stale_results_are_refused(tmp_path, smoke_results):
    path = tmp_path / "results.json"

    def refused(change, match):
        results = json.loads(json.dumps(smoke_results))
        change(results)
        path.write_text(json.dumps(results))
        with pytest.raises(ValueError, match=match):
            experiment.load_results(path, config=SMOKE)

    experiment.write_results(smoke_results, path)
    assert experiment.load_results(path, config=SMOKE)["config_hash"] == SMOKE.hash()
    refused(lambda r: r.update(config_hash="0" * 16), "re-run")
    refused(lambda r: r.update(schema_version=1), "schema_version")
    refused(lambda r: r["data"].update(eval_sha256="0" * 64), "eval data")
    refused(lambda r: r["data"].update(train_sha256="0" * 64), "train data")
    # the data are the pinned corpus's: another Python that produced them is
    # no reason to refuse the file
    other = json.loads(json.dumps(smoke_results))
    other["environment"]["python"] = "3.11.2"
    path.write_text(json.dumps(other))
    assert experiment.load_results(path, config=SMOKE)["environment"]["python"] == "3.11.2"
    assert dataclasses.replace(SMOKE, steps=7).hash() != SMOKE.hash()


def test_config_round_trips_through_a_results_file(smoke_results):
    assert experiment.Config.from_dict(smoke_results["config"]) == SMOKE
    assert experiment.Config.from_dict(experiment.Config().to_dict()) == experiment.Config()
    with pytest.raises(ValueError, match="unknown configuration fields"):
        experiment.Config.from_dict({**SMOKE.to_dict(), "temperature": 1.0})


def test_the_explorer_follows_the_results_it_is_given(smoke_results):
    from posenc_lib.widgets import experiment as widgets

    figure = widgets.explorer_for(smoke_results)
    sliders = {s.name: s for s in figure.sliders}
    assert list(sliders["model"].values) == list(smoke_results["models"])
    assert list(sliders["length"].values) == SMOKE.eval_lengths
    assert all(s.static == s.values for s in figure.sliders)   # all in the static book
    fig = figure.figure(model="rope+dynamic-kv", length=SMOKE.train_length)
    assert len(fig.axes) == 1


def test_the_figures_draw_the_fine_tunes_as_models_of_their_own(smoke_results):
    from posenc_lib.figures import experiment as figures
    from posenc_lib.widgets import experiment as widgets

    # a fine-tune has its own full pass and sliding window, like a trained model
    entry = smoke_results["models"]["rope+pi-ft"]
    assert entry["kind"] == "finetuned" and "sliding" in entry
    fig = figures.position_curves(smoke_results, ["rope"] + list(SMOKE.finetunes),
                                  sliding=["rope+pi-ft"])
    drawn = [line.get_label() for line in fig.axes[0].get_lines()]
    assert set(SMOKE.finetunes) <= set(drawn)
    # its curve is exp of the stored losses' mean over seeds and windows
    stored = np.exp(np.asarray(entry["loss"][str(SMOKE.eval_length)]).mean((0, 1)))
    line = fig.axes[0].get_lines()[drawn.index("rope+pi-ft")]
    assert np.allclose(line.get_ydata(), stored, rtol=1e-12)
    figure = widgets.explorer_for(smoke_results)
    assert len(figure.figure(model="drope", length=SMOKE.eval_length).axes) == 1
    # the book's explorer offers every fine-tune
    assert set(experiment.FINETUNES) <= set(widgets._NAMES)


def test_the_retrieval_figure_draws_the_stored_accuracy(tmp_path):
    from posenc_lib import retrieval
    from posenc_lib.figures import experiment as figures

    experiment.main(["--smoke", "--no-cache", "--quiet", "--device", "cpu",
                     "--out", str(tmp_path / "lg.json"),
                     "--retrieval-out", str(tmp_path / "retrieval.json")])
    tasks = retrieval.load_results(tmp_path / "retrieval.json", config=SMOKE)
    fig = figures.retrieval_accuracy(tasks, ["rope", "drope"])
    lines = [c for c in fig.axes[0].containers]
    assert len(lines) == 2
    # each marker sits at the band's accuracy: the mean of the stored per-seed
    # accuracies (every seed scores the same number of items)
    for container, name in zip(lines, ["rope", "drope"]):
        y = container.lines[0].get_ydata()
        stored = [np.mean(tasks["accuracy"][name][b]) for b in tasks["bands"]]
        assert np.allclose(y, stored, atol=5e-5)
    with pytest.raises(ValueError, match="not in the results"):
        figures.retrieval_accuracy(tasks, ["rope+dynamic"])


def test_config_validation():
    with pytest.raises(ValueError, match="models"):
        experiment.Config(models=("rope", "fourier"))
    with pytest.raises(ValueError, match="extensions"):
        experiment.Config(models=("nope",))
    with pytest.raises(ValueError, match="multiple of 4"):
        experiment.Config(d_model=24, n_heads=4)
    with pytest.raises(ValueError, match="bucket"):
        experiment.Config(bucket=7)
    with pytest.raises(ValueError, match="factors"):
        experiment.Config(factors=(3,))
    with pytest.raises(ValueError, match="probe_distances"):
        experiment.Config(probe_distances=(600,))
    with pytest.raises(ValueError, match="modules"):
        experiment.load_bytes(["no_such_module_here"])
    with pytest.raises(ValueError, match="evaluation"):
        experiment.Extension(print, evaluation="sometimes")


def test_training_curves_draw_the_stored_losses(smoke_results):
    from posenc_lib.figures import experiment as figures

    fig = figures.training_curves(smoke_results, ["rope", "alibi"])
    lines = fig.axes[0].get_lines()
    stored = np.asarray(smoke_results["models"]["rope"]["train"]["loss_curve"])
    assert len(lines) == 2
    assert np.allclose(lines[0].get_ydata(), stored.mean(0))
    assert list(lines[0].get_xdata()) == smoke_results["models"]["rope"]["train"]["steps"]
    with pytest.raises(ValueError, match="trained"):
        figures.training_curves(smoke_results, ["rope+pi"])


def test_smoke_run_scores_retrieval_for_every_model_on_identical_items(smoke_results):
    table = smoke_results["retrieval"]
    grid = experiment.retrieval_grid(SMOKE)
    assert set(table["cells"]) == set(grid)
    expected = (set(experiment.MODELS) | set(experiment.FINETUNES)
                | {f"rope+{e}" for e in experiment.EXTENSIONS
                   if e not in experiment.RETRIEVAL_SKIP})
    assert set(table["outcomes"]) == set(table["accuracy"]) == expected
    for name, cells in table["outcomes"].items():
        for cell, per_seed in cells.items():
            assert np.asarray(per_seed).shape == (len(SMOKE.seeds), SMOKE.retrieval_items)
            assert set(np.unique(per_seed)) <= {0, 1}
        for band, accs in table["accuracy"][name].items():
            members = [c for c in cells if table["cells"][c]["band"] == band]
            pooled = np.concatenate([np.asarray(cells[c]) for c in members], axis=1)
            assert np.allclose(accs, pooled.mean(1), atol=5e-5)
    for band in table["bands"]:
        assert table["controls"]["bag_of_tokens"][band] == table["chance"][band]
        assert table["controls"]["prefix_sets"][band] < 1


def test_retrieval_hits_is_a_multiple_choice_among_the_items_values():
    # A model that always puts the largest logit on one fixed token that is
    # not a value, and the second largest on the highest value token, answers
    # every item with its highest value token, whatever else it prefers.
    task = SMOKE.task
    g = torch.Generator().manual_seed(0)
    from posenc_lib import retrieval

    inputs, answers, _ = retrieval.make_position_items(task, 16, torch.full((50,), 2), g)

    class Fixed(torch.nn.Module):
        def forward(self, tokens):
            logits = torch.zeros(*tokens.shape, lm.VOCAB_SIZE)
            logits[..., 0] = 10.0
            logits[..., list(task.value_symbols)] = torch.arange(
                len(task.value_symbols), dtype=torch.float32)
            return logits

    hits = experiment.retrieval_hits(Fixed(), inputs, answers, task.value_symbols)
    top = torch.tensor([max(t for t in row.tolist() if t in task.value_symbols)
                        for row in inputs])
    assert np.array_equal(hits, (top == answers).numpy())


def test_finetunes_start_from_the_trained_rope_model_and_keep_their_change():
    data, _ = experiment.load_bytes(SMOKE.train_files)
    base = experiment.build_model(SMOKE, "rope", 0)
    drope, _ = experiment.finetune_model(SMOKE, "drope", base, 0, data)
    assert type(drope.scheme) is lm.PositionScheme          # no rotation left
    assert type(base.scheme) is lm.RopeScheme               # the base is untouched
    pi, log = experiment.finetune_model(SMOKE, "rope+pi-ft", base, 0, data)
    assert pi.scheme.rope_type == "linear" and pi.scheme.params["factor"] == 2.0
    assert len(log["loss_curve"]) >= 2


def test_training_rows_vary_the_query_position_as_designed():
    # With every query at one position a model can learn where the query sits
    # instead of how to find its key. The first query's position, n - 1, must
    # follow the design: D uniform on 1..top, then n uniform on
    # [shortest(D), m]; its exact law, by enumeration, against 4000 rows.
    config = experiment.Config()
    task, m = config.task, 64 - 2 * (config.task_queries - 1)
    top = max(d for d in range(1, m) if task.shortest(d) <= m)
    law = np.zeros(m + 1)
    for d in range(1, top + 1):
        low = task.shortest(d)
        law[low:m + 1] += 1 / top / (m + 1 - low)
    inputs, targets = experiment.training._task_rows(config, 64, 4000, torch.Generator().manual_seed(5),
                                            bos=True)
    n = (targets != -100).int().argmax(1).numpy() + 1
    seen = np.bincount(n, minlength=m + 1)
    support = law > 0
    assert set(np.flatnonzero(seen)) <= set(np.flatnonzero(support))
    assert stats.chisquare(seen[support], 4000 * law[support]).pvalue > 1e-4
    assert len(set(n.tolist())) > 40                      # of the 49 possible lengths
    fixed = dataclasses.replace(config, task_lengths="fixed")
    _, targets = experiment.training._task_rows(fixed, 64, 50, torch.Generator().manual_seed(5),
                                       bos=True)
    assert ((targets != -100).int().argmax(1) == m - 1).all()


@pytest.mark.parametrize("queries", [1, 2])
def test_training_rows_score_the_last_binding_of_every_query(queries):
    # Brute force: read each row left to right, keeping each key's last value;
    # every scored target must be the last value of the key just read, and
    # the row up to its first target is a test item of the same task.
    config = dataclasses.replace(experiment.Config(), task_queries=queries)
    g = torch.Generator().manual_seed(queries)
    inputs, targets = experiment.training._task_rows(config, 64, 40, g, bos=True)
    keys, values = set(config.task_keys), set(config.task_values)
    assert ((targets != -100).sum(1) == queries).all()
    for row, target in zip(inputs.tolist(), targets.tolist()):
        last, queried = {}, []
        for p, token in enumerate(row):
            if target[p] != -100:
                assert token in keys and target[p] == last[token]
                queried.append(token)
            elif p and row[p - 1] in keys and token in values:
                last[row[p - 1]] = token
        assert len(set(queried)) == queries          # every query a different key


def test_several_processes_share_one_gpu():
    # torchrun --nproc_per_node 8 on one GPU: every rank on cuda:0 (it used
    # to map rank k to cuda:k, which does not exist); on 2 GPUs, 4 ranks each
    assert [experiment.jobs._local_gpu(k, 1) for k in range(8)] == [0] * 8
    assert [experiment.jobs._local_gpu(k, 2) for k in range(4)] == [0, 1, 0, 1]
    with pytest.raises(ValueError, match="device"):
        experiment.jobs._local_gpu(0, 0)
