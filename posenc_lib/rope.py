"""Rotary position embedding (RoPE).

RoPE rotates each pair of query/key features by an angle proportional to the
position, ``m·θ_i`` with ``θ_i = base**(-2i/dim)``. Two memory layouts exist:

``"half"``
    pair ``i`` is features ``(i, i + dim/2)``: GPT-NeoX and Hugging Face Llama
    (``rotate_half``).
``"interleaved"``
    pair ``i`` is features ``(2i, 2i + 1)``: the RoFormer paper, Meta's
    original Llama code and GPT-J.

They are the same method up to a fixed permutation of the features, not the
same function of ``x``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import _validate

__all__ = ["LAYOUTS", "inv_freq", "rope_angles", "cos_sin", "rotate", "apply_rope"]

LAYOUTS = ("half", "interleaved")


def inv_freq(dim: int, base: float = 10000.0, *, dtype: torch.dtype | None = None) -> Tensor:
    """The rotation frequencies ``θ_i = base**(-2i/dim)``, ``i = 0 .. dim/2 - 1``.

    Computed in float64 and rounded once to ``dtype`` (torch's default if
    ``None``). Pair 0 turns fastest (one radian per position); the last pair
    is the slowest.

    Returns:
        ``(dim/2,)`` tensor.
    """
    dim = _validate.even_int("dim", dim)
    base = _validate.finite_float("base", base, greater_than=1.0)
    dtype = _validate.floating_dtype("dtype", dtype)
    exponent = torch.arange(0, dim, 2, dtype=torch.float64) / dim
    return (1.0 / base ** exponent).to(dtype)


def _check_inv_freq(inv_freq: Tensor) -> Tensor:
    _validate.tensor("inv_freq", inv_freq, min_dim=1, floating=True)
    if inv_freq.dim() != 1:
        raise ValueError(f"inv_freq must be 1-D (dim/2,), got shape {tuple(inv_freq.shape)}")
    return _validate.finite_tensor("inv_freq", inv_freq)


def rope_angles(positions, inv_freq: Tensor) -> Tensor:
    """The rotation angles ``positions[..., None] * inv_freq``, in ``inv_freq``'s dtype.

    Args:
        positions: shape ``S`` (a tensor or a sequence); converted to
            ``inv_freq.dtype`` before multiplying, as models do.
        inv_freq: ``(dim/2,)``.

    Returns:
        ``(*S, dim/2)`` tensor.
    """
    inv_freq = _check_inv_freq(inv_freq)
    p = torch.as_tensor(positions, device=inv_freq.device)
    if p.is_complex():
        raise ValueError("positions must be real")
    p = p.to(inv_freq.dtype)
    _validate.finite_tensor("positions", p)
    return p.unsqueeze(-1) * inv_freq


def cos_sin(positions, inv_freq: Tensor, *, layout: str = "half",
            attention_factor: float = 1.0) -> tuple[Tensor, Tensor]:
    """``cos`` and ``sin`` of the angles, expanded to the full feature size.

    For ``layout="half"`` the ``dim/2`` angles are repeated as ``[a, a]``; for
    ``"interleaved"`` each angle is repeated in place, ``[a0, a0, a1, a1, ...]``.
    Both are multiplied by ``attention_factor``, as transformers does.

    Returns:
        two ``(*S, dim)`` tensors.
    """
    _validate.one_of("layout", layout, LAYOUTS)
    attention_factor = _validate.finite_float("attention_factor", attention_factor,
                                              greater_than=0.0)
    angles = rope_angles(positions, inv_freq)
    if layout == "half":
        angles = torch.cat([angles, angles], dim=-1)
    else:
        angles = torch.repeat_interleave(angles, 2, dim=-1)
    cos, sin = angles.cos(), angles.sin()
    if attention_factor != 1.0:
        cos, sin = cos * attention_factor, sin * attention_factor
    return cos, sin


def rotate(x: Tensor, *, layout: str = "half") -> Tensor:
    """Each pair ``(a, b)`` becomes ``(-b, a)``: a quarter turn of every pair.

    ``"half"`` pairs feature ``i`` with ``i + dim/2`` (``rotate_half``);
    ``"interleaved"`` pairs ``2i`` with ``2i + 1``.
    """
    _validate.one_of("layout", layout, LAYOUTS)
    if layout == "half":
        first, second = x.chunk(2, dim=-1)
        return torch.cat([-second, first], dim=-1)
    pairs = x.unflatten(-1, (-1, 2))
    return torch.stack([-pairs[..., 1], pairs[..., 0]], dim=-1).flatten(-2)


def apply_rope(x: Tensor, positions, inv_freq: Tensor, *, layout: str = "half",
               attention_factor: float = 1.0) -> Tensor:
    """Rotate every feature pair of ``x`` by ``position · θ_i``.

    ``x ⊙ cos + rotate(x) ⊙ sin``: the O(dim) form of multiplying each row by
    the block-diagonal rotation matrix ``R_{Θ,m}``.

    Args:
        x: ``(..., seq, dim)`` queries or keys.
        positions: ``(seq,)``, or any shape that broadcasts to ``(..., seq)``.
        inv_freq: ``(dim/2,)`` frequencies, e.g. from :func:`inv_freq`.
        layout: ``"half"`` or ``"interleaved"`` (see the module docstring).
        attention_factor: multiplies cos and sin (YaRN's temperature).

    Returns:
        Tensor shaped like ``x``, in ``x``'s dtype.
    """
    _validate.tensor("x", x, min_dim=1, floating=True)
    inv_freq = _check_inv_freq(inv_freq)
    dim = _validate.even_int("x.shape[-1]", x.shape[-1])
    if inv_freq.shape[0] * 2 != dim:
        raise ValueError(f"inv_freq has {inv_freq.shape[0]} frequencies, so dim must be "
                         f"{2 * inv_freq.shape[0]}; x has dim {dim}")
    positions = torch.as_tensor(positions, device=x.device)
    if positions.dim() == 0:
        raise ValueError("positions must have at least one dimension (seq,)")
    try:
        shape = torch.broadcast_shapes(tuple(positions.shape) + (dim,), x.shape)
    except RuntimeError:
        shape = None
    if shape != x.shape:
        raise ValueError(f"positions of shape {tuple(positions.shape)} do not broadcast "
                         f"to x's leading shape {tuple(x.shape[:-1])}")
    cos, sin = cos_sin(positions, inv_freq, layout=layout, attention_factor=attention_factor)
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    return x * cos + rotate(x, layout=layout) * sin
