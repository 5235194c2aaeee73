"""Scaled dot-product attention, written to be read, with hooks for positions.

Every position encoding in the book enters attention through one of three
hooks, so the attention code itself never changes from chapter to chapter:

``input_encoding``
    a tensor added to the input before the projections (sinusoidal, learned,
    integer and binary encodings).
``qk_transform``
    a function ``(q, k) -> (q, k)`` applied to the projected queries and keys
    of every head (RoPE, xPos).
``score_bias``
    an additive bias on the scaled scores, either a tensor or a function
    ``(q, k) -> bias`` (ALiBi, T5 buckets, Shaw et al., Transformer-XL).

A fourth, optional ``value_term`` adds a position-dependent term to the
output, which Shaw et al. use on the values.

Shape names: ``b`` batch, ``h`` heads, ``n_q`` queries, ``n_k`` keys,
``d`` per-head feature size. With a causal mask and ``n_k > n_q`` the queries
are the *last* ``n_q`` positions, as in a key-value cache or a memory.
"""

from __future__ import annotations

import math
from typing import Callable, Optional, Union

import torch
from torch import Tensor, nn

from . import _validate

QKTransform = Callable[[Tensor, Tensor], "tuple[Tensor, Tensor]"]
ScoreBias = Union[Tensor, Callable[[Tensor, Tensor], Tensor]]
ValueTerm = Callable[[Tensor], Tensor]

__all__ = ["causal_mask", "scaled_dot_product_attention", "MultiHeadAttention"]


def causal_mask(n_q: int, n_k: Optional[int] = None, *, device=None) -> Tensor:
    """Boolean mask that is ``True`` where query ``i`` may attend to key ``j``.

    Query ``i`` sits at absolute position ``n_k - n_q + i``, so with
    ``n_k > n_q`` the queries are the last ``n_q`` positions.

    Returns:
        ``(n_q, n_k)`` bool tensor.
    """
    n_q = _validate.positive_int("n_q", n_q)
    n_k = n_q if n_k is None else _validate.positive_int("n_k", n_k)
    if n_k < n_q:
        raise ValueError(f"n_k must be >= n_q for a causal mask, "
                         f"got n_k={n_k}, n_q={n_q}")
    i = torch.arange(n_q, device=device).unsqueeze(1) + (n_k - n_q)
    j = torch.arange(n_k, device=device).unsqueeze(0)
    return j <= i


def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    score_bias: Optional[ScoreBias] = None,
    value_term: Optional[ValueTerm] = None,
    causal: bool = False,
    scale: Optional[float] = None,
    return_weights: bool = False,
):
    """``softmax(q kᵀ · scale + bias) v``, with optional causal mask.

    Args:
        q: ``(..., n_q, d)`` queries.
        k: ``(..., n_k, d)`` keys.
        v: ``(..., n_k, d_v)`` values.
        score_bias: tensor broadcastable to ``(..., n_q, n_k)``, or a function
            ``(q, k) -> bias`` returning one. It is added *after* scaling.
        value_term: function ``weights -> (..., n_q, d_v)`` added to the output.
        causal: mask keys that lie in the future of each query.
        scale: defaults to ``1 / sqrt(d)``.
        return_weights: also return the ``(..., n_q, n_k)`` attention weights.

    Returns:
        ``(..., n_q, d_v)`` output, and the weights if ``return_weights``.
    """
    _validate.tensor("q", q, min_dim=2, floating=True)
    _validate.tensor("k", k, min_dim=2, last_dim=q.shape[-1], floating=True)
    _validate.tensor("v", v, min_dim=2, floating=True)
    if v.shape[-2] != k.shape[-2]:
        raise ValueError(f"v must have as many rows as k ({k.shape[-2]}), "
                         f"got shape {tuple(v.shape)}")
    n_q, n_k = q.shape[-2], k.shape[-2]
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    scores = (q @ k.transpose(-2, -1)) * scale
    if score_bias is not None:
        bias = score_bias(q, k) if callable(score_bias) else score_bias
        _validate.tensor("score_bias", bias)
        _validate.broadcastable("score_bias", bias.shape, scores.shape)
        scores = scores + bias
    if causal:
        allowed = causal_mask(n_q, n_k, device=q.device)
        scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    out = weights @ v
    if value_term is not None:
        extra = value_term(weights)
        _validate.broadcastable("value_term(weights)", extra.shape, out.shape)
        out = out + extra
    return (out, weights) if return_weights else out


def _fused_attention(q: Tensor, k: Tensor, v: Tensor, score_bias: Optional[ScoreBias],
                     causal: bool) -> Tensor:
    """:func:`scaled_dot_product_attention` (no value term, no weights) through
    ``torch.nn.functional.scaled_dot_product_attention``: the bias, with the
    causal mask as ``-inf``, is its additive ``attn_mask``."""
    mask = None
    if score_bias is not None:
        mask = score_bias(q, k) if callable(score_bias) else score_bias
        _validate.tensor("score_bias", mask)
        _validate.broadcastable("score_bias", mask.shape, q.shape[:-1] + k.shape[-2:-1])
        mask = mask.to(q.dtype)
    if causal:
        blocked = torch.zeros(q.shape[-2], k.shape[-2], dtype=q.dtype, device=q.device)
        blocked = blocked.masked_fill(~causal_mask(q.shape[-2], k.shape[-2], device=q.device),
                                      float("-inf"))
        mask = blocked if mask is None else mask + blocked
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)


class MultiHeadAttention(nn.Module):
    """Multi-head self-attention with the three position hooks.

    Args:
        d_model: model width; must be divisible by ``n_heads``.
        n_heads: number of heads; each has ``head_dim = d_model // n_heads``.
        bias: whether the four projections have a bias.

    The projections are ``nn.Linear`` layers named ``w_q``, ``w_k``, ``w_v``
    and ``w_o``. Their rows are grouped by head: rows ``h*head_dim`` to
    ``(h+1)*head_dim - 1`` of ``w_q`` produce head ``h``'s queries.
    """

    def __init__(self, d_model: int, n_heads: int, *, bias: bool = False):
        super().__init__()
        d_model = _validate.positive_int("d_model", d_model)
        n_heads = _validate.positive_int("n_heads", n_heads)
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by "
                             f"n_heads ({n_heads})")
        self.d_model, self.n_heads, self.head_dim = d_model, n_heads, d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def _split(self, x: Tensor) -> Tensor:
        """``(b, n, d_model) -> (b, h, n, head_dim)``."""
        b, n, _ = x.shape
        return x.view(b, n, self.n_heads, self.head_dim).transpose(1, 2)

    def forward(
        self,
        x: Tensor,
        *,
        memory: Optional[Tensor] = None,
        input_encoding: Optional[Tensor] = None,
        qk_transform: Optional[QKTransform] = None,
        score_bias: Optional[ScoreBias] = None,
        value_term: Optional[ValueTerm] = None,
        causal: bool = False,
        return_weights: bool = False,
        fused: bool = False,
    ):
        """Attend from every row of ``x`` to ``memory`` followed by ``x``.

        Args:
            x: ``(b, n, d_model)`` or unbatched ``(n, d_model)`` input.
            memory: optional ``(b, m, d_model)`` earlier states, used as extra
                keys and values in front of ``x`` (Transformer-XL); it is not
                re-encoded.
            input_encoding: tensor broadcastable to ``x`` (typically
                ``(n, d_model)``), added to ``x`` before the projections.
            qk_transform: ``(q, k) -> (q, k)`` on ``(b, h, n_q|n_k, head_dim)``.
            score_bias: see :func:`scaled_dot_product_attention`; shapes are
                ``(b, h, n_q, n_k)``.
            value_term: see :func:`scaled_dot_product_attention`.
            causal: mask future keys.
            return_weights: also return ``(b, h, n_q, n_k)`` weights.
            fused: compute the attention with torch's
                ``F.scaled_dot_product_attention`` (the bias and the causal mask
                as one additive mask) instead of this module's readable
                :func:`scaled_dot_product_attention`; the same function up to
                rounding, faster, and never materialising the weights. Ignored
                when the weights are returned or a ``value_term`` is given.

        Returns:
            ``(b, n, d_model)`` (or ``(n, d_model)`` if ``x`` was unbatched),
            and the weights if ``return_weights``.
        """
        _validate.tensor("x", x, min_dim=2, last_dim=self.d_model, floating=True)
        if x.dim() > 3:
            raise ValueError(f"x must be (batch, seq, d_model) or (seq, d_model), "
                             f"got shape {tuple(x.shape)}")
        if x.dtype != self.w_q.weight.dtype:
            raise ValueError(f"x has dtype {x.dtype} but the layer's weights are "
                             f"{self.w_q.weight.dtype}: convert one of them")
        unbatched = x.dim() == 2
        if unbatched:
            x = x.unsqueeze(0)
        if input_encoding is not None:
            _validate.tensor("input_encoding", input_encoding)
            _validate.broadcastable("input_encoding", input_encoding.shape, x.shape)
            x = x + input_encoding
        kv_input = x
        if memory is not None:
            _validate.tensor("memory", memory, min_dim=3, last_dim=self.d_model)
            if memory.dim() != 3 or memory.shape[0] != x.shape[0]:
                raise ValueError(f"memory must be (batch={x.shape[0]}, mem_len, "
                                 f"{self.d_model}), got shape {tuple(memory.shape)}")
            kv_input = torch.cat([memory, x], dim=1)
        q = self._split(self.w_q(x))
        k = self._split(self.w_k(kv_input))
        v = self._split(self.w_v(kv_input))
        if qk_transform is not None:
            q_new, k_new = qk_transform(q, k)
            if q_new.shape != q.shape or k_new.shape != k.shape:
                raise ValueError("qk_transform must keep the shapes of q and k: got "
                                 f"{tuple(q_new.shape)}, {tuple(k_new.shape)} for "
                                 f"{tuple(q.shape)}, {tuple(k.shape)}")
            q, k = q_new, k_new
        if fused and not return_weights and value_term is None:
            out, weights = _fused_attention(q, k, v, score_bias, causal), None
        else:
            out, weights = scaled_dot_product_attention(
                q, k, v, score_bias=score_bias, value_term=value_term, causal=causal,
                return_weights=True)
        b, _, n, _ = out.shape
        out = self.w_o(out.transpose(1, 2).reshape(b, n, self.d_model))
        if unbatched:
            out = out.squeeze(0)
            weights = None if weights is None else weights.squeeze(0)
        return (out, weights) if return_weights else out
