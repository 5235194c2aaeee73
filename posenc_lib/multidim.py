"""Multi-axis rotary embeddings: 2D images, 3D video and M-RoPE.

Every multi-axis RoPE is the 1D mechanism of :mod:`posenc_lib.rope` plus two
choices:

``axis_of_freq``
    a ``(dim/2,)`` integer tensor: the axis whose coordinate drives frequency
    pair ``i``. Pair ``i`` is rotated by ``positions[axis_of_freq[i]] · inv_freq[i]``.
``inv_freq``
    the ``(dim/2,)`` frequencies: either one 1D ladder shared by all axes
    (M-RoPE in Qwen2-VL and Qwen3-VL), or a ladder of its own for each axis
    (axial RoPE in vision transformers, :func:`axial_inv_freq`).

Split halves, interleaved groups, contiguous M-RoPE sections and interleaved
M-RoPE are four values of these two tensors, applied by one function,
:func:`apply_multiaxis_rope`. :func:`mrope_position_ids` builds the three
position channels (temporal, height, width) of a mixed text/image/video
prompt, as Qwen2-VL's ``get_rope_index`` does.
"""

from __future__ import annotations

import numbers
from typing import Sequence

import torch
from torch import Tensor

from . import _validate, rope

__all__ = ["MROPE_AXES", "SEGMENT_KINDS", "mrope_axis_map", "axial_inv_freq", "grid_positions",
           "apply_multiaxis_rope", "segment_lengths", "mrope_position_ids"]

#: The three position channels of M-RoPE, in the order of ``positions``.
MROPE_AXES = ("temporal", "height", "width")
#: The kinds of segment that :func:`mrope_position_ids` accepts.
SEGMENT_KINDS = ("text", "image", "video")


def _sections(sections) -> list[int]:
    if isinstance(sections, Tensor):
        sections = sections.tolist()
    if isinstance(sections, (str, bytes)) or not isinstance(sections, Sequence):
        raise ValueError(f"sections must be a sequence of integers, got {sections!r}")
    values = [_validate.positive_int(f"sections[{a}]", s, minimum=0)
              for a, s in enumerate(sections)]
    if not values or sum(values) == 0:
        raise ValueError(f"sections must hold at least one pair, got {list(sections)}")
    return values


def mrope_axis_map(sections, *, interleaved: bool = False, dim: int | None = None) -> Tensor:
    """``axis_of_freq`` for M-RoPE: which axis drives each frequency pair.

    Axis ``a`` gets ``sections[a]`` pairs, either

    * **contiguous** (Qwen2-VL): pairs ``0 .. sections[0]-1`` follow axis 0,
      the next ``sections[1]`` follow axis 1, and so on. Qwen2-VL's
      ``mrope_section=[16, 24, 24]`` for ``head_dim=128``: time, then height,
      then width;
    * **interleaved** (Qwen3-VL): pairs cycle through the axes, ``t, h, w, t,
      h, w, ...``; an axis that has used up its section is skipped. With
      ``[24, 20, 20]`` this is Qwen3-VL's ``apply_interleaved_mrope``.

    Args:
        sections: one non-negative integer per axis.
        interleaved: cycle through the axes instead of taking them in blocks.
        dim: if given, the feature size; ``sections`` must sum to ``dim/2``.

    Returns:
        ``(sum(sections),)`` int64 tensor with values in ``0 .. len(sections)-1``.
    """
    sections = _sections(sections)
    if dim is not None:
        dim = _validate.even_int("dim", dim)
        if sum(sections) != dim // 2:
            raise ValueError(f"sections must sum to dim/2 = {dim // 2}, got {sections} "
                             f"(sum {sum(sections)})")
    if not interleaved:
        return torch.repeat_interleave(torch.arange(len(sections)), torch.tensor(sections))
    remaining, order = list(sections), []
    while any(remaining):
        for axis, left in enumerate(remaining):
            if left:
                order.append(axis)
                remaining[axis] -= 1
    return torch.tensor(order, dtype=torch.int64)


def _check_axis_map(axis_of_freq, *, n_pairs: int | None = None,
                    n_axes: int | None = None) -> Tensor:
    axis = torch.as_tensor(axis_of_freq)
    if axis.dtype == torch.bool or axis.is_floating_point() or axis.is_complex():
        raise ValueError(f"axis_of_freq must be an integer tensor, got {axis.dtype}")
    if axis.dim() != 1:
        raise ValueError(f"axis_of_freq must be 1-D (dim/2,), got shape {tuple(axis.shape)}")
    if n_pairs is not None and axis.shape[0] != n_pairs:
        raise ValueError(f"axis_of_freq has {axis.shape[0]} entries, but there are "
                         f"dim/2 = {n_pairs} frequency pairs (sections must sum to dim/2)")
    if axis.numel() and int(axis.min()) < 0:
        raise ValueError(f"axis_of_freq entries must be >= 0, got {int(axis.min())}")
    if n_axes is not None and axis.numel() and int(axis.max()) >= n_axes:
        raise ValueError(f"axis_of_freq entry {int(axis.max())} >= n_axes = {n_axes} "
                         f"(positions has {n_axes} axes)")
    return axis.to(torch.int64)


def axial_inv_freq(axis_of_freq, base: float = 10000.0, *,
                   dtype: torch.dtype | None = None) -> Tensor:
    """Frequencies that give every axis a 1D RoPE ladder of its own.

    Axis ``a`` owns ``n_a`` pairs; its ``k``-th pair (in the order the map
    lists them) gets ``base**(-k/n_a)``, the ``k``-th frequency of a
    ``2·n_a``-dimensional RoPE (:func:`posenc_lib.rope.inv_freq`). This is the
    axial RoPE of vision transformers (EVA-02, RoPE-ViT, Qwen2-VL's vision
    encoder): with a split-halves map, ``cat([ladder, ladder])``; with an
    interleaved map, every frequency repeated once per axis.

    Args:
        axis_of_freq: ``(dim/2,)`` integer tensor, e.g. from :func:`mrope_axis_map`.
        base: the ladder's base (``rope_theta``).

    Returns:
        ``(dim/2,)`` tensor.
    """
    axis = _check_axis_map(axis_of_freq)
    dtype = _validate.floating_dtype("dtype", dtype)
    out = torch.empty(axis.shape[0], dtype=dtype)
    for a in axis.unique().tolist():
        where = axis == a
        out[where] = rope.inv_freq(2 * int(where.sum()), base, dtype=dtype)
    return out


def grid_positions(shape: Sequence[int]) -> Tensor:
    """Coordinates of every cell of a grid, in row-major order (last axis fastest).

    ``grid_positions((t, h, w))[:, n]`` is the ``(t, h, w)`` coordinate of the
    ``n``-th cell, the order in which patches are flattened into tokens.

    Returns:
        ``(len(shape), prod(shape))`` int64 tensor.
    """
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence) or not shape:
        raise ValueError(f"shape must be a non-empty sequence of sizes, got {shape!r}")
    sizes = [_validate.positive_int(f"shape[{a}]", s) for a, s in enumerate(shape)]
    axes = torch.meshgrid(*(torch.arange(s) for s in sizes), indexing="ij")
    return torch.stack([a.flatten() for a in axes])


def apply_multiaxis_rope(x: Tensor, positions, inv_freq: Tensor, axis_of_freq, *,
                         layout: str = "half", attention_factor: float = 1.0) -> Tensor:
    """Rotate pair ``i`` of ``x`` by ``positions[axis_of_freq[i]] · inv_freq[i]``.

    Rotations of different pairs commute, so the multi-axis rotation is a
    product of 1D RoPEs, one per axis: the pass for axis ``a`` is
    :func:`posenc_lib.rope.apply_rope` with ``positions[a]`` and the
    frequencies of the pairs that axis drives, every other frequency set to 0
    (a rotation by angle 0, which leaves a pair exactly as it is). With one
    axis this is a single call to :func:`~posenc_lib.rope.apply_rope`. The
    result equals Qwen2-VL's ``apply_multimodal_rotary_pos_emb``, which instead
    computes ``cos``/``sin`` for every axis and picks each feature's from the
    axis that drives its pair.

    Args:
        x: ``(..., seq, dim)`` queries or keys.
        positions: ``(n_axes, ..., seq)``: one row of coordinates per axis;
            ``positions[a]`` must broadcast to ``x``'s leading shape ``(..., seq)``.
        inv_freq: ``(dim/2,)`` frequencies.
        axis_of_freq: ``(dim/2,)`` integers in ``0 .. n_axes-1``.
        layout: ``"half"`` (pair ``i`` is features ``i, i + dim/2``) or
            ``"interleaved"`` (features ``2i, 2i + 1``).
        attention_factor: multiplies the result (YaRN's temperature), applied
            once, in the first pass.

    Returns:
        Tensor shaped like ``x``, in ``x``'s dtype.
    """
    _validate.tensor("x", x, min_dim=1, floating=True)
    _validate.one_of("layout", layout, rope.LAYOUTS)
    dim = _validate.even_int("x.shape[-1]", x.shape[-1])
    _validate.tensor("inv_freq", inv_freq, min_dim=1, floating=True)
    if inv_freq.dim() != 1 or inv_freq.shape[0] * 2 != dim:
        raise ValueError(f"inv_freq must have shape (dim/2,) = ({dim // 2},), "
                         f"got {tuple(inv_freq.shape)}")
    positions = torch.as_tensor(positions, device=x.device)
    if positions.dim() < 2:
        raise ValueError(f"positions must be (n_axes, ..., seq), got shape "
                         f"{tuple(positions.shape)}")
    n_axes = positions.shape[0]
    axis = _check_axis_map(axis_of_freq, n_pairs=dim // 2, n_axes=n_axes).to(inv_freq.device)
    try:
        shape = torch.broadcast_shapes(tuple(positions.shape[1:]) + (dim,), x.shape)
    except RuntimeError:
        shape = None
    if shape != x.shape:
        raise ValueError(f"positions of shape {tuple(positions.shape)} do not broadcast: "
                         f"each axis {tuple(positions.shape[1:])} must broadcast to x's "
                         f"leading shape {tuple(x.shape[:-1])}")
    if n_axes == 1:
        return rope.apply_rope(x, positions[0], inv_freq, layout=layout,
                               attention_factor=attention_factor)
    out, factor = x, attention_factor
    for a in range(n_axes):
        mine = axis == a
        if not bool(mine.any()) and factor == 1.0:
            continue  # an axis without pairs, once the factor has been applied
        out = rope.apply_rope(out, positions[a], inv_freq.where(mine, 0.0), layout=layout,
                              attention_factor=factor)
        factor = 1.0
    return out


def _check_segments(segments, spatial_merge_size: int) -> list[tuple[str, object]]:
    if isinstance(segments, (str, bytes)) or not isinstance(segments, Sequence) or not segments:
        raise ValueError(f"segments must be a non-empty list of (kind, size), got {segments!r}")
    checked = []
    for n, segment in enumerate(segments):
        name = f"segments[{n}]"
        if not isinstance(segment, Sequence) or isinstance(segment, str) or len(segment) != 2:
            raise ValueError(f"{name} must be a pair (kind, size), got {segment!r}")
        kind, size = segment
        _validate.one_of(f"{name} kind", kind, SEGMENT_KINDS)
        if kind == "text":
            checked.append((kind, _validate.positive_int(f"{name} n_tokens", size)))
            continue
        if isinstance(size, Tensor):
            size = size.tolist()
        if not isinstance(size, Sequence) or len(size) != 3:
            raise ValueError(f"{name} must give a {kind} grid (t, h, w), got {size!r}")
        t, h, w = (_validate.positive_int(f"{name} {axis}", s)
                   for axis, s in zip("thw", size))
        if h % spatial_merge_size or w % spatial_merge_size:
            raise ValueError(f"{name}: the {kind} grid (t, h, w) = ({t}, {h}, {w}) is not "
                             f"divisible by spatial_merge_size = {spatial_merge_size} "
                             f"in h and w")
        checked.append((kind, (t, h, w)))
    return checked


def segment_lengths(segments, *, spatial_merge_size: int = 2) -> list[int]:
    """Number of tokens of each segment: ``n`` for text, ``t·(h/m)·(w/m)`` for vision.

    ``segments`` as in :func:`mrope_position_ids`.
    """
    m = _validate.positive_int("spatial_merge_size", spatial_merge_size)
    return [size if kind == "text" else size[0] * (size[1] // m) * (size[2] // m)
            for kind, size in _check_segments(segments, m)]


def mrope_position_ids(segments, *, spatial_merge_size: int = 2,
                       seconds_per_grid: float | Sequence[float] | None = None,
                       tokens_per_second: float | None = None) -> Tensor:
    """M-RoPE's three position channels (temporal, height, width) for a prompt.

    Follows Qwen2-VL's ``get_rope_index``:

    * a text token gets the same id in all three channels, one more than the
      previous token's largest id;
    * a vision block starts at the next id, ``s``, and its token at merged
      grid cell ``(t, h, w)`` gets ids ``(s + t, s + h, s + w)`` (tokens in
      row-major order: t, then h, then w);
    * the text after a block resumes at the block's largest id plus one.

    With ``seconds_per_grid`` and ``tokens_per_second`` (Qwen2.5-VL), a video's
    temporal offset is ``floor(t · seconds_per_grid · tokens_per_second)``
    instead of ``t``: ids follow absolute time, not the frame count. Images
    then keep temporal offset 0.

    Args:
        segments: list of ``("text", n_tokens)``, ``("image", (t, h, w))`` or
            ``("video", (t, h, w))``. ``(t, h, w)`` is the patch grid before
            merging (``image_grid_thw``); a block holds ``t·(h/m)·(w/m)`` tokens.
        spatial_merge_size: ``m``, patches merged per side into one token.
        seconds_per_grid: seconds covered by one temporal grid step
            (``second_per_grid_ts``, ``temporal_patch_size / fps``): one
            number for every video or one per video.
        tokens_per_second: temporal ids per second (Qwen2.5-VL's
            ``vision_config.tokens_per_second``).

    Returns:
        ``(3, seq)`` int64 tensor.
    """
    m = _validate.positive_int("spatial_merge_size", spatial_merge_size)
    segments = _check_segments(segments, m)
    if (seconds_per_grid is None) != (tokens_per_second is None):
        raise ValueError("seconds_per_grid and tokens_per_second must be given together "
                         "(Qwen2.5-VL's absolute time) or both left out (Qwen2-VL)")
    n_videos = sum(kind == "video" for kind, _ in segments)
    seconds = None
    if tokens_per_second is not None:
        tokens_per_second = _validate.finite_float("tokens_per_second", tokens_per_second,
                                                   greater_than=0.0)
        if isinstance(seconds_per_grid, numbers.Real):
            seconds_per_grid = [seconds_per_grid] * n_videos
        if isinstance(seconds_per_grid, Tensor):
            seconds_per_grid = seconds_per_grid.tolist()
        if not isinstance(seconds_per_grid, Sequence) or len(seconds_per_grid) != n_videos:
            raise ValueError(f"seconds_per_grid must be a number or hold one value per "
                             f"video ({n_videos}), got {seconds_per_grid!r}")
        seconds = [_validate.finite_float(f"seconds_per_grid[{v}]", s, greater_than=0.0)
                   for v, s in enumerate(seconds_per_grid)]
    chunks, start, video = [], 0, 0
    for kind, size in segments:
        if kind == "text":
            ids = torch.arange(start, start + size).expand(3, -1)
        else:
            t, h, w = size
            ids = grid_positions((t, h // m, w // m))
            if seconds is not None:
                step = seconds[video] if kind == "video" else 0.0
                # The order of the products matters for the rounding: as in Qwen2.5-VL.
                time = ids[0].to(torch.float64) * step * tokens_per_second
                ids[0] = time.long()
            ids = ids + start
            video += kind == "video"
        chunks.append(ids)
        start = int(ids.max()) + 1
    return torch.cat(chunks, dim=1)
