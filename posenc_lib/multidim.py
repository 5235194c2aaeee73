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

Split halves, interleaved groups, contiguous M-RoPE sections, interleaved
M-RoPE and VideoRoPE's low-frequency temporal allocation are five values of
these two tensors, applied by one function, :func:`apply_multiaxis_rope`.
:func:`mrope_position_ids` builds the three position channels (temporal,
height, width) of a mixed text/image/video prompt, as Qwen2-VL's
``get_rope_index`` does; :func:`videorope_position_ids` builds VideoRoPE's
diagonal layout.

RoPE-Mixed (Heo et al. 2024) drops the axis map: every pair gets a frequency
*vector*, one component per axis, and turns by its dot product with the
position (:func:`apply_mixed_rope`). Axial RoPE is the special case in which
every vector lies on an axis (:func:`frequency_vectors`).
"""

from __future__ import annotations

import math
import numbers
from typing import Sequence

import torch
from torch import Tensor

from . import _validate, rope

__all__ = ["MROPE_AXES", "SEGMENT_KINDS", "mrope_axis_map", "axial_inv_freq",
           "grid_positions", "apply_multiaxis_rope", "segment_lengths",
           "mrope_position_ids", "videorope_axis_map", "videorope_position_ids",
           "axis_kernel", "mixed_frequencies", "frequency_vectors", "apply_mixed_rope"]

#: The three position channels of M-RoPE, in the order of ``positions``.
MROPE_AXES = ("temporal", "height", "width")
#: The kinds of segment that :func:`mrope_position_ids` accepts.
SEGMENT_KINDS = ("text", "image", "video")


def _sections(sections) -> list[int]:
    if isinstance(sections, Tensor):
        sections = sections.tolist()
    if isinstance(sections, (str, bytes)) or not isinstance(sections, Sequence):
        raise ValueError(f"sections must be a sequence of integers, got {sections!r}")
    values = [_validate.nonnegative_int(f"sections[{a}]", s)
              for a, s in enumerate(sections)]
    if not values or sum(values) == 0:
        raise ValueError(f"sections must hold at least one pair, got {list(sections)}")
    return values


def _check_dim(sections: list[int], dim) -> None:
    if dim is None:
        return
    dim = _validate.even_int("dim", dim)
    if sum(sections) != dim // 2:
        raise ValueError(f"sections must sum to dim/2 = {dim // 2}, got {sections} "
                         f"(sum {sum(sections)})")


def mrope_axis_map(sections, *, interleaved: bool = False,
                   dim: int | None = None) -> Tensor:
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
    _check_dim(sections, dim)
    if not interleaved:
        axes = torch.arange(len(sections))
        return torch.repeat_interleave(axes, torch.tensor(sections))
    remaining, order = list(sections), []
    while any(remaining):
        for axis, left in enumerate(remaining):
            if left:
                order.append(axis)
                remaining[axis] -= 1
    return torch.tensor(order, dtype=torch.int64)


def videorope_axis_map(sections, *, dim: int | None = None) -> Tensor:
    """``axis_of_freq`` for VideoRoPE's low-frequency temporal allocation.

    VideoRoPE (Wei et al. 2025) keeps M-RoPE's section sizes ``(t, h, w)``
    but moves time to the **slowest** pairs of the shared ladder: height and
    width alternate, ``h, w, h, w, ...``, over the first ``h + w`` pairs, and
    the last ``t`` pairs follow time. With ``[16, 24, 24]`` and
    ``head_dim=128`` this is the map of the reference code's
    ``apply_m_modify_multimodal_rotary_pos_emb`` (repository
    Wiselnn570/VideoRoPE, file ``videorope-transformer/modeling_videorope.py``).

    Args:
        sections: ``(t, h, w)`` pair counts, with ``h == w`` (the two spatial
            axes alternate one for one).
        dim: if given, the feature size; ``sections`` must sum to ``dim/2``.

    Returns:
        ``(sum(sections),)`` int64 tensor with values in ``0, 1, 2``.
    """
    sections = _sections(sections)
    if len(sections) != 3:
        raise ValueError(f"sections must give three pair counts (t, h, w), got {sections}")
    if sections[1] != sections[2]:
        raise ValueError(f"sections must give height and width the same number of pairs "
                         f"(they alternate), got h = {sections[1]}, w = {sections[2]}")
    _check_dim(sections, dim)
    spatial = torch.tensor([1, 2]).repeat(sections[1])
    return torch.cat([spatial, torch.zeros(sections[0], dtype=torch.int64)])


def _check_axis_map(axis_of_freq, *, n_pairs: int | None = None,
                    n_axes: int | None = None) -> Tensor:
    axis = torch.as_tensor(axis_of_freq)
    if axis.dtype == torch.bool or axis.is_floating_point() or axis.is_complex():
        raise ValueError(f"axis_of_freq must be an integer tensor, got {axis.dtype}")
    if axis.dim() != 1:
        raise ValueError(f"axis_of_freq must be 1-D (dim/2,), got shape "
                         f"{tuple(axis.shape)}")
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


def _check_positions(positions, x: Tensor) -> Tensor:
    """``positions`` as a tensor ``(n_axes, ..., seq)`` whose rows broadcast to ``x``."""
    positions = torch.as_tensor(positions, device=x.device)
    if positions.dim() < 2:
        raise ValueError(f"positions must be (n_axes, ..., seq), got shape "
                         f"{tuple(positions.shape)}")
    try:
        shape = torch.broadcast_shapes(tuple(positions.shape[1:]) + (x.shape[-1],),
                                       x.shape)
    except RuntimeError:
        shape = None
    if shape != x.shape:
        raise ValueError(f"positions of shape {tuple(positions.shape)} do not broadcast: "
                         f"each axis {tuple(positions.shape[1:])} must broadcast to x's "
                         f"leading shape {tuple(x.shape[:-1])}")
    return positions


def apply_multiaxis_rope(x: Tensor, positions, inv_freq: Tensor, axis_of_freq, *,
                         layout: str = "half", attention_factor: float = 1.0) -> Tensor:
    """Rotate pair ``i`` of ``x`` by ``positions[axis_of_freq[i]] · inv_freq[i]``.

    Rotations of different pairs commute, so the multi-axis rotation is a
    product of 1D RoPEs, one per axis: the pass for axis ``a`` is
    :func:`posenc_lib.rope.apply_rope` with ``positions[a]`` and the
    frequencies of the pairs that axis drives, every other frequency set to 0
    (a rotation by angle 0, which leaves a pair exactly as it is). The result
    equals Qwen2-VL's ``apply_multimodal_rotary_pos_emb``, which instead
    computes ``cos``/``sin`` for every axis and picks each feature's from the
    axis that drives its pair (``tests/test_multidim.py`` compares the two,
    and both with the dense block rotation).

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
    positions = _check_positions(positions, x)
    n_axes = positions.shape[0]
    axis = _check_axis_map(axis_of_freq, n_pairs=dim // 2, n_axes=n_axes)
    axis = axis.to(inv_freq.device)
    out, factor = x, attention_factor
    for a in range(n_axes):
        mine = axis == a
        if not bool(mine.any()) and factor == 1.0:
            continue  # an axis without pairs, once the factor has been applied
        out = rope.apply_rope(out, positions[a], inv_freq.where(mine, 0.0),
                              layout=layout, attention_factor=factor)
        factor = 1.0
    return out


def axis_kernel(offsets, inv_freq: Tensor, axis_of_freq, axis: int) -> Tensor:
    """``mean(cos(offset · θ_i))`` over the pairs ``i`` that ``axis`` drives.

    The positional part of the score, per pair, of a query and a key whose
    pairs of that axis are all the same unit vector, when the two tokens are
    ``offset`` apart along ``axis`` only: 1 at offset 0, and the curve whose
    decay (or lack of it) decides whether that axis favours nearby tokens.

    Args:
        offsets: any shape ``S`` of offsets along ``axis``.
        inv_freq: ``(dim/2,)`` frequencies.
        axis_of_freq: ``(dim/2,)`` axis map.
        axis: the axis whose pairs are averaged; it must drive at least one pair.

    Returns:
        ``S``-shaped tensor in ``inv_freq``'s dtype, values in ``[-1, 1]``.
    """
    inv_freq = rope._check_inv_freq(inv_freq)
    axis_map = _check_axis_map(axis_of_freq, n_pairs=inv_freq.shape[0])
    axis = _validate.nonnegative_int("axis", axis)
    mine = axis_map.to(inv_freq.device) == axis
    if not bool(mine.any()):
        raise ValueError(f"axis {axis} drives no pair of axis_of_freq")
    return rope.rope_angles(offsets, inv_freq[mine]).cos().mean(-1)


# -- RoPE-Mixed: a frequency vector per pair ---------------------------------------


def mixed_frequencies(dim: int, base: float = 10.0, *, angle: float = 0.0,
                      dtype: torch.dtype | None = None) -> Tensor:
    """RoPE-Mixed's frequency vectors for one head, at their initial values.

    In RoPE-Mixed (Heo et al. 2024) pair ``i`` turns by ``θ_i · p``, the dot
    product of a learned 2D frequency vector ``θ_i`` with the patch position
    ``p``. The paper initialises one head with the magnitudes of a
    ``dim/2``-dimensional RoPE ladder, ``r_k = base**(-k/(dim/4))`` for
    ``k < dim/4``: pair ``k`` points along ``angle`` (measured from the x
    axis, towards y), pair ``dim/4 + k`` along ``angle + π/2``. Each head
    draws its own ``angle`` uniformly in ``[0, 2π)``; then training moves the
    vectors freely. With ``angle = 0`` the first quarter of the pairs follows
    x and the second follows y: axial RoPE (RoPE-ViT's default base is 100 for
    axial and 10 for mixed).

    Args:
        dim: head size, a multiple of 4.
        base: the magnitudes' base.
        angle: direction of the first ``dim/4`` vectors, in radians.

    Returns:
        ``(2, dim/2)`` tensor: row 0 holds the y components (they multiply the
        row coordinate), row 1 the x components (column), the axis order of
        :func:`grid_positions` ``((h, w))``.
    """
    dim = _validate.even_int("dim", dim, minimum=4)
    if dim % 4:
        raise ValueError(f"dim must be a multiple of 4 (two directions of pairs), got {dim}")
    angle = _validate.finite_float("angle", angle)
    dtype = _validate.floating_dtype("dtype", dtype)
    r = rope.inv_freq(dim // 2, base, dtype=torch.float64)
    c, s = math.cos(angle), math.sin(angle)
    # (x, y) components: r·(cos a, sin a), then the quarter turn r·(-sin a, cos a).
    x_part = torch.cat([r * c, r * -s])
    y_part = torch.cat([r * s, r * c])
    return torch.stack([y_part, x_part]).to(dtype)


def frequency_vectors(inv_freq: Tensor, axis_of_freq, n_axes: int | None = None) -> Tensor:
    """An axis map and its frequencies written as RoPE-Mixed frequency vectors.

    Column ``i`` is ``inv_freq[i]`` times the unit vector of axis
    ``axis_of_freq[i]``, so that ``apply_mixed_rope(x, p, frequency_vectors(f,
    a))`` equals ``apply_multiaxis_rope(x, p, f, a)``.

    Args:
        inv_freq: ``(dim/2,)``.
        axis_of_freq: ``(dim/2,)`` axis map.
        n_axes: number of axes (default: the largest axis in the map plus one).

    Returns:
        ``(n_axes, dim/2)`` tensor in ``inv_freq``'s dtype.
    """
    inv_freq = rope._check_inv_freq(inv_freq)
    axis = _check_axis_map(axis_of_freq, n_pairs=inv_freq.shape[0])
    if n_axes is None:
        n_axes = int(axis.max()) + 1
    n_axes = _validate.positive_int("n_axes", n_axes)
    axis = _check_axis_map(axis, n_axes=n_axes).to(inv_freq.device)
    out = torch.zeros(n_axes, inv_freq.shape[0], dtype=inv_freq.dtype,
                      device=inv_freq.device)
    out[axis, torch.arange(inv_freq.shape[0], device=inv_freq.device)] = inv_freq
    return out


def apply_mixed_rope(x: Tensor, positions, freqs: Tensor, *,
                     layout: str = "interleaved") -> Tensor:
    """RoPE-Mixed: rotate pair ``i`` of ``x`` by ``sum_a positions[a] · freqs[a, i]``.

    The angle of every pair is a linear function of the position vector, so
    two tokens' rotations differ by the rotation of the offset vector and
    scores depend on ``p' - p`` only, for any ``freqs``.

    Args:
        x: ``(..., seq, dim)`` queries or keys.
        positions: ``(n_axes, ..., seq)``; ``positions[a]`` broadcasts to
            ``x``'s leading shape.
        freqs: ``(n_axes, dim/2)`` frequency vectors, one column per pair
            (:func:`mixed_frequencies`, :func:`frequency_vectors`). The
            angles are computed in its dtype.
        layout: ``"interleaved"`` (the complex-number pairs ``2i, 2i+1`` of
            the RoPE-ViT code, the default) or ``"half"``.

    Returns:
        Tensor shaped like ``x``, in ``x``'s dtype.
    """
    _validate.tensor("x", x, min_dim=1, floating=True)
    _validate.one_of("layout", layout, rope.LAYOUTS)
    dim = _validate.even_int("x.shape[-1]", x.shape[-1])
    _validate.tensor("freqs", freqs, min_dim=2, floating=True)
    if freqs.dim() != 2 or freqs.shape[1] * 2 != dim:
        raise ValueError(f"freqs must have shape (n_axes, dim/2) = (n_axes, {dim // 2}), "
                         f"got {tuple(freqs.shape)}")
    _validate.finite_tensor("freqs", freqs)
    positions = _check_positions(positions, x)
    if positions.shape[0] != freqs.shape[0]:
        raise ValueError(f"positions has {positions.shape[0]} axes but freqs has "
                         f"{freqs.shape[0]} rows (one per axis)")
    p = positions.to(device=freqs.device, dtype=freqs.dtype)
    _validate.finite_tensor("positions", p)
    shape = (freqs.shape[0],) + (1,) * (p.dim() - 1) + (freqs.shape[1],)
    angles = (p.unsqueeze(-1) * freqs.view(shape)).sum(0)      # (..., seq, dim/2)
    if layout == "half":
        angles = torch.cat([angles, angles], dim=-1)
    else:
        angles = angles.repeat_interleave(2, dim=-1)
    return rope.apply_cos_sin(x, angles.cos(), angles.sin(), layout=layout)


# -- position ids of a mixed prompt -----------------------------------------------


def _check_segments(segments, spatial_merge_size: int) -> list[tuple[str, object]]:
    if (isinstance(segments, (str, bytes)) or not isinstance(segments, Sequence)
            or not segments):
        raise ValueError(f"segments must be a non-empty list of (kind, size), "
                         f"got {segments!r}")
    checked = []
    for n, segment in enumerate(segments):
        name = f"segments[{n}]"
        if (not isinstance(segment, Sequence) or isinstance(segment, str)
                or len(segment) != 2):
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
            raise ValueError(f"{name}: the {kind} grid (t, h, w) = ({t}, {h}, {w}) is "
                             f"not divisible by spatial_merge_size = "
                             f"{spatial_merge_size} in h and w")
        checked.append((kind, (t, h, w)))
    return checked


def segment_lengths(segments, *, spatial_merge_size: int = 2) -> list[int]:
    """Number of tokens of each segment: ``n`` for text, ``t·(h/m)·(w/m)`` for vision.

    ``segments`` as in :func:`mrope_position_ids`.
    """
    m = _validate.positive_int("spatial_merge_size", spatial_merge_size)
    return [size if kind == "text" else size[0] * (size[1] // m) * (size[2] // m)
            for kind, size in _check_segments(segments, m)]


def _seconds_per_video(segments, seconds_per_grid, tokens_per_second):
    """One ``seconds_per_grid`` per video, checked (``None`` without absolute time)."""
    if (seconds_per_grid is None) != (tokens_per_second is None):
        raise ValueError("seconds_per_grid and tokens_per_second must be given together "
                         "(Qwen2.5-VL's absolute time) or both left out (Qwen2-VL)")
    if tokens_per_second is None:
        return None
    _validate.finite_float("tokens_per_second", tokens_per_second, greater_than=0.0)
    n_videos = sum(kind == "video" for kind, _ in segments)
    if isinstance(seconds_per_grid, numbers.Real):
        seconds_per_grid = [seconds_per_grid] * n_videos
    if isinstance(seconds_per_grid, Tensor):
        seconds_per_grid = seconds_per_grid.tolist()
    if not isinstance(seconds_per_grid, Sequence) or len(seconds_per_grid) != n_videos:
        raise ValueError(f"seconds_per_grid must be a number or hold one value per "
                         f"video ({n_videos}), got {seconds_per_grid!r}")
    return [_validate.finite_float(f"seconds_per_grid[{v}]", s, greater_than=0.0)
            for v, s in enumerate(seconds_per_grid)]


# floor(t · s · r) of the exact product, from the float64 one. s arrives
# rounded (2 / fps, 0.4, ...), r may be, and the two products round again:
# four roundings, so the computed x is within 4u·x of the exact value
# (u = 2**-53, ignoring u²). A whole number k can come out just below k,
# and a plain floor then gives k - 1 (t = 7, s = 2/3, r = 3: 13.999...
# for 14). Scaling by 1 + 8u lifts every such x back to k or above (the
# rounding of that product is monotone), while an exact value below k moves
# past k only if it lies within ~12u·k of it. With s·r = p/q, t·p/q is at
# least 1/q below k, so that needs q·k > 1/(12u) ≈ 7.5e14: never for frame
# rates with small denominators (30000/1001 fps gives q <= 30000).
_FLOOR_LIFT = 1.0 + 8 * 2.0**-53


def mrope_position_ids(segments, *, spatial_merge_size: int = 2,
                       seconds_per_grid: float | Sequence[float] | None = None,
                       tokens_per_second: float | None = None) -> Tensor:
    """M-RoPE's three position channels (temporal, height, width) for a prompt.

    Follows Qwen2-VL's ``get_rope_index``: text gets the same id on all three
    channels; a vision block starting at id ``s`` gives its token at merged
    grid cell ``(t, h, w)`` the ids ``(s + t, s + h, s + w)``; whatever comes
    next starts at the largest id so far plus one. With ``seconds_per_grid``
    and ``tokens_per_second`` (Qwen2.5-VL) a video's temporal offset is
    ``floor(t · seconds_per_grid · tokens_per_second)`` instead of ``t``,
    the floor of the exact product: a whole number that float64 rounds to just
    below itself still counts as that number.

    Args:
        segments: list of ``("text", n_tokens)``, ``("image", (t, h, w))`` or
            ``("video", (t, h, w))``; ``(t, h, w)`` is the patch grid before
            merging (``image_grid_thw``), so a block holds ``t·(h/m)·(w/m)``
            tokens.
        spatial_merge_size: ``m``, patches merged per side into one token.
        seconds_per_grid: seconds per temporal grid step
            (``second_per_grid_ts = temporal_patch_size / fps``): one number,
            or one per video.
        tokens_per_second: temporal ids per second (Qwen2.5-VL's
            ``vision_config.tokens_per_second``).

    Returns:
        ``(3, seq)`` int64 tensor.
    """
    m = _validate.positive_int("spatial_merge_size", spatial_merge_size)
    segments = _check_segments(segments, m)
    seconds = _seconds_per_video(segments, seconds_per_grid, tokens_per_second)
    chunks, start, video = [], 0, 0
    for kind, size in segments:
        if kind == "text":
            ids = torch.arange(start, start + size).expand(3, -1)
        else:
            t, h, w = size
            ids = grid_positions((t, h // m, w // m))       # (t, h, w), w fastest
            if seconds is not None:                         # Qwen2.5-VL: time in ids
                step = seconds[video] if kind == "video" else 0.0
                time = ids[0].double() * step * tokens_per_second * _FLOOR_LIFT
                ids[0] = time.floor().long()
            ids = ids + start
            video += kind == "video"
        chunks.append(ids)
        start = int(ids.max()) + 1                          # largest id so far, plus 1
    return torch.cat(chunks, dim=1)


def videorope_position_ids(segments, *, spatial_merge_size: int = 2,
                           temporal_spacing: float = 2.0) -> Tensor:
    """VideoRoPE's diagonal layout (Wei et al. 2025) for a prompt.

    Text is as in :func:`mrope_position_ids`. A vision block with merged grid
    ``(T, H, W)`` that starts at id ``s`` gives its token at ``(t, h, w)`` the
    temporal id ``τ = s + δ·t`` and the spatial ids ``τ + h - (H-1)//2`` and
    ``τ + w - (W-1)//2``: every frame is centred on the diagonal that text
    runs along, and frames are ``δ`` apart (adjustable temporal spacing).
    Whatever comes next starts at the largest **temporal** id plus one,
    ``s + δ·(T-1) + 1``, as in the reference code's
    ``get_t_scale_rope_index`` (repository Wiselnn570/VideoRoPE, file
    ``videorope-transformer/modeling_videorope.py``).

    Args:
        segments: as in :func:`mrope_position_ids`.
        spatial_merge_size: patches merged per side into one token.
        temporal_spacing: ``δ`` (the reference code's ``scale_factor``; 2 in
            the paper's experiments).

    Returns:
        ``(3, seq)`` float64 tensor (``δ`` may be fractional).
    """
    m = _validate.positive_int("spatial_merge_size", spatial_merge_size)
    segments = _check_segments(segments, m)
    delta = _validate.finite_float("temporal_spacing", temporal_spacing,
                                   greater_than=0.0)
    chunks, start = [], 0.0
    for kind, size in segments:
        if kind == "text":
            ids = (start + torch.arange(size, dtype=torch.float64)).expand(3, -1)
        else:
            t, h, w = size
            grid = grid_positions((t, h // m, w // m)).double()
            tau = start + delta * grid[0]
            centre = torch.tensor([(h // m - 1) // 2, (w // m - 1) // 2])
            ids = torch.stack([tau, tau + grid[1] - centre[0],
                               tau + grid[2] - centre[1]])
        chunks.append(ids)
        start = float(ids[0].max()) + 1.0               # largest temporal id, plus 1
    return torch.cat(chunks, dim=1)
