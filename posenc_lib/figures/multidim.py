"""Figures for chapter 5: multi-dimensional RoPE (2D images, 3D video, M-RoPE)."""

from __future__ import annotations

import functools
import math

import numpy as np
import torch
from matplotlib.collections import PolyCollection
from matplotlib.patches import Patch
from matplotlib.ticker import NullLocator

from .. import _validate, multidim, rope
from ._base import (DIVERGING, BookFigure, new_figure, new_subplots, plain_log_axis,
                   steady_limit)

__all__ = ["axial_scores", "mrope_ids", "frequency_allocation", "mixed_kernel",
           "temporal_kernel", "videorope_ids", "AXIS_COLORS"]

#: One colour per M-RoPE axis (temporal, height, width), used by every figure here.
AXIS_COLORS = ("C3", "C0", "C2")
_SEGMENT_COLORS = {"text": "0.92", "image": "#dbe9f6", "video": "#fde3c8"}


def axial_scores(grid: int = 15, dim: int = 32, base: float = 100.0, *,
                 queries=((4, 4), (9, 10)), interleaved: bool = False,
                 seed: int = 0) -> BookFigure:
    """2D RoPE score of one content vector at each query against every key patch.

    Every patch holds the same random vector ``v``, so the score of query
    patch ``p`` and key patch ``p'`` is ``v·R(p)ᵀR(p')·v``; each panel shows it
    for one query over the whole grid. The pattern moves with the query
    without changing: it depends on ``p' - p`` only.
    """
    grid = _validate.positive_int("grid", grid, minimum=2)
    dim = _validate.even_int("dim", dim, minimum=4)
    if dim % 4:
        raise ValueError(f"dim must be divisible by 4 (two axes of pairs), got {dim}")
    axis = multidim.mrope_axis_map([dim // 4, dim // 4], interleaved=interleaved)
    f = multidim.axial_inv_freq(axis, base, dtype=torch.float64)
    positions = multidim.grid_positions((grid, grid))  # (y, x) rows, x fastest
    v = torch.randn(dim, generator=torch.Generator().manual_seed(seed),
                    dtype=torch.float64)
    rotated = multidim.apply_multiaxis_rope(v.expand(grid * grid, dim), positions, f,
                                            axis)
    scores = rotated @ rotated.T / dim
    limit = float(scores.abs().max())
    fig = new_figure(6.4, 3.3)
    panels = np.atleast_1d(fig.subplots(1, len(queries), sharey=True))
    for ax, (qy, qx) in zip(panels, queries):
        if not (0 <= qx < grid and 0 <= qy < grid):
            raise ValueError(f"queries must lie on the {grid}x{grid} grid, got {(qy, qx)}")
        image = ax.imshow(scores[qy * grid + qx].view(grid, grid).numpy(), cmap=DIVERGING,
                          vmin=-limit, vmax=limit, origin="upper")
        ax.plot(qx, qy, "k+", ms=10, mew=1.5, label="query patch")
        ax.set_title(f"query at (y, x) = ({qy}, {qx})", fontsize=9)
        ax.set_xlabel("key patch x (patches)")
    panels[0].set_ylabel("key patch y (patches)")
    panels[0].legend(loc="lower left", fontsize=8, framealpha=0.9)
    fig.colorbar(image, ax=panels, label="score / dim (dimensionless)", shrink=0.9)
    kind = "interleaved groups" if interleaved else "split halves"
    fig.suptitle(f"2D RoPE ({kind}, dim = {dim}, base = {base:g}): the pattern only moves",
                 fontsize=10)
    return fig


def _prompt(grid: int, fps: float, video_seconds: float, temporal_patch_size: int):
    fps = _validate.finite_float("fps", fps, greater_than=0.0)
    video_seconds = _validate.finite_float("video_seconds", video_seconds,
                                           greater_than=0.0)
    temporal_patch_size = _validate.positive_int("temporal_patch_size",
                                                 temporal_patch_size)
    frames = fps * video_seconds
    if abs(frames - round(frames)) > 1e-9 or round(frames) % temporal_patch_size:
        raise ValueError(f"fps * video_seconds = {frames:g} frames must be a multiple of "
                         f"temporal_patch_size = {temporal_patch_size}")
    grids = round(frames) // temporal_patch_size
    return [("text", 4), ("image", (1, grid, grid)), ("text", 3),
            ("video", (grids, grid, grid)), ("text", 3)]


def _shade_segments(ax, segments, bounds) -> None:
    """One full-height band per segment, as a single collection (cheap to redraw)."""
    bands = [[(lo - 0.5, 0), (hi - 0.5, 0), (hi - 0.5, 1), (lo - 0.5, 1)]
             for lo, hi in zip(bounds[:-1], bounds[1:])]
    colors = [_SEGMENT_COLORS[kind] for kind, _ in segments]
    ax.add_collection(PolyCollection(bands, facecolors=colors, linewidths=0, zorder=0.9,
                                     transform=ax.get_xaxis_transform()), autolim=False)


def _segment_legend(ax, kinds, **kwargs) -> None:
    handles = [Patch(color=_SEGMENT_COLORS[k], label=k) for k in kinds]
    ax.legend(handles=handles, fontsize=8, framealpha=0.9, **kwargs)


def mrope_ids(grid: int = 6, fps: float = 2.0, absolute_time: bool = True, *,
              video_seconds: float = 8.0, tokens_per_second: float = 2.0,
              temporal_patch_size: int = 2, spatial_merge_size: int = 2) -> BookFigure:
    """The three M-RoPE id channels of a text, image, text, video, text prompt.

    The image and every video frame are ``grid x grid`` patches, merged
    ``spatial_merge_size`` per side into tokens. The video lasts
    ``video_seconds`` and is sampled at ``fps``; ``temporal_patch_size`` frames
    make one temporal grid step. With ``absolute_time`` (Qwen2.5-VL) grid step
    ``t`` gets temporal offset ``floor(t · seconds_per_grid · tokens_per_second)``;
    without it (Qwen2-VL), ``t``.
    """
    segments = _prompt(grid, fps, video_seconds, temporal_patch_size)
    seconds = temporal_patch_size / fps
    if absolute_time:
        ids = multidim.mrope_position_ids(segments, spatial_merge_size=spatial_merge_size,
                                          seconds_per_grid=seconds,
                                          tokens_per_second=tokens_per_second)
    else:
        ids = multidim.mrope_position_ids(segments, spatial_merge_size=spatial_merge_size)
    lengths = multidim.segment_lengths(segments, spatial_merge_size=spatial_merge_size)
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    tokens = np.arange(ids.shape[1])
    fig, panels = new_subplots(6.4, 4.6, 3, 1)
    # Limits on a coarse ladder: the axes (and their cached drawings) stay put
    # while a slider changes the prompt a little.
    top = steady_limit(int(ids.max()) * 1.25 + 1)
    right = steady_limit(len(tokens))
    for a, (ax, name) in enumerate(zip(panels, multidim.MROPE_AXES)):
        _shade_segments(ax, segments, bounds)
        ax.plot(tokens, ids[a].numpy(), ".-", color=AXIS_COLORS[a], ms=2.5, lw=0.6)
        ax.set_ylabel(f"{name} id", fontsize=9)
        ax.set_ylim(-0.04 * top, top)
        ax.set_xlim(-0.5, right - 0.5)
        ax.tick_params(labelbottom=a == len(panels) - 1)
        ax.grid(alpha=0.3)
    _segment_legend(panels[0], ("text", "image", "video"), loc="upper left", ncol=3)
    video = slice(bounds[3], bounds[4])
    t_video = ids[0, video]
    span = int(t_video.max() - t_video.min())
    n_grids = segments[3][1][0]
    rule = (f"floor(t x {seconds:g} s x {tokens_per_second:g} ids/s)" if absolute_time
            else "1 id per grid")
    plural = "s" if n_grids > 1 else ""
    panels[0].text(0.99, 0.06, f"video: {n_grids} temporal grid{plural}, temporal ids "
                   f"span {span}\n({rule})", transform=panels[0].transAxes, ha="right",
                   va="bottom", fontsize=8, bbox=dict(facecolor="white", alpha=0.85, lw=0))
    panels[-1].set_xlabel("token index in the prompt")
    model = "Qwen2.5-VL, absolute time" if absolute_time else "Qwen2-VL, frame index"
    fig.suptitle(f"M-RoPE position ids ({model}): {grid}x{grid} patches, "
                 f"{video_seconds:g} s of video at {fps:g} fps", fontsize=10)
    return fig


def _split_sections(temporal_pairs: int, n_pairs: int) -> list[int]:
    temporal_pairs = _validate.positive_int("temporal_pairs", temporal_pairs)
    if temporal_pairs >= n_pairs or (n_pairs - temporal_pairs) % 2:
        raise ValueError(f"temporal_pairs must leave an even, positive number of the "
                         f"{n_pairs} pairs for height and width, got {temporal_pairs}")
    spatial = (n_pairs - temporal_pairs) // 2
    return [temporal_pairs, spatial, spatial]


def frequency_allocation(temporal_pairs: int = 16, base: float = 1e6,
                         head_dim: int = 128, *, top: float | None = None) -> BookFigure:
    """Which frequencies each M-RoPE axis gets, under four assignments.

    The temporal axis gets ``temporal_pairs`` pairs; height and width share
    the rest equally. Each dot is one frequency pair ``i`` at its wavelength
    ``2π/inv_freq[i]``, coloured by the axis that drives it:

    1. contiguous sections over the 1D ladder ``θ_i = base**(-2i/head_dim)``
       (Qwen2-VL);
    2. the interleaved map over the same ladder (Qwen3-VL);
    3. VideoRoPE's allocation over the same ladder: height and width
       alternate over the fast pairs, time takes the slowest;
    4. the interleaved map with a ladder per axis
       (:func:`~posenc_lib.multidim.axial_inv_freq`): the six-feature groups
       in which pairs ``3g, 3g+1, 3g+2`` share one frequency.

    ``top`` fixes the top of the wavelength axis (the live figure sets it for
    its largest base, so that the ladders move up and down against fixed
    axes); ``None`` fits it to the data.
    """
    head_dim = _validate.even_int("head_dim", head_dim)
    n_pairs = head_dim // 2
    sections = _split_sections(temporal_pairs, n_pairs)
    ladder = rope.inv_freq(head_dim, base, dtype=torch.float64)
    interleaved = multidim.mrope_axis_map(sections, interleaved=True)
    schemes = [
        ("contiguous sections, one ladder (Qwen2-VL)", multidim.mrope_axis_map(sections),
         ladder),
        ("interleaved t, h, w, one ladder (Qwen3-VL)", interleaved, ladder),
        ("h, w alternate, time on the slowest pairs (VideoRoPE)",
         multidim.videorope_axis_map(sections), ladder),
        ("interleaved, a ladder per axis (six-feature groups)", interleaved,
         multidim.axial_inv_freq(interleaved, base, dtype=torch.float64)),
    ]
    pairs = np.arange(n_pairs)
    # One x and y range for all panels, set rather than shared (sharing makes
    # every draw walk the siblings); y runs from 1 to a power of ten, so that
    # most slider changes keep the axes and their cached drawings.
    longest = max(float((2 * math.pi / inv_freq).max()) for _, _, inv_freq in schemes)
    y_top = steady_limit(longest * 10 ** 0.15, steps=(1,))
    if top is not None:
        y_top = max(y_top, _validate.finite_float("top", top, greater_than=1.0))
    margin = 0.05 * (n_pairs - 1)
    fig, panels = new_subplots(6.4, 7.0, len(schemes), 1)
    for ax, (title, axis, inv_freq) in zip(panels, schemes):
        axis, wavelength = axis.numpy(), (2 * math.pi / inv_freq).numpy()
        ax.semilogy(pairs, (2 * math.pi / ladder).numpy(), color="0.8", lw=0.8, zorder=1,
                    label="1D ladder")
        lines = []
        for a, name in enumerate(multidim.MROPE_AXES):
            mine = wavelength[axis == a]
            ax.plot(pairs[axis == a], mine, "o", ms=2.6, color=AXIS_COLORS[a], zorder=2,
                    label=name)
            lines.append(f"{name[0]}: {mine.min():,.0f} to {mine.max():,.0f}")
        plain_log_axis(ax.yaxis)
        ax.yaxis.set_minor_locator(NullLocator())  # minor ticks dominate the drawing time
        ax.set_ylim(1, y_top)
        ax.set_xlim(-margin, n_pairs - 1 + margin)
        ax.tick_params(labelbottom=ax is panels[-1])
        ax.set_ylabel("wavelength\n(positions)", fontsize=8.5)
        ax.grid(alpha=0.3, which="major")
        # y = 1.0 is where matplotlib puts it (no ticks on top); saying so skips the
        # title layout that hidden tick labels otherwise force on every draw.
        ax.set_title(title, fontsize=9, y=1.0)
        ax.text(0.01, 0.95, "\n".join(lines), transform=ax.transAxes, va="top",
                fontsize=7.5, family="monospace",
                bbox=dict(facecolor="white", alpha=0.85, lw=0))
    panels[0].legend(fontsize=8, loc="lower right", markerscale=1.5, ncol=2)
    panels[-1].set_xlabel("frequency pair i (fastest on the left)")
    fig.suptitle(f"Wavelength of each pair: head_dim {head_dim}, base {base:,.0f}, "
                 f"sections {sections}", fontsize=9.5)
    return fig


def mixed_kernel(angle: float = 30.0, base: float = 10.0, *, dim: int = 64,
                 extent: int = 24) -> BookFigure:
    """RoPE-Mixed's initial frequency vectors and the score kernel they give.

    Left: the ``dim/2`` frequency vectors ``θ_i = (θ_i^x, θ_i^y)`` of one head
    at initialisation (:func:`~posenc_lib.multidim.mixed_frequencies`), half
    along ``angle`` (degrees) and half at right angles to it. Right: the
    mean of ``cos(θ_i · Δp)`` over the pairs, the positional part of the
    score of ``q = k`` with unit pairs, for every offset ``Δp`` in a square of
    half-width ``extent`` patches. At ``angle = 0`` this is axial RoPE and the
    kernel is a sum of a function of ``Δx`` and one of ``Δy``: it is
    constant along lines of the grid away from the axes.
    """
    angle = _validate.finite_float("angle", angle)
    extent = _validate.positive_int("extent", extent)
    freqs = multidim.mixed_frequencies(dim, base, angle=math.radians(angle),
                                       dtype=torch.float64)
    offsets = torch.arange(-extent, extent + 1, dtype=torch.float64)
    dy, dx = torch.meshgrid(offsets, offsets, indexing="ij")
    angles = dy[..., None] * freqs[0] + dx[..., None] * freqs[1]
    kernel = angles.cos().mean(-1).numpy()
    fig, (left, right) = new_subplots(6.4, 3.2, 1, 2, width_ratios=[1, 1.25])
    half = dim // 4
    for rows, colour, label in ((slice(0, half), "C1", f"pairs 0..{half - 1}"),
                                (slice(half, None), "C4", f"pairs {half}..{2 * half - 1}")):
        left.plot(freqs[1, rows].numpy(), freqs[0, rows].numpy(), "o", ms=3,
                  color=colour, label=label)
    left.axhline(0, color="0.6", lw=0.6)
    left.axvline(0, color="0.6", lw=0.6)
    left.set_xlim(-1.1, 1.1)
    left.set_ylim(-1.1, 1.1)
    left.set_aspect("equal")
    left.set_xlabel(r"$\theta_i^x$ (rad per patch)")
    left.set_ylabel(r"$\theta_i^y$ (rad per patch)")
    left.set_title("frequency vectors of one head", fontsize=9)
    left.legend(fontsize=7.5, loc="lower left", framealpha=0.9)
    image = right.imshow(kernel, cmap=DIVERGING, vmin=-1, vmax=1, origin="lower",
                         extent=(-extent - 0.5, extent + 0.5, -extent - 0.5, extent + 0.5))
    right.set_xlabel("Δx (patches)")
    right.set_ylabel("Δy (patches)")
    right.set_title("mean over pairs of cos(θ_i · Δp)", fontsize=9)
    fig.colorbar(image, ax=right, label="kernel (1 at Δp = 0)", shrink=0.9)
    kind = "axial RoPE" if angle % 90 == 0 else "RoPE-Mixed"
    fig.suptitle(f"{kind} at initialisation: angle {angle:g}°, base {base:g}, dim {dim}",
                 fontsize=10)
    return fig


@functools.lru_cache(maxsize=32)
def _temporal_kernels(base: float, temporal_pairs: int, head_dim: int,
                      max_offset: float) -> tuple:
    """:func:`temporal_kernel`'s three curves, in its order (cached)."""
    sections = _split_sections(temporal_pairs, head_dim // 2)
    ladder = rope.inv_freq(head_dim, base, dtype=torch.float64)
    offsets = torch.logspace(0, math.log10(max_offset), 700, dtype=torch.float64)
    offsets = torch.cat([torch.zeros(1, dtype=torch.float64), offsets.round().unique()])
    maps = (multidim.mrope_axis_map(sections),
            multidim.mrope_axis_map(sections, interleaved=True),
            multidim.videorope_axis_map(sections))
    return tuple(multidim.axis_kernel(offsets, ladder, axis_map, 0).numpy()
                 for axis_map in maps)


def temporal_kernel(base: float = 1e6, temporal_pairs: int = 16, *,
                    head_dim: int = 128, max_offset: float = 1e6) -> BookFigure:
    """The temporal kernel of three frequency allocations, against the time offset.

    For each allocation (contiguous M-RoPE, interleaved M-RoPE, VideoRoPE)
    the curve is :func:`~posenc_lib.multidim.axis_kernel` on the temporal
    axis: the mean of ``cos(Δt · θ_i)`` over the temporal pairs, for two
    tokens ``Δt`` temporal ids apart. The dashed line marks ``π/θ_max`` of
    VideoRoPE's temporal pairs, up to which its kernel cannot increase.
    """
    head_dim = _validate.even_int("head_dim", head_dim)
    max_offset = _validate.finite_float("max_offset", max_offset, greater_than=10.0)
    sections = _split_sections(temporal_pairs, head_dim // 2)
    ladder = rope.inv_freq(head_dim, base, dtype=torch.float64)
    offsets = torch.logspace(0, math.log10(max_offset), 700, dtype=torch.float64)
    offsets = torch.cat([torch.zeros(1, dtype=torch.float64), offsets.round().unique()])
    maps = [("contiguous (Qwen2-VL)", multidim.mrope_axis_map(sections), "C3"),
            ("interleaved (Qwen3-VL)", multidim.mrope_axis_map(sections, interleaved=True),
             "C0"),
            ("slowest pairs (VideoRoPE)", multidim.videorope_axis_map(sections), "C2")]
    fig, ax = new_subplots(6.4, 3.4)
    x = (offsets + 1).numpy()  # log axis: offset 0 drawn at 1
    kernels = _temporal_kernels(base, temporal_pairs, head_dim, max_offset)
    for (label, _, colour), kernel in zip(maps, kernels):
        ax.plot(x, kernel, color=colour, lw=1.1, label=label)
    bound = math.pi / float(ladder[multidim.videorope_axis_map(sections) == 0].max())
    ax.axvline(bound + 1, color="C2", ls="--", lw=0.9,
               label=f"π/θ_max of VideoRoPE's time pairs ({bound:,.0f})")
    ax.set_xscale("log")
    plain_log_axis(ax.xaxis)
    ax.set_xlim(1, max_offset + 1)
    ax.set_ylim(-1.05, 1.05)
    ax.set_xlabel("temporal offset Δt + 1 (ids, log scale)")
    ax.set_ylabel("temporal kernel\n(mean cos Δt·θ_i)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7.5, loc="lower left", framealpha=0.9)
    ax.set_title(f"{temporal_pairs} temporal pairs of {head_dim // 2}, base {base:,.0f}",
                 fontsize=10)
    return fig


def videorope_ids(grid: int = 6, temporal_spacing: float = 2.0, *, frames: int = 4,
                  spatial_merge_size: int = 2) -> BookFigure:
    """Temporal against height ids of every token: M-RoPE and VideoRoPE's diagonal layout.

    The prompt is text, a video of ``frames`` temporal grids of ``grid x grid``
    patches, and text. Each token is a dot at (temporal id, height id); text
    lies on the diagonal, where all three ids are equal. Width ids behave as
    height ids for a square grid.
    """
    frames = _validate.positive_int("frames", frames)
    segments = [("text", 4), ("video", (frames, grid, grid)), ("text", 4)]
    lengths = multidim.segment_lengths(segments, spatial_merge_size=spatial_merge_size)
    layouts = [
        ("M-RoPE (Qwen2-VL)", multidim.mrope_position_ids(
            segments, spatial_merge_size=spatial_merge_size).double()),
        (f"VideoRoPE, δ = {temporal_spacing:g}", multidim.videorope_position_ids(
            segments, spatial_merge_size=spatial_merge_size,
            temporal_spacing=temporal_spacing)),
    ]
    kinds = np.repeat([kind for kind, _ in segments], lengths)
    fig, panels = new_subplots(6.4, 3.4, 1, 2, sharex=True, sharey=True)
    low = min(float(ids.min()) for _, ids in layouts)
    high = max(float(ids.max()) for _, ids in layouts)
    for ax, (title, ids) in zip(panels, layouts):
        ax.plot([low - 1, high + 1], [low - 1, high + 1], ls="--", color="0.5", lw=0.8,
                label="diagonal t = h = w")
        for kind, colour, marker in (("video", "C1", "s"), ("text", "C0", "o")):
            mine = kinds == kind
            ax.plot(ids[0, mine].numpy(), ids[1, mine].numpy(), marker, ms=3.5,
                    color=colour, alpha=0.8, ls="none", label=f"{kind} token")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("temporal id")
        ax.grid(alpha=0.3)
    panels[0].set_xlim(low - 1, high + 1)
    panels[0].set_ylim(low - 1, high + 1)
    panels[0].set_ylabel("height id")
    panels[0].legend(fontsize=7.5, loc="upper left", framealpha=0.9)
    merged = grid // spatial_merge_size
    fig.suptitle(f"Text, {frames} frames of {merged}x{merged} tokens, text: where each "
                 f"token sits", fontsize=10)
    return fig
