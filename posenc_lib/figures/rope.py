"""Figures for chapter 4: rotary position embedding (RoPE)."""

from __future__ import annotations

import functools
import math

import numpy as np
import torch
from matplotlib import colormaps
from matplotlib.patches import Rectangle
from matplotlib.ticker import NullLocator

from .. import _validate, rope, scaling
from ._base import DIVERGING, BookFigure, new_subplots, plain_log_axis, set_ticks
__all__ = ["rotation_matrices", "decay_bound", "rotation_angles", "rotation_clocks",
           "partial_rotary", "numerics_error"]


def rotation_matrices(position: float = 1.0, dim: int = 16,
                      base: float = 100.0) -> BookFigure:
    """The dense matrix ``R_{Θ,m}`` in the interleaved and the half layout, side by side."""
    f = rope.inv_freq(dim, base, dtype=torch.float64)
    fig, axes = new_subplots(6.4, 3.4, 1, 2)
    for ax, layout, who in zip(axes, rope.LAYOUTS[::-1],
                               ("RoFormer, Meta Llama, GPT-J", "GPT-NeoX, HF Llama")):
        matrix = rope.rotation_matrix(position, f, layout=layout).numpy()
        image = ax.imshow(matrix, cmap=DIVERGING, vmin=-1, vmax=1,
                          interpolation="nearest")
        pairs = "(2i, 2i+1)" if layout == "interleaved" else f"(i, i+{dim // 2})"
        ax.set_title(f"{layout}: pairs {pairs}\n{who}", fontsize=9)
        ticks = np.arange(0, dim, max(1, dim // 4))
        set_ticks(ax.xaxis, ticks)
        set_ticks(ax.yaxis, ticks)
        ax.set_xlabel("input feature (index)")
        ax.set_ylabel("output feature (index)")
    fig.colorbar(image, ax=axes, shrink=0.8, label="matrix entry (cos or ±sin)")
    fig.suptitle(f"Rotation matrix at position m = {position:g} "
                 f"(dim = {dim}, base = {base:g})", fontsize=10)
    return fig


def _exact_rms(distances: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    """``sqrt(E[score²]/d)`` for standard normal ``q, k``: ``‖R_r‖_F / √d``, exactly.

    ``E[(qᵀ A k)²] = tr(A Aᵀ)``; row ``b`` of ``apply_rope(I, r)`` is
    ``(R_r e_b)ᵀ``, so the sum of squares of that matrix is ``tr(R_r R_rᵀ)``.
    """
    dim = 2 * f.shape[0]
    eye = torch.eye(dim, dtype=torch.float64).expand(distances.shape[0], dim, dim)
    rotated = rope.apply_rope(eye, distances[:, None].to(torch.float64), f)
    return rotated.pow(2).sum(dim=(-2, -1)).div(dim).sqrt()


@functools.lru_cache(maxsize=128)
def _decay_curves(dim: int, base: float, max_distance: int):
    """The three curves of :func:`decay_bound` (cached: the exact RMS is slow)."""
    r = np.unique(np.round(np.logspace(0, math.log10(max_distance), 700))
                  .astype(np.int64))
    distances = torch.from_numpy(r)
    f = rope.inv_freq(dim, base, dtype=torch.float64)
    bound = rope.decay_bound(distances, dim, base) / (dim / 4 + 0.5)
    ones = torch.ones(dim, dtype=torch.float64)
    constant = rope.relative_score(ones, ones, distances, f) / dim
    sparse = torch.from_numpy(np.unique(np.round(
        np.logspace(0, math.log10(max_distance), 25)).astype(np.int64)))
    rms = _exact_rms(sparse, f)
    return r, bound, constant, sparse, rms


def decay_bound(dim: int = 128, base: float = 10000.0,
                max_distance: int = 2 ** 16) -> BookFigure:
    """RoFormer's bound against two actual scores, each relative to its value at 0.

    Curves: the bound ``(1/(d/2)) Σ|S_j|`` over its value ``d/4 + 1/2`` at 0;
    the score of ``q = k = 1`` over its value ``d`` at 0; and the root mean
    square score of independent standard normal ``q, k`` over ``√d``,
    computed exactly as ``sqrt(tr(R_r R_rᵀ)/d)`` (no sampling).
    """
    dim = _validate.even_int("dim", dim)
    max_distance = _validate.positive_int("max_distance", max_distance, minimum=2)
    r, bound, constant, sparse, rms = _decay_curves(dim, base, max_distance)

    fig, ax = new_subplots(6.4, 3.6)
    ax.semilogx(r, bound.numpy(), color="C3", lw=1.6,
                label=r"RoFormer bound $\frac{1}{d/2}\sum_j|S_j|$, over $d/4+1/2$")
    ax.semilogx(r, constant.numpy(), color="C0", lw=1.0,
                label=r"score of $q=k=\mathbf{1}$, over $d$")
    ax.semilogx(sparse.numpy(), rms.numpy(), color="C2", lw=1.2, marker="o", ms=3,
                label=r"RMS score of random $q,k$, over $\sqrt{d}$ (exact: "
                      r"$\sqrt{\mathrm{tr}\,AA^\top/d}$)")
    ax.axhline(0, color="grey", lw=0.6, label="zero")
    plain_log_axis(ax.xaxis)
    # Small heads dip further: the q = k = 1 score reaches -0.65 of its start at
    # d = 16. The axis reaches below the lowest curve, on a 0.05 grid.
    lowest = min(float(constant.min()), float(rms.min()), float(bound.min()))
    ax.set_ylim(min(-0.35, math.floor((lowest - 0.05) / 0.05) * 0.05), 2.0)
    ax.set_xlabel("relative distance n − m (positions)")
    ax.set_ylabel("value / value at distance 0")
    ax.set_title(f"The bound decays, the typical score does not "
                 f"(dim = {dim}, base = {base:g})", fontsize=10)
    ax.legend(fontsize=8.5, loc="upper right")  # above the curves, which start at 1
    ax.grid(alpha=0.3, which="both")
    return fig


def rotation_angles(base: float = 10000.0, dim: int = 128,
                    context_length: int = 4096) -> BookFigure:
    """Angle ``m·θ_i mod 2π`` of every pair against position, and each pair's wavelength.

    Left: the angle as a cyclic colour, positions on a log axis from 1 to
    ``context_length``; the white curve marks ``m = 2π/θ_i``, where pair ``i``
    completes its first full turn. Right: the wavelengths ``2π/θ_i`` against
    the context length; filled markers complete a turn within it.
    """
    dim = _validate.even_int("dim", dim)
    context_length = _validate.positive_int("context_length", context_length, minimum=2)
    f = rope.inv_freq(dim, base, dtype=torch.float64)
    wavelength = (2 * math.pi / f).numpy()
    pairs = np.arange(dim // 2)
    full = wavelength <= context_length
    edges = np.logspace(0, math.log10(context_length), 257)
    centres = np.sqrt(edges[:-1] * edges[1:])
    angles = np.mod(rope.rope_angles(torch.from_numpy(centres), f).numpy().T, 2 * math.pi)
    # Where a pair turns by more than half a turn across one column of cells, the
    # colour at the column's centre says nothing about the column (aliasing):
    # those cells are left blank instead of drawn as noise.
    aliased = f.numpy()[:, None] * np.diff(edges)[None, :] > math.pi
    angles = np.ma.masked_where(aliased, angles)

    fig, (left, right) = new_subplots(6.4, 3.8, 1, 2, sharey=True, width_ratios=[1.35, 1])
    twilight = colormaps["twilight"].with_extremes(bad="0.9")
    mesh = left.pcolormesh(edges, np.arange(dim // 2 + 1) - 0.5, angles, cmap=twilight,
                           vmin=0, vmax=2 * math.pi, shading="flat", rasterized=True)
    if aliased.any():
        left.add_patch(Rectangle((0, 0), 0, 0, fc="0.9", ec="none",
                                 label="> half a turn per column: not drawable"))
    left.plot(wavelength[full], pairs[full], color="white", lw=1.2, marker=".", ms=3,
              label=r"first full turn, $m = 2\pi/\theta_i$")
    left.set_xscale("log")
    plain_log_axis(left.xaxis)
    # No minor tick marks under the heatmap: its x axis changes with the context
    # length, and drawing ~50 minor ticks was most of a redraw (decades stay marked).
    left.xaxis.set_minor_locator(NullLocator())
    left.set_xlim(1, context_length)
    left.set_xlabel("position m")
    left.set_ylabel("pair i")
    left.set_title(r"angle $m\theta_i$ mod $2\pi$", fontsize=9)
    left.legend(fontsize=8, loc="upper left", facecolor="0.6", framealpha=0.8)
    bar = fig.colorbar(mesh, ax=left, location="bottom", shrink=0.8, pad=0.02, aspect=30,
                       label=r"angle $m\theta_i$ mod $2\pi$ (rad)")
    bar.set_ticks([0, math.pi, 2 * math.pi], labels=["0", "π", "2π"])

    right.semilogx(wavelength[full], pairs[full], "o", ms=3, color="C0",
                   label=f"{full.sum()} pairs turn at least once")
    right.semilogx(wavelength[~full], pairs[~full], "o", ms=3, mfc="none", color="C3",
                   label=f"{(~full).sum()} pairs never complete a turn")
    right.axvline(context_length, color="k", ls="--", lw=1,
                  label=f"context length L = {context_length:,}")
    plain_log_axis(right.xaxis)
    right.set_xlim(2, 2 * math.pi * 1.2e6)
    right.set_ylim(-0.5, dim // 2 - 0.5)
    right.set_xlabel(r"wavelength $2\pi/\theta_i$ (positions)")
    right.set_title("wavelength against the context length", fontsize=9)
    right.legend(fontsize=8, loc="lower right")
    right.grid(alpha=0.3, which="both")
    fig.suptitle(f"{full.sum()} of {dim // 2} pairs complete a full turn within "
                 f"L = {context_length:,} (base = {base:g}, dim = {dim})", fontsize=10)
    return fig


def rotation_clocks(shift: int = 2, distance: int = 3, dim: int = 16,
                    base: float = 100.0) -> BookFigure:
    """Every pair as a clock: the query's hand at ``m·θ_i``, the key's at ``n·θ_i``.

    The key sits at ``n = shift`` and the query ``distance`` positions after
    it, at ``m = shift + distance`` (a causal query looks back), so moving
    ``shift`` alone moves both positions by the same step. Query and key hold
    the same content, the unit vector ``(1, 0)`` in every pair, so pair ``i``
    contributes ``cos((n - m)·θ_i)`` to the score: only the angle between the
    two hands (the arc) counts, and it depends on ``n - m`` alone. The lower
    panel draws those contributions.
    """
    dim = _validate.even_int("dim", dim)
    n = _validate.finite_float("shift", shift)
    m = n + _validate.finite_float("distance", distance)
    f = rope.inv_freq(dim, base, dtype=torch.float64)
    pairs = dim // 2
    query_angle = rope.rope_angles(torch.tensor([m]), f)[0].numpy()
    key_angle = rope.rope_angles(torch.tensor([n]), f)[0].numpy()
    # The turn from the query's hand to the key's, in (-π, π]: (n - m)θ_i mod 2π.
    turn = np.angle(np.exp(1j * (key_angle - query_angle)))
    contribution = np.cos(key_angle - query_angle)

    # Four clocks to a row, so that each is large enough to read at the
    # column's width; the query's hand is long, the key's short and dashed, so
    # the two stay apart even where they point the same way.
    fig, (clocks, bars) = new_subplots(6.4, 5.6, 2, 1, height_ratios=[2.4, 1])
    columns = min(pairs, 4)
    rows = math.ceil(pairs / columns)
    circle = np.linspace(0, 2 * math.pi, 65)
    centres = [(3.0 * (i % columns), -3.3 * (i // columns)) for i in range(pairs)]
    # All dials in one line and all arcs in another (NaN between clocks): the
    # clocks do not overlap, so this draws what one line per clock drew.
    gap = np.full(1, np.nan)
    clocks.plot(np.concatenate([np.r_[cx + np.cos(circle), gap] for cx, _ in centres]),
                np.concatenate([np.r_[cy + np.sin(circle), gap] for _, cy in centres]),
                color="0.75", lw=0.8)
    arcs = [query_angle[i] + np.linspace(0, turn[i], 24) for i in range(pairs)]
    clocks.plot(np.concatenate([np.r_[cx + 0.55 * np.cos(arc), gap]
                                for (cx, _), arc in zip(centres, arcs)]),
                np.concatenate([np.r_[cy + 0.55 * np.sin(arc), gap]
                                for (_, cy), arc in zip(centres, arcs)]),
                color="C2", lw=2.2, label="turn from query to key, (n − m)θᵢ")
    for i, (cx, cy) in enumerate(centres):
        clocks.plot([cx, cx + np.cos(query_angle[i])], [cy, cy + np.sin(query_angle[i])],
                    color="C0", lw=2.2, marker="o", markevery=[1], markersize=5,
                    label="query hand, angle mθᵢ" if i == 0 else None)
        clocks.plot([cx, cx + 0.7 * np.cos(key_angle[i])],
                    [cy, cy + 0.7 * np.sin(key_angle[i])], color="C3", lw=2.2,
                    ls=(0, (2, 1)), marker="s", markevery=[1], markersize=5,
                    label="key hand, angle nθᵢ" if i == 0 else None)
        clocks.text(cx, cy - 1.15, f"pair {i}\nθ = {f[i].item():.3g}", ha="center",
                    va="top", fontsize=9, linespacing=1.1)
    clocks.set_xlim(-1.3, 3.0 * (columns - 1) + 1.3)
    clocks.set_ylim(-3.3 * (rows - 1) - 2.1, 1.15)
    clocks.set_aspect("equal")
    clocks.axis("off")
    clocks.legend(fontsize=9, loc="lower center", ncols=2, bbox_to_anchor=(0.5, 1.0),
                  frameon=False)

    bars.bar(np.arange(pairs), contribution, color="C2", width=0.7,
             label="cos((n − m)θᵢ)")
    bars.axhline(0, color="grey", lw=0.6, label="zero")
    bars.set_xlim(-0.6, pairs - 0.4)
    bars.set_ylim(-1.1, 1.1)
    set_ticks(bars.xaxis, np.arange(0, pairs, max(1, pairs // 8)))
    bars.set_xlabel("pair i")
    bars.set_ylabel("contribution to\nthe score")
    bars.legend(fontsize=9, loc="lower right", ncols=2, bbox_to_anchor=(1.0, 1.0),
                frameon=False)
    bars.grid(alpha=0.3, axis="y")
    def signed(x: float, spec: str = "g") -> str:  # a true minus sign, not a hyphen
        return format(x, spec).replace("-", "−")

    fig.suptitle(f"query at m = {signed(m)}, key at n = {signed(n)}: "
                 f"n − m = {signed(n - m)}\nscore "
                 f"Σ cos((n − m)θᵢ) = {signed(contribution.sum(), '.3f')} "
                 f"(dim = {dim}, base = {base:g})", fontsize=9)
    return fig


_partial_cache: dict = {}


def _partial_curves(f: torch.Tensor, r: np.ndarray, head_dim: int, context_length: int):
    """One variant's numbers for :func:`partial_rotary`, cached by their inputs' bytes.

    Returns the score of ``q = k = 1`` over ``head_dim`` at the distances
    ``r``, the turns of the rotating pairs within ``context_length`` and how
    many of them are out of range at twice that length.
    """
    key = (str(f.dtype), f.numpy().tobytes(), r.tobytes(), head_dim, context_length)
    hit = _partial_cache.get(key)
    if hit is not None:
        return hit
    rotated = 2 * f.shape[0]                 # features that the frequencies cover
    moving = f > 0
    ones = torch.ones(rotated, dtype=torch.float64)
    # Whole head: rotated part plus the position-free rest, q = k = 1.
    score = (rope.relative_score(ones, ones, torch.from_numpy(r), f)
             + (head_dim - rotated)) / head_dim
    turns = scaling.rotations(f[moving], context_length).numpy()
    out = scaling.out_of_range_pairs(f[moving], f[moving], context_length,
                                     2 * context_length)
    if len(_partial_cache) >= 256:
        _partial_cache.clear()
    _partial_cache[key] = hit = (score.numpy(), turns, int(out.sum()))
    return hit


def partial_rotary(partial_rotary_factor: float = 0.25, base: float = 10000.0,
                   head_dim: int = 128, context_length: int = 4096,
                   max_distance: int = 2 ** 20) -> BookFigure:
    """The two partial-rotary conventions against full RoPE, at fraction ``p``.

    Left: the score of ``q = k = 1`` over its value ``d`` at 0, against the
    distance; the dashed line is the position-free part, ``(d - d_r)/d`` for
    ``d_r`` rotated features. Right: how many turns each rotating pair makes
    within ``context_length`` (:func:`posenc_lib.scaling.rotations`); pairs
    below one turn are out of range beyond it
    (:func:`posenc_lib.scaling.out_of_range_pairs`); p-RoPE's pairs with
    ``θ = 0`` are drawn at the bottom edge.
    """
    head_dim = _validate.even_int("head_dim", head_dim)
    context_length = _validate.positive_int("context_length", context_length, minimum=2)
    max_distance = _validate.positive_int("max_distance", max_distance, minimum=2)
    p = partial_rotary_factor
    variants = [
        ("full RoPE", rope.inv_freq(head_dim, base, dtype=torch.float64), "k", "-"),
        ("rotary_dim spacing (GPT-NeoX)",
         rope.partial_inv_freq(head_dim, p, base, dtype=torch.float64), "C0", "-"),
        ("head_dim spacing (p-RoPE)",
         rope.partial_inv_freq(head_dim, p, base, spacing="head_dim",
                               dtype=torch.float64), "C3", "-"),
    ]
    r = np.unique(np.round(np.logspace(0, math.log10(max_distance), 600)).astype(np.int64))

    fig, (left, right) = new_subplots(6.8, 3.8, 1, 2, width_ratios=[1.3, 1])
    counts = []
    for label, f, color, style in variants:
        moving = f > 0
        score, turns, n_out = _partial_curves(f, r, head_dim, context_length)
        left.semilogx(r, score, color=color, ls=style, lw=1.0, label=label)
        counts.append(n_out)
        index = np.arange(f.shape[0])
        right.semilogy(index[moving.numpy()], turns, "o", ms=2.5, color=color,
                       mfc=color if color != "C3" else "none", label=label)
        if (~moving).any():
            right.plot(index[~moving.numpy()], np.full(int((~moving).sum()), 1.2e-6), "v",
                       ms=3, color=color, label="θ = 0: never turns")
    kept = 2 * int(p * head_dim // 2)
    left.axhline((head_dim - kept) / head_dim, color="grey", ls="--", lw=1,
                 label="position-free part (d − dᵣ)/d")
    plain_log_axis(left.xaxis)
    left.set_ylim(-0.35, 1.05)
    left.set_xlabel("relative distance n − m (positions)")
    left.set_ylabel("score of q = k = 1, over d")
    left.set_title("score of a constant query and key", fontsize=9)
    left.legend(fontsize=8, loc="lower left")
    left.grid(alpha=0.3, which="both")
    right.axhline(1, color="k", ls=":", lw=1, label=f"one turn within L = {context_length:,}")
    right.set_ylim(1e-6, 1e4)
    right.set_xlabel("pair i")
    right.set_ylabel("turns within L, Lθᵢ / 2π")
    right.set_title("turns within the context length", fontsize=9)
    right.legend(fontsize=8, loc="upper right")
    right.grid(alpha=0.3, which="major")
    fig.suptitle(f"p = {p:g} (head_dim = {head_dim}, base = {base:g})\npairs out of "
                 f"range at 2L: full {counts[0]}, rotary_dim spacing {counts[1]}, "
                 f"p-RoPE {counts[2]}", fontsize=9)
    return fig


def numerics_error(max_position: int = 10 ** 6, dim: int = 128, base: float = 10000.0, *,
                   n_points: int = 400) -> BookFigure:
    """Largest cos/sin error per position for several precision recipes, log-log."""
    max_position = _validate.positive_int("max_position", max_position, minimum=10)
    positions = torch.unique(torch.logspace(0, math.log10(max_position), n_points,
                                            dtype=torch.float64).round()).to(torch.int64)
    recipes = [
        ("float32 angles, float32 cos/sin", torch.float32, torch.float32, "C0"),
        ("float32 angles, bfloat16 cos/sin", torch.float32, torch.bfloat16, "C1"),
        ("float64 angles, float32 cos/sin", torch.float64, torch.float32, "C2"),
        ("bfloat16 angles (positions in bfloat16)", torch.bfloat16, torch.bfloat16, "C3"),
    ]
    p = positions.numpy()
    fig, ax = new_subplots(6.4, 3.8)
    for label, angle_dtype, cs_dtype, color in recipes:
        error = rope.cos_sin_error(positions, dim, base, angle_dtype=angle_dtype,
                                   cos_sin_dtype=cs_dtype).numpy()
        ax.loglog(p, np.maximum(error, 1e-10), color=color, lw=1, label=label)
    ax.loglog(p, p * 2.0 ** -23, "k--", lw=0.8,
              label=r"bound for float32 angles, $m\cdot 2^{-23}$")
    ax.axhline(2.0 ** -9, color="grey", ls=":", lw=1,
               label=r"half a bfloat16 step below 1, $2^{-9}$")
    plain_log_axis(ax.xaxis)
    ax.set_ylim(1e-10, 5)
    ax.set_xlabel("position m")
    ax.set_ylabel("max error of cos, sin (absolute)")
    ax.set_title(f"cos and sin of mθᵢ against float64 (dim = {dim}, base = {base:g})",
                 fontsize=10)
    ax.legend(fontsize=7, loc="lower right", bbox_to_anchor=(1, 0.1))
    ax.grid(alpha=0.3, which="both")
    return fig
