"""xPos: RoPE with an exponential decay (Sun et al., 2023).

Pair ``i`` of a query at position ``m`` is rotated by ``m·θ_i`` (RoPE) and
scaled by ``ζ_i^(m/scale_base)``; pair ``i`` of a key at position ``n`` is
rotated by ``n·θ_i`` and scaled by ``ζ_i^(-n/scale_base)``, with

    ``ζ_i = (2i/dim + γ) / (1 + γ)``,  ``γ = 0.4``, ``scale_base = 512``.

In ``q·k`` the two scales multiply to ``ζ_i^((m - n)/scale_base)``: a factor
``< 1`` for past keys, smaller for the fast pairs (``ζ_0 = γ/(1+γ)``) than
for the slow ones (``ζ_i → 1``), and a function of ``m - n`` only.

The separate scales ``ζ^(±m/scale_base)`` overflow or underflow for large
positions: ``ζ_0^(-m/512)`` passes float32's maximum at
``m = 512·ln(3.4e38)/ln(1/ζ_0) ≈ 36 260.7`` (``γ = 0.4``), so implementations
measure the scale's exponent from a ``center``: the centre cancels in ``q·k``
when queries and keys share it. rotary-embedding-torch uses
``center = seq_len // 2``, which moves as the sequence grows.
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import _validate, rope

__all__ = ["xpos_zeta", "xpos_scale", "apply_xpos", "xpos_qk_transform"]

KINDS = ("query", "key")


def xpos_zeta(dim: int, gamma: float = 0.4, *, dtype: torch.dtype | None = None) -> Tensor:
    """``ζ_i = (2i/dim + γ)/(1 + γ)`` for ``i = 0 .. dim/2 - 1``, all in ``(0, 1)``.

    Returns:
        ``(dim/2,)`` tensor.
    """
    dim = _validate.even_int("dim", dim)
    gamma = _validate.finite_float("gamma", gamma, greater_than=0.0)
    dtype = _validate.floating_dtype("dtype", dtype)
    i = torch.arange(dim // 2, dtype=torch.float64)
    return ((2 * i / dim + gamma) / (1 + gamma)).to(dtype)


def xpos_scale(positions, dim: int, *, kind: str = "query", gamma: float = 0.4,
               scale_base: float = 512.0, center: float = 0.0,
               dtype: torch.dtype | None = None) -> Tensor:
    """The per-pair scale ``ζ_i^(±(p - center)/scale_base)`` (``+`` for queries).

    Returns:
        ``(*S, dim/2)`` tensor for positions of shape ``S``.
    """
    _validate.one_of("kind", kind, KINDS)
    scale_base = _validate.finite_float("scale_base", scale_base, greater_than=0.0)
    center = _validate.finite_float("center", center)
    dtype = _validate.floating_dtype("dtype", dtype)
    p = torch.as_tensor(positions).to(torch.float64)
    _validate.finite_tensor("positions", p)
    sign = 1.0 if kind == "query" else -1.0
    power = sign * (p - center) / scale_base
    return (xpos_zeta(dim, gamma, dtype=torch.float64) ** power.unsqueeze(-1)).to(dtype)


def apply_xpos(x: Tensor, positions, inv_freq: Tensor, *, kind: str, gamma: float = 0.4,
               scale_base: float = 512.0, layout: str = "half",
               center: float = 0.0) -> Tensor:
    """Rotate ``x`` as RoPE does and scale pair ``i`` by ``ζ_i^(±(p - center)/scale_base)``.

    Args:
        x: ``(..., seq, dim)`` queries or keys.
        positions: ``(seq,)`` positions (or any shape broadcasting to ``(..., seq)``).
        inv_freq: ``(dim/2,)`` RoPE frequencies, e.g. :func:`posenc_lib.rope.inv_freq`.
        kind: ``"query"`` (scale ``ζ^(+p/scale_base)``) or ``"key"`` (``ζ^(-p/scale_base)``).
        gamma: xPos' ``γ``.
        scale_base: divides the position in the exponent.
        layout: ``"half"`` or ``"interleaved"``, as in :mod:`posenc_lib.rope`.
        center: position at which the scale is 1; it cancels in ``q·k`` when
            queries and keys use the same one.

    Returns:
        Tensor shaped like ``x``, in ``x``'s dtype.
    """
    rotated = rope.apply_rope(x, positions, inv_freq, layout=layout)
    scale = xpos_scale(positions, x.shape[-1], kind=kind, gamma=gamma, scale_base=scale_base,
                       center=center, dtype=torch.float64)
    if layout == "half":
        scale = torch.cat([scale, scale], dim=-1)
    else:
        scale = torch.repeat_interleave(scale, 2, dim=-1)
    return rotated * scale.to(device=x.device, dtype=x.dtype)


def xpos_qk_transform(inv_freq: Tensor, *, gamma: float = 0.4, scale_base: float = 512.0,
                      layout: str = "half"):
    """A ``qk_transform`` hook ``(q, k) -> (q, k)`` for :mod:`posenc_lib.attention`.

    Keys sit at positions ``0 .. n_k - 1`` and queries at the last ``n_q``
    of them; the scales are centred at ``n_k // 2``, as in
    rotary-embedding-torch.
    """
    _validate.one_of("layout", layout, rope.LAYOUTS)

    def transform(q: Tensor, k: Tensor) -> tuple[Tensor, Tensor]:
        n_q, n_k = q.shape[-2], k.shape[-2]
        if n_k < n_q:
            raise ValueError(f"xPos needs at least as many keys as queries, got "
                             f"n_k={n_k}, n_q={n_q}")
        center = float(n_k // 2)
        k_positions = torch.arange(n_k, device=k.device)
        q_positions = k_positions[n_k - n_q:]
        options = dict(gamma=gamma, scale_base=scale_base, layout=layout, center=center)
        return (apply_xpos(q, q_positions, inv_freq, kind="query", **options),
                apply_xpos(k, k_positions, inv_freq, kind="key", **options))

    return transform
