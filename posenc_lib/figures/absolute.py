"""Figures for chapter 2: absolute position encodings."""

from __future__ import annotations

import math

import numpy as np
import torch

from .. import _validate, absolute
from ._base import DIVERGING, BookFigure, new_figure, new_subplots, plain_log_axis, set_ticks
__all__ = ["integer_magnitude", "binary_code", "binary_to_sinusoid", "sinusoidal_heatmap",
           "sinusoidal_similarity", "wavelengths", "float32_error"]


def integer_magnitude(n_positions: int = 512, d_model: int = 64, *,
                      seed: int = 0) -> BookFigure:
    """Norm of the integer encoding ``p·1`` against token embeddings at two scales.

    Tokens at Vaswani et al.'s scale have unit-variance entries (an
    ``N(0, 1/d_model)`` table times ``sqrt(d_model)``); tokens at GPT-2's
    initial scale have entries ``N(0, 0.02²)``. The sinusoidal row, of norm
    ``sqrt(d_model/2)``, is shown for comparison.
    """
    n_positions = _validate.positive_int("n_positions", n_positions, minimum=2)
    d_model = _validate.even_int("d_model", d_model)
    generator = torch.Generator().manual_seed(seed)
    draws = torch.randn(n_positions, d_model, generator=generator, dtype=torch.float64)
    integer = absolute.integer_encoding(n_positions, d_model, dtype=torch.float64)
    sinusoidal = absolute.sinusoidal_encoding(n_positions, d_model, dtype=torch.float64)
    p = np.arange(n_positions)
    fig, ax = new_subplots(6.4, 4.0)
    ax.plot(p[1:], integer.norm(dim=-1)[1:],
            label=r"integer encoding $\|p\cdot\mathbf{1}\| = p\sqrt{d_{model}}$")
    ax.plot(p, draws.norm(dim=-1), lw=0.8,
            label=r"token, Vaswani et al. scale (unit-variance entries)")
    ax.plot(p, sinusoidal.norm(dim=-1), ls="--",
            label=r"sinusoidal encoding, $\sqrt{d_{model}/2}$")
    ax.plot(p, 0.02 * draws.norm(dim=-1), lw=0.8,
            label="token, GPT-2 initial scale (std 0.02)")
    ax.set_yscale("log")
    plain_log_axis(ax.yaxis)
    ax.set_xlabel("position p (tokens)")
    ax.set_ylabel("Euclidean norm (log scale)")
    ax.set_title(f"The integer encoding swamps the token (d_model = {d_model})",
                 fontsize=10)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2,
              frameon=False)
    ax.grid(alpha=0.3)
    return fig


def binary_code(n_positions: int = 64, dim: int = 6) -> BookFigure:
    """The bits of each position (top) and the bits flipped between neighbours."""
    table = absolute.binary_encoding(n_positions, dim)
    flips = absolute.neighbour_hamming(n_positions, dim)
    fig, (top, bottom) = new_subplots(6.4, 4.2, 2, 1, sharex=True, height_ratios=[1.2, 1])
    image = top.imshow(table.T.numpy(), aspect="auto", cmap="Greys",
                       interpolation="nearest", vmin=0, vmax=1,
                       extent=(-0.5, n_positions - 0.5, dim - 0.5, -0.5))
    set_ticks(top.yaxis, range(dim), [f"bit {j} (period {2 ** (j + 1)})" for j in range(dim)],
              labelsize=7)
    top.set_title("Binary encoding, least significant bit first", fontsize=10)
    fig.colorbar(image, ax=top, ticks=[0, 1], label="bit value")
    bottom.bar(np.arange(n_positions - 1) + 0.5, flips.numpy(), width=0.8, color="C3")
    bottom.set_xlabel("position p (bars sit between p and p + 1)")
    bottom.set_ylabel("bits flipped\np -> p + 1")
    bottom.grid(axis="y", alpha=0.3)
    fig.colorbar(image, ax=bottom).remove()  # keeps the two panels the same width
    return fig


def binary_to_sinusoid(n_positions: int = 32, bits: int = 3) -> BookFigure:
    """Each bit as a square wave, with the sinusoid of the same period and phase.

    Bit ``j`` equals 1 exactly where ``(1 − sin(π(p + ½)/2^j))/2`` exceeds
    one half.
    """
    n_positions = _validate.positive_int("n_positions", n_positions, minimum=2)
    bits = _validate.positive_int("bits", bits)
    width = max(bits, (n_positions - 1).bit_length())
    table = absolute.binary_encoding(n_positions, width, dtype=torch.float64).numpy()
    p = np.arange(n_positions)
    x = np.linspace(-0.5, n_positions - 0.5, 40 * n_positions)
    fig = new_figure(6.4, 1.1 + 1.0 * bits)
    axes = fig.subplots(bits, 1, sharex=True, squeeze=False)[:, 0]
    for j, ax in enumerate(axes):
        smooth = (1 - np.sin(np.pi * (x + 0.5) / 2 ** j)) / 2
        ax.step(p, table[:, j], where="mid", color="k", lw=1.2,
                label="bit $b_j(p)$ (square wave)")
        ax.plot(x, smooth, color="C0", lw=1.2,
                label=r"$(1-\sin(\pi(p+\frac{1}{2})/2^j))/2$")
        ax.axhline(0.5, color="C3", ls=":", lw=1, label="threshold 1/2")
        ax.set_ylabel(f"bit {j}\n(period {2 ** (j + 1)})", fontsize=8)
        set_ticks(ax.yaxis, [0, 1])
        ax.set_ylim(-0.15, 1.15)
    axes[0].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    axes[0].set_title("From bits to waves: same period, same phase", fontsize=10)
    axes[-1].set_xlabel("position p (tokens)")
    return fig


def sinusoidal_heatmap(base: float = 10000.0, dim: int = 64,
                       n_positions: int = 128) -> BookFigure:
    """The sinusoidal table ``PE[p, j]`` as a heatmap (positions down, features across)."""
    pe = absolute.sinusoidal_encoding(n_positions, dim, base, dtype=torch.float64)
    fig, ax = new_subplots(6.4, 3.8)
    image = ax.imshow(pe.numpy(), aspect="auto", cmap=DIVERGING, vmin=-1, vmax=1,
                      interpolation="nearest")
    ax.set_xlabel("feature j (even: sin, odd: cos; frequency falls to the right)")
    ax.set_ylabel("position p (tokens)")
    ax.set_title(f"Sinusoidal encoding, base = {base:g}, dim = {dim}", fontsize=10)
    fig.colorbar(image, ax=ax, label="PE[p, j] (dimensionless, in [-1, 1])")
    return fig


def sinusoidal_similarity(base: float = 10000.0, dim: int = 64,
                          max_offset: int = 256) -> BookFigure:
    """``PE(t)·PE(t+k) = Σ cos(kω_i)`` against ``k``, with its rises marked."""
    k = torch.arange(-max_offset, max_offset + 1)
    s = absolute.sinusoidal_similarity(k, dim, base).numpy()
    kk = k.numpy()
    rises = np.nonzero((kk[1:] > 0) & (np.diff(s) > 0))[0] + 1  # s grows as k grows
    fig, ax = new_subplots(6.4, 3.4)
    ax.plot(kk, s, lw=1.2, label=r"$PE(t)\cdot PE(t+k)=\sum_i\cos(k\,\omega_i)$")
    if rises.size:
        ax.plot(kk[rises], s[rises], ".", color="C3", ms=3,
                label=f"k > 0 where it rises ({rises.size} of {max_offset})")
    ax.axhline(0, color="grey", lw=0.6, label="zero")
    ax.set_xlabel("offset k (positions)")
    ax.set_ylabel("dot product (dimensionless)")
    ax.set_ylim(min(s.min(), 0) - 0.05 * dim, dim / 2 * 1.08)
    ax.set_title(f"Even in k, not monotone (base = {base:g}, dim = {dim})", fontsize=10)
    ax.legend(fontsize=8, loc="upper right")
    ax.grid(alpha=0.3)
    return fig


def wavelengths(dim: int = 128, base: float = 10000.0, context: int = 4096) -> BookFigure:
    """Wavelength ``2π/ω_i`` of every sin/cos pair, against a context length."""
    omega = absolute.sinusoidal_frequencies(dim, base, dtype=torch.float64)
    lam = (2 * math.pi / omega).numpy()
    i = np.arange(dim // 2)
    fig, ax = new_subplots(6.4, 3.4)
    ax.semilogy(i, lam, ".-", ms=3, label=r"wavelength $2\pi/\omega_i$")
    plain_log_axis(ax.yaxis)
    ax.axhline(2 * math.pi * base, color="C3", ls="--", lw=1,
               label=rf"$2\pi\cdot$base = {2 * math.pi * base:,.0f} (never reached)")
    ax.axhline(context, color="C2", ls=":", lw=1.2, label=f"context length {context:,}")
    # One y range for every base and context length the sliders offer (as in
    # chapter 6's wavelength figure): the ladder visibly stretches with the base,
    # and the axis is not laid out again at each slider step.
    ax.set_ylim(3, 2e7)
    ax.set_xlabel("pair index i (features 2i, 2i + 1)")
    ax.set_ylabel("wavelength (positions)")
    ax.set_title(rf"From $2\pi$ to $2\pi\cdot$base$^{{(d-2)/d}}$ = {lam[-1]:,.0f} "
                 f"(dim = {dim})", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def float32_error(max_position: int = 10 ** 6, dim: int = 128, base: float = 10000.0,
                  *, n_points: int = 200) -> BookFigure:
    """Float32 rounding error of a row and its bound, against the neighbour distance."""
    positions = torch.linspace(0, max_position, n_points).round().to(torch.int64)
    pe32 = absolute.sinusoidal_rows(positions, dim, base, dtype=torch.float32)
    pe64 = absolute.sinusoidal_rows(positions, dim, base, dtype=torch.float64)
    error = (pe32.double() - pe64).norm(dim=-1).numpy()
    bound = absolute.sinusoidal_error_bound(positions, dim, base).numpy()
    nearest = absolute.offset_distance(1, dim, base).item()
    x = positions[1:].numpy()
    fig, ax = new_subplots(6.4, 3.4)
    ax.loglog(x, error[1:], label=r"measured $\|PE_{32}(p)-PE(p)\|$")
    ax.loglog(x, bound[1:], color="C1", ls="-.", label="bound (float32 round-off)")
    ax.axhline(nearest, color="C3", ls="--",
               label=f"distance between neighbours, {nearest:.2f}")
    ax.axhline(nearest / 2, color="C3", ls=":",
               label="half of it: rows stay distinct below")
    ax.set_xlabel("position p (tokens)")
    ax.set_ylabel("Euclidean distance")
    ax.set_title(f"float32 rounding vs. the gap between encodings (dim = {dim})",
                 fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, which="both")
    return fig
