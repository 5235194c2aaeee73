"""Attention temperatures (chapter 10): log-n scaling and attention entropy.

:func:`logn_attention_scale` is the log-n factor on the logits of a query that
sees more keys than in training; :func:`attention_entropy` measures how spread
a softmax is, and :func:`random_attention_entropy` follows it over lengths
for random RoPE queries and keys.
"""

from __future__ import annotations

import functools
import math

import torch
from torch import Tensor

from . import _validate, rope
from .bounds import _one_thread
from .remap import _position_vector
from .scaling import _default_inv_freq

__all__ = ["logn_attention_scale", "attention_entropy", "random_attention_entropy"]


def logn_attention_scale(positions, train_length: int) -> Tensor:
    """Log-n scaling of the logits: ``max(1, ln(p + 1) / ln(train_length))``.

    The query at position ``p`` (counting from 0) sees ``p + 1`` keys under a
    causal mask; beyond the training length its logits are multiplied by
    ``log_L(p + 1)``, so that they grow with the log of the number of keys
    (Su 2021, entropy invariance). This is Qwen-1's ``use_logn_attn``
    (``logn_tensor`` in ``QWenAttention``, with ``L = seq_length``) and the
    query scaling in the ReRoPE reference code; both multiply the queries.

    Args:
        positions: 0-based query positions, any shape ``S``.
        train_length: ``L``, an integer >= 2.

    Returns:
        ``S``-shaped float64 tensor, >= 1.
    """
    length = _validate.positive_int("train_length", train_length, minimum=2)
    p = torch.as_tensor(positions)
    if p.is_complex() or p.dtype == torch.bool:
        raise ValueError(f"positions must be real, got {p.dtype}")
    p = p.to(torch.float64)
    _validate.finite_tensor("positions", p)
    if bool((p < 0).any()):
        raise ValueError("positions must be >= 0")
    return (torch.log1p(p) / math.log(length)).clamp(min=1.0)


def attention_entropy(scores: Tensor, *, dim: int = -1) -> Tensor:
    """Entropy in nats of ``softmax(scores)`` along ``dim``.

    ``H = logsumexp(s) - Σ_j p_j s_j``; keys with score ``-inf`` (masked) get
    weight 0 and add nothing.

    Args:
        scores: ``(..., n)`` logits (float), ``-inf`` allowed, not every one.

    Returns:
        tensor of ``scores``' shape without ``dim``.
    """
    _validate.tensor("scores", scores, min_dim=1, floating=True)
    if bool(torch.isnan(scores).any()) or bool((scores == math.inf).any()):
        raise ValueError("scores must not hold NaN or +inf")
    if bool(torch.isneginf(scores).all(dim=dim).any()):
        raise ValueError("scores must leave at least one key unmasked along dim")
    p = torch.softmax(scores, dim=dim)
    finite = torch.where(torch.isneginf(scores), torch.zeros_like(scores), scores)
    return torch.logsumexp(scores, dim=dim) - (p * finite).sum(dim)



def random_attention_entropy(lengths, *, sigma: float = 1.0, dim: int = 64,
                             n_queries: int = 32, train_length=None,
                             base: float = 10000.0, seed: int = 0) -> Tensor:
    """Entropy of RoPE attention for random queries and keys, at several lengths.

    For each length ``n``, ``n_queries`` queries of norm ``sigma·√dim`` (random
    directions) sit at position ``n - 1`` and attend causally to ``n`` keys with
    independent standard normal entries at positions ``0 .. n - 1``; every
    logit ``⟨R q, R' k⟩/√dim`` is then normal with variance ``sigma²``. With
    ``train_length`` the logits are multiplied by
    :func:`logn_attention_scale` of the query's position. Seeded: the same
    keys serve every length (the first ``n`` of them).

    The logits for ``sigma = 1`` are cached (for the last two sets of
    lengths, sizes and seeds); other values of ``sigma`` and ``train_length``
    scale them, so that a figure can sweep both cheaply.

    Args:
        lengths: ``(n_lengths,)`` positive integers.
        train_length: ``None`` (no scaling), an integer ``>= 2``, or a list of
            them (the result then gets a leading axis, one entry each).

    Returns:
        ``(n_lengths, n_queries)`` float64 entropies in nats; with a list of
        ``train_length``, ``(len(train_length), n_lengths, n_queries)``.
    """
    lengths = _position_vector("lengths", lengths)
    if lengths.numel() == 0 or bool((lengths < 1).any()):
        raise ValueError("lengths must hold integers >= 1")
    sigma = _validate.finite_float("sigma", sigma, greater_than=0.0)
    dim = _validate.even_int("dim", dim)
    n_queries = _validate.positive_int("n_queries", n_queries)
    seed = _validate.nonnegative_int("seed", seed)
    base = _validate.finite_float("base", base, greater_than=1.0)
    several = isinstance(train_length, (list, tuple))
    train_lengths = list(train_length) if several else [train_length]
    if several and not train_lengths:
        raise ValueError("train_length must not be an empty list")
    for value in train_lengths:
        if value is not None:
            _validate.positive_int("train_length", value, minimum=2)
    unit = _unit_logits(tuple(lengths.tolist()), n_queries, dim, seed, base)
    out = []
    with _one_thread():  # row-wise kernels: threads only add overhead
        for value in train_lengths:
            out.append(torch.stack([
                _entropy_of_logits(logits, sigma if value is None else sigma * float(
                    logn_attention_scale(n - 1, value)))
                for n, logits in zip(lengths.tolist(), unit)]))
    return torch.stack(out) if several else out[0]


@functools.lru_cache(maxsize=2)
def _unit_logits(lengths: tuple, n_queries: int, dim: int, seed: int, base: float) -> list:
    """The logits of :func:`random_attention_entropy` for ``sigma = 1``, one
    ``(n_queries, n)`` tensor per length (cached; callers must not modify them)."""
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(n_queries, dim, generator=generator, dtype=torch.float64)
    q = q / q.norm(dim=-1, keepdim=True) * math.sqrt(dim)
    n_max = max(lengths)
    keys = torch.randn(n_max, dim, generator=generator, dtype=torch.float64)
    theta = _default_inv_freq(dim, base)
    keys = rope.apply_rope(keys, torch.arange(n_max), theta)
    with _one_thread():
        return [rope.apply_rope(q, torch.full((n_queries,), n - 1), theta) @ keys[:n].T
                / math.sqrt(dim) for n in lengths]


_BLOCK = 1 << 16  # scores per block of rows in _entropy_of_logits


def _entropy_of_logits(logits: Tensor, scale: float) -> Tensor:
    """:func:`attention_entropy` along the last axis of ``scale·logits`` (finite),
    with one exponential per score: ``H = ln Z - Σ_j e_j (s_j - m) / Z`` with
    ``e_j = exp(s_j - m)``, ``m`` the largest score and ``Z = Σ_j e_j``.

    Works through blocks of rows of at most ``_BLOCK`` scores, in place: the
    temporaries stay small, so memory is reused rather than mapped afresh
    (a new 8 MB tensor cost more in page faults than its arithmetic).
    """
    flat = logits.reshape(-1, logits.shape[-1])
    parts = []
    for block in flat.split(max(1, _BLOCK // max(1, flat.shape[-1]))):
        shifted = block * scale
        shifted -= shifted.max(dim=-1, keepdim=True).values
        weights = torch.exp(shifted)
        total = weights.sum(-1)
        weights *= shifted
        parts.append(torch.log(total) - weights.sum(-1) / total)
    entropy = torch.cat(parts).reshape(logits.shape[:-1])
    if not bool(torch.isfinite(entropy).all()):  # a score was inf or NaN
        return attention_entropy(logits * scale)  # raises the error that names the problem
    return entropy
