"""Figures for chapter 4: rotary position embedding (RoPE)."""

from __future__ import annotations

import math

import numpy as np
import torch

from .. import _validate, rope
from ._base import DIVERGING, BookFigure, new_figure, plain_log_axis

__all__ = ["rotation_matrices", "decay_bound", "rotation_angles", "numerics_error"]


def rotation_matrices(position: float = 1.0, dim: int = 16, base: float = 100.0) -> BookFigure:
    """The dense matrix ``R_{Θ,m}`` in the interleaved and in the half layout, side by side."""
    f = rope.inv_freq(dim, base, dtype=torch.float64)
    fig = new_figure(6.4, 3.4)
    axes = fig.subplots(1, 2)
    for ax, layout, who in zip(axes, rope.LAYOUTS[::-1],
                               ("RoFormer, Meta Llama, GPT-J", "GPT-NeoX, HF Llama")):
        matrix = rope.rotation_matrix(position, f, layout=layout).numpy()
        image = ax.imshow(matrix, cmap=DIVERGING, vmin=-1, vmax=1, interpolation="nearest")
        ax.set_title(f"{layout}: pairs "
                     + ("(2i, 2i+1)" if layout == "interleaved" else f"(i, i+{dim // 2})")
                     + f"\n{who}", fontsize=9)
        ticks = np.arange(0, dim, max(1, dim // 4))
        ax.set_xticks(ticks)
        ax.set_yticks(ticks)
        ax.set_xlabel("input feature")
        ax.set_ylabel("output feature")
    fig.colorbar(image, ax=axes, shrink=0.8, label="matrix entry")
    fig.suptitle(f"Rotation matrix at position m = {position:g} (dim = {dim}, base = {base:g})",
                 fontsize=10)
    return fig


def decay_bound(dim: int = 128, base: float = 10000.0, max_distance: int = 2 ** 16, *,
                n_draws: int = 256, seed: int = 0) -> BookFigure:
    """RoFormer's bound against two actual scores, each relative to its value at distance 0.

    Curves: the bound ``(1/(d/2)) Σ|S_j|`` over its value ``d/4 + 1/2`` at 0;
    the score of ``q = k = 1`` over its value ``d`` at 0; and the root mean
    square score of random Gaussian ``q, k`` (``n_draws`` seeded draws) over
    ``√d``, its exact value at every distance.
    """
    dim = _validate.even_int("dim", dim)
    max_distance = _validate.positive_int("max_distance", max_distance, minimum=2)
    r = np.unique(np.round(np.logspace(0, math.log10(max_distance), 700)).astype(np.int64))
    distances = torch.from_numpy(r)
    f = rope.inv_freq(dim, base, dtype=torch.float64)
    bound = rope.decay_bound(distances, dim, base) / (dim / 4 + 0.5)
    ones = torch.ones(dim, dtype=torch.float64)
    constant = rope.relative_score(ones, ones, distances, f) / dim
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(n_draws, dim, generator=generator, dtype=torch.float64)
    k = torch.randn(n_draws, dim, generator=generator, dtype=torch.float64)
    rms = rope.relative_score(q, k, distances, f).pow(2).mean(0).sqrt() / math.sqrt(dim)

    fig = new_figure(6.4, 3.6)
    ax = fig.subplots()
    ax.semilogx(r, bound.numpy(), color="C3", lw=1.6,
                label=r"RoFormer bound $\frac{1}{d/2}\sum_j|S_j|$, over $d/4+1/2$")
    ax.semilogx(r, constant.numpy(), color="C0", lw=1.0,
                label=r"score of $q=k=\mathbf{1}$, over $d$")
    ax.semilogx(r, rms.numpy(), color="C2", lw=1.0,
                label=rf"RMS score of random $q,k$ ({n_draws} draws), over $\sqrt{{d}}$")
    plain_log_axis(ax.xaxis)
    ax.axhline(0, color="grey", lw=0.6)
    ax.set_ylim(-0.35, 1.25)
    ax.set_xlabel("relative distance n - m (positions)")
    ax.set_ylabel("value / value at distance 0")
    ax.set_title(f"The bound decays, the typical score does not (dim = {dim}, base = {base:g})",
                 fontsize=10)
    ax.legend(fontsize=7.5, loc="lower left")
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

    fig = new_figure(6.4, 3.8)
    left, right = fig.subplots(1, 2, sharey=True, width_ratios=[1.35, 1])
    mesh = left.pcolormesh(edges, np.arange(dim // 2 + 1) - 0.5, angles, cmap="twilight",
                           vmin=0, vmax=2 * math.pi, shading="flat", rasterized=True)
    left.plot(wavelength[full], pairs[full], color="white", lw=1.2, marker=".", ms=3)
    left.set_xscale("log")
    plain_log_axis(left.xaxis)
    left.set_xlim(1, context_length)
    left.set_xlabel("position m")
    left.set_ylabel("pair i")
    left.set_title(r"angle $m\theta_i$ mod $2\pi$; white: first full turn", fontsize=9)
    bar = fig.colorbar(mesh, ax=left, location="bottom", shrink=0.8, pad=0.02, aspect=30)
    bar.set_ticks([0, math.pi, 2 * math.pi], labels=["0", "π", "2π"])

    right.semilogx(wavelength[full], pairs[full], "o", ms=3, color="C0",
                   label=f"{full.sum()} pairs turn at least once")
    right.semilogx(wavelength[~full], pairs[~full], "o", ms=3, mfc="none", color="C3",
                   label=f"{(~full).sum()} pairs never complete a turn")
    right.axvline(context_length, color="k", ls="--", lw=1, label=f"L = {context_length:,}")
    plain_log_axis(right.xaxis)
    right.set_xlim(2, 2 * math.pi * 1.2e6)
    right.set_ylim(-0.5, dim // 2 - 0.5)
    right.set_xlabel(r"wavelength $2\pi/\theta_i$ (positions)")
    right.set_title("wavelength against the context length", fontsize=9)
    right.legend(fontsize=7, loc="lower right")
    right.grid(alpha=0.3, which="both")
    fig.suptitle(f"{full.sum()} of {dim // 2} pairs complete a full turn within "
                 f"L = {context_length:,} (base = {base:g}, dim = {dim})", fontsize=10)
    return fig


def numerics_error(max_position: int = 10 ** 6, dim: int = 128, base: float = 10000.0, *,
                   n_points: int = 400) -> BookFigure:
    """Largest cos/sin error per position for several precision recipes, log-log."""
    max_position = _validate.positive_int("max_position", max_position, minimum=10)
    positions = torch.unique(torch.logspace(0, math.log10(max_position), n_points,
                                            dtype=torch.float64).round()).to(torch.int64)
    recipes = [
        ("float32 angles, float32 cos/sin", torch.float32, torch.float32, "C0", "-"),
        ("float32 angles, bfloat16 cos/sin", torch.float32, torch.bfloat16, "C1", "-"),
        ("float64 angles, float32 cos/sin", torch.float64, torch.float32, "C2", "-"),
        ("bfloat16 angles (positions in bfloat16)", torch.bfloat16, torch.bfloat16, "C3", "-"),
    ]
    p = positions.numpy()
    fig = new_figure(6.4, 3.8)
    ax = fig.subplots()
    for label, angle_dtype, cs_dtype, color, style in recipes:
        error = rope.cos_sin_error(positions, dim, base, angle_dtype=angle_dtype,
                                   cos_sin_dtype=cs_dtype).numpy()
        ax.loglog(p, np.maximum(error, 1e-10), style, color=color, lw=1, label=label)
    ax.loglog(p, p * 2.0 ** -23, "k--", lw=0.8,
              label=r"bound for float32 angles, $m\cdot 2^{-23}$")
    ax.axhline(2.0 ** -9, color="grey", ls=":", lw=1,
               label=r"half a bfloat16 step below 1, $2^{-9}$")
    plain_log_axis(ax.xaxis)
    ax.set_ylim(1e-10, 5)
    ax.set_xlabel("position m")
    ax.set_ylabel("max error of cos, sin")
    ax.set_title(f"cos and sin of mθ_i against float64 (dim = {dim}, base = {base:g})",
                 fontsize=10)
    ax.legend(fontsize=7, loc="lower right", bbox_to_anchor=(1, 0.1))
    ax.grid(alpha=0.3, which="both")
    return fig
