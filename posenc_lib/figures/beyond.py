"""Figures for chapter 10: RoPE's base, attention temperatures and re-mapped positions."""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

from .. import _validate, bounds, remap, scaling, temperature
from ._base import SEQUENTIAL, BookFigure, new_subplots, plain_log_axis, set_ticks
__all__ = ["MODEL_BASES", "base_bounds", "temperatures", "entropy_growth", "position_maps"]

#: ``(name, rope_theta, context length)`` of the models the chapter compares,
#: all with head size 128 (the sources are cited in the chapter).
MODEL_BASES = (("Llama 2", 1e4, 4096), ("Llama 3", 5e5, 8192),
               ("Qwen2 / Qwen2.5", 1e6, 32768))
_MODEL_STYLE = ("o", "s", "D")


@functools.lru_cache(maxsize=4)
def _supported_lengths(dim: int, per_decade: int = 12, low: float = 1e3,
                       high: float = 1e7) -> tuple[np.ndarray, np.ndarray]:
    """Men et al.'s supported length on a geometric grid of bases (cached: ~1 s)."""
    bases = np.geomspace(low, high, int(round(per_decade * math.log10(high / low))) + 1)
    lengths = [bounds.rope_supported_length(dim, float(b), max_length=2 ** 19)
               for b in bases]
    return bases, np.array(lengths)


@functools.lru_cache(maxsize=16)
def _cos_sum_curve(dim: int, base: float, m_max: int):
    """The left panel's data for one base (cached: 2**17 distances take a while).

    Returns the geometric samples ``δ`` and ``B(δ)/(dim/2)`` there, the running
    minimum over every integer ``1 <= δ <= m_max`` reduced to the two ends of
    each constant run (the same polyline: only the collinear points inside a
    flat run are dropped), and the supported length.
    """
    distances = torch.arange(m_max + 1, dtype=torch.float64)
    values = (bounds.rope_cos_sum(distances, dim, base) / (dim / 2)).numpy()
    running_min = np.minimum.accumulate(values)[1:]
    changes = np.flatnonzero(np.diff(running_min) != 0)
    keep = np.union1d(np.union1d(changes, changes + 1), [0, running_min.size - 1])
    sample = np.unique(np.geomspace(1, m_max, 1500).astype(int))
    supported = bounds.rope_supported_length(dim, base, max_length=m_max)
    return sample, values[sample], keep + 1.0, running_min[keep], supported


def base_bounds(base: float = 5e5, train_length: int = 4096, *,
                dim: int = 128) -> BookFigure:
    """How long a context a base supports, by Men et al.'s and Liu et al.'s criteria.

    Left: ``B(δ)/(dim/2)`` against the distance ``δ`` for the chosen base
    (every integer distance up to ``2**17``, drawn as its running minimum and
    as samples), with the first distance where it turns negative. Right: that
    supported length against the base, Liu et al.'s ``T_extra`` for
    pre-training on ``train_length`` tokens with base ``10**4``, and three
    models' (base, context length).
    """
    base = _validate.finite_float("base", base, greater_than=1.0)
    train_length = _validate.positive_int("train_length", train_length, minimum=8)
    m_max = 2 ** 17
    sample, sampled, min_at, running_min, supported = _cos_sum_curve(dim, base, m_max)
    fig, (left, right) = new_subplots(8.4, 3.5, 1, 2)
    left.plot(sample, sampled, color="0.6", lw=0.6,
              label="$B(\\delta)/(d/2)$ (samples)")
    left.plot(min_at, running_min, color="C0", lw=1.4, label="running minimum")
    left.axhline(0.0, color="k", lw=0.8, label="zero")
    if supported < m_max:
        left.axvline(supported + 1, color="C3", ls="--", lw=1.0,
                     label=f"first negative: δ = {supported + 1:,}")
    left.set_xscale("log")
    plain_log_axis(left.xaxis)
    left.set_xlim(1, m_max)
    left.set_ylim(-0.35, 1.02)
    left.set_xlabel("distance δ (tokens)")
    left.set_ylabel("$B(\\delta)$ / (d/2) (dimensionless)")
    left.set_title(f"base {_sci(base)}, d = {dim}", fontsize=10)
    left.legend(fontsize=9, loc="lower left")

    bases, lengths = _supported_lengths(dim)
    right.loglog(bases, lengths, color="C0", lw=1.3, drawstyle="steps-post",
                 label="longest L with $B(\\delta) \\geq 0$ for all δ ≤ L")
    liu = [bounds.extrapolation_bound(dim, float(b), train_length) for b in bases]
    right.loglog(bases, liu, color="C1", lw=1.3, ls="--",
                 label=f"Liu et al.'s $T_{{extra}}$ ($T_{{train}}$ = {train_length:,})")
    for (name, model_base, context), marker in zip(MODEL_BASES, _MODEL_STYLE):
        right.plot([model_base], [context], marker=marker, color="C3", ls="none", ms=6,
                   label=f"{name}: base {_sci(model_base)}, {context:,} tokens")
    right.axvline(base, color="0.4", lw=0.8, ls=":", label="base of the left panel")
    plain_log_axis(right.yaxis)
    right.set_xlabel("base")
    right.set_ylabel("context length (tokens)")
    right.set_ylim(50, 2 ** 19)
    right.grid(alpha=0.3, which="major")
    right.legend(fontsize=8.5, loc="upper left")
    return fig


def temperatures(train_length: int = 8192, factor: float = 8.0, *,
                 max_factor: float = 64.0, attn_scale: float = 0.1) -> BookFigure:
    """Four attention temperatures as factors on the logits.

    Left: against the length ``N = s·L``: log-n scaling at the last query
    (``ln N/ln L``), which LongRoPE's factor equals at every ``s``, YaRN's
    ``(0.1 ln s + 1)²`` and Llama 4's rule with ``floor_scale = L``. Right:
    inside one window of ``factor·L`` tokens, against the query position: the
    per-position rules (log-n, Llama 4) against the per-window constants
    (LongRoPE, YaRN).
    """
    train_length = _validate.positive_int("train_length", train_length, minimum=2)
    factor = _validate.finite_float("factor", factor, at_least=1.0)
    s = np.geomspace(1.0, max_factor, 400)
    log_l = math.log(train_length)
    yarn = np.array([scaling.yarn_attention_factor(float(x)) ** 2 for x in s])
    fig, (left, right) = new_subplots(8.4, 3.4, 1, 2)
    lengths = torch.as_tensor(s * train_length)
    logn = temperature.logn_attention_scale(lengths - 1, train_length).numpy()
    llama4 = scaling.llama4_attn_scales(lengths - 1, attn_scale=attn_scale,
                                        floor_scale=float(train_length)).numpy()
    left.plot(s, logn, color="C0", lw=1.5, label="log-n: ln N / ln L")
    integer = np.arange(1, int(max_factor) + 1)
    longrope = [1 + math.log(x) / log_l for x in integer]
    left.plot(integer, longrope, "o", color="C2", ms=3,
              label="LongRoPE: 1 + ln s / ln L")
    left.plot(s, yarn, color="C1", lw=1.5, ls="--", label="YaRN: (0.1 ln s + 1)²")
    left.plot(s, llama4, color="C3", lw=1.2, label="Llama 4 rule, floor_scale = L")
    left.axvline(factor, color="0.4", lw=0.8, ls=":", label="factor of the right panel")
    left.set_xscale("log")
    plain_log_axis(left.xaxis)
    left.set_xlabel("extension factor s = N / L")
    left.set_ylabel("factor on the logits")
    left.set_title(f"L = {train_length:,}", fontsize=10)
    left.grid(alpha=0.3, which="both")
    left.legend(fontsize=9, loc="upper left")

    n = int(round(factor * train_length))
    p = torch.unique(torch.linspace(0, n - 1, 1200).round())
    right.plot(p.numpy(), temperature.logn_attention_scale(p, train_length).numpy(),
               color="C0", lw=1.5, label="log-n (per position)")
    right.axhline(1 + math.log(factor) / log_l, color="C2", lw=1.5, ls="-.",
                  label="LongRoPE (per window)")
    right.axhline(scaling.yarn_attention_factor(factor) ** 2, color="C1", lw=1.5, ls="--",
                  label="YaRN (per window)")
    right.plot(p.numpy(), scaling.llama4_attn_scales(p, attn_scale=attn_scale,
                                                     floor_scale=float(train_length)),
               color="C3", lw=1.2, label="Llama 4 rule (per position)")
    right.axvline(train_length, color="k", lw=0.8, ls=":", label="training length L")
    right.set_xlabel("query position p (tokens)")
    right.set_ylabel("factor on the logits")
    right.set_title(f"one window of s·L = {n:,} tokens (s = {factor:g})", fontsize=10)
    right.set_ylim(0.95, max(1.05, yarn.max() * 1.02))
    right.grid(alpha=0.3)
    right.legend(fontsize=9, loc="upper left")
    return fig


@functools.lru_cache(maxsize=32)
def _entropies(sigma, train_length, dim, n_queries, seed):
    """Cached :func:`~posenc_lib.temperature.random_attention_entropy` at 16 .. 32 768 keys:
    ``(2, 12, n_queries)``, without and with log-n scaling (one set of logits)."""
    return temperature.random_attention_entropy(2 ** torch.arange(4, 16), sigma=sigma, dim=dim,
                                            n_queries=n_queries, seed=seed,
                                            train_length=[None, train_length])


def entropy_growth(sigma: float = 2.0, train_length: int = 512, *, dim: int = 64,
                   n_queries: int = 32, seed: int = 0) -> BookFigure:
    """Attention entropy against the number of keys, with and without log-n scaling.

    Random queries and keys (:func:`posenc_lib.temperature.random_attention_entropy`):
    the logits are normal with standard deviation ``sigma``. Also drawn: the
    largest possible entropy ``ln n`` and the large-``n`` limits
    ``ln n − λ²σ²/2`` of Gaussian logits (``λ = 1``, and the log-n ``λ``).
    """
    sigma = _validate.finite_float("sigma", sigma, greater_than=0.0)
    train_length = _validate.positive_int("train_length", train_length, minimum=2)
    lengths = 2 ** torch.arange(4, 16)  # 16 .. 32 768 keys
    plain, scaled = _entropies(sigma, train_length, dim, n_queries, seed)
    n = lengths.double().numpy()
    lam = temperature.logn_attention_scale(lengths - 1, train_length).numpy()
    fig, ax = new_subplots(6.4, 3.6)
    ax.plot(n, np.log(n), color="k", lw=0.8, ls=":", label="ln N (uniform weights)")
    ax.plot(n, plain.mean(1).numpy(), "o-", color="C0", ms=3, lw=1.3,
            label="no scaling (mean of the queries)")
    ax.plot(n, np.log(n) - sigma ** 2 / 2, color="C0", lw=0.8, ls="--",
            label="Gaussian limit ln N − σ²/2")
    ax.plot(n, scaled.mean(1).numpy(), "s-", color="C3", ms=3, lw=1.3,
            label="log-n scaling")
    ax.plot(n, np.log(n) - (lam * sigma) ** 2 / 2, color="C3", lw=0.8, ls="--",
            label="Gaussian limit ln N − λ²σ²/2")
    ax.axvline(train_length, color="0.4", lw=0.8, ls="-.", label="training length L")
    ax.set_xscale("log", base=2)
    set_ticks(ax.xaxis, n[::2], [f"{int(v):,}" for v in n[::2]])
    ax.minorticks_off()
    ax.set_ylim(0, math.log(float(n[-1])) * 1.05)
    ax.set_xlabel("number of keys N")
    ax.set_ylabel("attention entropy (nats)")
    ax.set_title(f"logit standard deviation σ = {sigma:g}, d = {dim}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    return fig


def position_maps(window: int = 16, group_size: int = 4, leaky_factor: float = 4.0, *,
                  n: int = 96, start_size: int = 4) -> BookFigure:
    """The effective distance (query minus key) that each method gives each pair.

    Five query × key heatmaps on one colour scale (plain RoPE, ReRoPE, Leaky
    ReRoPE, Self-Extend, attention sinks), future and evicted keys blank, and
    the last query's row for all five against the true distance. ``window`` is
    ReRoPE's window, Self-Extend's neighbour window and the sink cache's
    ``recent_size``.
    """
    window = _validate.positive_int("window", window)
    positions = torch.arange(_validate.positive_int("n", n, minimum=2))
    causal = positions[None, :] <= positions[:, None]
    sinks, kept = remap.sink_cache_positions(positions, start_size=start_size,
                                               recent_size=window)
    maps = {
        "RoPE": -(positions[None, :] - positions[:, None]).double(),
        f"ReRoPE, w = {window}": -remap.rerope_relative_positions(positions,
                                                                     window=window),
        f"Leaky ReRoPE, k = {leaky_factor:g}": -remap.rerope_relative_positions(
            positions, window=window, leaky_factor=leaky_factor),
        f"Self-Extend, G = {group_size}": -remap.self_extend_relative_positions(
            positions, group_size=group_size, neighbor_window=window).double(),
        f"sinks: {start_size} + {window} recent": -sinks.double(),
    }
    masks = {name: causal for name in maps}
    masks[f"sinks: {start_size} + {window} recent"] = kept
    fig, axes = new_subplots(8.4, 5.6, 2, 3)
    axes = axes.ravel()
    cmap = _masked_cmap()
    image = None
    for ax, (name, values) in zip(axes, maps.items()):
        shown = np.ma.masked_where(~masks[name].numpy(), values.numpy())
        image = ax.imshow(shown, cmap=cmap, vmin=0, vmax=n - 1, interpolation="nearest")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("key position n", fontsize=9)
        ax.set_ylabel("query position m", fontsize=9)
        ax.tick_params(labelsize=9)
    last = axes[-1]
    true = (positions[-1] - positions).numpy()
    styles = (dict(ls="-", lw=1.3), dict(ls="-", lw=1.3), dict(ls="-", lw=3.0, alpha=0.5),
              dict(ls="--", lw=1.3), dict(ls="none", marker="o", ms=3))
    for (name, values), style in zip(maps.items(), styles):
        row = np.ma.masked_where(~masks[name][-1].numpy(), values[-1].numpy())
        last.plot(true, row, label=name.split(",")[0].split(":")[0], **style)
    last.set_xlabel("true distance m − n (tokens)", fontsize=9)
    last.set_ylabel("effective distance (tokens)", fontsize=9)
    last.set_title(f"last query, m = {n - 1}", fontsize=9)
    last.tick_params(labelsize=9)
    last.grid(alpha=0.3)
    last.legend(fontsize=8.5, loc="upper left")
    fig.colorbar(image, ax=list(axes[:-1]), shrink=0.8,
                 label="effective distance (tokens); blank: not attended")
    return fig


def _sci(value: float) -> str:
    """``5e5`` as ``5·10⁵`` and ``1e4`` as ``10⁴``, for labels."""
    exponent = math.floor(math.log10(value) + 1e-9)
    mantissa = value / 10 ** exponent
    power = "10" + str(exponent).translate(str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹"))
    if abs(mantissa - 1) < 1e-9:
        return power
    return f"{mantissa:.3g}·{power}"


def _masked_cmap():
    """The sequential colour map with masked cells drawn in very light grey."""
    import matplotlib

    return matplotlib.colormaps[SEQUENTIAL].with_extremes(bad="0.93")
