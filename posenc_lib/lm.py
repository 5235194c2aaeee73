"""A small decoder-only language model whose position encoding is pluggable.

The model is the same for every encoding: token embedding, ``n_layers``
pre-LayerNorm blocks of :class:`~posenc_lib.attention.MultiHeadAttention` and a
GELU feed-forward layer, a final LayerNorm and an output projection. A
:class:`PositionScheme` decides how positions enter, through the attention
hooks only:

========================  ==========================================
scheme                    hook
========================  ==========================================
``"nope"``                nothing (the causal mask alone)
``"sinusoidal"``          ``input_encoding``
``"learned"``             ``input_encoding``
``"t5"``                  ``score_bias`` (one table shared by all layers)
``"alibi"``               ``score_bias``
``"rope"``                ``qk_transform``
``"xpos"``                ``qk_transform``
========================  ==========================================

A RoPE scheme can be given a context-extension method at inference time
(:meth:`RopeScheme.set_scaling`), with the parameters of
:func:`posenc_lib.scaling.rope_parameters`.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor, nn

from . import _validate, absolute, attention, rope

__all__ = ["SCHEMES", "PositionScheme", "make_scheme", "RopeScheme", "DecoderLM"]


class PositionScheme(nn.Module):
    """How positions enter the model. Subclasses override one of the hooks.

    All hooks receive the sequence length ``n`` of the current forward pass
    (positions ``0 .. n-1``).
    """

    name = "nope"

    def input_encoding(self, n: int, d_model: int) -> Optional[Tensor]:
        """``(n, d_model)`` tensor added to the token embeddings, or ``None``."""
        return None

    def attention_hooks(self, n: int) -> dict:
        """Keyword arguments for :meth:`~posenc_lib.attention.MultiHeadAttention.forward` (same for every layer)."""
        return {}


class SinusoidalScheme(PositionScheme):
    name = "sinusoidal"

    def input_encoding(self, n, d_model):
        return absolute.sinusoidal_encoding(n, d_model, dtype=torch.float32)


class LearnedScheme(PositionScheme):
    """A learned table; positions beyond the trained length keep their initial rows."""

    name = "learned"

    def __init__(self, max_positions: int, d_model: int):
        super().__init__()
        self.table = absolute.LearnedPositionalEmbedding(max_positions, d_model)

    def input_encoding(self, n, d_model):
        return self.table(torch.arange(n))


class T5Scheme(PositionScheme):
    """T5's bucketed relative bias, one table shared by all layers (as in T5)."""

    name = "t5"

    def __init__(self, n_heads: int, num_buckets: int, max_distance: int):
        super().__init__()
        from . import relative

        self.bias = relative.T5RelativeBias(n_heads, num_buckets=num_buckets,
                                            max_distance=max_distance, bidirectional=False)

    def attention_hooks(self, n):
        return {"score_bias": self.bias(n, n)}


class AlibiScheme(PositionScheme):
    name = "alibi"

    def __init__(self, n_heads: int):
        super().__init__()
        self.n_heads = n_heads

    def attention_hooks(self, n):
        from . import alibi

        return {"score_bias": alibi.alibi_bias(self.n_heads, n).to(torch.float32)}


class RopeScheme(PositionScheme):
    """RoPE on every head; optionally with a context-extension method.

    Args:
        head_dim: per-head feature size.
        base: RoPE base.
    """

    name = "rope"

    def __init__(self, head_dim: int, base: float = 10000.0):
        super().__init__()
        self.head_dim, self.base = head_dim, base
        self.set_scaling("default")

    def set_scaling(self, rope_type: str, **params) -> None:
        """Use :func:`posenc_lib.scaling.rope_parameters` from now on.

        For ``rope_type="dynamic"`` leave out ``seq_len``: it is set to the
        length of each forward pass, as dynamic NTK does.
        """
        self.rope_type, self.params = rope_type, params

    def _frequencies(self, n: int):
        if self.rope_type == "default" and not self.params:
            return rope.inv_freq(self.head_dim, self.base, dtype=torch.float32), 1.0
        from . import scaling

        params = dict(self.params)
        if self.rope_type in ("dynamic", "longrope") and "seq_len" not in params:
            params["seq_len"] = n
        inv_freq, factor = scaling.rope_parameters(self.rope_type, self.head_dim, self.base,
                                                   **params)
        return inv_freq.to(torch.float32), float(factor)

    def attention_hooks(self, n):
        inv_freq, factor = self._frequencies(n)
        return {"qk_transform": rope.qk_transform(torch.arange(n), inv_freq,
                                                  attention_factor=factor)}


class XposScheme(PositionScheme):
    """RoPE with xPos's per-pair scaling of queries up and keys down."""

    name = "xpos"

    def __init__(self, head_dim: int, base: float = 10000.0, scale_base: float = 512.0):
        super().__init__()
        self.head_dim, self.base, self.scale_base = head_dim, base, scale_base

    def attention_hooks(self, n):
        from . import xpos

        inv_freq = rope.inv_freq(self.head_dim, self.base, dtype=torch.float32)
        return {"qk_transform": xpos.xpos_qk_transform(inv_freq, scale_base=self.scale_base)}


#: The schemes :func:`make_scheme` knows.
SCHEMES = ("nope", "sinusoidal", "learned", "t5", "alibi", "rope", "xpos")


def make_scheme(name: str, *, d_model: int, n_heads: int, max_positions: int,
                t5_num_buckets: int = 16, t5_max_distance: int = 32,
                rope_base: float = 10000.0, xpos_scale_base: float = 512.0) -> PositionScheme:
    """Build the scheme called ``name`` (one of :data:`SCHEMES`)."""
    _validate.one_of("name", name, SCHEMES)
    head_dim = d_model // n_heads
    if name == "nope":
        return PositionScheme()
    if name == "sinusoidal":
        return SinusoidalScheme()
    if name == "learned":
        return LearnedScheme(max_positions, d_model)
    if name == "t5":
        return T5Scheme(n_heads, t5_num_buckets, t5_max_distance)
    if name == "alibi":
        return AlibiScheme(n_heads)
    if name == "rope":
        return RopeScheme(head_dim, rope_base)
    return XposScheme(head_dim, rope_base, xpos_scale_base)


class _Block(nn.Module):
    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = attention.MultiHeadAttention(d_model, n_heads)
        self.norm2 = nn.LayerNorm(d_model)
        self.ffn = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(),
                                 nn.Linear(4 * d_model, d_model))

    def forward(self, h: Tensor, hooks: dict) -> Tensor:
        h = h + self.attn(self.norm1(h), causal=True, **hooks)
        return h + self.ffn(self.norm2(h))


class DecoderLM(nn.Module):
    """A causal language model over ``vocab_size`` symbols.

    Args:
        vocab_size: number of token ids.
        d_model: width; ``n_heads`` must divide it.
        n_layers: number of blocks.
        n_heads: attention heads per block.
        scheme: the :class:`PositionScheme`.
    """

    def __init__(self, vocab_size: int, d_model: int, n_layers: int, n_heads: int,
                 scheme: PositionScheme):
        super().__init__()
        _validate.positive_int("vocab_size", vocab_size)
        _validate.positive_int("n_layers", n_layers)
        self.d_model = d_model
        self.embed = nn.Embedding(vocab_size, d_model)
        self.scheme = scheme
        self.blocks = nn.ModuleList(_Block(d_model, n_heads) for _ in range(n_layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        # Token rows ~ N(0, 1) have norm ~ sqrt(d_model), the same order as a
        # sinusoidal row (sqrt(d_model / 2)), so no encoding starts out drowned.
        nn.init.normal_(self.embed.weight, std=1.0)

    def forward(self, tokens: Tensor) -> Tensor:
        """``tokens: (batch, n)`` int64 -> logits ``(batch, n, vocab_size)``."""
        _validate.tensor("tokens", tokens, min_dim=2)
        n = tokens.shape[1]
        h = self.embed(tokens)
        encoding = self.scheme.input_encoding(n, self.d_model)
        if encoding is not None:
            h = h + encoding.to(h.dtype)
        hooks = self.scheme.attention_hooks(n)
        for block in self.blocks:
            h = block(h, hooks)
        return self.head(self.norm(h))
