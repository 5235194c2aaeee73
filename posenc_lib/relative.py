"""Relative position encodings: Shaw et al. (2018), T5 buckets, Transformer-XL.

All three enter attention through the hooks of :mod:`posenc_lib.attention`,
as a ``score_bias`` (and, for Shaw et al., a ``value_term``), so attention
itself does not change.

Sign convention: the *relative position* of key ``j`` seen from query ``i`` is
``j - i`` (key minus query), as in Shaw et al. and in T5's
``memory_position - query_position``. Transformer-XL indexes its sinusoid by
the *distance* ``i - j`` (query minus key) instead; its functions say so.

Positions follow :func:`~posenc_lib.attention.causal_mask`: with ``n_k``
keys and ``n_q <= n_k`` queries, key ``j`` sits at position ``j`` and query
``i`` at ``n_k - n_q + i`` (the queries are the last positions, as after a
memory or a key-value cache).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor, nn

from . import _validate, absolute

__all__ = [
    "relative_positions",
    "shaw_labels",
    "shaw_attainable_weight",
    "ShawRelativePosition",
    "t5_bucket",
    "BucketRange",
    "t5_bucket_ranges",
    "T5RelativeBias",
    "transformer_xl_embedding",
    "rel_shift",
    "TransformerXLRelativePosition",
]


def _lengths(n_q, n_k) -> tuple[int, int]:
    n_q = _validate.positive_int("n_q", n_q)
    n_k = n_q if n_k is None else _validate.positive_int("n_k", n_k)
    if n_k < n_q:
        raise ValueError(f"n_k must be >= n_q (the queries are the last n_q of the n_k "
                         f"positions), got n_k={n_k}, n_q={n_q}")
    return n_q, n_k


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
    """Row of the ``2k + 1`` Shaw tables used for each relative position.

    ``clip(j - i, -k, k) + k`` with ``k = max_relative_position``: label ``k``
    is distance 0, labels ``0`` and ``2k`` stand for "``k`` or more to the left"
    and "``k`` or more to the right".

    Args:
        relative_position: integer tensor of any shape ``S`` (key minus query).
        max_relative_position: the clip distance ``k >= 0``.

    Returns:
        ``S``-shaped int64 tensor with values in ``[0, 2k]``.
    """
    k = _validate.positive_int("max_relative_position", max_relative_position, minimum=0)
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
    A key at distance ``d < k`` has a label of its own (``m = 1``); all keys
    at distance ``>= k`` share one label.

    Returns:
        ``(n_keys,)`` float64 tensor; entry ``d`` is for the key ``d``
        positions before the query.
    """
    n_keys = _validate.positive_int("n_keys", n_keys)
    labels = shaw_labels(relative_positions(1, n_keys)[0], max_relative_position)
    multiplicity = torch.bincount(labels)[labels]
    return (1.0 / multiplicity.to(torch.float64)).flip(0)


class ShawRelativePosition(nn.Module):
    """Learned relative positions on keys and values (Shaw et al., 2018).

    ``e_ij = q_i·(k_j + a^K_ij) / sqrt(d)`` and
    ``z_i = Σ_j α_ij (v_j + a^V_ij)``, with ``a^K_ij`` and ``a^V_ij`` rows of
    two ``(2k + 1, head_dim)`` tables picked by :func:`shaw_labels`. As in the
    paper, the tables are shared by all heads (and all batch rows) of a layer.

    Use the two methods as hooks of :mod:`posenc_lib.attention`::

        mha(x, score_bias=shaw.score_bias, value_term=shaw.value_term)

    Args:
        max_relative_position: the clip distance ``k >= 0``.
        head_dim: the per-head feature size ``d``.
        std: standard deviation of the normal initialisation.
        generator: optional ``torch.Generator`` for the initialisation.

    Attributes:
        table_k: ``a^K``, ``(2k + 1, head_dim)``; row ``k + r`` is relative position ``r``.
        table_v: ``a^V``, same shape.
    """

    def __init__(self, max_relative_position: int, head_dim: int, *, std: float = 0.02,
                 generator: torch.Generator | None = None):
        super().__init__()
        self.max_relative_position = _validate.positive_int(
            "max_relative_position", max_relative_position, minimum=0)
        self.head_dim = _validate.positive_int("head_dim", head_dim)
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
        a_k = self.table_k.to(q.dtype)[self.labels(q.shape[-2], k.shape[-2])]  # (n_q, n_k, d)
        return torch.einsum("...id,ijd->...ij", q, a_k) / math.sqrt(self.head_dim)

    def value_term(self, weights: Tensor) -> Tensor:
        """``Σ_j α_ij a^V_ij``, the position term of the output.

        Args:
            weights: ``(..., n_q, n_k)`` attention weights ``α``.

        Returns:
            ``(..., n_q, head_dim)``.
        """
        _validate.tensor("weights", weights, min_dim=2, floating=True)
        a_v = self.table_v.to(weights.dtype)[self.labels(*weights.shape[-2:])]
        return torch.einsum("...ij,ijd->...id", weights, a_v)

    def extra_repr(self) -> str:
        return f"max_relative_position={self.max_relative_position}, head_dim={self.head_dim}"


# -- T5 buckets ---------------------------------------------------------------------

def _check_t5(bidirectional, num_buckets, max_distance) -> tuple[bool, int, int]:
    if not isinstance(bidirectional, bool):
        raise ValueError(f"bidirectional must be a bool, got {bidirectional!r}")
    num_buckets = _validate.positive_int("num_buckets", num_buckets, minimum=2)
    if bidirectional and num_buckets < 4:
        raise ValueError(f"num_buckets must be >= 4 when bidirectional (each direction "
                         f"needs at least one exact bucket), got {num_buckets}")
    max_distance = _validate.positive_int("max_distance", max_distance)
    if not max_distance > num_buckets / 2:
        raise ValueError(f"max_distance must be > num_buckets/2 = {num_buckets / 2:g}, "
                         f"got {max_distance}")
    return bidirectional, num_buckets, max_distance


def t5_bucket(relative_position, bidirectional: bool = True, num_buckets: int = 32,
              max_distance: int = 128) -> Tensor:
    """T5's bucket of each relative position (key minus query).

    The same arithmetic as T5's ``_relative_position_bucket`` (Mesh TensorFlow,
    transformers), including its float32 logarithm, so the buckets agree
    exactly. With ``n = num_buckets`` (halved if ``bidirectional``, the upper
    half then holding keys to the right of the query) and ``n/2`` exact
    buckets per direction:

    * distances ``0 .. n/2 - 1`` each get their own bucket;
    * larger distances get ``n/2`` logarithmically wider buckets, up to
      ``max_distance``;
    * every distance from there on shares the last bucket (which starts
      *before* ``max_distance``; see :func:`t5_bucket_ranges`).

    In the causal case (``bidirectional=False``) keys to the right of the
    query (positive relative positions) all fall into bucket 0, with distance 0.

    Args:
        relative_position: integer tensor (or sequence) of any shape ``S``.
        bidirectional: whether keys may lie on both sides (T5's encoder) or
            only on the left (T5's decoder).
        num_buckets: number of buckets, ``>= 2`` (``>= 4`` if bidirectional).
        max_distance: distance where the last bucket is reached at the latest;
            must be ``> num_buckets/2``.

    Returns:
        ``S``-shaped int64 tensor with values in ``[0, num_buckets)``.
    """
    bidirectional, num_buckets, max_distance = _check_t5(bidirectional, num_buckets,
                                                         max_distance)
    relative_position = torch.as_tensor(relative_position)
    if relative_position.is_floating_point() or relative_position.is_complex() \
            or relative_position.dtype == torch.bool:
        raise ValueError(f"relative_position must hold integers, got {relative_position.dtype}")
    relative_position = relative_position.to(torch.int64)
    buckets = torch.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        buckets += (relative_position > 0).to(torch.int64) * num_buckets
        distance = relative_position.abs()
    else:
        distance = (-relative_position).clamp_min(0)
    max_exact = num_buckets // 2
    is_small = distance < max_exact
    # Exactly T5's float32 expression. The clamp only avoids log(0) in entries
    # that torch.where discards; it changes no kept value.
    scaled = distance.clamp_min(max_exact).float() / max_exact
    if_large = max_exact + (torch.log(scaled) / math.log(max_distance / max_exact)
                            * (num_buckets - max_exact)).to(torch.int64)
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
    bidirectional, num_buckets, max_distance = _check_t5(bidirectional, num_buckets,
                                                         max_distance)
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


class T5RelativeBias(nn.Module):
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
        nn.init.normal_(self.relative_attention_bias.weight, std=std, generator=generator)

    def buckets(self, n_q: int, n_k: int | None = None) -> Tensor:
        """``(n_q, n_k)`` bucket of every (query, key) pair."""
        positions = relative_positions(n_q, n_k, device=self.relative_attention_bias.weight.device)
        return t5_bucket(positions, self.bidirectional, self.num_buckets, self.max_distance)

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

    def score_bias(self, q: Tensor, k: Tensor) -> Tensor:
        """The hook form: ``self(n_q, n_k)`` for ``q: (..., n_q, d)``, ``k: (..., n_k, d)``."""
        _validate.tensor("q", q, min_dim=2)
        _validate.tensor("k", k, min_dim=2)
        return self(q.shape[-2], k.shape[-2])

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
    :func:`~posenc_lib.absolute.sinusoidal_rows` (whose columns these are,
    reordered). A learned linear map follows, so the order does not matter
    to the model.

    Args:
        distances: any shape ``S`` (a tensor or a sequence).

    Returns:
        ``(*S, d_model)`` tensor.
    """
    rows = absolute.sinusoidal_rows(distances, d_model, base, dtype=dtype)
    return torch.cat([rows[..., 0::2], rows[..., 1::2]], dim=-1)


def rel_shift(x: Tensor) -> Tensor:
    """Transformer-XL's relative shift: pad a zero column, reshape, drop a row.

    If column ``r`` of ``x`` belongs to distance ``n_r - 1 - r`` (distances
    ``n_r - 1`` down to 0), the result holds at ``[i, j]`` the entry for
    distance ``i + n_r - n_q - j``, which is ``i' - j`` for a query at
    position ``i' = n_r - n_q + i``. Precisely,
    ``out[..., i, j] = x[..., i, j + n_q - 1 - i]`` for ``j <= n_r - n_q + i``;
    the next entry is 0 and any later ones come from row ``i + 1`` (they are
    meaningless: a causal mask hides them).

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
    ``(q_i + u)·k_j + (q_i + v)·W_R R_{i'-j}``, scaled by ``1/sqrt(d)``:
    the four terms (a) ``q·k``, (b) ``q·W_R R``, (c) ``u·k``, (d)
    ``v·W_R R``. Attention computes (a); :meth:`score_bias` returns the
    rest, (b) + (c) + (d), already scaled, computed with :func:`rel_shift`.

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
                             f"{self.head_dim}), got {tuple(q.shape)} and {tuple(k.shape)}")

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

        No shift trick and no grouping: a reference for :meth:`score_bias`,
        and a way to look at each term. Costs an ``(n_q, n_k, d_model)``
        gather. The terms are not scaled.

        Returns:
            ``{"a": q·k, "b": q·W_R R, "c": u·k, "d": v·W_R R}``, each
            ``(..., n_heads, n_q, n_k)``.
        """
        self._check(q, k)
        n_q, n_k = q.shape[-2], k.shape[-2]
        distance = -relative_positions(n_q, n_k, device=q.device)      # i' - j
        r = transformer_xl_embedding(distance, self.d_model, self.base, dtype=q.dtype)
        w_r = self.r_net.weight.to(q.dtype).view(self.n_heads, self.head_dim, self.d_model)
        r_heads = torch.einsum("hdm,ijm->hijd", w_r, r)              # W_R R_{i'-j}
        u, v = self.r_w_bias.to(q.dtype), self.r_r_bias.to(q.dtype)
        return {
            "a": q @ k.transpose(-1, -2),
            "b": torch.einsum("...hid,hijd->...hij", q, r_heads),
            "c": torch.einsum("hd,...hjd->...hj", u, k).unsqueeze(-2).expand(
                *k.shape[:-2], n_q, n_k),
            "d": torch.einsum("hd,hijd->hij", v, r_heads).expand(*q.shape[:-3], -1, -1, -1),
        }

    def extra_repr(self) -> str:
        return (f"d_model={self.d_model}, n_heads={self.n_heads}, head_dim={self.head_dim}, "
                f"base={self.base:g}, bidirectional={self.bidirectional}")
