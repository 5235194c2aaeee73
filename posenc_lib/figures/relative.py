"""Figures for chapter 3: relative position encodings and learned biases."""

from __future__ import annotations

import functools
import math
from typing import Sequence

import numpy as np
import torch

from .. import _validate, attention, relative
from ._base import (DIVERGING, SEQUENTIAL, BookFigure, new_figure, new_subplots,
                    plain_log_axis, set_ticks)

__all__ = ["t5_buckets", "t5_head_biases", "score_bias_heatmaps",
           "shaw_attainable_weight", "transformer_xl_terms", "rel_shift_steps",
           "kerple_biases", "fire_interpolation", "cope_positions"]


def _symlog_ticks(ax, max_exact: int, reach: int) -> None:
    ax.set_xscale("symlog", linthresh=max(max_exact, 1), linscale=1.2)
    powers = [10 ** p for p in range(1, 7) if 2 * max_exact <= 10 ** p <= reach]
    set_ticks(ax.xaxis, sorted({0, max_exact, -max_exact, *powers, *(-p for p in powers)}))
    plain_log_axis(ax.xaxis)


def t5_buckets(num_buckets: int = 32, max_distance: int = 128,
               bidirectional: bool = True) -> BookFigure:
    """T5's bucket against the relative position (key minus query), symlog axis."""
    ranges = relative.t5_bucket_ranges(bidirectional, num_buckets, max_distance)
    reach = 2 * max_distance
    rel = torch.arange(-reach, reach + 1)
    bucket = relative.t5_bucket(rel, bidirectional, num_buckets, max_distance)
    per_side = num_buckets // 2 if bidirectional else num_buckets
    max_exact = per_side // 2
    fig, ax = new_subplots(6.4, 3.6)
    ax.plot(rel.numpy(), bucket.numpy(), drawstyle="steps-mid", lw=1.4, color="C0",
            label="bucket of j - i")
    _symlog_ticks(ax, max_exact, reach)
    sides = (-1, 1) if bidirectional else (-1,)
    for n, side in enumerate(sides):
        ax.axvline(side * max_distance, color="C3", ls="--", lw=1,
                   label="|j - i| = max_distance" if n == 0 else None)
    by_bucket = {r.bucket: r for r in ranges}
    starts = [by_bucket[per_side - 1].last]  # the last bucket is never empty
    if bidirectional:
        starts.append(by_bucket[2 * per_side - 1].first)
    for n, start in enumerate(starts):
        ax.axvline(start, color="C2", ls=":", lw=1.4,
                   label=f"last bucket starts (|j - i| = {abs(start)})" if n == 0
                   else None)
    ax.set_xlim(-reach, reach)
    ax.set_ylim(-0.5, num_buckets - 0.5)
    ax.set_xlabel("relative position j - i (tokens, key minus query; symlog scale)")
    ax.set_ylabel("bucket index")
    mode = "bidirectional" if bidirectional else "causal"
    ax.set_title(f"T5 buckets ({mode}): {len(ranges)} of {num_buckets} used, "
                 f"max_distance = {max_distance}", fontsize=10)
    ax.legend(fontsize=8, loc="upper center" if bidirectional else "upper right")
    ax.grid(alpha=0.3)
    return fig


def t5_head_biases(n_heads: int = 3, num_buckets: int = 32, max_distance: int = 128,
                   reach: int = 160, *, seed: int = 0) -> BookFigure:
    """Each head's scalar bias against the relative position, for a seeded table."""
    generator = torch.Generator().manual_seed(seed)
    bias = relative.T5RelativeBias(n_heads, num_buckets=num_buckets,
                                   max_distance=max_distance, std=1.0,
                                   generator=generator)
    rel = torch.arange(-reach, reach + 1)
    with torch.no_grad():  # (n_rel, n_heads): the table row of each relative position
        values = bias.relative_attention_bias(
            relative.t5_bucket(rel, True, num_buckets, max_distance)).numpy()
    fig, ax = new_subplots(6.4, 3.4)
    for h in range(n_heads):
        ax.plot(rel.numpy(), values[:, h], drawstyle="steps-mid", lw=1.2,
                label=f"head {h}")
    for n, side in enumerate((-1, 1)):
        ax.axvline(side * max_distance, color="grey", ls="--", lw=0.8,
                   label="|j - i| = max_distance" if n == 0 else None)
    _symlog_ticks(ax, num_buckets // 4, reach)
    ax.set_xlim(-reach, reach)
    ax.set_xlabel("relative position j - i (tokens, key minus query; symlog scale)")
    ax.set_ylabel("bias added to the score (logit units)")
    ax.set_title(f"T5: one scalar per bucket and head ({num_buckets} buckets, "
                 f"random table, seed {seed})", fontsize=10)
    fig.legend(fontsize=8, ncols=n_heads + 1, loc="outside lower center")
    ax.grid(alpha=0.3)
    return fig


@functools.lru_cache(maxsize=64)
def _score_bias_panels(max_relative_position, num_buckets, mem_len, n_q, max_distance,
                       head_dim, seed) -> dict:
    """The three position terms of :func:`score_bias_heatmaps` (cached, seeded)."""
    n_k = n_q + mem_len
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(head_dim, generator=generator, dtype=torch.float64)
    q = q.expand(1, n_q, head_dim)
    keys = torch.zeros(1, n_k, head_dim, dtype=torch.float64)  # content plays no part
    shaw = relative.ShawRelativePosition(max_relative_position, head_dim, std=1.0,
                                         generator=generator).double()
    t5 = relative.T5RelativeBias(1, num_buckets=num_buckets, max_distance=max_distance,
                                 std=1.0, generator=generator).double()
    xl = relative.TransformerXLRelativePosition(
        2 * head_dim, 1, head_dim, bidirectional=True, std=1.0 / math.sqrt(head_dim),
        generator=generator).double()
    with torch.no_grad():
        return {
            f"Shaw et al., κ = {max_relative_position}": shaw.score_bias(q, keys)[0],
            f"T5, {num_buckets} buckets": t5(n_q, n_k)[0],
            "Transformer-XL, (b) + (d)": xl.score_bias(q[None], keys[None])[0, 0],
        }


def score_bias_heatmaps(max_relative_position: int = 4, num_buckets: int = 16,
                        mem_len: int = 0, n_q: int = 32, *, max_distance: int = 128,
                        head_dim: int = 16, seed: int = 0) -> BookFigure:
    """The position part of the score, query × key, for Shaw, T5 and Transformer-XL.

    Every query has the same content, so what varies across a panel is the
    position term alone: Shaw's ``q·a^K/√d``, T5's bias, and Transformer-XL's
    terms (b) + (d) (in both directions, as XLNet uses them). The tables and
    projections are random (seeded); the *structure* is the point.
    """
    mem_len = _validate.nonnegative_int("mem_len", mem_len)
    n_k = n_q + mem_len
    panels = _score_bias_panels(max_relative_position, num_buckets, mem_len, n_q,
                                max_distance, head_dim, seed)
    fig, axes = new_subplots(9.6, 3.5, 1, 3)
    extent = (-0.5, n_k - 0.5, n_k - 0.5, mem_len - 0.5)  # queries: last n_q positions
    image = None
    for ax, (title, bias) in zip(axes, panels.items()):
        values = bias.numpy()
        scale = max(float(np.abs(values).max()), 1e-12)  # each panel on its own scale
        image = ax.imshow(values / scale, cmap=DIVERGING, vmin=-1, vmax=1,
                          extent=extent, interpolation="nearest")
        ax.set_title(f"{title}\n(largest |value| {scale:.2f})", fontsize=10.5)
        ax.set_xlabel("key position j (tokens)")
    axes[0].set_ylabel("query position i (tokens)")
    fig.colorbar(image, ax=list(axes), shrink=0.85,
                 label="score term / largest |value| (dimensionless)")
    fig.suptitle(f"Position term of the score: {n_q} queries, {n_k} keys "
                 f"(memory {mem_len}); random tables, seed {seed}", fontsize=10)
    return fig


def shaw_attainable_weight(n_keys: int = 32,
                           max_relative_positions: Sequence[int] = (2, 4, 8)
                           ) -> BookFigure:
    """The largest weight positions alone can give the key ``δ`` back, per ``κ``."""
    fig, ax = new_subplots(6.4, 3.2)
    distance = np.arange(n_keys)
    for n, k in enumerate(max_relative_positions):
        weight = relative.shaw_attainable_weight(n_keys, k).numpy()
        ax.plot(distance, weight, "o-", ms=3, lw=1, color=f"C{n}",
                label=f"κ = {k}: 1 below κ, then 1/{n_keys - k}")
    ax.set_yscale("log")
    plain_log_axis(ax.yaxis)
    ax.set_xlabel("distance δ = i - j of the target key (tokens)")
    ax.set_ylabel("largest attainable weight (probability)")
    ax.set_title(f"Shaw et al.: beyond κ, position cannot single out a key "
                 f"({n_keys} keys)", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, which="both")
    return fig


def transformer_xl_terms(n_q: int = 12, mem_len: int = 6, d_model: int = 32, *,
                         seed: int = 0) -> BookFigure:
    """Transformer-XL's four score terms for one head, random content and weights.

    Future keys (hidden by the causal mask) are left blank.
    """
    n_k = n_q + mem_len
    generator = torch.Generator().manual_seed(seed)
    head_dim = d_model
    xl = relative.TransformerXLRelativePosition(d_model, 1, head_dim,
                                                std=1.0 / math.sqrt(d_model),
                                                generator=generator).double()
    q = torch.randn(1, n_q, head_dim, generator=generator, dtype=torch.float64)
    k = torch.randn(1, n_k, head_dim, generator=generator, dtype=torch.float64)
    with torch.no_grad():
        terms = xl.terms(q, k)
    hidden = ~attention.causal_mask(n_q, n_k)
    names = {"a": "(a) content-content q·k", "b": "(b) content-position q·W_R R",
             "c": "(c) global content bias u_c·k",
             "d": "(d) global position bias u_p·W_R R"}
    fig, axes = new_subplots(8.0, 5.6, 2, 2, sharex=True, sharey=True)
    axes = axes.ravel()
    extent = (-0.5, n_k - 0.5, n_k - 0.5, mem_len - 0.5)
    for ax, (key, title) in zip(axes, names.items()):
        values = terms[key][0].numpy().copy()
        values[hidden.numpy()] = np.nan
        vmax = max(float(np.nanmax(np.abs(values))), 1e-12)
        image = ax.imshow(values, cmap=DIVERGING, vmin=-vmax, vmax=vmax, extent=extent,
                          interpolation="nearest")
        ax.axvline(mem_len - 0.5, color="k", lw=0.8, ls="--",
                   label="end of the memory" if key == "a" else None)
        ax.set_title(title, fontsize=9)
        fig.colorbar(image, ax=ax, shrink=0.85, label="term (unscaled score units)")
    for ax in axes[2:]:
        ax.set_xlabel("key position j (tokens)")
    for ax in axes[::2]:
        ax.set_ylabel("query position i (tokens)")
    fig.legend(fontsize=8, loc="outside lower center")
    fig.suptitle(f"Transformer-XL's four terms, one head, memory of {mem_len} "
                 f"(random weights, seed {seed})", fontsize=10)
    return fig


def rel_shift_steps(n_q: int = 3, mem_len: int = 2) -> BookFigure:
    """The relative shift on a labelled matrix: pad, reshape, drop a row, reshape.

    Entry ``(i, c)`` of the input is labelled ``i:δ``: row ``i`` (the query)
    and the distance ``δ = n_k - 1 - c`` of column ``c``. After the shift,
    cell ``(i, j)`` should read ``i:i'-j``.
    """
    n_q = _validate.positive_int("n_q", n_q)
    mem_len = _validate.nonnegative_int("mem_len", mem_len)
    n_k = n_q + mem_len
    distance = n_k - 1 - torch.arange(n_k)
    # code = 100 (i + 1) + δ, and 0 for the padding
    x = 100.0 * (torch.arange(n_q)[:, None] + 1) + distance[None, :]
    padded = torch.cat([torch.zeros(n_q, 1), x], dim=1)
    reshaped = padded.reshape(n_k + 1, n_q)
    shifted = relative.rel_shift(x)
    valid = attention.causal_mask(n_q, n_k)

    def label(code):
        code = int(code)
        return "0" if code == 0 else f"{code // 100 - 1}:{code % 100}"

    steps = [
        ("1. x: column c holds distance n_k-1-c", x, None),
        ("2. pad a zero column", padded, None),
        (f"3. read as {n_k + 1}×{n_q}, drop row 0", reshaped, "drop"),
        (f"4. read as {n_q}×{n_k}: cell (i, j) is i:i'-j", shifted, valid),
    ]
    fig = new_figure(6.4, 5.6)
    grid = fig.add_gridspec(2, 2, width_ratios=[n_k + 1, n_k + 1],
                            height_ratios=[n_q, n_k + 1])
    axes = [fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1]),
            fig.add_subplot(grid[1, 0]), fig.add_subplot(grid[1, 1])]
    for ax, (title, matrix, marks) in zip(axes, steps):
        rows, cols = matrix.shape
        rows_of = (matrix // 100 - 1).numpy()
        colours = np.where(matrix.numpy() == 0, np.nan, rows_of)
        ax.imshow(colours, cmap="Pastel1", vmin=0, vmax=8, interpolation="nearest")
        for a in range(rows):
            for b in range(cols):
                bad = (marks == "drop" and a == 0) or \
                      (isinstance(marks, torch.Tensor) and not bool(marks[a, b]))
                ax.text(b, a, label(matrix[a, b]), ha="center", va="center",
                        fontsize=8, color="#b00" if bad else "k",
                        fontweight="normal" if bad else "bold")
                if bad:
                    ax.plot([b - 0.45, b + 0.45], [a - 0.45, a + 0.45], color="#b00",
                            lw=0.6)
        set_ticks(ax.xaxis, range(cols))
        set_ticks(ax.yaxis, range(rows))
        ax.tick_params(labelsize=7)
        ax.set_xlabel("column", fontsize=7)
        ax.set_ylabel("row", fontsize=7)
        ax.set_title(title, fontsize=9)
    axes[3].set_anchor("N")
    fig.suptitle(f"The skewing / relative shift, $n_q$ = {n_q}, memory {mem_len}. "
                 f"Label i:δ = query row i,\ndistance δ; colour = row of origin; "
                 f"red = dropped, or hidden by the causal mask", fontsize=9)
    return fig


def kerple_biases(kernel: str = "log", r1: float = 1.0, r2: float = 1.0,
                  reach: int = 256) -> BookFigure:
    """Kerple's bias against the distance, next to ALiBi with slope ``r1``."""
    _validate.one_of("kernel", kernel, relative.KERPLE_KERNELS)
    n = _validate.positive_int("reach", reach) + 1
    bias = relative.kerple_bias(r1, r2, n, kernel=kernel, dtype=torch.float64)
    values = bias[0, -1].flip(0).numpy()                # distances 0 .. reach
    distance = np.arange(n)
    formula = (f"-{r1:g}·δ^{r2:g}" if kernel == "power"
               else f"-{r1:g}·log(1 + {r2:g}·δ)")
    fig, ax = new_subplots(6.4, 3.4)
    ax.plot(distance, values, color="C0", lw=1.8, label=f"Kerple {kernel}: {formula}")
    ax.plot(distance, -r1 * distance, color="C3", ls="--", lw=1,
            label=f"ALiBi, slope {r1:g} (= power kernel, r2 = 1)")
    low = float(values.min())                           # ALiBi may run off the axes
    ax.set_ylim(1.15 * low, -0.1 * low)
    ax.set_xlim(0, reach)
    ax.set_xlabel("distance δ = i - j (tokens)")
    ax.set_ylabel("bias added to the score (logit units)")
    ax.set_title(f"Kerple's {kernel} kernel, r1 = {r1:g}, r2 = {r2:g}", fontsize=10)
    ax.legend(fontsize=8, loc="lower left")
    ax.grid(alpha=0.3)
    return fig


def fire_interpolation(threshold: float = 64.0, c: float = 0.1, n: int = 512,
                       query_positions: Sequence[int] = (16, 64, 128, 256, 511)
                       ) -> BookFigure:
    """FIRE's normalised distance against the distance, one curve per query position."""
    x = relative.fire_normalized_distance(n, c=c, threshold=threshold,
                                          dtype=torch.float64).numpy()
    fig, ax = new_subplots(6.4, 3.6)
    for n_line, position in enumerate(query_positions):
        distance = np.arange(position + 1)
        values = x[position, position - distance]
        style = "-" if position <= threshold else "--"
        ax.plot(distance, values, style, color=f"C{n_line}", lw=1.4,
                label=f"query at i = {position}" + (" (> T)" if position > threshold
                                                     else " (<= T)"))
    ax.axhline(1.0, color="grey", ls=":", lw=1, label="1: the whole context")
    ax.set_xscale("symlog", linthresh=1.0)
    plain_log_axis(ax.xaxis)
    ax.set_xlim(0, n)
    ax.set_ylim(-0.02, 1.25)
    ax.set_xlabel("distance i - j (tokens; symlog scale)")
    ax.set_ylabel("MLP input ψ(i - j) / ψ(max(i, T))")
    ax.set_title(f"FIRE's progressive interpolation: T = {threshold:g}, c = {c:g}",
                 fontsize=10)
    ax.legend(fontsize=7, loc="upper left", ncols=2)
    ax.grid(alpha=0.3)
    return fig


def cope_positions(text: str = "the cat sat . a dog ran . it rained . we left",
                   separator: str = ".") -> BookFigure:
    """CoPE's positions with gates open on sentence ends, next to ``i - j + 1``.

    The gates are 1 for the tokens equal to ``separator``, 0 otherwise: the
    position of a key is then the number of sentence ends from it to the
    query (0 within the query's own unfinished sentence).
    """
    words = text.split()
    n = len(words)
    is_end = torch.tensor([w == separator for w in words], dtype=torch.float64)
    causal = attention.causal_mask(n).double()
    gates = causal * is_end[None, :]
    panels = {
        "all gates 1: p = i - j + 1": relative.cope_positions(causal),
        "gates open on sentence ends": relative.cope_positions(gates),
    }
    fig, axes = new_subplots(8.4, 4.0, 1, 2, sharey=True)
    vmax = float(n)
    image = None
    for ax, (title, p) in zip(axes, panels.items()):
        values = p.numpy().copy()
        values[causal.numpy() == 0] = np.nan
        image = ax.imshow(values, cmap=SEQUENTIAL, vmin=0, vmax=vmax,
                          interpolation="nearest")
        for a in range(n):
            for b in range(a + 1):
                ax.text(b, a, f"{values[a, b]:g}", ha="center", va="center",
                        fontsize=6, color="w" if values[a, b] < vmax / 2 else "k")
        ax.set_xticks(range(n), words, rotation=90, fontsize=7)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("key j (token)")
    set_ticks(axes[0].yaxis, range(n), words, labelsize=7)
    axes[0].set_ylabel("query i (token)")
    fig.colorbar(image, ax=list(axes), shrink=0.85,
                 label="contextual position p_ij (counted tokens)")
    fig.suptitle("CoPE counts what its gates let through (future keys blank)",
                 fontsize=10)
    return fig
