"""Relative position encodings and the score biases that grew out of them.

Shaw et al. (2018) with three implementations of the same numbers (a gather,
a projection, and the skewing of Huang et al., 2018), T5's buckets,
Transformer-XL, DeBERTa's disentangled attention, TUPE's untied positions,
and the biases that generalise T5 and ALiBi: Kerple's kernels, FIRE and
CoPE. All enter attention through the hooks of :mod:`posenc_lib.attention`,
as a ``score_bias`` (and, for Shaw et al., a ``value_term``), so attention
itself does not change.

Sign convention: the *relative position* of key ``j`` seen from query ``i`` is
``j - i`` (key minus query), as in Shaw et al. and in T5's
``memory_position - query_position``. Transformer-XL and DeBERTa index their
tables by the *distance* ``i - j`` (query minus key) instead; their functions
say so.

Positions follow :func:`~posenc_lib.attention.causal_mask`: with ``n_k``
keys and ``n_q <= n_k`` queries, key ``j`` sits at position ``j`` and query
``i`` at ``n_k - n_q + i`` (the queries are the last positions, as after a
memory or a key-value cache).
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import torch
from torch import Tensor, nn

from . import _validate, absolute

__all__ = [
    "relative_positions",
    "shaw_labels",
    "shaw_attainable_weight",
    "SHAW_IMPLEMENTATIONS",
    "ShawRelativePosition",
    "t5_bucket",
    "BucketRange",
    "t5_bucket_ranges",
    "T5RelativeBias",
    "transformer_xl_embedding",
    "rel_shift",
    "TransformerXLRelativePosition",
    "deberta_relative_index",
    "DisentangledRelativePosition",
    "UntiedPositionBias",
    "KERPLE_KERNELS",
    "kerple_bias",
    "fire_normalized_distance",
    "fire_bias",
    "FIREBias",
    "cope_positions",
    "ContextualPosition",
]


def _lengths(n_q, n_k) -> tuple[int, int]:
    n_q = _validate.positive_int("n_q", n_q)
    n_k = n_q if n_k is None else _validate.positive_int("n_k", n_k)
    if n_k < n_q:
        raise ValueError(f"n_k must be >= n_q (the queries are the last n_q of the "
                         f"n_k positions), got n_k={n_k}, n_q={n_q}")
    return n_q, n_k


def _integer_tensor(name: str, value) -> Tensor:
    value = torch.as_tensor(value)
    if value.is_floating_point() or value.is_complex() or value.dtype == torch.bool:
        raise ValueError(f"{name} must hold integers, got {value.dtype}")
    return value.to(torch.int64)


def relative_positions(n_q: int, n_k: int | None = None, *, device=None) -> Tensor:
    """The matrix of relative positions ``j - i`` (key minus query).

    Query ``i`` sits at position ``n_k - n_q + i`` and key ``j`` at ``j``.

    Returns:
        ``(n_q, n_k)`` int64 tensor.
    """
    n_q, n_k = _lengths(n_q, n_k)
    query = torch.arange(n_q, device=device) + (n_k - n_q)
    key = torch.arange(n_k, device=device)
    return key[None, :] - query[:, None]


# -- Shaw et al. (2018) ---------------------------------------------------------------

def shaw_labels(relative_position: Tensor, max_relative_position: int) -> Tensor:
    """Row of the ``2κ + 1`` Shaw tables used for each relative position.

    ``clip(j - i, -κ, κ) + κ`` with ``κ = max_relative_position`` (the paper's
    ``k``): label ``κ`` is distance 0, labels ``0`` and ``2κ`` stand for
    "``κ`` or more to the left" and "``κ`` or more to the right".

    Args:
        relative_position: integer tensor of any shape ``S`` (key minus query).
        max_relative_position: the clip distance ``κ >= 0``.

    Returns:
        ``S``-shaped int64 tensor with values in ``[0, 2κ]``.
    """
    k = _validate.nonnegative_int("max_relative_position", max_relative_position)
    _validate.tensor("relative_position", relative_position)
    if relative_position.is_floating_point() or relative_position.is_complex():
        raise ValueError(f"relative_position must be an integer tensor, "
                         f"got {relative_position.dtype}")
    return relative_position.to(torch.int64).clamp(-k, k) + k


def shaw_attainable_weight(n_keys: int, max_relative_position: int) -> Tensor:
    """Largest attention weight that positions alone can give each key.

    Take the last query of a causal sequence of ``n_keys`` tokens whose
    contents are all equal, so only the Shaw term ``q·a^K`` tells keys apart.
    Keys that share a label get the same score, hence the same weight, so no
    table ``a^K`` can give a key more than ``1 / m``, where ``m`` is the number
    of keys sharing its label; a large enough score gets arbitrarily close.

    Returns:
        ``(n_keys,)`` float64 tensor; entry ``δ`` is for the key ``δ``
        positions before the query.
    """
    n_keys = _validate.positive_int("n_keys", n_keys)
    labels = shaw_labels(relative_positions(1, n_keys)[0], max_relative_position)
    multiplicity = torch.bincount(labels)[labels]
    return (1.0 / multiplicity.to(torch.float64)).flip(0)


#: The three ways in which :class:`ShawRelativePosition` computes ``q·a^K``
#: (the same numbers, with different memory; see its docstring).
SHAW_IMPLEMENTATIONS = ("gather", "project", "skew")


class ShawRelativePosition(nn.Module):
    """Learned relative positions on keys and values (Shaw et al., 2018).

    ``e_ij = q_i·(k_j + a^K_ij) / sqrt(d)`` and
    ``z_i = Σ_j α_ij (v_j + a^V_ij)``, with ``a^K_ij`` and ``a^V_ij`` rows of
    two ``(2κ + 1, head_dim)`` tables picked by :func:`shaw_labels`. As in the
    paper, the tables are shared by all heads (and all batch rows) of a layer.

    Use the two methods as hooks of :mod:`posenc_lib.attention`::

        mha(x, score_bias=shaw.score_bias, value_term=shaw.value_term)

    ``implementation`` chooses how ``q·a^K`` is computed; all three give the
    same numbers (up to float rounding), with different extra memory for
    ``n_q`` queries, ``n_k`` keys and head size ``d``:

    * ``"gather"``: gather ``a^K`` for every pair, ``(n_q, n_k, d)``, and
      contract it with ``q``: ``O(n_q n_k d)``, as in the paper's own
      implementation (its Section 3.3).
    * ``"project"``: ``P = q W^Kᵀ``, one score per query and *label*,
      ``(n_q, 2κ + 1)``, then ``P[i, label(i, j)]``: ``O(n_q κ + n_q n_k)``.
    * ``"skew"``: ``q`` against one table row per relative position,
      ``(n_q, n_k + n_q - 1)``, then :func:`rel_shift`, the skewing of Huang
      et al. (2018): ``O((n_k + n_q) d + n_q (n_k + n_q))``.

    The value term uses the gathered ``a^V`` with ``"gather"``; otherwise it
    sums the weights of each label first (``(n_q, 2κ + 1)``), then multiplies
    by the table.

    Args:
        max_relative_position: the clip distance ``κ >= 0`` (the paper's ``k``).
        head_dim: the per-head feature size ``d``.
        implementation: one of :data:`SHAW_IMPLEMENTATIONS`.
        std: standard deviation of the normal initialisation.
        generator: optional ``torch.Generator`` for the initialisation.

    Attributes:
        table_k: ``a^K``, ``(2κ + 1, head_dim)``; row ``κ + r`` is relative
            position ``r``.
        table_v: ``a^V``, same shape.
    """

    def __init__(self, max_relative_position: int, head_dim: int, *,
                 implementation: str = "project", std: float = 0.02,
                 generator: torch.Generator | None = None):
        super().__init__()
        self.max_relative_position = _validate.nonnegative_int(
            "max_relative_position", max_relative_position)
        self.head_dim = _validate.positive_int("head_dim", head_dim)
        _validate.one_of("implementation", implementation, SHAW_IMPLEMENTATIONS)
        self.implementation = implementation
        std = _validate.finite_float("std", std, at_least=0.0)
        n_labels = 2 * self.max_relative_position + 1
        self.table_k = nn.Parameter(torch.empty(n_labels, self.head_dim))
        self.table_v = nn.Parameter(torch.empty(n_labels, self.head_dim))
        for table in (self.table_k, self.table_v):
            nn.init.normal_(table, std=std, generator=generator)

    def labels(self, n_q: int, n_k: int | None = None) -> Tensor:
        """``(n_q, n_k)`` rows of the tables, from :func:`shaw_labels`."""
        positions = relative_positions(n_q, n_k, device=self.table_k.device)
        return shaw_labels(positions, self.max_relative_position)

    def score_bias(self, q: Tensor, k: Tensor) -> Tensor:
        """``q_i·a^K_ij / sqrt(d)``, the position term of the score.

        Args:
            q: ``(..., n_q, head_dim)`` queries, *before* scaling.
            k: ``(..., n_k, head_dim)`` keys (only their number is used).

        Returns:
            ``(..., n_q, n_k)``.
        """
        _validate.tensor("q", q, min_dim=2, last_dim=self.head_dim, floating=True)
        _validate.tensor("k", k, min_dim=2)
        n_q, n_k = _lengths(q.shape[-2], k.shape[-2])
        table = self.table_k.to(q.dtype)
        if self.implementation == "gather":
            a_k = table[self.labels(n_q, n_k)]                     # (n_q, n_k, d)
            bias = torch.einsum("...id,ijd->...ij", q, a_k)
        elif self.implementation == "project":
            per_label = q @ table.T                                # (..., n_q, 2κ+1)
            index = self.labels(n_q, n_k).expand(*per_label.shape[:-1], n_k)
            bias = per_label.gather(-1, index)
        else:  # "skew": one row per relative position -(n_k - 1) .. n_q - 1
            relative = torch.arange(-(n_k - 1), n_q, device=q.device)
            rows = table[shaw_labels(relative, self.max_relative_position)]
            # Columns by distance i - j, from n_k - 1 down to -(n_q - 1).
            bias = rel_shift(q @ rows.T)[..., :n_k]
        return bias / math.sqrt(self.head_dim)

    def value_term(self, weights: Tensor) -> Tensor:
        """``Σ_j α_ij a^V_ij``, the position term of the output.

        Args:
            weights: ``(..., n_q, n_k)`` attention weights ``α``.

        Returns:
            ``(..., n_q, head_dim)``.
        """
        _validate.tensor("weights", weights, min_dim=2, floating=True)
        labels = self.labels(*weights.shape[-2:])
        table = self.table_v.to(weights.dtype)
        if self.implementation == "gather":
            return torch.einsum("...ij,ijd->...id", weights, table[labels])
        per_label = weights.new_zeros(*weights.shape[:-1], table.shape[0])
        per_label.scatter_add_(-1, labels.expand_as(weights), weights)
        return per_label @ table

    def extra_repr(self) -> str:
        return (f"max_relative_position={self.max_relative_position}, "
                f"head_dim={self.head_dim}, implementation={self.implementation!r}")


# -- T5 buckets ---------------------------------------------------------------------

def _check_t5(bidirectional, num_buckets, max_distance) -> tuple[bool, int, int]:
    if not isinstance(bidirectional, bool):
        raise ValueError(f"bidirectional must be a bool, got {bidirectional!r}")
    num_buckets = _validate.positive_int("num_buckets", num_buckets, minimum=2)
    if bidirectional and num_buckets < 4:
        raise ValueError(f"num_buckets must be >= 4 when bidirectional (each direction "
                         f"needs at least one exact bucket), got {num_buckets}")
    max_distance = _validate.positive_int("max_distance", max_distance)
    max_exact = (num_buckets // 2 if bidirectional else num_buckets) // 2
    if not max_distance > max_exact:
        raise ValueError(f"max_distance must be > {max_exact}, the distance where the "
                         f"exact buckets end for num_buckets={num_buckets}, "
                         f"bidirectional={bidirectional}; got {max_distance} (T5's "
                         f"logarithm of max_distance/{max_exact} would be <= 0)")
    return bidirectional, num_buckets, max_distance


def t5_bucket(relative_position, bidirectional: bool = True, num_buckets: int = 32,
              max_distance: int = 128) -> Tensor:
    """T5's bucket of each relative position (key minus query).

    The same arithmetic as transformers' ``T5Attention._relative_position_bucket``,
    including its float32 logarithm, so the buckets agree exactly.

    Args:
        relative_position: integer tensor (or sequence) of any shape ``S``.
        bidirectional: keys on both sides (T5's encoder), or causal (decoder:
            every key on the right shares bucket 0 with distance 0).
        num_buckets: ``>= 2`` (``>= 4`` if bidirectional).
        max_distance: must exceed where the exact buckets end,
            ``num_buckets // 2`` (per direction) ``// 2``.

    Returns:
        ``S``-shaped int64 tensor with values in ``[0, num_buckets)``.
    """
    bidirectional, num_buckets, max_distance = _check_t5(
        bidirectional, num_buckets, max_distance)
    relative_position = _integer_tensor("relative_position", relative_position)
    buckets = torch.zeros_like(relative_position)
    if bidirectional:  # half the buckets for each side
        num_buckets //= 2
        buckets += (relative_position > 0).to(torch.int64) * num_buckets
        distance = relative_position.abs()
    else:
        distance = (-relative_position).clamp_min(0)
    max_exact = num_buckets // 2  # distances 0 .. max_exact - 1 get their own bucket
    is_small = distance < max_exact
    # T5's float32 expression. The clamp only avoids log(0) in entries that
    # torch.where discards; it changes no kept value.
    scaled = distance.clamp_min(max_exact).float() / max_exact
    log_ratio = torch.log(scaled) / math.log(max_distance / max_exact)
    if_large = max_exact + (log_ratio * (num_buckets - max_exact)).to(torch.int64)
    if_large = if_large.clamp_max(num_buckets - 1)
    return buckets + torch.where(is_small, distance, if_large)


class BucketRange(NamedTuple):
    """The relative positions ``first .. last`` (inclusive) that share one bucket.

    ``first`` may be ``-math.inf`` and ``last`` may be ``math.inf`` for the
    open-ended buckets.
    """

    bucket: int
    first: float
    last: float


def _first_distance(bucket: Tensor, bucket_of) -> Tensor:
    """Smallest distance ``n >= 0`` with ``bucket_of(n) >= bucket``, by bisection."""
    lo = torch.zeros_like(bucket)
    hi = torch.ones_like(bucket)
    while bool((bucket_of(hi) < bucket).any()):  # grow until every target is bracketed
        hi = torch.where(bucket_of(hi) < bucket, hi * 2, hi)
    while bool((hi > lo).any()):  # invariant: bucket_of(hi) >= bucket
        mid = (lo + hi) // 2
        reached = bucket_of(mid) >= bucket
        hi = torch.where(reached, mid, hi)
        lo = torch.where(reached, lo, mid + 1)
    return hi


def t5_bucket_ranges(bidirectional: bool = True, num_buckets: int = 32,
                     max_distance: int = 128) -> list[BucketRange]:
    """Which relative positions (key minus query) each T5 bucket covers.

    Computed from :func:`t5_bucket` itself: within one direction the bucket
    never decreases with the distance, so the first distance of every bucket
    is found by bisection. Buckets that no relative position reaches are left
    out; in the bidirectional case bucket ``num_buckets // 2`` is always one
    of them, because distance 0 goes to bucket 0.

    Returns:
        The non-empty buckets in increasing order, as :class:`BucketRange`.
    """
    bidirectional, num_buckets, max_distance = _check_t5(
        bidirectional, num_buckets, max_distance)
    per_side = num_buckets // 2 if bidirectional else num_buckets

    def bucket_left(distance):  # the bucket of relative position -distance
        return t5_bucket(-distance, bidirectional, num_buckets, max_distance)

    starts = _first_distance(torch.arange(per_side), bucket_left).tolist()
    ranges = []
    for b in range(per_side):
        first = starts[b]
        last = starts[b + 1] - 1 if b + 1 < per_side else math.inf
        if last < first:
            continue  # an empty bucket: the next one starts at the same distance
        ranges.append((b, first, last))
    out = []
    for b, first, last in ranges:  # keys to the left of the query
        if b == 0 and not bidirectional:
            out.append(BucketRange(0, -last, math.inf))  # every key on the right, too
        else:
            out.append(BucketRange(b, -last, -first))
    if bidirectional:  # keys to the right; distance 0 stays in bucket 0
        for b, first, last in ranges:
            first = max(first, 1)
            if first <= last:
                out.append(BucketRange(b + per_side, first, last))
    return out


class _LengthBias(nn.Module):
    """A score bias that depends on the lengths only: ``self(n_q, n_k)`` gives
    ``(n_heads, n_q, n_k)``, and :meth:`score_bias` is its attention-hook form."""

    def score_bias(self, q: Tensor, k: Tensor) -> Tensor:
        """Hook form: ``self(n_q, n_k)`` for ``q: (..., n_q, d)``, ``k: (..., n_k, d)``,
        in ``q``'s dtype."""
        _validate.tensor("q", q, min_dim=2)
        _validate.tensor("k", k, min_dim=2)
        return self(q.shape[-2], k.shape[-2]).to(q.dtype)


class T5RelativeBias(_LengthBias):
    """T5's learned scalar bias per (bucket, head), added to the scores.

    T5 computes this bias once, in its first layer, and every layer of the
    stack reuses it: one instance serves the whole stack. T5 does not scale
    its scores by ``1/sqrt(d)``; here the bias is added after the scaling
    that :mod:`posenc_lib.attention` applies, which changes only how large the
    learned values must be.

    Args:
        n_heads: number of heads; each gets its own bias per bucket.
        num_buckets, max_distance, bidirectional: see :func:`t5_bucket`.
        std: standard deviation of the normal initialisation.
        generator: optional ``torch.Generator`` for the initialisation.

    Attributes:
        relative_attention_bias: ``nn.Embedding(num_buckets, n_heads)``, named
            as in transformers' ``T5Attention``.
    """

    def __init__(self, n_heads: int, *, num_buckets: int = 32, max_distance: int = 128,
                 bidirectional: bool = True, std: float = 0.02,
                 generator: torch.Generator | None = None):
        super().__init__()
        self.n_heads = _validate.positive_int("n_heads", n_heads)
        self.bidirectional, self.num_buckets, self.max_distance = _check_t5(
            bidirectional, num_buckets, max_distance)
        std = _validate.finite_float("std", std, at_least=0.0)
        self.relative_attention_bias = nn.Embedding(self.num_buckets, self.n_heads)
        nn.init.normal_(self.relative_attention_bias.weight, std=std,
                        generator=generator)

    def buckets(self, n_q: int, n_k: int | None = None) -> Tensor:
        """``(n_q, n_k)`` bucket of every (query, key) pair."""
        device = self.relative_attention_bias.weight.device
        positions = relative_positions(n_q, n_k, device=device)
        return t5_bucket(positions, self.bidirectional, self.num_buckets,
                         self.max_distance)

    def forward(self, n_q, n_k=None) -> Tensor:
        """The bias for ``n_q`` queries (the last positions) and ``n_k`` keys.

        Args:
            n_q: number of queries, or the queries ``(..., n_q, d)`` themselves.
            n_k: number of keys (default ``n_q``), or the keys ``(..., n_k, d)``.
                Passing tensors is what the ``score_bias`` hook does, so the
                module itself can be given as ``score_bias``.

        Returns:
            ``(n_heads, n_q, n_k)``: compute it once and pass it as
            ``score_bias`` to every layer.
        """
        if isinstance(n_q, Tensor) or isinstance(n_k, Tensor):
            return self.score_bias(n_q, n_k)
        return self.relative_attention_bias(self.buckets(n_q, n_k)).permute(2, 0, 1)

    def extra_repr(self) -> str:
        return (f"n_heads={self.n_heads}, num_buckets={self.num_buckets}, "
                f"max_distance={self.max_distance}, bidirectional={self.bidirectional}")


# -- Transformer-XL -----------------------------------------------------------------

def transformer_xl_embedding(distances, d_model: int, base: float = 10000.0, *,
                             dtype: torch.dtype | None = None) -> Tensor:
    """Transformer-XL's sinusoid ``R`` of each distance ``i - j`` (query minus key).

    ``R[..., :d/2] = sin(distance·ω)`` and ``R[..., d/2:] = cos(distance·ω)``
    with ``ω_i = base**(-2i/d)``: the halves are concatenated, as in
    Transformer-XL's code, not interleaved as in
    :func:`~posenc_lib.absolute.sinusoidal_rows`. A learned linear map
    follows, so the order does not matter to the model.

    Args:
        distances: any shape ``S`` (a tensor or a sequence).

    Returns:
        ``(*S, d_model)`` tensor.
    """
    rows = absolute.sinusoidal_rows(distances, d_model, base, dtype=dtype)
    return torch.cat([rows[..., 0::2], rows[..., 1::2]], dim=-1)


def rel_shift(x: Tensor) -> Tensor:
    """Pad a zero column, re-read the memory one row longer, drop the first row.

    The "skewing" of Huang et al. (2018), which Transformer-XL calls its
    relative shift. If column ``c`` of ``x`` holds distance ``n_r - 1 - c``
    (largest first), entry ``[i, j]`` of the result holds distance
    ``i + n_r - n_q - j``: ``out[..., i, j] = x[..., i, j + n_q - 1 - i]``
    for ``j <= n_r - n_q + i``. The next entry is the padded 0, and any later
    ones come from row ``i + 1``.

    Args:
        x: ``(..., n_q, n_r)`` with ``n_r >= n_q``.

    Returns:
        ``(..., n_q, n_r)``.
    """
    _validate.tensor("x", x, min_dim=2)
    *batch, n_q, n_r = x.shape
    if n_r < n_q:
        raise ValueError(f"x must have at least as many columns as rows, got shape "
                         f"{tuple(x.shape)}")
    padded = torch.cat([x.new_zeros(*batch, n_q, 1), x], dim=-1)  # (..., n_q, n_r + 1)
    padded = padded.view(*batch, n_r + 1, n_q)                    # same memory, re-cut
    return padded[..., 1:, :].reshape(*batch, n_q, n_r)


class TransformerXLRelativePosition(nn.Module):
    """Transformer-XL's relative attention score, as a score-bias hook.

    The score of query ``i`` (at position ``i'``) and key ``j`` is
    ``(q_i + u)·k_j + (q_i + v)·W_R R_{i'-j}``, scaled by ``1/sqrt(d)``, with
    the paper's global biases ``u`` (content) and ``v`` (position): the four
    terms (a) ``q·k``, (b) ``q·W_R R``, (c) ``u·k``, (d) ``v·W_R R``.
    Attention computes (a); :meth:`score_bias` returns the rest, (b) + (c) +
    (d), already scaled, computed with :func:`rel_shift`.

    Args:
        d_model: width of the sinusoid ``R`` (the model width).
        n_heads: number of heads.
        head_dim: per-head size; defaults to ``d_model // n_heads``.
        base: base of the sinusoid.
        bidirectional: if ``False`` (Transformer-XL, causal), ``R`` covers
            the ``n_k`` distances ``n_k - 1 .. 0`` and the bias is meaningful
            only where ``j <= i'`` (use a causal mask). If ``True`` (XLNet),
            ``R`` also covers the negative distances down to ``-(n_q - 1)``,
            and every entry is exact.
        std: standard deviation of the normal initialisation.
        generator: optional ``torch.Generator`` for the initialisation.

    Attributes:
        r_net: ``W_{k,R}``, ``nn.Linear(d_model, n_heads * head_dim, bias=False)``.
        r_w_bias: ``u``, the global content bias, ``(n_heads, head_dim)``.
        r_r_bias: ``v``, the global position bias, ``(n_heads, head_dim)``.
        (The names are those of transformers' Transformer-XL.)
    """

    def __init__(self, d_model: int, n_heads: int, head_dim: int | None = None, *,
                 base: float = 10000.0, bidirectional: bool = False, std: float = 0.02,
                 generator: torch.Generator | None = None):
        super().__init__()
        self.d_model = _validate.even_int("d_model", d_model)
        self.n_heads = _validate.positive_int("n_heads", n_heads)
        if head_dim is None:
            if self.d_model % self.n_heads:
                raise ValueError(f"d_model ({d_model}) must be divisible by n_heads "
                                 f"({n_heads}) unless head_dim is given")
            head_dim = self.d_model // self.n_heads
        self.head_dim = _validate.positive_int("head_dim", head_dim)
        self.base = _validate.finite_float("base", base, greater_than=1.0)
        if not isinstance(bidirectional, bool):
            raise ValueError(f"bidirectional must be a bool, got {bidirectional!r}")
        self.bidirectional = bidirectional
        std = _validate.finite_float("std", std, at_least=0.0)
        self.r_net = nn.Linear(self.d_model, self.n_heads * self.head_dim, bias=False)
        self.r_w_bias = nn.Parameter(torch.empty(self.n_heads, self.head_dim))
        self.r_r_bias = nn.Parameter(torch.empty(self.n_heads, self.head_dim))
        for weight in (self.r_net.weight, self.r_w_bias, self.r_r_bias):
            nn.init.normal_(weight, std=std, generator=generator)

    def distances(self, n_q: int, n_k: int | None = None) -> Tensor:
        """The distances that ``R`` is evaluated at, in Transformer-XL's order.

        Returns:
            ``(n_r,)`` int64: ``n_k - 1, ..., 0`` and, if ``bidirectional``,
            on to ``-(n_q - 1)``.
        """
        n_q, n_k = _lengths(n_q, n_k)
        stop = -n_q if self.bidirectional else -1
        return torch.arange(n_k - 1, stop, -1, device=self.r_w_bias.device)

    def position_keys(self, n_q: int, n_k: int | None = None) -> Tensor:
        """``W_R R`` for every distance of :meth:`distances`, split by head.

        Returns:
            ``(n_heads, n_r, head_dim)``.
        """
        r = transformer_xl_embedding(self.distances(n_q, n_k), self.d_model, self.base,
                                     dtype=self.r_net.weight.dtype)
        return self.r_net(r).view(-1, self.n_heads, self.head_dim).transpose(0, 1)

    def _check(self, q: Tensor, k: Tensor) -> None:
        _validate.tensor("q", q, min_dim=3, last_dim=self.head_dim, floating=True)
        _validate.tensor("k", k, min_dim=3, last_dim=self.head_dim, floating=True)
        if q.shape[-3] != self.n_heads or k.shape[-3] != self.n_heads:
            raise ValueError(f"q and k must be (..., n_heads={self.n_heads}, n, "
                             f"{self.head_dim}), got {tuple(q.shape)} and "
                             f"{tuple(k.shape)}")

    def score_bias(self, q: Tensor, k: Tensor) -> Tensor:
        """Terms (b) + (c) + (d), divided by ``sqrt(head_dim)``, via :func:`rel_shift`.

        Args:
            q: ``(..., n_heads, n_q, head_dim)`` queries, before scaling.
            k: ``(..., n_heads, n_k, head_dim)`` keys.

        Returns:
            ``(..., n_heads, n_q, n_k)``.
        """
        self._check(q, k)
        n_q, n_k = q.shape[-2], k.shape[-2]
        r = self.position_keys(n_q, n_k).to(q.dtype)                 # (h, n_r, d)
        bd = (q + self.r_r_bias.to(q.dtype)[:, None, :]) @ r.transpose(-1, -2)
        bd = rel_shift(bd)[..., :n_k]                                 # (b) + (d)
        c = self.r_w_bias.to(k.dtype)[:, None, :] @ k.transpose(-1, -2)  # (c)
        return (bd + c) / math.sqrt(self.head_dim)

    def terms(self, q: Tensor, k: Tensor) -> dict[str, Tensor]:
        """The four terms, each on its own, with ``R`` gathered at every ``i' - j``.

        No shift trick: a way to look at each term, at the cost of an
        ``(n_q, n_k, d_model)`` gather. The terms are not scaled.

        Returns:
            ``{"a": q·k, "b": q·W_R R, "c": u·k, "d": v·W_R R}``, each
            ``(..., n_heads, n_q, n_k)``.
        """
        self._check(q, k)
        n_q, n_k = q.shape[-2], k.shape[-2]
        distance = -relative_positions(n_q, n_k, device=q.device)      # i' - j
        r = transformer_xl_embedding(distance, self.d_model, self.base, dtype=q.dtype)
        w_r = self.r_net.weight.to(q.dtype).view(self.n_heads, self.head_dim,
                                                 self.d_model)
        r_heads = torch.einsum("hdm,ijm->hijd", w_r, r)              # W_R R_{i'-j}
        u, v = self.r_w_bias.to(q.dtype), self.r_r_bias.to(q.dtype)
        return {
            "a": q @ k.transpose(-1, -2),
            "b": torch.einsum("...hid,hijd->...hij", q, r_heads),
            "c": torch.einsum("hd,...hjd->...hj", u, k).unsqueeze(-2).expand(
                *k.shape[:-2], n_q, n_k),
            "d": torch.einsum("hd,hijd->hij", v, r_heads).expand(
                *q.shape[:-3], -1, -1, -1),
        }

    def extra_repr(self) -> str:
        return (f"d_model={self.d_model}, n_heads={self.n_heads}, "
                f"head_dim={self.head_dim}, base={self.base:g}, "
                f"bidirectional={self.bidirectional}")


def _init_normal(module: nn.Module, std: float, generator) -> None:
    for weight in module.parameters():
        nn.init.normal_(weight, std=std, generator=generator)


def _check_heads_qk(q: Tensor, k: Tensor, n_heads: int, head_dim: int) -> None:
    _validate.tensor("q", q, min_dim=3, last_dim=head_dim, floating=True)
    _validate.tensor("k", k, min_dim=3, last_dim=head_dim, floating=True)
    if q.shape[-3] != n_heads or k.shape[-3] != n_heads:
        raise ValueError(f"q and k must be (..., n_heads={n_heads}, n, {head_dim}), "
                         f"got {tuple(q.shape)} and {tuple(k.shape)}")
    _lengths(q.shape[-2], k.shape[-2])


# -- DeBERTa's disentangled attention --------------------------------------------------

def deberta_relative_index(relative_position, max_relative_positions: int) -> Tensor:
    """DeBERTa's ``δ``: the row of the ``2κ``-row position table of each pair.

    ``δ = clamp(i - j + κ, 0, 2κ - 1)`` with ``κ = max_relative_positions``:
    DeBERTa counts query minus key, the opposite of this module's ``j - i``,
    so ``δ = clamp(κ - relative_position, 0, 2κ - 1)``.

    Args:
        relative_position: integer tensor of any shape ``S`` (key minus query).
        max_relative_positions: ``κ >= 1`` (transformers' name).

    Returns:
        ``S``-shaped int64 tensor with values in ``[0, 2κ)``.
    """
    k = _validate.positive_int("max_relative_positions", max_relative_positions)
    relative_position = _integer_tensor("relative_position", relative_position)
    return (k - relative_position).clamp(0, 2 * k - 1)


class DisentangledRelativePosition(nn.Module):
    """DeBERTa's content-to-position and position-to-content terms (He et al., 2021).

    ``c2p_ij = q_i·K^r_δ`` and ``p2c_ij = k_j·Q^r_δ``, with ``δ`` from
    :func:`deberta_relative_index` for both, as in transformers'
    ``DisentangledSelfAttention`` (the paper's Eq. 4 writes ``δ(j, i)`` for
    p2c). DeBERTa divides all three terms, ``q·k`` included, by
    ``sqrt(3 d)``: :meth:`score_bias` returns ``(c2p + p2c) / sqrt(3 d)``, so
    call attention with ``scale = 1 / sqrt(3 d)``.

    DeBERTa projects one table of relative embeddings, shared by all layers,
    with each layer's ``pos_key_proj`` and ``pos_query_proj``; here the
    projected tables of one layer are the parameters.

    Args:
        max_relative_positions: ``κ``; the tables have ``2κ`` rows.
        n_heads: number of heads.
        head_dim: per-head size ``d``.
        std: standard deviation of the normal initialisation.
        generator: optional ``torch.Generator`` for the initialisation.

    Attributes:
        pos_key: ``K^r``, ``(n_heads, 2κ, head_dim)``.
        pos_query: ``Q^r``, ``(n_heads, 2κ, head_dim)``.
    """

    def __init__(self, max_relative_positions: int, n_heads: int, head_dim: int, *,
                 std: float = 0.02, generator: torch.Generator | None = None):
        super().__init__()
        self.max_relative_positions = _validate.positive_int(
            "max_relative_positions", max_relative_positions)
        self.n_heads = _validate.positive_int("n_heads", n_heads)
        self.head_dim = _validate.positive_int("head_dim", head_dim)
        std = _validate.finite_float("std", std, at_least=0.0)
        rows = 2 * self.max_relative_positions
        self.pos_key = nn.Parameter(torch.empty(self.n_heads, rows, self.head_dim))
        self.pos_query = nn.Parameter(torch.empty(self.n_heads, rows, self.head_dim))
        _init_normal(self, std, generator)

    def index(self, n_q: int, n_k: int | None = None) -> Tensor:
        """``(n_q, n_k)`` table row ``δ`` of every pair."""
        positions = relative_positions(n_q, n_k, device=self.pos_key.device)
        return deberta_relative_index(positions, self.max_relative_positions)

    def terms(self, q: Tensor, k: Tensor) -> dict[str, Tensor]:
        """``{"c2p": ..., "p2c": ...}``, unscaled, each ``(..., n_heads, n_q, n_k)``.

        Args:
            q: ``(..., n_heads, n_q, head_dim)``; k: ``(..., n_heads, n_k, head_dim)``.
        """
        _check_heads_qk(q, k, self.n_heads, self.head_dim)
        n_q, n_k = q.shape[-2], k.shape[-2]
        delta = self.index(n_q, n_k)
        per_query = q @ self.pos_key.to(q.dtype).transpose(-1, -2)   # (..., n_q, 2κ)
        c2p = per_query.gather(-1, delta.expand(*per_query.shape[:-1], n_k))
        per_key = k @ self.pos_query.to(k.dtype).transpose(-1, -2)   # (..., n_k, 2κ)
        p2c = per_key.gather(-1, delta.T.expand(*per_key.shape[:-1], n_q))
        return {"c2p": c2p, "p2c": p2c.transpose(-1, -2)}

    def score_bias(self, q: Tensor, k: Tensor) -> Tensor:
        """``(c2p + p2c) / sqrt(3 d)``, ``(..., n_heads, n_q, n_k)``."""
        terms = self.terms(q, k)
        return (terms["c2p"] + terms["p2c"]) / math.sqrt(3 * self.head_dim)

    def extra_repr(self) -> str:
        return (f"max_relative_positions={self.max_relative_positions}, "
                f"n_heads={self.n_heads}, head_dim={self.head_dim}")


# -- TUPE: untied positional encoding --------------------------------------------------

class UntiedPositionBias(_LengthBias):
    """TUPE-A's position term (Ke et al., 2021): positions never meet words.

    ``(p_i U^Q)·(p_j U^K) / sqrt(2 d)`` per head, from one table of absolute
    embeddings ``p`` shared by all heads, with per-head projections ``U^Q``
    and ``U^K``. TUPE shares ``U^Q`` and ``U^K`` by all layers, so the term
    is computed once per sequence. With ``reset_cls``, row 0 (from ``[CLS]``)
    is replaced by a learned ``θ_1`` and the rest of column 0 (to ``[CLS]``)
    by ``θ_2``, per head. TUPE divides the content term by ``sqrt(2 d)``
    too: call attention with ``scale = 1 / sqrt(2 d)``.

    Args:
        max_position_embeddings: rows of the table ``p``.
        d_model: width of ``p``.
        n_heads: number of heads.
        head_dim: per-head size ``d``; defaults to ``d_model // n_heads``.
        reset_cls: untie position 0 as TUPE does for ``[CLS]``.
        std: standard deviation of the normal initialisation.
        generator: optional ``torch.Generator`` for the initialisation.

    Attributes:
        position_embeddings: ``p``, ``(max_position_embeddings, d_model)``.
        u_q, u_k: ``nn.Linear(d_model, n_heads * head_dim, bias=False)``.
        cls_theta: ``(n_heads, 2)``: ``θ_1`` and ``θ_2`` of every head.
    """

    def __init__(self, max_position_embeddings: int, d_model: int, n_heads: int,
                 head_dim: int | None = None, *, reset_cls: bool = True,
                 std: float = 0.02, generator: torch.Generator | None = None):
        super().__init__()
        self.max_position_embeddings = _validate.positive_int(
            "max_position_embeddings", max_position_embeddings)
        self.d_model = _validate.positive_int("d_model", d_model)
        self.n_heads = _validate.positive_int("n_heads", n_heads)
        if head_dim is None:
            if self.d_model % self.n_heads:
                raise ValueError(f"d_model ({d_model}) must be divisible by n_heads "
                                 f"({n_heads}) unless head_dim is given")
            head_dim = self.d_model // self.n_heads
        self.head_dim = _validate.positive_int("head_dim", head_dim)
        if not isinstance(reset_cls, bool):
            raise ValueError(f"reset_cls must be a bool, got {reset_cls!r}")
        self.reset_cls = reset_cls
        std = _validate.finite_float("std", std, at_least=0.0)
        self.position_embeddings = nn.Parameter(
            torch.empty(self.max_position_embeddings, self.d_model))
        self.u_q = nn.Linear(self.d_model, self.n_heads * self.head_dim, bias=False)
        self.u_k = nn.Linear(self.d_model, self.n_heads * self.head_dim, bias=False)
        self.cls_theta = nn.Parameter(torch.empty(self.n_heads, 2))
        _init_normal(self, std, generator)

    def forward(self, n_q, n_k=None) -> Tensor:
        """The position term for ``n_q`` queries (the last positions) and ``n_k`` keys.

        ``n_q`` and ``n_k`` may also be the query and key tensors (hook form).

        Returns:
            ``(n_heads, n_q, n_k)``.
        """
        if isinstance(n_q, Tensor) or isinstance(n_k, Tensor):
            return self.score_bias(n_q, n_k)
        n_q, n_k = _lengths(n_q, n_k)
        if n_k > self.max_position_embeddings:
            raise ValueError(f"n_k must be <= max_position_embeddings="
                             f"{self.max_position_embeddings}, got {n_k}")
        p = self.position_embeddings[:n_k]
        keys = self.u_k(p).view(n_k, self.n_heads, self.head_dim).transpose(0, 1)
        queries = self.u_q(p[n_k - n_q:]).view(n_q, self.n_heads, self.head_dim)
        bias = queries.transpose(0, 1) @ keys.transpose(-1, -2)
        bias = bias / math.sqrt(2 * self.head_dim)                   # (h, n_q, n_k)
        if self.reset_cls:
            is_cls_row = (torch.arange(n_q, device=bias.device) + n_k - n_q == 0)
            theta_1 = self.cls_theta[:, 0, None, None].to(bias.dtype)
            theta_2 = self.cls_theta[:, 1, None, None].to(bias.dtype)
            column_0 = torch.zeros(n_k, dtype=torch.bool, device=bias.device)
            column_0[0] = True
            bias = torch.where(column_0[None, None, :] & ~is_cls_row[None, :, None],
                               theta_2, bias)
            bias = torch.where(is_cls_row[None, :, None], theta_1, bias)
        return bias

    def extra_repr(self) -> str:
        return (f"max_position_embeddings={self.max_position_embeddings}, "
                f"d_model={self.d_model}, n_heads={self.n_heads}, "
                f"head_dim={self.head_dim}, reset_cls={self.reset_cls}")


# -- Kerple, FIRE and CoPE: biases that generalise T5 and ALiBi ------------------------

def _positive_per_head(name: str, value) -> Tensor:
    """A float, a sequence or a 1-D tensor of positive finite values -> ``(n,)``."""
    if isinstance(value, Tensor):
        tensor = value
        if not tensor.is_floating_point():
            tensor = tensor.to(torch.get_default_dtype())
    else:
        try:
            tensor = torch.as_tensor(value, dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError):
            raise ValueError(f"{name} must be a positive number or a sequence of them, "
                             f"got {value!r}") from None
    if tensor.dim() > 1 or tensor.numel() == 0:
        raise ValueError(f"{name} must be a number or one value per head, got shape "
                         f"{tuple(tensor.shape)}")
    values = tensor.detach()
    if not bool(torch.isfinite(values).all()) or not bool((values > 0).all()):
        raise ValueError(f"{name} must be positive and finite, got {values.tolist()}")
    return tensor.reshape(-1)


#: Kerple's two kernels, ``-r1·|j - i|^r2`` and ``-r1·log(1 + r2·|j - i|)``.
KERPLE_KERNELS = ("power", "log")


def kerple_bias(r1, r2, n_q: int, n_k: int | None = None, *, kernel: str = "log",
                dtype: torch.dtype | None = None) -> Tensor:
    """Kerple's score bias (Chi et al., 2022), a shifted kernel of the distance.

    ``power``: ``-r1·|j - i|^r2`` with ``0 < r2 <= 2``; ``log``:
    ``-r1·log(1 + r2·|j - i|)``; ``r1, r2 > 0`` per head (the paper's names;
    the reference code's log kernel calls them ``bias_p`` and ``bias_a``).
    ``power`` with ``r2 = 1`` is ALiBi with slope ``r1``
    on the keys ``j <= i``. The bias is symmetric in ``j - i``: use it with a
    causal mask, as Kerple does.

    Args:
        r1, r2: positive numbers, or one per head (``(n_heads,)``; a tensor
            keeps its autograd graph).
        n_q, n_k: queries (the last positions) and keys (default ``n_q``).
        kernel: one of :data:`KERPLE_KERNELS`.
        dtype: result dtype; defaults to ``r1``'s if it is a tensor.

    Returns:
        ``(n_heads, n_q, n_k)``, ``n_heads`` the longer of ``r1`` and ``r2``.
    """
    _validate.one_of("kernel", kernel, KERPLE_KERNELS)
    if dtype is None:
        dtype = r1.dtype if isinstance(r1, Tensor) and r1.is_floating_point() \
            else torch.get_default_dtype()
    dtype = _validate.floating_dtype("dtype", dtype)
    r1 = _positive_per_head("r1", r1).to(dtype)
    r2 = _positive_per_head("r2", r2).to(dtype)
    if r1.numel() != r2.numel() and 1 not in (r1.numel(), r2.numel()):
        raise ValueError(f"r1 and r2 must have one value per head each, got "
                         f"{r1.numel()} and {r2.numel()} values")
    if kernel == "power" and bool((r2.detach() > 2).any()):
        raise ValueError(f"r2 must be <= 2 for the power kernel (beyond 2 the kernel "
                         f"is not conditionally positive definite), got "
                         f"{r2.detach().tolist()}")
    distance = relative_positions(n_q, n_k).abs().to(dtype)     # |j - i|
    r1, r2 = r1[:, None, None], r2[:, None, None]
    if kernel == "power":
        return -r1 * distance ** r2
    return -r1 * torch.log1p(r2 * distance)


def fire_normalized_distance(n_q: int, n_k: int | None = None, *, c=0.1,
                             threshold=512.0, eps: float = 1e-6,
                             dtype: torch.dtype | None = None) -> Tensor:
    """FIRE's input to its MLP: ``ψ(|i' - j|) / (ψ(max(i', L)) + eps)``.

    ``ψ(x) = log(|c·x| + 1)`` and ``L`` the threshold (Li et al., 2024, and
    their reference code, which takes ``|i' - j|`` and adds ``eps``). For a
    query at ``i' <= L`` the normaliser is the constant ``ψ(L)``, so the
    value is a function of the distance alone; beyond ``L`` it is the
    *fraction* of the query's own context, ``ψ(i' - j) / ψ(i')``, which stays
    in ``[0, 1]`` for every causal key ("progressive interpolation").

    Args:
        n_q, n_k: queries (the last positions) and keys (default ``n_q``).
        c: the log transform's scale, ``> 0`` (a tensor keeps its graph).
        threshold: ``L > 0`` (the paper's name; ``init_L·L_multiplier`` in its code).
        eps: added to the normaliser.
        dtype: result dtype; defaults to ``c``'s if it is a tensor.

    Returns:
        ``(n_q, n_k)``.
    """
    n_q, n_k = _lengths(n_q, n_k)
    if dtype is None:
        dtype = c.dtype if isinstance(c, Tensor) and c.is_floating_point() \
            else torch.get_default_dtype()
    dtype = _validate.floating_dtype("dtype", dtype)
    c = _positive_per_head("c", c).to(dtype)[0]
    threshold = _positive_per_head("threshold", threshold).to(dtype)[0]
    eps = _validate.finite_float("eps", eps, at_least=0.0)
    query = (torch.arange(n_q) + (n_k - n_q)).to(dtype)
    distance = relative_positions(n_q, n_k).abs().to(dtype)

    def psi(x):
        return torch.log(torch.abs(c * x) + 1)

    normaliser = psi(torch.maximum(query, threshold)) + eps
    return psi(distance) / normaliser[:, None]


def fire_bias(f: Callable[[Tensor], Tensor], n_q: int, n_k: int | None = None, *,
              c=0.1, threshold=512.0, eps: float = 1e-6,
              dtype: torch.dtype | None = None) -> Tensor:
    """FIRE's bias ``f(normalised distance)`` for any function ``f``.

    Args:
        f: maps ``(n_q, n_k, 1)`` to ``(n_q, n_k, n_heads)``: FIRE's MLP, or
            any other function (the special cases of :class:`FIREBias`).
        n_q, n_k, c, threshold, eps, dtype: see :func:`fire_normalized_distance`.

    Returns:
        ``(n_heads, n_q, n_k)``.
    """
    if not callable(f):
        raise ValueError(f"f must be callable, got {type(f).__name__}")
    x = fire_normalized_distance(n_q, n_k, c=c, threshold=threshold, eps=eps,
                                 dtype=dtype)
    out = f(x[..., None])
    if not isinstance(out, Tensor) or out.shape[:2] != x.shape or out.dim() != 3:
        raise ValueError(f"f must map (n_q, n_k, 1) to (n_q, n_k, n_heads), got "
                         f"{getattr(out, 'shape', type(out).__name__)}")
    return out.permute(2, 0, 1)


class FIREBias(_LengthBias):
    """FIRE (Li et al., 2024): a learned function of a normalised distance.

    ``b(i, j) = f_θ(ψ(|i - j|) / ψ(max(i, L)))`` with ``f_θ`` an MLP
    ``1 -> mlp_width -> n_heads`` (ReLU), ``ψ(x) = log(c·x + 1)``, and
    learnable ``c`` and ``L = |L_multiplier · init_L|``, as in the paper's
    reference code (defaults ``mlp_width=32``, ``init_c=0.1``, ``init_L=512``).
    Use it with a causal mask.

    Args:
        n_heads: number of heads (outputs of the MLP).
        mlp_width: hidden width.
        init_c, init_L: initial ``c`` and ``L``.
        eps: added to the normaliser.
        generator: optional ``torch.Generator``; the MLP's weights are drawn
            from ``N(0, 1/fan_in)``.
    """

    def __init__(self, n_heads: int, *, mlp_width: int = 32, init_c: float = 0.1,
                 init_L: float = 512.0, eps: float = 1e-6,
                 generator: torch.Generator | None = None):
        super().__init__()
        self.n_heads = _validate.positive_int("n_heads", n_heads)
        mlp_width = _validate.positive_int("mlp_width", mlp_width)
        init_c = _validate.finite_float("init_c", init_c, greater_than=0.0)
        init_L = _validate.finite_float("init_L", init_L, greater_than=0.0)
        self.eps = _validate.finite_float("eps", eps, at_least=0.0)
        self.mlp = nn.Sequential(nn.Linear(1, mlp_width), nn.ReLU(),
                                 nn.Linear(mlp_width, self.n_heads))
        for layer in (self.mlp[0], self.mlp[2]):
            std = 1.0 / math.sqrt(layer.in_features)
            nn.init.normal_(layer.weight, std=std, generator=generator)
            nn.init.normal_(layer.bias, std=std, generator=generator)
        self.c = nn.Parameter(torch.tensor(init_c))
        self.register_buffer("init_L", torch.tensor(init_L))
        self.L_multiplier = nn.Parameter(torch.tensor(1.0))

    @property
    def threshold(self) -> Tensor:
        """``L = |L_multiplier · init_L|``."""
        return torch.abs(self.L_multiplier * self.init_L)

    def forward(self, n_q, n_k=None) -> Tensor:
        """``(n_heads, n_q, n_k)``; ``n_q, n_k`` may be the q and k tensors (hook)."""
        if isinstance(n_q, Tensor) or isinstance(n_k, Tensor):
            return self.score_bias(n_q, n_k)
        return fire_bias(self.mlp, n_q, n_k, c=self.c.abs(), threshold=self.threshold,
                         eps=self.eps)

    def extra_repr(self) -> str:
        return f"n_heads={self.n_heads}, mlp_width={self.mlp[0].out_features}"


def cope_positions(gates: Tensor) -> Tensor:
    """CoPE's contextual positions ``p_ij = Σ_{t >= j} g_it`` (Golovneva et al., 2024).

    With the gates of future keys set to 0, this is ``Σ_{t=j}^{i} g_it``: the
    number of "counted" tokens from key ``j`` to the query, inclusive. With
    every gate 1 it is ``i - j + 1``.

    Args:
        gates: ``(..., n_q, n_k)`` values in ``[0, 1]``.

    Returns:
        ``(..., n_q, n_k)``, non-increasing along the keys.
    """
    _validate.tensor("gates", gates, min_dim=1, floating=True)
    return gates.flip(-1).cumsum(-1).flip(-1)


class ContextualPosition(nn.Module):
    """CoPE (Golovneva et al., 2024): positions that count what the gates let through.

    Gates ``g_ij = σ(q_i·k_j / sqrt(d))`` (0 for future keys), positions
    ``p_ij = Σ_{t=j}^{i} g_it`` clamped to ``npos_max - 1``, and the score
    term ``q_i·e[p_ij]`` with ``e`` linearly interpolated between the integer
    rows of a learned table. As in the paper's code, the term is added to the
    already scaled scores, unscaled. Causal attention only.

    Args:
        head_dim: per-head size ``d``.
        npos_max: rows of the table ``e`` (the paper's name).
        std: standard deviation of the initial table; the paper starts from 0.
        generator: optional ``torch.Generator`` for the initialisation.

    Attributes:
        pos_emb: ``e``, ``(npos_max, head_dim)``, shared by the heads.
    """

    def __init__(self, head_dim: int, npos_max: int, *, std: float = 0.0,
                 generator: torch.Generator | None = None):
        super().__init__()
        self.head_dim = _validate.positive_int("head_dim", head_dim)
        self.npos_max = _validate.positive_int("npos_max", npos_max)
        std = _validate.finite_float("std", std, at_least=0.0)
        self.pos_emb = nn.Parameter(torch.zeros(self.npos_max, self.head_dim))
        if std > 0:
            nn.init.normal_(self.pos_emb, std=std, generator=generator)

    def gates(self, q: Tensor, k: Tensor) -> Tensor:
        """``σ(q·k / sqrt(d))`` where ``j <= i'``, else 0: ``(..., n_q, n_k)``."""
        _validate.tensor("q", q, min_dim=2, last_dim=self.head_dim, floating=True)
        _validate.tensor("k", k, min_dim=2, last_dim=self.head_dim, floating=True)
        n_q, n_k = _lengths(q.shape[-2], k.shape[-2])
        logits = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)
        causal = relative_positions(n_q, n_k, device=q.device) <= 0
        return torch.where(causal, torch.sigmoid(logits), torch.zeros_like(logits))

    def positions(self, q: Tensor, k: Tensor) -> Tensor:
        """``p_ij`` clamped to ``npos_max - 1``: ``(..., n_q, n_k)``."""
        return cope_positions(self.gates(q, k)).clamp(max=self.npos_max - 1)

    def score_bias(self, q: Tensor, k: Tensor) -> Tensor:
        """``q_i·e[p_ij]``, interpolated: ``(..., n_q, n_k)``.

        Args:
            q: ``(..., n_q, head_dim)``; k: ``(..., n_k, head_dim)``.
        """
        p = self.positions(q, k)
        floor = p.floor()
        w = p - floor
        per_row = q @ self.pos_emb.to(q.dtype).T                    # (..., n_q, npos)
        at_floor = per_row.gather(-1, floor.long())
        at_ceil = per_row.gather(-1, p.ceil().long())
        return at_ceil * w + at_floor * (1 - w)

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, npos_max={self.npos_max}"
