"""Rotary position embedding (RoPE).

RoPE rotates each pair of query/key features by an angle proportional to the
position, ``m·θ_i`` with ``θ_i = base**(-2i/dim)``. Two memory layouts exist:

``"half"``
    pair ``i`` is features ``(i, i + dim/2)``: GPT-NeoX and Hugging Face Llama
    (``rotate_half``).
``"interleaved"``
    pair ``i`` is features ``(2i, 2i + 1)``: the RoFormer paper, Meta's
    original Llama code and GPT-J.

They are the same method up to a fixed permutation of the features
(:func:`layout_permutation`), not the same function of ``x``.

The module also holds the pieces the RoPE chapter checks: the dense rotation
matrix (:func:`rotation_matrix`), the complex-number form
(:func:`apply_rope_complex`), the weight permutation that checkpoint
converters apply (:func:`interleaved_to_half`), RoFormer's long-range bound
(:func:`decay_bound`), the rounding error of cos and sin at long positions
(:func:`cos_sin_error`), the frequencies of the two partial-rotary
conventions, GPT-NeoX's and p-RoPE's (:func:`partial_inv_freq`), and the
orthogonal basis in which any ``exp(p·A)`` with skew-symmetric ``A`` is RoPE
(:func:`rope_basis`).

Speed: :func:`apply_rope` computes cos and sin once per position and pair,
``(seq, rotary_dim/2)``, and broadcasts them over batch and heads. Without
autograd it writes straight into the output: ``x ⊙ cos`` with
``torch.mul(..., out=)``, then one in-place ``addcmul_`` per member of the
pairs; the interleaved layout in float32/float64 is a single complex
multiplication. No ``torch.cat`` and no rotated copy of ``x`` is built. With
autograd it uses the plain, differentiable formula.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import Tensor

from . import _validate

__all__ = ["LAYOUTS", "inv_freq", "rope_angles", "cos_sin", "rotate", "apply_rope",
           "apply_cos_sin", "apply_rope_complex", "rotation_matrix", "layout_permutation",
           "interleaved_to_half", "qk_transform", "relative_score", "decay_bound",
           "cos_sin_error", "PARTIAL_SPACINGS", "partial_inv_freq", "rope_basis",
           "rerotate", "fused_apply"]

LAYOUTS = ("half", "interleaved")
#: The two conventions for a partial rotary head (:func:`partial_inv_freq`).
PARTIAL_SPACINGS = ("rotary_dim", "head_dim")


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


def partial_inv_freq(head_dim: int, partial_rotary_factor: float, base: float = 10000.0,
                     *, spacing: str = "rotary_dim",
                     dtype: torch.dtype | None = None) -> Tensor:
    """Frequencies for a head that rotates only a fraction ``p`` of its features.

    Two conventions go by the name ``partial_rotary_factor``:

    ``spacing="rotary_dim"``
        GPT-NeoX (``rotary_pct``) and transformers' ``partial_rotary_factor``
        (``_compute_default_rope_parameters`` in ``modeling_rope_utils.py``):
        ``rotary_dim = int(head_dim * p)`` features rotate, with
        ``θ_i = base**(-2i/rotary_dim)`` spaced over that slice, so the slice
        keeps the whole range from 1 down to about ``1/base``. Returns
        ``(rotary_dim/2,)``; pass ``rotary_dim=2 * len(result)`` to
        :func:`apply_rope`, which rotates the first ``rotary_dim`` features.
    ``spacing="head_dim"``
        p-RoPE (Barbero et al. 2024), also transformers' later
        ``"proportional"`` rope type: the ``k = int(p * head_dim // 2)``
        fastest pairs keep the frequencies of the whole head,
        ``θ_i = base**(-2i/head_dim)``, and the other ``head_dim/2 - k`` pairs
        get ``θ_i = 0``, so they never turn: the lowest frequencies are
        dropped. Returns ``(head_dim/2,)``; rotate the whole head with
        :func:`apply_rope`.

    Args:
        head_dim: features per head (even).
        partial_rotary_factor: the fraction ``p``, ``0 < p <= 1``.
        base: the frequency base (``rope_theta``).
        spacing: ``"rotary_dim"`` or ``"head_dim"`` (:data:`PARTIAL_SPACINGS`).
        dtype: computed in float64 and rounded once (torch's default if ``None``).

    Returns:
        ``(rotary_dim/2,)`` or ``(head_dim/2,)`` tensor, as above.
    """
    head_dim = _validate.even_int("head_dim", head_dim)
    factor = _validate.finite_float("partial_rotary_factor", partial_rotary_factor,
                                    greater_than=0.0)
    if factor > 1.0:
        raise ValueError(f"partial_rotary_factor must be <= 1, got {factor}")
    _validate.one_of("spacing", spacing, PARTIAL_SPACINGS)
    base = _validate.finite_float("base", base, greater_than=1.0)
    dtype = _validate.floating_dtype("dtype", dtype)
    if spacing == "rotary_dim":
        rotary_dim = int(head_dim * factor)
        if rotary_dim < 2 or rotary_dim % 2:
            raise ValueError(f"partial_rotary_factor={factor} gives rotary_dim = "
                             f"int({head_dim} * {factor}) = {rotary_dim}, which "
                             f"must be even and >= 2")
        return inv_freq(rotary_dim, base, dtype=dtype)
    rotating = int(factor * head_dim // 2)
    theta = inv_freq(head_dim, base, dtype=torch.float64)
    theta[rotating:] = 0.0
    return theta.to(dtype)


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
    if p.is_floating_point():
        _validate.finite_tensor("positions", p)
    cast = p.to(inv_freq.dtype)
    if not bool(torch.isfinite(cast).all()):  # finite, but not in inv_freq's dtype
        largest = torch.finfo(inv_freq.dtype).max
        raise ValueError(
            f"positions overflow {inv_freq.dtype}: positions above {largest:,.6g} "
            f"(its largest finite value, {largest!r}) do not fit, and positions "
            f"reach {float(p.abs().max()):,.6g}; compute the angles in a wider dtype")
    return cast.unsqueeze(-1) * inv_freq


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


def _needs_grad(*tensors: Tensor) -> bool:
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def rotate(x: Tensor, *, layout: str = "half") -> Tensor:
    """Each pair ``(a, b)`` becomes ``(-b, a)``: a quarter turn of every pair.

    ``"half"`` pairs feature ``i`` with ``i + dim/2`` (``rotate_half``);
    ``"interleaved"`` pairs ``2i`` with ``2i + 1``.

    Args:
        x: ``(..., dim)`` with an even ``dim``.

    Returns:
        Tensor shaped like ``x``.
    """
    _validate.one_of("layout", layout, LAYOUTS)
    _validate.tensor("x", x, min_dim=1)
    _validate.even_int("x.shape[-1]", x.shape[-1])
    if layout == "half":
        first, second = x.chunk(2, dim=-1)
    else:
        first, second = x[..., 0::2], x[..., 1::2]
    if _needs_grad(x):
        if layout == "half":
            return torch.cat([-second, first], dim=-1)
        return torch.stack([-second, first], dim=-1).flatten(-2)
    out = torch.empty_like(x)
    if layout == "half":
        out_first, out_second = out.chunk(2, dim=-1)
    else:
        out_first, out_second = out[..., 0::2], out[..., 1::2]
    torch.neg(second, out=out_first)
    out_second.copy_(first)
    return out


def _pair_views(t: Tensor, layout: str) -> tuple[Tensor, Tensor]:
    """The first and second member of every pair, as views ``(..., dim/2)``."""
    if layout == "half":
        return t.chunk(2, dim=-1)
    return t[..., 0::2], t[..., 1::2]


def _complex_view_ok(t: Tensor) -> bool:
    """Whether ``t`` (``(..., 2k)``) can be viewed as ``k`` complex numbers in place."""
    if t.dtype not in (torch.float32, torch.float64) or t.numel() == 0:
        return False
    pairs = t.unflatten(-1, (-1, 2))
    return (pairs.stride(-1) == 1 and t.storage_offset() % 2 == 0
            and all(s % 2 == 0 for s in pairs.stride()[:-1]))


def _rope_formula(x: Tensor, cos: Tensor, sin: Tensor, layout: str, rotary_dim: int) -> Tensor:
    """The plain, differentiable formula: ``(a, b) -> (a cos - b sin, b cos + a sin)``
    for pair ``i`` of ``x[..., :rotary_dim]``; the other features pass through.

    ``cos`` and ``sin`` are ``(..., rotary_dim/2)``, one per pair. Eager, this
    is several passes over memory; :func:`fused_apply` compiles it into one.
    """
    first, second = _pair_views(x[..., :rotary_dim], layout)
    new_first, new_second = first * cos - second * sin, second * cos + first * sin
    if layout == "half":
        rotated = torch.cat([new_first, new_second], dim=-1)
    else:
        rotated = torch.stack([new_first, new_second], dim=-1).flatten(-2)
    if rotary_dim == x.shape[-1]:
        return rotated
    return torch.cat([rotated, x[..., rotary_dim:]], dim=-1)


def _rotate_pairs(x: Tensor, cos: Tensor, sin: Tensor, layout: str, rotary_dim: int) -> Tensor:
    """Rotate pair ``i`` of ``x[..., :rotary_dim]`` by the angle whose cos and sin are given.

    ``cos`` and ``sin`` are ``(..., rotary_dim/2)`` in ``x``'s dtype and
    broadcast to ``x``'s leading shape (the caller checked this).
    """
    dim = x.shape[-1]
    if _needs_grad(x, cos, sin):
        return _rope_formula(x, cos, sin, layout, rotary_dim)
    out = torch.empty_like(x)
    if rotary_dim < dim:
        out[..., rotary_dim:].copy_(x[..., rotary_dim:])
    x_rot, out_rot = x[..., :rotary_dim], out[..., :rotary_dim]
    if layout == "interleaved" and _complex_view_ok(x_rot) and _complex_view_ok(out_rot):
        # One pass over memory: (a + ib)(cos + i sin).
        z = torch.view_as_complex(x_rot.unflatten(-1, (-1, 2)))
        torch.mul(z, torch.complex(cos, sin),
                  out=torch.view_as_complex(out_rot.unflatten(-1, (-1, 2))))
        return out
    # Three passes: out = x ⊙ cos over whole rows, then each half of every pair
    # adds its partner times ∓sin in place.
    first, second = _pair_views(x_rot, layout)
    out_first, out_second = _pair_views(out_rot, layout)
    full_cos = torch.cat([cos, cos], -1) if layout == "half" else cos.repeat_interleave(2, -1)
    torch.mul(x_rot, full_cos, out=out_rot)
    out_first.addcmul_(second, sin, value=-1)
    out_second.addcmul_(first, sin)
    return out


def _check_rotary_dim(rotary_dim, dim: int, n_freq: int, freq_name: str) -> int:
    """Validate ``rotary_dim`` against ``x``'s ``dim`` and the number of frequencies."""
    if rotary_dim is None:
        if n_freq * 2 != dim:
            raise ValueError(f"{freq_name} has {n_freq} frequencies, so dim must be "
                             f"{2 * n_freq}; x has dim {dim}")
        return dim
    rotary_dim = _validate.even_int("rotary_dim", rotary_dim)
    if rotary_dim > dim:
        raise ValueError(f"rotary_dim must be <= x.shape[-1] = {dim}, got {rotary_dim}")
    if n_freq * 2 != rotary_dim:
        raise ValueError(f"{freq_name} has {n_freq} frequencies, so rotary_dim must be "
                         f"{2 * n_freq}; got rotary_dim={rotary_dim}")
    return rotary_dim


def _check_positions(positions, x: Tensor, name: str = "positions",
                     x_name: str = "x") -> Tensor:
    """``positions`` as a tensor of at least one dimension that broadcasts to
    ``x``'s leading shape; errors name ``name`` and ``x_name``."""
    positions = torch.as_tensor(positions, device=x.device)
    if positions.dim() == 0:
        raise ValueError(f"{name} must have at least one dimension (seq,)")
    try:
        shape = torch.broadcast_shapes(tuple(positions.shape) + (x.shape[-1],), x.shape)
    except RuntimeError:
        shape = None
    if shape != x.shape:
        raise ValueError(f"{name} of shape {tuple(positions.shape)} do not broadcast "
                         f"to {x_name}'s leading shape {tuple(x.shape[:-1])}")
    return positions


def apply_rope(x: Tensor, positions, inv_freq: Tensor, *, layout: str = "half",
               attention_factor: float = 1.0, rotary_dim: int | None = None) -> Tensor:
    """Rotate every feature pair of ``x`` by ``position · θ_i``.

    ``x ⊙ cos + rotate(x) ⊙ sin``: the O(dim) form of multiplying each row by
    the block-diagonal rotation matrix ``R_{Θ,m}`` (:func:`rotation_matrix`).

    Args:
        x: ``(..., seq, dim)`` queries or keys.
        positions: ``(seq,)``, or any shape that broadcasts to ``(..., seq)``.
        inv_freq: ``(rotary_dim/2,)`` frequencies, e.g. from :func:`inv_freq`.
            The angles are computed in its dtype, then cos and sin are cast to
            ``x``'s dtype.
        layout: ``"half"`` or ``"interleaved"`` (see the module docstring).
        attention_factor: multiplies cos and sin (YaRN's temperature).
        rotary_dim: partial rotary: only the first ``rotary_dim`` features
            rotate (with pairs laid out within them) and the rest pass through
            unchanged, as in GPT-NeoX (``rotary_pct``) and transformers'
            ``partial_rotary_factor`` (``rotary_dim = int(head_dim * factor)``).
            ``None`` rotates all ``dim`` features.

    Returns:
        Tensor shaped like ``x``, in ``x``'s dtype.
    """
    _validate.tensor("x", x, min_dim=1, floating=True)
    inv_freq = _check_inv_freq(inv_freq)
    dim = _validate.even_int("x.shape[-1]", x.shape[-1])
    rotary_dim = _check_rotary_dim(rotary_dim, dim, inv_freq.shape[0], "inv_freq")
    _validate.one_of("layout", layout, LAYOUTS)
    attention_factor = _validate.finite_float("attention_factor", attention_factor,
                                              greater_than=0.0)
    positions = _check_positions(positions, x)
    angles = rope_angles(positions, inv_freq)     # (..., seq, rotary_dim/2): once a pair
    cos, sin = angles.cos(), angles.sin()
    if attention_factor != 1.0:
        cos, sin = cos * attention_factor, sin * attention_factor
    return _rotate_pairs(x, cos.to(x.dtype), sin.to(x.dtype), layout, rotary_dim)


def _check_apply_args(x: Tensor, cos: Tensor, sin: Tensor, layout: str) -> int:
    """The checks :func:`apply_cos_sin` and :func:`fused_apply` share; ``x``'s last dim."""
    _validate.tensor("x", x, min_dim=1, floating=True)
    _validate.tensor("cos", cos, min_dim=1, floating=True)
    _validate.tensor("sin", sin, min_dim=1, floating=True)
    _validate.one_of("layout", layout, LAYOUTS)
    dim = _validate.even_int("x.shape[-1]", x.shape[-1])
    if cos.shape != sin.shape:
        raise ValueError(f"cos and sin must have the same shape, got {tuple(cos.shape)} "
                         f"and {tuple(sin.shape)}")
    return dim


def apply_cos_sin(x: Tensor, cos: Tensor, sin: Tensor, *, layout: str = "half",
                  rotary_dim: int | None = None) -> Tensor:
    """Rotate ``x`` with precomputed cos and sin, e.g. cached once per sequence.

    ``cos`` and ``sin`` are laid out as :func:`cos_sin` returns them (and as
    transformers' rotary embeddings return them): every angle appears twice,
    as ``[a, a]`` for ``"half"`` and ``[a0, a0, a1, a1, ...]`` for
    ``"interleaved"``. This is checked, because the fast path reads each
    angle once. ``apply_cos_sin(x, *cos_sin(p, f, layout=L), layout=L)``
    equals ``apply_rope(x, p, f, layout=L)``.

    Args:
        x: ``(..., seq, dim)``.
        cos: ``(..., seq, rotary_dim)``, broadcastable to ``x[..., :rotary_dim]``.
        sin: same shape as ``cos``.
        layout: ``"half"`` or ``"interleaved"``.
        rotary_dim: rotate only the first ``rotary_dim`` features (``None``: all).

    Returns:
        Tensor shaped like ``x``, in ``x``'s dtype.
    """
    dim = _check_apply_args(x, cos, sin, layout)
    if rotary_dim is None:
        rotary_dim = dim
    rotary_dim = _validate.even_int("rotary_dim", rotary_dim)
    if rotary_dim > dim:
        raise ValueError(f"rotary_dim must be <= x.shape[-1] = {dim}, got {rotary_dim}")
    if cos.shape[-1] != rotary_dim:
        raise ValueError(f"cos must have last dimension rotary_dim = {rotary_dim}, "
                         f"got shape {tuple(cos.shape)}")
    _validate.broadcastable("cos", cos.shape, x[..., :rotary_dim].shape)
    halves = []
    for name, t in (("cos", cos), ("sin", sin)):
        first, second = _pair_views(t, layout)
        if not torch.equal(first, second):
            raise ValueError(f"{name} must repeat every angle for layout={layout!r} "
                             f"(as cos_sin returns it)")
        halves.append(first.to(x.dtype))
    return _rotate_pairs(x, halves[0], halves[1], layout, rotary_dim)


#: The compiled :func:`_rope_formula` (built on first use), or why it is not used.
#: ``backend`` is torch.compile's (TorchInductor; the tests also use ``"eager"``,
#: which traces the graph without generating code).
_FUSED: dict = {"compiled": {}, "fallback": None, "backend": "inductor"}


def _compiled_formula(key) -> Callable:
    """The compiled formula for ``key`` (layout, dtype, ...), one per key.

    dynamo keeps at most ``recompile_limit`` (8) graphs per code object, and
    ``fullgraph=True`` turns one more into an error; layouts, dtypes and
    partial or full rotation would exceed that together. So each key gets its
    own copy of the code object, with its own budget for the sizes it meets.
    """
    compiled = _FUSED["compiled"]
    if key not in compiled:
        import types

        code = _rope_formula.__code__.replace(co_name=f"_rope_formula_{len(compiled)}")
        fresh = types.FunctionType(code, _rope_formula.__globals__, code.co_name)
        # dynamic=True: one graph serves every size (a model's sequence length changes).
        compiled[key] = torch.compile(fresh, dynamic=True, fullgraph=True,
                                      backend=_FUSED["backend"])
    return compiled[key]


def fused_apply(x: Tensor, cos: Tensor, sin: Tensor, *, layout: str = "half",
                rotary_dim: int | None = None) -> Tensor:
    """RoPE as one fused elementwise kernel: ``torch.compile`` of the plain formula.

    Reads ``x``, ``cos`` and ``sin`` once and writes the result once, where
    the eager paths (:func:`apply_rope`, :func:`apply_cos_sin`) make several
    passes over memory. The computation is the library's own differentiable
    formula, ``(a, b) -> (a cos - b sin, b cos + a sin)`` for every pair,
    compiled by ``torch.compile`` (TorchInductor: a Triton kernel on a GPU,
    C++ on the CPU, which needs a C compiler). The eager formula stays the
    reference the tests compare this with. In float16 and bfloat16 the
    compiled kernel computes in float32 and rounds once, so it can differ
    from the eager paths (which round each product) by a few units in the
    last place.

    Where ``torch.compile`` is unavailable or fails (no C compiler, an
    unsupported Python), it warns once, saying why, and computes the same
    formula eagerly from then on.

    Args:
        x: ``(..., seq, dim)`` queries or keys.
        cos: ``(..., seq, rotary_dim/2)``, one cosine per pair (not repeated
            as :func:`cos_sin` returns them): ``rope_angles(positions,
            inv_freq).cos()``, times ``attention_factor`` if any; it must
            broadcast to ``x[..., :rotary_dim/2]``. Cast to ``x``'s dtype.
        sin: same shape as ``cos``.
        layout: ``"half"`` or ``"interleaved"`` (see the module docstring).
        rotary_dim: rotate only the first ``rotary_dim`` features (``None``: all).

    Returns:
        Tensor shaped like ``x``, in ``x``'s dtype, on its device.
    """
    dim = _check_apply_args(x, cos, sin, layout)
    rotary_dim = _check_rotary_dim(rotary_dim, dim, cos.shape[-1], "cos")
    _validate.broadcastable("cos", cos.shape, x[..., : rotary_dim // 2].shape)
    for name, t in (("cos", cos), ("sin", sin)):
        if t.device != x.device:
            raise ValueError(f"{name} is on {t.device} and x on {x.device}; move {name} "
                             f"to x's device")
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    if _FUSED["fallback"] is None:
        # Views of rank >= 4 with leading 1s: fewer distinct graphs to compile.
        rank = max(4, x.dim())
        x4, cos4, sin4 = (t.reshape((1,) * (rank - t.dim()) + tuple(t.shape))
                          for t in (x, cos, sin))
        try:
            key = (layout, rotary_dim == dim, x.dtype, x.device.type, rank)
            out = _compiled_formula(key)(x4, cos4, sin4, layout, rotary_dim)
            return out.reshape(x.shape)
        except Exception as error:  # compile-time failure: inputs were checked above
            import warnings

            reason = " ".join(str(error).split()).split(" Set TORCHDYNAMO_VERBOSE")[0]
            _FUSED["fallback"] = f"{type(error).__name__}: {reason[:400]}"
            warnings.warn(f"fused_apply: torch.compile is unavailable or failed here "
                          f"({_FUSED['fallback']}); computing the same formula eagerly "
                          f"(several passes over memory) from now on", RuntimeWarning,
                          stacklevel=2)
    return _rope_formula(x, cos, sin, layout, rotary_dim)


def apply_rope_complex(x: Tensor, positions, inv_freq: Tensor, *,
                       attention_factor: float = 1.0) -> Tensor:
    """Interleaved RoPE written as complex multiplication, as Meta's Llama code does.

    Features ``(2i, 2i+1)`` become the complex number ``x_{2i} + i·x_{2i+1}``,
    which is multiplied by ``attention_factor · e^{i·m·θ_i}``. The computation
    runs in complex128 (``x`` converted to float64), and the result is cast
    back to ``x``'s dtype. An independent route to the same numbers as
    ``apply_rope(..., layout="interleaved")``.

    Args:
        x: ``(..., seq, dim)``.
        positions: ``(seq,)`` or broadcastable to ``(..., seq)``.
        inv_freq: ``(dim/2,)``.

    Returns:
        Tensor shaped like ``x``.
    """
    _validate.tensor("x", x, min_dim=1, floating=True)
    inv_freq = _check_inv_freq(inv_freq)
    dim = _validate.even_int("x.shape[-1]", x.shape[-1])
    _check_rotary_dim(None, dim, inv_freq.shape[0], "inv_freq")
    attention_factor = _validate.finite_float("attention_factor", attention_factor,
                                              greater_than=0.0)
    positions = _check_positions(positions, x)
    angles = rope_angles(positions, inv_freq).to(torch.float64)
    rotation = torch.polar(torch.full_like(angles, attention_factor), angles)
    z = torch.view_as_complex(x.to(torch.float64).unflatten(-1, (-1, 2)).contiguous())
    return torch.view_as_real(z * rotation).flatten(-2).to(x.dtype)


def _pair_indices(dim: int, layout: str) -> tuple[Tensor, Tensor]:
    """Feature indices of the first and second member of every pair."""
    half = dim // 2
    if layout == "half":
        return torch.arange(half), torch.arange(half, dim)
    return torch.arange(0, dim, 2), torch.arange(1, dim, 2)


def rotation_matrix(position, inv_freq: Tensor, *, layout: str = "interleaved") -> Tensor:
    """The dense rotation matrix ``R_{Θ,m}``, so that ``R x`` rotates a column vector.

    For rows, ``apply_rope(x, [m], inv_freq, layout=layout) == x @ R.T``.
    Pair ``i`` (features ``(a, b)`` given by ``layout``) gets the block
    ``[[cos mθ_i, -sin mθ_i], [sin mθ_i, cos mθ_i]]`` at rows and columns
    ``a, b``; for ``"interleaved"`` the matrix is block-diagonal.

    Args:
        position: a number, or a tensor of positions of shape ``S``.
        inv_freq: ``(dim/2,)``; the matrix has its dtype.
        layout: ``"interleaved"`` (default, the paper's matrix) or ``"half"``.

    Returns:
        ``(dim, dim)`` tensor, or ``(*S, dim, dim)`` for a tensor of positions.
    """
    _validate.one_of("layout", layout, LAYOUTS)
    inv_freq = _check_inv_freq(inv_freq)
    p = torch.as_tensor(position)
    if p.is_floating_point() or p.is_complex():
        _validate.finite_tensor("position", p)
    angles = rope_angles(p, inv_freq)                       # (*S, dim/2)
    cos, sin = angles.cos(), angles.sin()
    dim = 2 * inv_freq.shape[0]
    first, second = _pair_indices(dim, layout)
    matrix = torch.zeros(*angles.shape[:-1], dim, dim, dtype=inv_freq.dtype,
                         device=inv_freq.device)
    matrix[..., first, first] = cos
    matrix[..., first, second] = -sin
    matrix[..., second, first] = sin
    matrix[..., second, second] = cos
    return matrix


def layout_permutation(dim: int) -> Tensor:
    """The feature order that turns the interleaved layout into the half layout.

    ``perm = [0, 2, 4, ..., dim-2, 1, 3, ..., dim-1]``: position ``i`` of the
    half layout holds feature ``perm[i]`` of the interleaved one, so
    ``apply_rope(x[..., perm], p, f, layout="half")
    == apply_rope(x, p, f, layout="interleaved")[..., perm]``.
    ``torch.argsort(perm)`` goes back.

    Returns:
        ``(dim,)`` int64 tensor.
    """
    dim = _validate.even_int("dim", dim)
    return torch.cat([torch.arange(0, dim, 2), torch.arange(1, dim, 2)])


def interleaved_to_half(weight: Tensor, n_heads: int) -> Tensor:
    """Reorder the rows of ``W_q`` or ``W_k`` (or a bias) head by head for the half layout.

    A model that applies interleaved RoPE to ``x @ weight.T`` scores exactly
    like one that applies half-layout RoPE with the returned weight. This is
    the permutation Hugging Face's Llama conversion script applies to Meta's
    checkpoints.

    Args:
        weight: ``(n_heads * head_dim, ...)``, rows grouped by head (rows
            ``h*head_dim`` to ``(h+1)*head_dim - 1`` belong to head ``h``).
        n_heads: number of heads.

    Returns:
        Tensor shaped like ``weight``.
    """
    _validate.tensor("weight", weight, min_dim=1)
    n_heads = _validate.positive_int("n_heads", n_heads)
    rows = weight.shape[0]
    if rows % n_heads:
        raise ValueError(f"weight has {rows} rows, which n_heads={n_heads} does not divide")
    head_dim = _validate.even_int("head_dim (weight.shape[0] // n_heads)", rows // n_heads)
    perm = layout_permutation(head_dim).to(weight.device)
    per_head = weight.reshape(n_heads, head_dim, *weight.shape[1:])
    return per_head[:, perm].reshape(weight.shape)


def rope_basis(generator: Tensor) -> tuple[Tensor, Tensor]:
    """The RoPE inside ``U_p = exp(p·A)``: an orthogonal basis and the frequencies.

    A real skew-symmetric ``A`` (``Aᵀ = -A``) is ``Q B Qᵀ`` with ``Q``
    orthogonal and ``B`` block-diagonal, block ``j`` equal to
    ``[[0, -θ_j], [θ_j, 0]]`` with ``θ_j >= 0``. Hence
    ``matrix_exp(p * A) == Q @ rotation_matrix(p, θ) @ Q.T`` (interleaved
    layout) for every real ``p``.

    Computed from the Hermitian eigenproblem of ``iA``: an eigenvector
    ``v = a + ib`` of eigenvalue ``θ > 0`` gives the orthonormal pair
    ``(√2 a, √2 b)``, on which ``A`` acts as ``θ·[[0, -1], [1, 0]]``. The
    kernel of ``A`` (pairs with ``θ = 0``) comes from its singular vectors.

    Args:
        generator: ``(d, d)`` skew-symmetric matrix ``A``, ``d`` even.

    Returns:
        ``(basis, inv_freq)`` in ``generator``'s dtype: ``(d, d)`` orthogonal
        ``Q`` whose columns ``2j, 2j+1`` span pair ``j``, and ``(d/2,)``
        frequencies ``θ_j``, largest first.
    """
    _validate.tensor("generator", generator, min_dim=2, floating=True)
    if generator.dim() != 2 or generator.shape[0] != generator.shape[1]:
        raise ValueError(f"generator must be a square matrix (d, d), got shape "
                         f"{tuple(generator.shape)}")
    dim = _validate.even_int("generator.shape[0]", generator.shape[0])
    _validate.finite_tensor("generator", generator)
    a = generator.to(torch.float64)
    scale = float(a.abs().max())
    if float((a + a.T).abs().max()) > 16 * torch.finfo(generator.dtype).eps * scale:
        raise ValueError("generator must be skew-symmetric (generator.T == -generator)")
    a = (a - a.T) / 2
    # iA is Hermitian; its eigenvalues come in pairs ±θ_j, ascending.
    values, vectors = torch.linalg.eigh(1j * a.to(torch.complex128))
    theta = values[dim // 2:].flip(0)                        # θ_j >= 0, largest first
    upper = vectors[:, dim // 2:].flip(1)
    basis = math.sqrt(2) * torch.stack([upper.real, upper.imag], dim=-1).flatten(-2)
    turning = int((theta > dim * torch.finfo(torch.float64).eps * scale).sum())
    if turning < dim // 2:
        # The kernel of A: a real subspace, from the smallest singular values.
        kernel = torch.linalg.svd(a).Vh[2 * turning:].T
        basis = torch.cat([basis[:, :2 * turning], kernel], dim=1)
        theta[turning:] = 0.0
    return basis.to(generator.dtype), theta.to(generator.dtype)


def qk_transform(positions, inv_freq: Tensor, *, key_positions=None, layout: str = "half",
                 attention_factor: float = 1.0,
                 rotary_dim: int | None = None) -> Callable[[Tensor, Tensor], tuple[Tensor, Tensor]]:
    """A ``qk_transform`` hook for :class:`~posenc_lib.attention.MultiHeadAttention`.

    Args:
        positions: ``(n_q,)`` positions of the queries (broadcastable to
            ``(b, h, n_q)``).
        inv_freq: ``(rotary_dim/2,)``.
        key_positions: positions of the keys; defaults to ``positions``.
        layout, attention_factor, rotary_dim: as in :func:`apply_rope`.

    Returns:
        ``(q, k) -> (apply_rope(q, positions, ...), apply_rope(k, key_positions, ...))``.
    """
    key_positions = positions if key_positions is None else key_positions

    def transform(q: Tensor, k: Tensor) -> tuple[Tensor, Tensor]:
        options = dict(layout=layout, attention_factor=attention_factor, rotary_dim=rotary_dim)
        return (apply_rope(q, positions, inv_freq, **options),
                apply_rope(k, key_positions, inv_freq, **options))

    return transform


def relative_score(q: Tensor, k: Tensor, distances, inv_freq: Tensor, *,
                   layout: str = "half") -> Tensor:
    """The score ``⟨R_m q, R_{m+r} k⟩`` for every relative distance ``r`` (key minus query).

    It does not depend on ``m``, so this evaluates ``Re Σ_i h_i e^{-i r θ_i}``
    with ``h_i = q_i·conj(k_i)`` (pair ``i`` as a complex number, first member
    real), which costs ``O(dim)`` per distance whatever ``r`` is.

    Args:
        q: ``(..., dim)`` query (not yet rotated).
        k: ``(..., dim)`` key, broadcastable with ``q``.
        distances: ``(n,)`` relative distances ``r``.
        inv_freq: ``(dim/2,)``.
        layout: which features form pair ``i`` (see the module docstring).

    Returns:
        ``(..., n)`` tensor in the promoted dtype of ``q``, ``k`` and ``inv_freq``.
    """
    _validate.one_of("layout", layout, LAYOUTS)
    inv_freq = _check_inv_freq(inv_freq)
    _validate.tensor("q", q, min_dim=1, last_dim=2 * inv_freq.shape[0], floating=True)
    _validate.tensor("k", k, min_dim=1, last_dim=2 * inv_freq.shape[0], floating=True)
    r = torch.as_tensor(distances, device=inv_freq.device)
    if r.dim() != 1:
        raise ValueError(f"distances must be 1-D (n,), got shape {tuple(r.shape)}")
    dtype = torch.promote_types(torch.promote_types(q.dtype, k.dtype), inv_freq.dtype)
    q_pairs = torch.complex(*(t.to(dtype) for t in _pair_views(q, layout)))
    k_pairs = torch.complex(*(t.to(dtype) for t in _pair_views(k, layout)))
    h = q_pairs * k_pairs.conj()                                  # (..., dim/2)
    angles = rope_angles(r, inv_freq.to(dtype))                   # (n, dim/2)
    phases = torch.polar(torch.ones_like(angles), -angles)
    return (h @ phases.T).real


def decay_bound(distances, dim: int, base: float = 10000.0) -> Tensor:
    """RoFormer's relative upper bound ``(1/(d/2)) Σ_{j=1}^{d/2} |S_j|`` on the score.

    ``S_j = Σ_{i=0}^{j-1} e^{i·r·θ_i}`` for relative distance ``r``. By Abel
    summation, ``|score| <= max_i |h_{i+1} - h_i| · Σ_j |S_j|`` with
    ``h_i = q_i·conj(k_i)`` (pairs as complex numbers, ``h_{d/2} = 0``); this
    function returns the sum divided by ``d/2``, as RoFormer plots it. It
    equals ``d/4 + 1/2`` at distance 0 and is even in ``r``.

    Args:
        distances: relative distances ``r``, any shape ``S`` (computed in float64).
        dim: the feature size ``d`` (even).
        base: the frequency base.

    Returns:
        ``S``-shaped float64 tensor.
    """
    dim = _validate.even_int("dim", dim)
    base = _validate.finite_float("base", base, greater_than=1.0)
    r = torch.as_tensor(distances)
    if r.is_complex():
        raise ValueError("distances must be real")
    r = r.to(torch.float64)
    _validate.finite_tensor("distances", r)
    theta = inv_freq(dim, base, dtype=torch.float64)
    flat = r.reshape(-1)
    out = torch.empty_like(flat)
    step = max(1, 2 ** 22 // theta.numel())              # bounds the memory per chunk
    for start in range(0, flat.numel(), step):
        angles = flat[start:start + step, None] * theta
        partial_sums = torch.polar(torch.ones_like(angles), angles).cumsum(dim=-1)
        out[start:start + step] = partial_sums.abs().mean(dim=-1)
    return out.reshape(r.shape)


def cos_sin_error(positions, dim: int, base: float = 10000.0, *,
                  angle_dtype: torch.dtype = torch.float32,
                  cos_sin_dtype: torch.dtype | None = None) -> Tensor:
    """Largest error of cos and sin at each position, against float64.

    Mimics how models compute them: the frequencies are rounded to
    ``angle_dtype`` (from float64, once), the positions are converted to
    ``angle_dtype``, the angles ``m·θ_i`` are computed in ``angle_dtype``,
    and cos and sin are then rounded to ``cos_sin_dtype`` (e.g. bfloat16,
    as transformers casts them to the model's dtype). The reference does
    everything in float64.

    Args:
        positions: ``(n,)`` positions (integers up to ``2**53`` are exact in
            the reference).
        dim: feature size (even).
        base: frequency base.
        angle_dtype: dtype of the frequencies, positions and angles.
        cos_sin_dtype: dtype cos and sin are rounded to (defaults to ``angle_dtype``).

    Returns:
        ``(n,)`` float64 tensor: ``max_i max(|Δcos mθ_i|, |Δsin mθ_i|)``.
    """
    angle_dtype = _validate.floating_dtype("angle_dtype", angle_dtype)
    cos_sin_dtype = _validate.floating_dtype("cos_sin_dtype", cos_sin_dtype or angle_dtype)
    p = torch.as_tensor(positions)
    if p.is_complex() or p.dim() != 1:
        raise ValueError(f"positions must be a real 1-D sequence, got shape {tuple(p.shape)}")
    reference = rope_angles(p.to(torch.float64), inv_freq(dim, base, dtype=torch.float64))
    angles = rope_angles(p, inv_freq(dim, base, dtype=angle_dtype))
    error = torch.zeros(p.shape[0], dtype=torch.float64)
    for fn in (torch.cos, torch.sin):
        rounded = fn(angles).to(cos_sin_dtype).to(torch.float64)
        error = torch.maximum(error, (rounded - fn(reference)).abs().amax(dim=-1))
    return error


def rerotate(k: Tensor, delta, inv_freq: Tensor, *, layout: str = "half") -> Tensor:
    """Move keys rotated at position ``p`` to position ``p + delta``, without
    recomputing them.

    Rotations of a pair compose by adding angles, ``R(a)R(b) = R(a + b)``, so
    ``R_{Θ,p+δ} k = R_{Θ,δ} (R_{Θ,p} k)``: a cached key is moved by rotating
    it once more, by ``δ``. That is :func:`apply_rope` at the "position"
    ``δ``. Whatever ``attention_factor`` the keys carry stays as it is.

    With ``inv_freq = θ_new - θ_old`` and ``delta`` the keys' positions, the
    same call turns keys rotated with frequencies ``θ_old`` into keys rotated
    with ``θ_new`` at the same positions.

    Args:
        k: ``(..., seq, dim)`` rotated keys, e.g. a KV cache
            ``(batch, heads, seq, head_dim)``.
        delta: an int, or a tensor broadcastable to ``(..., seq)``: how many
            positions to move each key (negative moves it back).
        inv_freq: ``(dim/2,)`` the frequencies the keys were rotated with.
        layout: ``"half"`` or ``"interleaved"`` (see the module docstring).

    Returns:
        Tensor shaped like ``k``, in ``k``'s dtype.
    """
    _validate.tensor("k", k, min_dim=2, floating=True)
    inv_freq = _check_inv_freq(inv_freq)
    if k.shape[-1] != 2 * inv_freq.shape[0]:
        raise ValueError(f"k must have last dimension 2 * len(inv_freq) = "
                         f"{2 * inv_freq.shape[0]}, got shape {tuple(k.shape)}")
    if isinstance(delta, Tensor):
        if delta.is_complex() or delta.dtype == torch.bool:
            raise ValueError(f"delta must be a real tensor, got {delta.dtype}")
        shift = _check_positions(delta.reshape(1) if delta.dim() == 0 else delta, k,
                                 "delta", "k")
    elif isinstance(delta, int) and not isinstance(delta, bool):
        shift = torch.tensor([delta])
    else:
        raise ValueError(f"delta must be an int or a tensor, got {delta!r}")
    return apply_rope(k, shift, inv_freq, layout=layout)

