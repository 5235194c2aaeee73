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
``"p-rope"``              ``qk_transform`` (the fastest pairs only)
``"rnope-swa"``           per layer: ``qk_transform`` and a window
                          as ``score_bias``, or nothing
========================  ==========================================

A scheme whose layers differ overrides :meth:`PositionScheme.layer_hooks`
(full pass) and :meth:`PositionScheme.for_layer` (cached path).

The vocabulary is the 256 byte values plus :data:`BOS`, a beginning-of-sequence
marker. A RoPE scheme can be given a context-extension method at inference
(:meth:`RopeScheme.set_scaling`), with the parameters of
:func:`posenc_lib.scaling.rope_parameters`.

:meth:`DecoderLM.forward` has two paths. Without a cache it runs the whole
sequence through :class:`~posenc_lib.attention.MultiHeadAttention` with the
scheme's hooks. With a cache (a list that the call fills) it runs only the new
tokens and attends to the keys and values of earlier calls *as they were
cached*: a key keeps the rotation it got when it was computed, as in
generation with a key-value cache.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor, nn

from . import _validate, absolute, alibi, attention, relative, rope

__all__ = ["SCHEMES", "BOS", "VOCAB_SIZE", "PositionScheme", "make_scheme", "RopeScheme",
           "DecoderLM"]

#: Token id of the beginning-of-sequence marker (byte values are 0 .. 255).
BOS = 256
#: 256 byte values and :data:`BOS`.
VOCAB_SIZE = 257


class PositionScheme(nn.Module):
    """How positions enter the model (this base class: not at all, i.e. NoPE).

    Subclasses override the hooks they use. The full-sequence path uses
    :meth:`input_encoding` and :meth:`attention_hooks`; the cached path uses
    :meth:`input_encoding`, :meth:`rotate` and :meth:`score_bias`, with
    explicit positions.
    """

    name = "nope"

    def input_encoding(self, positions: Tensor, d_model: int) -> Optional[Tensor]:
        """``(n, d_model)`` tensor added to the token embeddings at ``positions: (n,)``."""
        return None

    def attention_hooks(self, n: int) -> dict:
        """Keyword arguments for :meth:`~posenc_lib.attention.MultiHeadAttention.forward`
        for positions ``0 .. n-1`` (the same for every layer)."""
        return {}

    def layer_hooks(self, n: int, n_layers: int) -> list[dict]:
        """One :meth:`attention_hooks` dict per layer (the same one for every
        layer, unless a scheme treats its layers differently)."""
        return [self.attention_hooks(n)] * n_layers

    def for_layer(self, layer: int, n_layers: int):
        """Cached path: what layer ``layer`` of ``n_layers`` uses for
        :meth:`rotate` and :meth:`score_bias` (this scheme, unless its layers
        differ)."""
        return self

    def rotate(self, x: Tensor, positions: Tensor, kind: str, seq_len: int) -> Tensor:
        """Cached path: transform queries or keys ``x: (b, h, n, d)`` at ``positions: (n,)``.

        ``kind`` is ``"query"`` or ``"key"``; ``seq_len`` is the length of the
        sequence so far (cached keys included).
        """
        return x

    def score_bias(self, n_q: int, n_k: int) -> Optional[Tensor]:
        """Cached path: bias ``(h, n_q, n_k)`` for the last ``n_q`` of ``n_k`` positions."""
        return None


class SinusoidalScheme(PositionScheme):
    name = "sinusoidal"

    def input_encoding(self, positions, d_model):
        return absolute.sinusoidal_rows(positions.cpu(), d_model, dtype=torch.float32)


class LearnedScheme(PositionScheme):
    """A learned table of ``max_positions`` rows. Rows the training never
    reaches get no gradient; AdamW's decoupled weight decay still shrinks them
    by ``(1 - lr·weight_decay)`` at every step."""

    name = "learned"

    def __init__(self, max_positions: int, d_model: int):
        super().__init__()
        self.table = absolute.LearnedPositionalEmbedding(max_positions, d_model)

    def input_encoding(self, positions, d_model):
        return self.table(positions.to(self.table.table.weight.device))


class T5Scheme(PositionScheme):
    """T5's bucketed relative bias, one table shared by all layers (as in T5)."""

    name = "t5"

    def __init__(self, n_heads: int, num_buckets: int, max_distance: int):
        super().__init__()
        self.bias = relative.T5RelativeBias(n_heads, num_buckets=num_buckets,
                                            max_distance=max_distance, bidirectional=False)

    def attention_hooks(self, n):
        return {"score_bias": self.bias(n, n)}

    def score_bias(self, n_q, n_k):
        return self.bias(n_q, n_k)


class AlibiScheme(PositionScheme):
    name = "alibi"

    def __init__(self, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.register_buffer("_device", torch.empty(0), persistent=False)

    def score_bias(self, n_q, n_k):
        bias = alibi.alibi_bias(self.n_heads, n_q, n_k, dtype=torch.float32)
        return bias.to(self._device.device)

    def attention_hooks(self, n):
        return {"score_bias": self.score_bias(n, n)}


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
        self.register_buffer("_device", torch.empty(0), persistent=False)
        self.set_scaling("default")

    def set_scaling(self, rope_type: str, *, attention_factor: float | None = None,
                    **params) -> None:
        """Use :func:`posenc_lib.scaling.rope_parameters` from now on.

        For ``rope_type="dynamic"`` (and ``"longrope"``) leave out ``seq_len``:
        it is set to the current sequence length, as dynamic NTK does.
        ``attention_factor`` replaces the one the method returns (for
        ablations: YaRN without its temperature, NTK-aware with YaRN's).
        """
        from . import scaling

        _validate.one_of("rope_type", rope_type, list(scaling.ROPE_SCALINGS))
        if attention_factor is not None:
            attention_factor = _validate.finite_float("attention_factor", attention_factor,
                                                      greater_than=0.0)
        self.rope_type, self.params = rope_type, dict(params)
        self.attention_factor = attention_factor

    def frequencies(self, seq_len: int) -> tuple[Tensor, float]:
        """``(inv_freq (head_dim/2,), attention_factor)`` for a sequence of ``seq_len``."""
        from . import scaling

        params = dict(self.params)
        if self.rope_type in ("dynamic", "longrope") and "seq_len" not in params:
            params["seq_len"] = seq_len
        inv_freq, factor = scaling.rope_parameters(self.rope_type, self.head_dim, self.base,
                                                   dtype=torch.float32, **params)
        if self.attention_factor is not None:
            factor = self.attention_factor
        return inv_freq.to(self._device.device), float(factor)

    def attention_hooks(self, n):
        inv_freq, factor = self.frequencies(n)
        positions = torch.arange(n, device=self._device.device)
        return {"qk_transform": rope.qk_transform(positions, inv_freq, attention_factor=factor)}

    def rotate(self, x, positions, kind, seq_len):
        inv_freq, factor = self.frequencies(seq_len)
        return rope.apply_rope(x, positions, inv_freq, attention_factor=factor)


class XposScheme(PositionScheme):
    """RoPE with xPos's per-pair scaling of queries up and keys down."""

    name = "xpos"

    def __init__(self, head_dim: int, base: float = 10000.0, scale_base: float = 512.0):
        super().__init__()
        self.head_dim, self.base, self.scale_base = head_dim, base, scale_base
        self.register_buffer("inv_freq", rope.inv_freq(head_dim, base, dtype=torch.float32),
                             persistent=False)

    def _xpos(self, x, positions, kind, center):
        from . import xpos

        # Positions on the CPU: xpos_scale computes its float64 scales there.
        return xpos.apply_xpos(x, positions.cpu(), self.inv_freq, kind=kind,
                               scale_base=self.scale_base, center=center)

    def attention_hooks(self, n):
        # xpos.xpos_qk_transform, with the scales computed on the CPU (it
        # builds its positions on q's device, which fails on a GPU).
        positions, center = torch.arange(n), float(n // 2)
        return {"qk_transform": lambda q, k: (self._xpos(q, positions, "query", center),
                                              self._xpos(k, positions, "key", center))}

    def rotate(self, x, positions, kind, seq_len):
        # Any fixed centre cancels in q·k; 0 keeps cached keys valid as n grows.
        return self._xpos(x, positions, kind, 0.0)


class PRopeScheme(RopeScheme):
    """p-RoPE (transformers 5.x's ``"proportional"`` rope type): only the
    fastest ``fraction`` of the pairs turn, at the frequencies of the whole
    head (:func:`posenc_lib.designs.proportional_inv_freq`); the others never
    turn. No context extension."""

    name = "p-rope"

    def __init__(self, head_dim: int, base: float = 10000.0, fraction: float = 0.25):
        from . import designs

        super().__init__(head_dim, base)
        self.fraction = fraction
        self.register_buffer("inv_freq", designs.proportional_inv_freq(
            head_dim, fraction, base, dtype=torch.float32), persistent=False)

    def set_scaling(self, rope_type: str, **params) -> None:
        if rope_type != "default":
            raise ValueError(f"rope_type: p-RoPE takes no extension, got {rope_type!r}")
        super().set_scaling(rope_type, **params)

    def frequencies(self, seq_len):
        return self.inv_freq, 1.0


class RnopeSwaScheme(RopeScheme):
    """RNoPE-SWA: RoPE layers that see a sliding window of ``window`` keys
    (themselves included), and every ``full_every``-th layer full causal
    attention without positions
    (:func:`posenc_lib.designs.rnope_swa_layer_types`)."""

    name = "rnope-swa"

    def __init__(self, head_dim: int, base: float = 10000.0, window: int = 32,
                 full_every: int = 3):
        super().__init__(head_dim, base)
        self.window = _validate.positive_int("window", window)
        self.full_every = _validate.positive_int("full_every", full_every)

    def layer_hooks(self, n, n_layers):
        from . import designs

        rope_hooks = self.attention_hooks(n)
        allowed = designs.sliding_window_mask(n, self.window).to(self._device.device)
        bias = torch.zeros(n, n, device=allowed.device).masked_fill(~allowed, float("-inf"))
        sliding = {**rope_hooks, "score_bias": bias}
        return [sliding if kind == "sliding_attention" else {}
                for kind in designs.rnope_swa_layer_types(n_layers, self.full_every)]

    def for_layer(self, layer, n_layers):
        from . import designs

        kind = designs.rnope_swa_layer_types(n_layers, self.full_every)[layer]
        return _RnopeLayer(self, kind == "sliding_attention")


class _RnopeLayer:
    """One RNoPE-SWA layer on the cached path: RoPE and the window, or nothing."""

    def __init__(self, scheme: RnopeSwaScheme, sliding: bool):
        self.scheme, self.sliding = scheme, sliding

    def rotate(self, x, positions, kind, seq_len):
        return self.scheme.rotate(x, positions, kind, seq_len) if self.sliding else x

    def score_bias(self, n_q, n_k):
        if not self.sliding:
            return None
        device = self.scheme._device.device
        i = torch.arange(n_k - n_q, n_k, device=device)[:, None]
        j = torch.arange(n_k, device=device)[None, :]
        outside = j <= i - self.scheme.window
        return torch.zeros(n_q, n_k, device=device).masked_fill(outside, float("-inf"))


#: The schemes :func:`make_scheme` knows.
SCHEMES = ("nope", "sinusoidal", "learned", "t5", "alibi", "rope", "xpos", "p-rope",
           "rnope-swa")


def make_scheme(name: str, *, d_model: int, n_heads: int, max_positions: int,
                t5_num_buckets: int = 16, t5_max_distance: int = 32,
                rope_base: float = 10000.0, xpos_scale_base: float = 512.0,
                p_rope_fraction: float = 0.25, swa_window: int = 32,
                full_every: int = 3) -> PositionScheme:
    """Build the scheme called ``name`` (one of :data:`SCHEMES`).

    Parameters (the learned table, T5's biases) are drawn from torch's global
    generator; seed it (or fork it) around this call.
    """
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
    if name == "p-rope":
        return PRopeScheme(head_dim, rope_base, p_rope_fraction)
    if name == "rnope-swa":
        return RnopeSwaScheme(head_dim, rope_base, swa_window, full_every)
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
        h = h + self.attn(self.norm1(h), causal=True, fused=True, **hooks)
        return h + self.ffn(self.norm2(h))

    def forward_cached(self, h: Tensor, scheme: PositionScheme, positions: Tensor,
                       entry: dict) -> Tensor:
        """The same block for new tokens at ``positions``, with this layer's cache ``entry``."""
        attn, x = self.attn, self.norm1(h)
        q, k, v = (attn._split(w(x)) for w in (attn.w_q, attn.w_k, attn.w_v))
        seq_len = int(positions[-1]) + 1
        q = scheme.rotate(q, positions, "query", seq_len)
        k = scheme.rotate(k, positions, "key", seq_len)
        if entry:
            k, v = torch.cat([entry["k"], k], dim=-2), torch.cat([entry["v"], v], dim=-2)
        entry["k"], entry["v"] = k, v
        out = attention.scaled_dot_product_attention(
            q, k, v, score_bias=scheme.score_bias(q.shape[-2], k.shape[-2]), causal=True)
        b, _, n, _ = out.shape
        h = h + attn.w_o(out.transpose(1, 2).reshape(b, n, attn.d_model))
        return h + self.ffn(self.norm2(h))


class DecoderLM(nn.Module):
    """A causal language model over ``vocab_size`` symbols.

    Args:
        vocab_size: number of token ids.
        d_model: width; ``n_heads`` must divide it.
        n_layers: number of blocks.
        n_heads: attention heads per block.
        scheme: the :class:`PositionScheme`. It is built before the model, so
            the model's own weights are drawn from torch's global generator
            *after* the scheme's: seed it right before this call to give every
            scheme the same shared weights.
    """

    def __init__(self, vocab_size: int, d_model: int, n_layers: int, n_heads: int,
                 scheme: PositionScheme):
        super().__init__()
        _validate.positive_int("vocab_size", vocab_size)
        _validate.positive_int("n_layers", n_layers)
        self.d_model = d_model
        self.embed = nn.Embedding(vocab_size, d_model)
        self.blocks = nn.ModuleList(_Block(d_model, n_heads) for _ in range(n_layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        # Token rows ~ N(0, 1) have norm ~ sqrt(d_model), the same order as a
        # sinusoidal row (sqrt(d_model / 2)), so no encoding starts out drowned.
        nn.init.normal_(self.embed.weight, std=1.0)
        self.scheme = scheme

    def forward(self, tokens: Tensor, *, cache: Optional[list] = None) -> Tensor:
        """``tokens: (batch, n)`` int64 -> logits ``(batch, n, vocab_size)``.

        Args:
            cache: ``None`` for a full pass over positions ``0 .. n-1``. A list
                (empty at the start of a sequence) to generate incrementally:
                the tokens sit at the positions after those already cached,
                and the call appends their keys and values.
        """
        _validate.tensor("tokens", tokens, min_dim=2)
        if cache is None:
            n = tokens.shape[1]
            h = self._embed(tokens, torch.arange(n, device=tokens.device))
            for block, hooks in zip(self.blocks,
                                    self.scheme.layer_hooks(n, len(self.blocks))):
                h = block(h, hooks)
            return self.head(self.norm(h))
        if not isinstance(cache, list):
            raise ValueError(f"cache must be None or a list, got {type(cache).__name__}")
        if not cache:
            cache.extend({} for _ in self.blocks)
        start = cache[0]["k"].shape[-2] if cache[0] else 0
        positions = torch.arange(start, start + tokens.shape[1], device=tokens.device)
        h = self._embed(tokens, positions)
        for i, (block, entry) in enumerate(zip(self.blocks, cache)):
            h = block.forward_cached(h, self.scheme.for_layer(i, len(self.blocks)), positions,
                                     entry)
        return self.head(self.norm(h))

    def _embed(self, tokens: Tensor, positions: Tensor) -> Tensor:
        h = self.embed(tokens)
        encoding = self.scheme.input_encoding(positions, self.d_model)
        if encoding is not None:
            h = h + encoding.to(device=h.device, dtype=h.dtype)
        return h
