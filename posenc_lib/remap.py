"""Re-mapped positions (chapter 10): ReRoPE, Self-Extend and attention sinks.

Each method keeps a model's trained RoPE and changes which relative position a
query-key pair sees: :func:`rerope_relative_positions`,
:func:`self_extend_relative_positions` and :func:`sink_cache_positions` give
the map, :func:`relative_map_scores` the attention scores under any map, and
:func:`rerope_scores`, :func:`self_extend_scores` and :func:`sink_scores` the
scores as the methods' reference code computes them.
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import _validate, rope

__all__ = ["rerope_relative_positions", "self_extend_relative_positions",
           "sink_cache_positions", "relative_map_scores", "rerope_scores",
           "self_extend_scores", "sink_scores", "SELF_EXTEND_SHIFTS"]


def _position_vector(name: str, value) -> Tensor:
    """1-D int64 tensor of non-negative integer positions."""
    p = torch.as_tensor(value)
    if p.dim() != 1 or p.is_complex() or p.dtype == torch.bool:
        raise ValueError(f"{name} must be a 1-D sequence of integers, got "
                         f"{p.dtype} of shape {tuple(p.shape)}")
    if p.is_floating_point():
        if not bool((torch.isfinite(p) & (p == p.round())).all()):
            raise ValueError(f"{name} must hold integers")
    p = p.to(torch.int64)
    if bool((p < 0).any()):
        raise ValueError(f"{name} must be >= 0")
    return p


def _query_key(query_positions, key_positions) -> tuple[Tensor, Tensor]:
    m = _position_vector("query_positions", query_positions)
    n = m if key_positions is None else _position_vector("key_positions", key_positions)
    return m, n


def rerope_relative_positions(query_positions, key_positions=None, *, window: int,
                              leaky_factor: float | None = None) -> Tensor:
    """The relative position (key minus query) each pair sees under ReRoPE.

    With the distance ``D = m - n`` of query ``m`` and key ``n``, ReRoPE (Su
    2023) keeps ``D`` inside the window and clips it outside:
    ``D' = D`` if ``|D| < window``, else ``window``. Leaky ReRoPE
    (``leaky_factor = k > 1``) continues with slope ``1/k`` instead:
    ``D' = window + (D - window)/k``. Exactly what the two passes of
    bojone/rerope's ``rerope_patch.py`` and ``leaky_rerope_patch.py`` compute
    (:func:`rerope_scores`); under a causal mask only ``D >= 0`` matters.
    Both methods are defined there. For a future key beyond the window,
    Leaky ReRoPE's value lands among the past distances (window 16, ``k = 4``:
    ``D = -20`` gives 7, as ``D = 7`` does).

    Args:
        query_positions: ``(n_q,)`` integers >= 0.
        key_positions: ``(n_k,)``; defaults to ``query_positions``.
        window: ``w``, an integer >= 1.
        leaky_factor: ``None`` (ReRoPE) or ``k > 1`` (Leaky ReRoPE).

    Returns:
        ``(n_q, n_k)`` float64 tensor ``-D'``.
    """
    m, n = _query_key(query_positions, key_positions)
    window = _validate.positive_int("window", window)
    distance = (m[:, None] - n[None, :]).to(torch.float64)
    if leaky_factor is None:
        outside = torch.full_like(distance, float(window))
    else:
        k = _validate.finite_float("leaky_factor", leaky_factor, greater_than=1.0)
        outside = window + (distance - window) / k
    return -torch.where(distance.abs() < window, distance, outside)


#: The two group query shifts of datamllab/LongLM (see
#: :func:`self_extend_relative_positions`).
SELF_EXTEND_SHIFTS = ("floor", "divide")


def _group_query_positions(m: Tensor, w: int, g: int, query_shift: str) -> Tensor:
    """The group pass's query positions: ``⌊m/G⌋ + w - ⌊w/G⌋`` (int64), or, for
    ``"divide"``, ``query_position // G + w - w / G`` evaluated as LongLM's
    code evaluates it: an int64 tensor minus a Python float, so float32."""
    if query_shift == "floor":
        return m // g + w - w // g
    if query_shift == "divide":
        return (m // g + w).to(torch.float32) - torch.tensor(w / g, dtype=torch.float32)
    raise ValueError(f"query_shift must be one of {SELF_EXTEND_SHIFTS}, got "
                     f"{query_shift!r}: 'floor' for the paper's w - w // G, 'divide' "
                     f"for the w - w / G of LongLM's prefill code")


def self_extend_relative_positions(query_positions, key_positions=None, *,
                                   group_size: int, neighbor_window: int,
                                   query_shift: str = "floor") -> Tensor:
    """The relative position (key minus query) each pair sees under Self-Extend.

    Jin et al. (2024): within the neighbour window, ``m - n < w``, the
    distance is exact; beyond, both positions are grouped by floor division
    and the query is shifted so that the two parts meet:
    ``D' = (⌊m/G⌋ + w - ⌊w/G⌋) - ⌊n/G⌋`` (``query_shift="floor"``, the
    paper's formula). The authors' code (datamllab/LongLM at cdbbb06)
    computes that only in ``self_extend_forward`` of
    ``self_extend_patch/Llama_4_40.py`` (line 131, fixed in commit 715c1e3)
    and in its decode paths; the prefill paths of ``Llama.py`` (lines 134,
    294, 402: the forward ``SelfExtend.apply`` installs for Llama),
    ``Gemma.py`` (144, 247) and ``Llama_4_40.py`` (291, 408) shift the query
    by ``w - w / G``, a float (``query_shift="divide"``; the positions come
    out in float32, as there), which differs by ``(w mod G)/G`` when ``G``
    does not divide ``w``.

    Args:
        query_positions: ``(n_q,)`` integers >= 0.
        key_positions: ``(n_k,)``; defaults to ``query_positions``.
        group_size: ``G`` (``group_size_1`` in the reference code), >= 1.
        neighbor_window: ``w`` (``group_size_2``), >= 1.
        query_shift: ``"floor"`` or ``"divide"`` (above).

    Returns:
        ``(n_q, n_k)`` tensor ``-D'``: int64 for ``"floor"``; float64 for
        ``"divide"`` (from the float32 group query positions).
    """
    m, n = _query_key(query_positions, key_positions)
    g = _validate.positive_int("group_size", group_size)
    w = _validate.positive_int("neighbor_window", neighbor_window)
    group_query = _group_query_positions(m, w, g, query_shift)
    distance = m[:, None] - n[None, :]
    if query_shift == "divide":
        distance, group_query = distance.double(), group_query.double()
    grouped = group_query[:, None] - n[None, :] // g
    return -torch.where(distance < w, distance, grouped)


def sink_cache_positions(query_positions, key_positions=None, *, start_size: int,
                         recent_size: int) -> tuple[Tensor, Tensor]:
    """Relative positions (key minus query) inside a StreamingLLM cache, and
    what it keeps.

    When query ``m`` is computed, the cache holds the first ``start_size``
    tokens (the attention sinks) and the ``recent_size`` most recent ones, the
    query itself included: keys ``n < s`` and ``m - r < n <= m``
    (``StartRecentKVCache.evict_for_space`` in mit-han-lab/streaming-llm).
    Positions are assigned by slot in the cache, ``0, 1, ...``; with
    ``a = max(s, m - r + 1)`` the first kept recent token, key ``n`` sits at
    ``n`` if ``n < s`` else ``n - a + s``, and the query at ``m - a + s``.
    So recent keys keep their distance ``m - n`` and a sink ``n`` is seen at
    distance ``m - a + s - n``.

    Args:
        query_positions: ``(n_q,)`` integers >= 0.
        key_positions: ``(n_k,)``; defaults to ``query_positions``.
        start_size: ``s``, sinks kept (>= 0).
        recent_size: ``r``, most recent tokens kept, the query included (>= 1).

    Returns:
        ``(relative, kept)``: ``(n_q, n_k)`` int64 relative positions (0 where
        not kept) and the ``(n_q, n_k)`` bool mask of kept keys.
    """
    m, n = _query_key(query_positions, key_positions)
    s = _validate.nonnegative_int("start_size", start_size)
    r = _validate.positive_int("recent_size", recent_size)
    first_recent = torch.clamp(m - r + 1, min=s)[:, None]           # a, per query
    sink = (n[None, :] < s) & (n[None, :] <= m[:, None])
    recent = (n[None, :] >= first_recent) & (n[None, :] <= m[:, None])
    key_slot = torch.where(n[None, :] < s, n[None, :], n[None, :] - first_recent + s)
    query_slot = m[:, None] - first_recent + s
    kept = sink | recent
    return torch.where(kept, key_slot - query_slot, 0), kept


def relative_map_scores(q: Tensor, k: Tensor, relative_positions: Tensor,
                        inv_freq: Tensor, *, layout: str = "half") -> Tensor:
    """RoPE scores ``⟨q_m, R_{r(m,n)} k_n⟩`` for an arbitrary map of relative positions.

    Entry ``(m, n)`` is the score of plain RoPE at the relative position
    ``r(m, n)`` (key minus query): with pair ``i`` of ``q`` and ``k`` as complex
    numbers, ``Re Σ_i conj(q_mi) k_ni e^{i r θ_i}``. A reference that builds an
    ``(n_q, n_k, dim/2)`` table of angles: ``O(n_q n_k dim)`` time and memory.

    Args:
        q: ``(..., n_q, dim)`` queries, not rotated.
        k: ``(..., n_k, dim)`` keys, not rotated.
        relative_positions: ``(n_q, n_k)`` real tensor.
        inv_freq: ``(dim/2,)``.
        layout: which features form pair ``i`` (see :mod:`posenc_lib.rope`).

    Returns:
        ``(..., n_q, n_k)`` tensor in the promoted dtype of ``q``, ``k`` and
        ``inv_freq``.
    """
    _validate.one_of("layout", layout, rope.LAYOUTS)
    inv_freq = _validate.tensor("inv_freq", inv_freq, min_dim=1, floating=True)
    _validate.finite_tensor("inv_freq", inv_freq)
    half = inv_freq.shape[0]
    _validate.tensor("q", q, min_dim=2, last_dim=2 * half, floating=True)
    _validate.tensor("k", k, min_dim=2, last_dim=2 * half, floating=True)
    r = _validate.tensor("relative_positions", relative_positions, min_dim=2)
    if r.shape != (q.shape[-2], k.shape[-2]) or r.is_complex():
        raise ValueError(f"relative_positions must be real of shape (n_q, n_k) = "
                         f"{(q.shape[-2], k.shape[-2])}, got {tuple(r.shape)}")
    dtype = torch.promote_types(torch.promote_types(q.dtype, k.dtype), inv_freq.dtype)
    r = r.to(dtype)
    _validate.finite_tensor("relative_positions", r)
    if layout == "half":
        (qa, qb), (ka, kb) = q.to(dtype).chunk(2, -1), k.to(dtype).chunk(2, -1)
    else:
        qa, qb, ka, kb = (t.to(dtype)[..., j::2] for t in (q, k) for j in (0, 1))
    angles = r[..., None] * inv_freq.to(dtype)                       # (n_q, n_k, dim/2)
    cos, sin = angles.cos(), angles.sin()
    # conj(qa + i qb)(ka + i kb) = (qa ka + qb kb) + i (qa kb - qb ka)
    real = (torch.einsum("...mi,...ni,mni->...mn", qa, ka, cos)
            + torch.einsum("...mi,...ni,mni->...mn", qb, kb, cos))
    imag = (torch.einsum("...mi,...ni,mni->...mn", qa, kb, sin)
            - torch.einsum("...mi,...ni,mni->...mn", qb, ka, sin))
    return real - imag


def _pass(q, k, query_positions, key_positions, inv_freq, layout) -> Tensor:
    """One pass of RoPE scores: ``R_a q`` against ``R_b k`` for positions ``a``, ``b``."""
    return (rope.apply_rope(q, query_positions, inv_freq, layout=layout)
            @ rope.apply_rope(k, key_positions, inv_freq, layout=layout).transpose(-1, -2))


def _check_qk(q, k, inv_freq, query_positions, key_positions):
    _validate.tensor("q", q, min_dim=2, floating=True)
    _validate.tensor("k", k, min_dim=2, last_dim=q.shape[-1], floating=True)
    m = (torch.arange(q.shape[-2]) if query_positions is None
         else _position_vector("query_positions", query_positions))
    n = (torch.arange(k.shape[-2]) if key_positions is None
         else _position_vector("key_positions", key_positions))
    if m.shape[0] != q.shape[-2] or n.shape[0] != k.shape[-2]:
        raise ValueError(f"query_positions and key_positions must have n_q = {q.shape[-2]} "
                         f"and n_k = {k.shape[-2]} entries, got {m.shape[0]} and "
                         f"{n.shape[0]}")
    return m.to(q.device), n.to(q.device)


def rerope_scores(q: Tensor, k: Tensor, inv_freq: Tensor, *, window: int,
                  leaky_factor: float | None = None, query_positions=None,
                  key_positions=None, layout: str = "half") -> Tensor:
    """ReRoPE's (or Leaky ReRoPE's) attention scores, in two passes merged by a mask.

    As bojone/rerope does: pass 1 is plain RoPE (queries at ``m``, keys at
    ``n``); pass 2 rotates every query to position ``window`` and leaves the
    keys unrotated (ReRoPE), or, for Leaky ReRoPE, uses frequencies divided by
    ``k = leaky_factor`` with queries at ``m + window·(k - 1)`` and keys at
    ``n``. Entry ``(m, n)`` comes from pass 1 where ``|m - n| < window``, else
    from pass 2. Not scaled by ``1/√d`` and not masked.

    Args:
        q: ``(..., n_q, dim)``, k: ``(..., n_k, dim)``, not rotated.
        inv_freq: ``(dim/2,)``.
        window, leaky_factor: as in :func:`rerope_relative_positions`.
        query_positions, key_positions: default ``0 .. n - 1``.
        layout: see :mod:`posenc_lib.rope`.

    Returns:
        ``(..., n_q, n_k)`` scores.
    """
    m, n = _check_qk(q, k, inv_freq, query_positions, key_positions)
    window = _validate.positive_int("window", window)
    inside = _pass(q, k, m, n, inv_freq, layout)
    if leaky_factor is None:
        outside = _pass(q, k, torch.full_like(m, window), torch.zeros_like(n), inv_freq,
                        layout)
    else:
        factor = _validate.finite_float("leaky_factor", leaky_factor, greater_than=1.0)
        shifted = m.to(torch.float64) + window * (factor - 1)
        outside = _pass(q, k, shifted, n, inv_freq / factor, layout)
    near = (m[:, None] - n[None, :]).abs() < window
    return torch.where(near, inside, outside)


def self_extend_scores(q: Tensor, k: Tensor, inv_freq: Tensor, *, group_size: int,
                       neighbor_window: int, query_positions=None, key_positions=None,
                       layout: str = "half", query_shift: str = "floor") -> Tensor:
    """Self-Extend's attention scores, in two passes merged by a mask.

    As datamllab/LongLM does: the neighbour pass is plain RoPE; the group pass
    rotates queries to ``⌊m/G⌋ + w - ⌊w/G⌋`` (``query_shift="floor"``) or
    ``⌊m/G⌋ + w - w/G`` (``"divide"``, LongLM's prefill code; see
    :func:`self_extend_relative_positions`) and keys to ``⌊n/G⌋``. Entry
    ``(m, n)`` comes from the neighbour pass where ``m - n < w``. Not scaled and
    not masked.

    Returns:
        ``(..., n_q, n_k)`` scores.
    """
    m, n = _check_qk(q, k, inv_freq, query_positions, key_positions)
    g = _validate.positive_int("group_size", group_size)
    w = _validate.positive_int("neighbor_window", neighbor_window)
    neighbour = _pass(q, k, m, n, inv_freq, layout)
    grouped = _pass(q, k, _group_query_positions(m, w, g, query_shift), n // g,
                    inv_freq, layout)
    return torch.where(m[:, None] - n[None, :] < w, neighbour, grouped)


def sink_scores(q: Tensor, k: Tensor, inv_freq: Tensor, *, start_size: int,
                recent_size: int, query_positions=None, key_positions=None,
                layout: str = "half") -> Tensor:
    """Attention scores inside a StreamingLLM cache; ``-inf`` for keys it has evicted.

    Every query sees its own cache (:func:`sink_cache_positions`). Recent
    keys keep their distance, so plain RoPE (pass 1) scores them; the sinks
    are scored with the query moved to its slot in the cache,
    ``m - max(s, m - r + 1) + s``, and the keys at their own positions
    (pass 2). Future keys are ``-inf`` as well. Not scaled.

    Returns:
        ``(..., n_q, n_k)`` scores.
    """
    m, n = _check_qk(q, k, inv_freq, query_positions, key_positions)
    s = _validate.nonnegative_int("start_size", start_size)
    r = _validate.positive_int("recent_size", recent_size)
    first_recent = torch.clamp(m - r + 1, min=s)
    recent = _pass(q, k, m, n, inv_freq, layout)
    sinks = _pass(q, k, m - first_recent + s, n, inv_freq, layout)
    visible = n[None, :] <= m[:, None]
    is_recent = visible & (n[None, :] >= first_recent[:, None])
    is_sink = visible & (n[None, :] < s) & ~is_recent
    scores = torch.where(is_recent, recent, sinks)
    return scores.masked_fill(~(is_recent | is_sink), float("-inf"))
