"""Statistics of the study's results, with no torch: paired t-intervals over
seeds (with the windows' source files as clusters), intervals and tests for
0/1 outcomes, and Holm's method for a family of comparisons.

Nothing here imports torch or another posenc_lib module
(``tests/test_experiment.py`` imports this file without the package and
checks): numpy, and scipy where a quantile is needed.
"""

from __future__ import annotations

import math
import numbers
from typing import NamedTuple, Sequence

import numpy as np


def _positive(name: str, value) -> float:
    """``value`` as a float > 0, else ``ValueError`` with the messages of
    ``posenc_lib._validate.finite_float(name, value, greater_than=0.0)``, which
    is not imported here because it imports torch (a test compares the two)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if not value > 0.0:
        raise ValueError(f"{name} must be > 0.0, got {value}")
    return value


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
    confidence = _positive("confidence", confidence)
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
    alpha = _positive("alpha", alpha)
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
    alpha = _positive("alpha", alpha)
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
