"""Figures for chapter 5: multi-dimensional RoPE (2D images, 3D video, M-RoPE)."""

from __future__ import annotations

import math

import numpy as np
import torch
from matplotlib.ticker import NullLocator

from .. import _validate, multidim, rope
from ._base import DIVERGING, BookFigure, new_figure, plain_log_axis

__all__ = ["axial_scores", "mrope_ids", "frequency_allocation", "AXIS_COLORS"]

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
    v = torch.randn(dim, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    rotated = multidim.apply_multiaxis_rope(v.expand(grid * grid, dim), positions, f, axis)
    scores = rotated @ rotated.T / dim
    limit = float(scores.abs().max())
    fig = new_figure(6.4, 3.2)
    panels = fig.subplots(1, len(queries), sharey=True)
    for ax, (qy, qx) in zip(np.atleast_1d(panels), queries):
        if not (0 <= qx < grid and 0 <= qy < grid):
            raise ValueError(f"queries must lie on the {grid}x{grid} grid, got {(qy, qx)}")
        image = ax.imshow(scores[qy * grid + qx].view(grid, grid).numpy(), cmap=DIVERGING,
                          vmin=-limit, vmax=limit, origin="upper")
        ax.plot(qx, qy, "k+", ms=10, mew=1.5)
        ax.set_title(f"query at (y, x) = ({qy}, {qx})", fontsize=9)
        ax.set_xlabel("key patch x")
    np.atleast_1d(panels)[0].set_ylabel("key patch y")
    fig.colorbar(image, ax=panels, label="score / dim", shrink=0.9)
    kind = "interleaved groups" if interleaved else "split halves"
    fig.suptitle(f"2D RoPE ({kind}, dim = {dim}, base = {base:g}): the pattern only moves",
                 fontsize=10)
    return fig


def _prompt(grid: int, fps: float, video_seconds: float, temporal_patch_size: int):
    fps = _validate.finite_float("fps", fps, greater_than=0.0)
    video_seconds = _validate.finite_float("video_seconds", video_seconds, greater_than=0.0)
    temporal_patch_size = _validate.positive_int("temporal_patch_size", temporal_patch_size)
    frames = fps * video_seconds
    if abs(frames - round(frames)) > 1e-9 or round(frames) % temporal_patch_size:
        raise ValueError(f"fps * video_seconds = {frames:g} frames must be a multiple of "
                         f"temporal_patch_size = {temporal_patch_size}")
    grids = round(frames) // temporal_patch_size
    return [("text", 4), ("image", (1, grid, grid)), ("text", 3),
            ("video", (grids, grid, grid)), ("text", 3)]


def mrope_ids(grid: int = 6, fps: float = 2.0, absolute_time: bool = True, *,
              video_seconds: float = 8.0, tokens_per_second: float = 2.0,
              temporal_patch_size: int = 2, spatial_merge_size: int = 2) -> BookFigure:
    """The three M-RoPE id channels of a text, image, text, video, text prompt.

    The image and every video frame are ``grid x grid`` patches, merged
    ``spatial_merge_size`` per side into tokens. The video lasts
    ``video_seconds`` and is sampled at ``fps``; ``temporal_patch_size`` frames
    make one temporal grid step. With ``absolute_time`` (Qwen2.5-VL) a grid
    step advances the temporal id by ``seconds_per_grid · tokens_per_second``;
    without it (Qwen2-VL) by 1.
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
    fig = new_figure(6.4, 4.6)
    panels = fig.subplots(3, 1, sharex=True)
    top = int(ids.max())
    for a, (ax, name) in enumerate(zip(panels, multidim.MROPE_AXES)):
        for (kind, _), lo, hi in zip(segments, bounds[:-1], bounds[1:]):
            ax.axvspan(lo - 0.5, hi - 0.5, color=_SEGMENT_COLORS[kind], lw=0)
        ax.plot(tokens, ids[a].numpy(), ".-", color=AXIS_COLORS[a], ms=2.5, lw=0.6)
        ax.set_ylabel(f"{name} id", fontsize=9)
        ax.set_ylim(-0.05 * top - 1, top * 1.25 + 1)
        ax.grid(alpha=0.3)
    from matplotlib.patches import Patch

    panels[0].legend(handles=[Patch(color=c, label=k) for k, c in _SEGMENT_COLORS.items()],
                     loc="upper left", ncol=3, fontsize=8, framealpha=0.9)
    video = slice(bounds[3], bounds[4])
    t_video = ids[0, video]
    span = int(t_video.max() - t_video.min())
    n_grids = segments[3][1][0]
    rule = (f"{seconds:g} s per grid x {tokens_per_second:g} ids/s" if absolute_time
            else "1 id per grid")
    plural = "s" if n_grids > 1 else ""
    panels[0].text(0.99, 0.06, f"video: {n_grids} temporal grid{plural}, temporal ids span "
                   f"{span}\n({rule})", transform=panels[0].transAxes, ha="right",
                   va="bottom", fontsize=8, bbox=dict(facecolor="white", alpha=0.85, lw=0))
    panels[-1].set_xlabel("token index in the prompt")
    model = "Qwen2.5-VL, absolute time" if absolute_time else "Qwen2-VL, frame index"
    fig.suptitle(f"M-RoPE position ids ({model}): {grid}x{grid} patches, "
                 f"{video_seconds:g} s of video at {fps:g} fps", fontsize=10)
    return fig


def frequency_allocation(temporal_pairs: int = 16, base: float = 1e6,
                         head_dim: int = 128) -> BookFigure:
    """Which frequencies each M-RoPE axis gets, under three assignments.

    The temporal axis gets ``temporal_pairs`` pairs; height and width share
    the rest equally. Each dot is one frequency pair ``i`` at its wavelength
    ``2π/inv_freq[i]``, coloured by the axis that drives it:

    1. contiguous sections over the 1D ladder ``θ_i = base**(-2i/head_dim)``
       (Qwen2-VL);
    2. the interleaved map over the same ladder (Qwen3-VL);
    3. the interleaved map with a ladder per axis
       (:func:`~posenc_lib.multidim.axial_inv_freq`): the "six-element groups"
       in which pairs ``3g, 3g+1, 3g+2`` share one frequency.
    """
    head_dim = _validate.even_int("head_dim", head_dim)
    n_pairs = head_dim // 2
    temporal_pairs = _validate.positive_int("temporal_pairs", temporal_pairs)
    if temporal_pairs >= n_pairs or (n_pairs - temporal_pairs) % 2:
        raise ValueError(f"temporal_pairs must leave an even, positive number of the "
                         f"{n_pairs} pairs for height and width, got {temporal_pairs}")
    spatial = (n_pairs - temporal_pairs) // 2
    sections = [temporal_pairs, spatial, spatial]
    ladder = rope.inv_freq(head_dim, base, dtype=torch.float64)
    interleaved = multidim.mrope_axis_map(sections, interleaved=True)
    schemes = [
        ("contiguous sections, one ladder (Qwen2-VL)", multidim.mrope_axis_map(sections), ladder),
        ("interleaved t, h, w, one ladder (Qwen3-VL)", interleaved, ladder),
        ("interleaved, a ladder per axis ('six-element groups')", interleaved,
         multidim.axial_inv_freq(interleaved, base, dtype=torch.float64)),
    ]
    pairs = np.arange(n_pairs)
    fig = new_figure(6.4, 5.8)
    panels = fig.subplots(3, 1, sharex=True, sharey=True)
    for ax, (title, axis, inv_freq) in zip(panels, schemes):
        axis, wavelength = axis.numpy(), (2 * math.pi / inv_freq).numpy()
        ax.semilogy(pairs, (2 * math.pi / ladder).numpy(), color="0.85", lw=0.8, zorder=1)
        lines = []
        for a, name in enumerate(multidim.MROPE_AXES):
            mine = wavelength[axis == a]
            ax.plot(pairs[axis == a], mine, "o", ms=2.8, color=AXIS_COLORS[a], zorder=2,
                    label=name)
            lines.append(f"{name[0]}: {mine.min():,.0f} to {mine.max():,.0f}")
        plain_log_axis(ax.yaxis)
        ax.yaxis.set_minor_locator(NullLocator())  # minor ticks dominate the drawing time
        ax.set_ylabel("wavelength", fontsize=9)
        ax.grid(alpha=0.3, which="major")
        ax.set_title(title, fontsize=9)
        ax.text(0.01, 0.95, "\n".join(lines), transform=ax.transAxes, va="top", fontsize=7.5,
                family="monospace", bbox=dict(facecolor="white", alpha=0.85, lw=0))
    panels[0].legend(fontsize=8, loc="lower right", markerscale=1.5)
    panels[-1].set_xlabel("frequency pair i (fastest on the left)")
    fig.suptitle(f"Wavelength (positions) of each pair: head_dim {head_dim}, "
                 f"base {base:,.0f}, sections {sections}", fontsize=9.5)
    return fig
