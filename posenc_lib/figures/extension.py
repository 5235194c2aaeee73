"""Figures for chapter 6: extrapolation and context extension."""

from __future__ import annotations

import functools
import math

import matplotlib
import numpy as np
import torch
from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator

from .. import _validate, alibi, designs, rope, scaling, xpos
from ._base import SEQUENTIAL, BookFigure, new_subplots, plain_log_axis, steady_limit

__all__ = ["METHOD_LABELS", "out_of_range", "wavelengths", "ramps", "alibi_bias",
           "pi_fit", "xpos_decay", "llama4_nope", "p_rope_removed", "partial_conventions"]

#: Display names of the methods of :func:`posenc_lib.scaling.extension_inv_freqs`.
METHOD_LABELS = {"default": "RoPE, no scaling", "linear": "PI (linear)",
                 "ntk": "NTK-aware", "dynamic": "dynamic NTK", "yarn": "YaRN",
                 "llama3": "Llama 3"}
_STYLE = {"default": dict(color="0.3", ls="-"), "linear": dict(color="C0", ls="-"),
          "ntk": dict(color="C1", ls="--"), "dynamic": dict(color="C2", ls=":"),
          "yarn": dict(color="C3", ls="-"), "llama3": dict(color="C4", ls="-.")}
_DTYPES = {"float32": torch.float32, "float64": torch.float64}


@functools.lru_cache(maxsize=64)
def _out_of_range_data(dim: int, base: float, factor: float, train_length: int,
                       target_length: int):
    """The numbers :func:`out_of_range` draws (cached).

    Returns the inference lengths, per method the fraction of pairs out of
    range at each length and the per-pair angle ratio at ``target_length``,
    and the number of pairs that closed the circle in training.
    """
    original = rope.inv_freq(dim, base, dtype=torch.float64)
    lengths = np.unique(np.geomspace(train_length, 64 * train_length, 60).round()
                        .astype(int))
    at_target = scaling.extension_inv_freqs(dim, base, factor, train_length,
                                            seq_len=target_length)
    # Dynamic NTK's frequencies follow the length: one row per length.
    dynamic = torch.stack([scaling.rope_parameters(
        "dynamic", dim, base, factor=factor, max_position_embeddings=train_length,
        seq_len=int(length), dtype=torch.float64)[0] for length in lengths])
    fractions, ratios = {}, {}
    for method in METHOD_LABELS:
        freqs = dynamic if method == "dynamic" else at_target[method]
        out = scaling.out_of_range_pairs(original, freqs, train_length, lengths)
        fractions[method] = out.double().mean(dim=-1).tolist()
        ratios[method] = scaling.angle_range_ratio(
            original, at_target[method], train_length, target_length).numpy()
    closed = int((train_length * original >= 2 * math.pi).sum())
    return lengths, fractions, ratios, closed


def out_of_range(factor: float = 4.0, target_length: int = 16384, *, dim: int = 128,
                 base: float = 10000.0, train_length: int = 4096) -> BookFigure:
    """Which pairs each method pushes outside their trained angle range.

    Left: the fraction of pairs out of range against the inference length.
    Right: per pair, the largest angle at ``target_length`` over the largest
    angle in training; pairs that closed the circle in training are shaded.
    """
    factor = _validate.finite_float("factor", factor, at_least=1.0)
    target_length = _validate.positive_int("target_length", target_length)
    lengths, fractions, ratios, closed = _out_of_range_data(
        dim, base, factor, train_length, target_length)
    fig, (left, right) = new_subplots(8.0, 3.4, 1, 2, width_ratios=[1, 1.15])
    for method, label in METHOD_LABELS.items():
        left.plot(lengths, fractions[method], label=label, lw=1.4, **_STYLE[method])
        right.semilogy(ratios[method], lw=1.4, **_STYLE[method])
    left.axvline(target_length, color="k", lw=0.8, alpha=0.6, label="target length")
    left.set_xscale("log")
    plain_log_axis(left.xaxis)
    left.set_xlabel("inference length (tokens)")
    left.set_ylabel("fraction of pairs out of range")
    left.set_ylim(-0.02, 0.62)
    left.set_title(f"Trained on {train_length:,} tokens, factor = {factor:g}", fontsize=10)
    left.legend(fontsize=9, loc="upper left")
    left.grid(alpha=0.3)
    right.axvspan(-0.5, closed - 0.5, color="0.85", lw=0,
                  label="pairs that closed the circle in training")
    right.axhline(1, color="k", lw=0.8, label="ratio 1: edge of the trained range")
    right.set_ylim(0.02, 100)
    right.set_xlabel("pair index i (frequency falls to the right)")
    right.set_ylabel("largest angle, inference / training")
    right.set_title(f"Per pair at {target_length:,} tokens (above 1: unseen)", fontsize=10)
    right.legend(fontsize=9, loc="lower left")
    right.grid(alpha=0.3)
    return fig


def wavelengths(factor: float = 8.0, original_max_position_embeddings: int = 4096, *,
                dim: int = 128, base: float = 10000.0) -> BookFigure:
    """Per-pair wavelength ``2π/θ'_i`` of every method, against the two context lengths."""
    length = _validate.positive_int("original_max_position_embeddings",
                                    original_max_position_embeddings)
    freqs = scaling.extension_inv_freqs(dim, base, factor, length)
    fig, ax = new_subplots(6.4, 3.6)
    for method, label in METHOD_LABELS.items():
        ax.semilogy((2 * math.pi / freqs[method]).numpy(), label=label, lw=1.4, **_STYLE[method])
    ax.axhline(length, color="k", lw=0.8, ls="--", label=f"original context L = {length:,}")
    ax.axhline(factor * length, color="k", lw=0.8, ls=":",
               label=f"target context = {round(factor * length):,}")
    plain_log_axis(ax.yaxis)
    ax.set_ylim(3, 2e7)
    ax.set_xlabel("pair index i (frequency falls to the right)")
    ax.set_ylabel("wavelength (tokens)")
    ax.set_title(f"Wavelengths after scaling by {factor:g} (dim = {dim}, base = {base:g})",
                 fontsize=10)
    ax.legend(fontsize=7, loc="upper left", ncol=2)
    ax.grid(alpha=0.3)
    return fig


def ramps(beta_fast: float = 32.0, beta_slow: float = 1.0, low_freq_factor: float = 1.0,
          high_freq_factor: float = 4.0, *, dim: int = 128, base: float = 500000.0,
          original_max_position_embeddings: int = 8192, factor: float = 8.0) -> BookFigure:
    """Interpolation weight per pair for YaRN and Llama 3, against the rotations ``r = L/λ``.

    Weight 0 keeps a pair (extrapolation), 1 divides its frequency by
    ``factor`` (interpolation). The dotted line is the ramp as the YaRN
    paper writes it, linear in ``r``.
    """
    length = original_max_position_embeddings
    original = rope.inv_freq(dim, base, dtype=torch.float64)
    r = scaling.rotations(original, length).numpy()
    fig, ax = new_subplots(6.4, 3.6)
    for truncate, style in ((True, dict(color="C3", marker=".", ms=4, lw=1.2)),
                            (False, dict(color="C3", ls="--", lw=1.0, alpha=0.7))):
        freqs, _ = scaling.rope_parameters(
            "yarn", dim, base, factor=factor, original_max_position_embeddings=length,
            beta_fast=beta_fast, beta_slow=beta_slow, truncate=truncate, dtype=torch.float64)
        weight = scaling.interpolation_weight(freqs, original, factor).numpy()
        ax.plot(r, weight, label=f"YaRN, truncate={truncate}", **style)
    grid = np.geomspace(r.min(), r.max(), 400)
    paper = 1 - np.clip((grid - beta_slow) / (beta_fast - beta_slow), 0, 1)
    ax.plot(grid, paper, color="C3", ls=":", lw=1.0, label="YaRN paper: linear in r")
    freqs, _ = scaling.rope_parameters(
        "llama3", dim, base, factor=factor, low_freq_factor=low_freq_factor,
        high_freq_factor=high_freq_factor, original_max_position_embeddings=length,
        dtype=torch.float64)
    weight = scaling.interpolation_weight(freqs, original, factor).numpy()
    ax.plot(r, weight, color="C4", marker="x", ms=4, lw=1.2, label="Llama 3")
    for value, label, style in (
            (beta_slow, "YaRN thresholds β_slow, β_fast", dict(color="C3", ls=":")),
            (beta_fast, None, dict(color="C3", ls=":")),
            (low_freq_factor, "Llama 3 thresholds low, high", dict(color="C4", ls="-.")),
            (high_freq_factor, None, dict(color="C4", ls="-."))):
        ax.axvline(value, lw=0.7, alpha=0.6, label=label, **style)
    ax.set_xscale("log")
    plain_log_axis(ax.xaxis)
    ax.set_xlim(r.min(), r.max())
    ax.invert_xaxis()  # fast pairs (many rotations) on the left, as in pair order
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel(f"rotations r = L/λ within the original context L = {length:,}")
    ax.set_ylabel("interpolation weight w (1: θ/factor)")
    ax.set_title(f"YaRN (β_fast = {beta_fast:g}, β_slow = {beta_slow:g}) and Llama 3 "
                 f"(low = {low_freq_factor:g}, high = {high_freq_factor:g})", fontsize=10)
    ax.legend(fontsize=7, loc="center right")
    ax.grid(alpha=0.3)
    return fig


def alibi_bias(n_heads: int = 8, max_distance: int = 64) -> BookFigure:
    """ALiBi's bias ``-μ_k·(m - n)`` over heads and distance ``m - n``, with the slopes."""
    n_heads = _validate.positive_int("n_heads", n_heads)
    max_distance = _validate.positive_int("max_distance", max_distance)
    slopes = alibi.alibi_slopes(n_heads, dtype=torch.float64)
    distance = torch.arange(max_distance + 1, dtype=torch.float64)
    bias = -slopes[:, None] * distance
    fig, (left, right) = new_subplots(8.0, 3.4, 1, 2, width_ratios=[1.6, 1])
    # Room between the colour bar's label and the slopes' axis for the widest
    # colour bar ticks of any head count ("−0.25" at one head, "−50" at 64).
    fig.get_layout_engine().set(wspace=0.08)
    image = left.imshow(bias.numpy(), aspect="auto", cmap=SEQUENTIAL, interpolation="nearest",
                        extent=(-0.5, max_distance + 0.5, n_heads + 0.5, 0.5))
    fig.colorbar(image, ax=left, label="bias −μ_k(m − n) added to the logit (nats)")
    left.set_xlabel("distance m − n (tokens back)")
    left.set_ylabel("head k")
    left.set_title(f"ALiBi bias, {n_heads} heads", fontsize=10)
    k = np.arange(1, n_heads + 1)
    right.semilogy(k, slopes.numpy(), "o-", ms=3, label="reference rule")
    right.semilogy(k, 2.0 ** (-8.0 / k), "x:", ms=3, color="C3",
                   label=r"$1/2^{8/k}$ (misreading)")
    right.set_xlabel("head k")
    right.set_ylabel("slope μ_k (logit per token)")
    right.set_ylim(2.0 ** -9, 1.5)
    right.set_xlim(0.5, n_heads + 0.5)
    for axis in (left.yaxis, right.xaxis):  # heads are whole numbers
        axis.set_major_locator(MaxNLocator(nbins=6, integer=True, min_n_ticks=1))
    right.set_title("Slopes μ_k (log scale)", fontsize=10)
    right.legend(fontsize=9, loc="lower left")
    right.grid(alpha=0.3, which="both")
    return fig


@functools.lru_cache(maxsize=64)
def _pi_fit_data(seed: int, dtype: str, ridge: float, n_points: int, dim: int,
                 length: int):
    """The fit :func:`pi_fit` draws and ``a(s)`` on its three grids (cached)."""
    torch_dtype = _DTYPES[dtype]
    positions, targets, h = scaling.random_score_fit(dim=dim, length=length,
                                                     n_points=n_points, seed=seed,
                                                     dtype=torch_dtype, ridge=ridge)
    inv_freq = rope.inv_freq(dim, dtype=torch_dtype)
    s_in = torch.linspace(0, length, 1500, dtype=torch_dtype)
    s_all = torch.linspace(0, 2 * length, 3000, dtype=torch_dtype)
    s_fine = torch.linspace(1000, 1010, 400, dtype=torch_dtype)
    a_in = scaling.score_function(s_in, h, inv_freq).double().numpy()
    a_all = scaling.score_function(s_all, h, inv_freq).double().numpy()
    a_fine = scaling.score_function(s_fine, h, inv_freq).double().numpy()
    return s_in, a_in, s_all, a_all, s_fine, a_fine, positions, targets


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _decade_label(value: float, _position=None) -> str:
    """``±10ᵏ`` with Unicode superscripts (no mathtext to lay out), or ``0``."""
    if value == 0:
        return "0"
    exponent = str(round(math.log10(abs(value)))).translate(_SUPERSCRIPT)
    return f"{'−' if value < 0 else ''}10{exponent}"


def _symmetric_limits(values, *, floor: float) -> tuple[float, float]:
    """``(-t, t)``: ``t`` the data's largest magnitude plus 5 %, rounded up by
    :func:`steady_limit`, and at least ``floor``."""
    finite = np.abs(values[np.isfinite(values)])
    top = steady_limit(max(floor, 1.05 * float(finite.max(initial=0.0))))
    return -top, top


def pi_fit(seed: int = 0, dtype: str = "float64", ridge: float = 1e-6, *, n_points: int = 256,
           dim: int = 128, length: int = 2048) -> BookFigure:
    """The PI paper's Figure 2: a least-squares fit of ``a(s)`` to random points.

    Left: the fit on ``[0, length]``; middle: the same function on
    ``[0, 2·length]`` (extrapolation); right: interpolation between integer
    offsets (what position interpolation asks of the model).
    """
    if dtype not in _DTYPES:
        raise ValueError(f"dtype must be one of {list(_DTYPES)}, got {dtype!r}")
    s_in, a_in, s_all, a_all, s_fine, a_fine, positions, targets = _pi_fit_data(
        seed, dtype, ridge, n_points, dim, length)
    fig, (first, second, third) = new_subplots(9.0, 3.0, 1, 3)
    first.plot(s_in.double().numpy(), a_in, color="C3", lw=0.8, label="fitted a(s)")
    first.plot(positions.double().numpy(), targets.double().numpy(), ".", ms=2.5, color="C0",
               label="random targets")
    first.set_xlabel("offset s (tokens)")
    first.set_ylabel("score a(s)")
    first.set_title("Fit on [0, L]", fontsize=10)
    first.legend(fontsize=9, loc="lower left")
    second.plot(s_all.double().numpy(), a_all, color="C3", lw=0.8)
    second.axvline(length, color="k", lw=0.8, ls="--", label="L: end of the fitted range")
    second.set_yscale("symlog", linthresh=2)
    second.set_xlabel("offset s (tokens)")
    second.legend(fontsize=9, loc="upper left")
    peak = np.abs(a_all[s_all.double().numpy() > length]).max()
    second.set_title(f"Extrapolation: max |a| = {peak:.3g}", fontsize=10)
    third.plot(s_fine.double().numpy(), a_fine, color="C3", lw=1.0)
    third.vlines(range(1000, 1011), 0, 1, transform=third.get_xaxis_transform(), colors="k",
                 lw=0.5, linestyles=":", label="integer offsets")
    third.set_xlabel("offset s (tokens)")
    # Fixed ticks: the panel is narrowest where the middle panel's labels are
    # widest, and an automatic locator would then pick labels that collide.
    third.xaxis.set_major_locator(FixedLocator([1000, 1005, 1010]))
    third.legend(fontsize=9, loc="upper right")
    third.set_title("Interpolation, 1000 <= s <= 1010", fontsize=10)
    # Limits on coarse ladders, so that most slider changes keep the axes (and
    # their cached drawings): the fit at least ±2 (the targets lie in [-1, 1]),
    # the extrapolation up to the next power of ten, the zoom at least ±1.
    first.set_ylim(_symmetric_limits(a_in, floor=2.0))
    finite = np.abs(a_all[np.isfinite(a_all)])
    top = steady_limit(max(2.0, float(finite.max(initial=0.0))), steps=(1,))
    second.set_ylim(-top, top)
    # Ticks at 0 and at most four decades each side, from 10 up: ±1 would sit
    # inside the linear band around 0 and their labels would overlap its own.
    decades = list(range(round(math.log10(top)), 0, -1))
    decades = decades[::math.ceil(len(decades) / 4)]
    # (A locator, not set_yticks: that would build the Tick artists now, which
    # a live redraw that finds the axis cached never needs.)
    second.yaxis.set_major_locator(FixedLocator(
        sorted([0.0] + [sign * 10.0 ** k for k in decades for sign in (-1, 1)])))
    second.yaxis.set_major_formatter(FuncFormatter(_decade_label))
    third.set_ylim(_symmetric_limits(a_fine, floor=1.0))
    for ax in (first, second, third):
        ax.grid(alpha=0.3)
    fig.suptitle(f"d = {dim}, L = {length}, {n_points} points, draw {seed}, {dtype}, "
                 f"ridge {ridge:g}", fontsize=9)
    return fig


def xpos_decay(gamma: float = 0.4, scale_base: float = 512.0, *, dim: int = 128,
               max_distance: int = 4096) -> BookFigure:
    """xPos' factor ``ζ_i^((m - n)/scale_base)`` on a pair's logit, against ``m - n``."""
    zeta = xpos.xpos_zeta(dim, gamma, dtype=torch.float64)
    scale_base = _validate.finite_float("scale_base", scale_base, greater_than=0.0)
    distance = torch.linspace(0, max_distance, 400, dtype=torch.float64)
    factor = zeta[None, :] ** (distance[:, None] / scale_base)
    fig, ax = new_subplots(6.4, 3.4)
    for i in (0, dim // 8, dim // 4, dim // 2 - 1):
        ax.semilogy(distance.numpy(), factor[:, i].numpy(), lw=1.2,
                    label=f"pair {i}, ζ = {zeta[i]:.3f}")
    ax.semilogy(distance.numpy(), factor.mean(dim=1).numpy(), color="k", lw=1.6,
                label="mean over pairs")
    ax.set_ylim(1e-6, 1.5)
    ax.set_xlabel("distance m - n (tokens)")
    ax.set_ylabel("factor on the pair's logit")
    ax.set_title(f"xPos decay (γ = {gamma:g}, scale_base = {scale_base:g}, dim = {dim})",
                 fontsize=10)
    ax.legend(fontsize=7, loc="lower left")
    ax.grid(alpha=0.3, which="both")
    return fig


def llama4_nope(num_hidden_layers: int = 48, no_rope_layer_interval: int = 4, *,
                max_position: int = 10 ** 7, attn_scale: float = 0.1,
                floor_scale: float = 8192.0) -> BookFigure:
    """Llama 4's layer pattern (RoPE or NoPE) and its NoPE query scale against position."""
    layers = scaling.llama4_no_rope_layers(num_hidden_layers, no_rope_layer_interval)
    positions = torch.unique(torch.logspace(0, math.log10(max_position), 600).round())
    scales = scaling.llama4_attn_scales(positions, attn_scale=attn_scale,
                                        floor_scale=floor_scale)
    fig, (left, right) = new_subplots(8.0, 3.0, 1, 2, width_ratios=[1, 1.3])
    from matplotlib.patches import Patch

    greys = matplotlib.colormaps["Greys"]
    left.imshow(np.array(layers)[None, :], aspect="auto", cmap=greys, vmin=-0.3, vmax=1.3,
                extent=(-0.5, num_hidden_layers - 0.5, 0, 1))
    left.set_yticks([])
    left.set_xlabel("layer index")
    left.set_title(f"{num_hidden_layers} layers, interval {no_rope_layer_interval}",
                   fontsize=10)
    left.legend(handles=[Patch(color=greys(1 / 1.6), label="RoPE layer (chunked attention)"),
                         Patch(color=greys(0.3 / 1.6), label="NoPE layer (global attention)",
                               ec="0.5")],
                fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.3))
    right.semilogx(positions.numpy(), scales.numpy(), lw=1.2, label="NoPE query scale")
    plain_log_axis(right.xaxis)
    right.axvline(floor_scale - 1, color="k", lw=0.8, ls="--",
                  label=f"p = floor_scale − 1 = {floor_scale - 1:g}")
    right.set_xlabel("position p (tokens)")
    right.set_ylabel("factor on the logits")
    right.legend(fontsize=7, loc="upper left")
    right.set_title(f"1 + {attn_scale:g}·ln(1 + ⌊(p + 1)/{floor_scale:g}⌋)", fontsize=10)
    right.grid(alpha=0.3, which="both")
    return fig


def p_rope_removed(partial_rotary_factor: float = 0.25, train_length: int = 8192, *,
                   head_dim: int = 512, base: float = 1e6) -> BookFigure:
    """The wavelengths p-RoPE keeps and removes, against the training length ``L``.

    Every pair's wavelength ``2π/θ_i`` with ``θ_i = base**(-2i/head_dim)``; the
    pairs past ``int(p·head_dim // 2)`` are removed (``θ_i = 0``). Defaults:
    Gemma 4's full-attention layers (``head_dim = 512``, base ``10^6``, ``p = 0.25``).
    """
    info = designs.removed_pairs(head_dim, partial_rotary_factor, base, train_length)
    theta = rope.inv_freq(head_dim, base, dtype=torch.float64)
    wavelength = (2 * math.pi / theta).numpy()
    pairs = np.arange(head_dim // 2)
    kept = info["kept"]
    fig, ax = new_subplots(6.4, 3.4)
    ax.semilogy(pairs[:kept], wavelength[:kept], color="C0", lw=1.6,
                label=f"kept: {kept} pairs turn")
    ax.semilogy(pairs[kept:], wavelength[kept:], color="0.6", lw=1.6, ls=":",
                label=f"removed: {info['removed']} pairs, θ = 0")
    ax.axhline(train_length, color="k", lw=0.8, ls="--",
               label=f"training length L = {train_length:,}")
    ax.axvspan(kept - 0.5, head_dim // 2 - 0.5, color="0.9", lw=0)
    plain_log_axis(ax.yaxis)
    ax.set_ylim(3, 2e7)
    ax.set_xlim(-0.5, head_dim // 2 - 0.5)
    ax.set_xlabel("pair index i (frequency falls to the right)")
    ax.set_ylabel("wavelength 2π/θ_i (tokens)")
    ax.set_title(f"p = {partial_rotary_factor:g}: {info['unclosed_removed']} of the "
                 f"{info['unclosed']} pairs that never close the circle in L are removed",
                 fontsize=9)
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(alpha=0.3)
    return fig


@functools.lru_cache(maxsize=32)
def _conventions_data(head_dim: int, partial_rotary_factor: float, base: float,
                      max_offset: int):
    """Per convention: the frequency of every feature, and one head's score by offset."""
    generator = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 1, head_dim, generator=generator, dtype=torch.float64)
    offsets = torch.arange(max_offset + 1)
    freqs, scores = {}, {}
    for convention in designs.CONVENTIONS:
        plan = designs.rotation_plan(head_dim, partial_rotary_factor, convention, base)
        freqs[convention] = designs.feature_frequencies(plan).numpy()
        keys = designs.apply_plan(k.expand(len(offsets), head_dim), offsets, plan)
        query = designs.apply_plan(q, torch.zeros(1), plan)
        scores[convention] = (keys @ query[0]).numpy()
    return offsets.numpy(), freqs, scores


_CONVENTION_LABELS = {"partial": "partial (first slice)",
                      "proportional": "proportional (p-RoPE, whole head)",
                      "trailing": "trailing slice (Mistral 4)"}


def partial_conventions(partial_rotary_factor: float = 0.25, *, head_dim: int = 64,
                        base: float = 1e4, max_offset: int = 64) -> BookFigure:
    """Which features turn at which frequency under each partial-RoPE convention.

    Left: one row per convention, one column per feature of a ``head_dim`` head,
    coloured by ``log10 θ`` (white: the feature never turns). Right: the score
    ``q·R(Δ)k`` of one random ``q, k`` against the offset ``Δ`` (key before the
    query), as each convention computes it: a kernel that assumes another
    convention computes another curve.
    """
    offsets, freqs, scores = _conventions_data(head_dim, partial_rotary_factor, base,
                                               max_offset)
    fig, (left, right) = new_subplots(8.4, 3.0, 1, 2, width_ratios=[1.5, 1])
    grid = np.full((3, head_dim), np.nan)
    for row, convention in enumerate(designs.CONVENTIONS):
        f = freqs[convention]
        grid[row, f > 0] = np.log10(f[f > 0])
    image = left.imshow(grid, aspect="auto", cmap=SEQUENTIAL, interpolation="nearest",
                        vmin=-math.log10(base), vmax=0,
                        extent=(-0.5, head_dim - 0.5, 2.5, -0.5))
    fig.colorbar(image, ax=left, label="log10 θ (rad per token)")
    left.set_yticks([0, 1, 2], [_CONVENTION_LABELS[c] for c in designs.CONVENTIONS],
                    fontsize=8.5)
    left.set_xlabel("feature of the head (white: never turns)")
    left.set_title(f"head_dim = {head_dim}, p = {partial_rotary_factor:g}", fontsize=10)
    for convention, style in zip(designs.CONVENTIONS, ("-", "--", ":")):
        right.plot(offsets, scores[convention], ls=style, lw=1.3,
                   label=convention)
    right.set_xlabel("offset Δ (tokens)")
    right.set_ylabel("score q·R(Δ)k")
    right.set_title("one head's score, same q, k", fontsize=9)
    right.legend(fontsize=8.5, loc="lower left")
    right.grid(alpha=0.3)
    return fig
