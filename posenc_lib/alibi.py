"""ALiBi: attention with linear biases (Press et al., 2022).

No position enters the embeddings or the queries and keys. Each head ``k``
adds ``m_k·(j - i)`` to the score of query ``i`` and key ``j``: zero on the
diagonal, more negative the further back the key lies. The slopes ``m_k``
form a geometric sequence, so some heads look far and others only nearby.

Use :func:`alibi_bias` as the ``score_bias`` of
:mod:`posenc_lib.attention`, with a causal mask.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from . import _validate, relative

__all__ = ["alibi_slopes", "alibi_bias"]


def _power_of_two_slopes(n: int) -> list[float]:
    # 2^(-8k/n) for k = 1..n: starts at 2^(-8/n) and ends at 2^-8.
    return [2.0 ** (-8.0 * k / n) for k in range(1, n + 1)]


def alibi_slopes(n_heads: int, *, dtype: torch.dtype | None = None) -> Tensor:
    """The head slopes ``m_k`` of the reference implementation.

    For ``n`` a power of two, ``m_k = 2^(-8k/n)``, ``k = 1..n``. Otherwise,
    with ``c`` the largest power of two below ``n``, the ``c`` slopes for
    ``c`` heads followed by the first ``n - c`` of every other slope for
    ``2c`` heads (``2^(-8(2j+1)/(2c))``, ``j = 0, 1, ...``), which fall in
    between the first ``c`` ones.

    Returns:
        ``(n_heads,)`` tensor, decreasing from the first head.
    """
    n = _validate.positive_int("n_heads", n_heads)
    dtype = _validate.floating_dtype("dtype", dtype)
    closest = 2 ** math.floor(math.log2(n))
    slopes = _power_of_two_slopes(closest)
    if closest != n:
        slopes += _power_of_two_slopes(2 * closest)[0::2][: n - closest]
    return torch.tensor(slopes, dtype=torch.float64).to(dtype)


def alibi_bias(n_heads: int, q_len: int, k_len: int | None = None, *,
               dtype: torch.dtype | None = None) -> Tensor:
    """ALiBi's additive score bias ``m_k·(j - i) = -m_k·(i - j)``.

    Query ``i`` sits at absolute position ``k_len - q_len + i`` (the queries
    are the *last* ``q_len`` positions, as with a key-value cache), key ``j``
    at position ``j``. The bias depends on the offset only; on future keys
    (``j > i``) it is positive, so use it with a causal mask, as ALiBi does.

    Returns:
        ``(n_heads, q_len, k_len)`` tensor, usable directly as a ``score_bias``.
    """
    q_len = _validate.positive_int("q_len", q_len)
    k_len = q_len if k_len is None else _validate.positive_int("k_len", k_len)
    if k_len < q_len:
        raise ValueError(f"k_len must be >= q_len, got k_len={k_len}, q_len={q_len}")
    dtype = _validate.floating_dtype("dtype", dtype)
    offset = relative.relative_positions(q_len, k_len).to(torch.float64)  # key minus query
    slopes = alibi_slopes(n_heads, dtype=torch.float64)
    return (slopes[:, None, None] * offset).to(dtype)
