"""Designs of 2025–26: p-RoPE, the partial-RoPE conventions, RNoPE-SWA and DroPE.

* **p-RoPE** (Barbero et al., arXiv 2410.06205), transformers 5.x's
  ``"proportional"`` rope type: the frequencies of the whole head,
  ``θ_i = base**(-2i/head_dim)``, keep only the fastest ``int(p·head_dim//2)``
  pairs; the slowest pairs get ``θ_i = 0`` and never turn
  (:func:`proportional_inv_freq`).
* **Five partial-RoPE layouts**, as a :class:`RotationPlan` that says
  which two features of a head turn together and at which frequency
  (:func:`rotation_plan`, :func:`apply_plan`). Each is what some shipped code
  computes; ``scripts/probe_conventions.py`` recovers the plan of each model from
  its own attention code and ``results/conventions.json`` stores what it found:

  ``"partial"``
      the NeoX slice: the *first* ``rotary_dim = int(head_dim·p)`` features
      rotate, frequencies ``base**(-2i/rotary_dim)`` spaced over that slice, pairs
      ``(j, j + rotary_dim/2)`` (rotate-half within the slice). GPT-NeoX, Phi,
      StableLM, GLM-4.5 (``glm4_moe``), Qwen3-Next; vLLM's ``is_neox_style=True``.
  ``"partial_adjacent"``
      the GPT-J slice: the same first ``rotary_dim`` features and frequencies,
      adjacent pairs ``(2j, 2j+1)``. GPT-J and CodeGen (``rotary_dim``), GLM and
      GLM-4 (``glm``, ``glm4``); vLLM's ``is_neox_style=False``.
  ``"proportional"``
      p-RoPE (transformers 5.x's ``"proportional"``, Gemma 4): frequencies spaced
      over the whole head, pairs ``(j, j + head_dim/2)`` over the whole head, the
      slowest at ``θ = 0``.
  ``"trailing"``
      multi-head latent attention with ``rope_interleave=True`` (DeepSeek-V2/V3,
      Mistral 4): the *last* ``rotary_dim`` features rotate
      (``query = cat(q_pass, q_rot)``), frequencies spaced over that slice,
      adjacent pairs ``(2j, 2j+1)``.
  ``"trailing_half"``
      the same trailing slice with ``rope_interleave=False``: rotate-half pairs
      ``(j, j + rotary_dim/2)`` within the slice.

  :data:`CONVENTIONS` holds the three drawn in the chapter's figure,
  :data:`LAYOUTS` all five.
* **RNoPE-SWA** (Yang et al., arXiv 2501.18795): sliding-window layers with
  RoPE interleaved with full-attention layers without positions
  (:func:`rnope_swa_layer_types`, :func:`rnope_swa_attention`).
* **FoPE** (Hua et al., arXiv 2412.17739), as vLLM serves it
  (``vllm/model_executor/layers/rotary_embedding/fope.py``): only the
  frequencies that turn at least once within the training length are kept, and
  each pair's cos and sin become learned mixtures of the cosines and sines of all
  kept frequencies (:func:`fope_inv_freq`, :func:`fope_cos_sin`, :func:`apply_fope`).
* **DroPE** (Gelberg et al., arXiv 2512.12167): RoPE removed from a
  pretrained model (the rotation set to the identity, ``cos = 1, sin = 0``),
  optionally with an RMS norm on the queries and keys, then recalibrated
  (:func:`drope_attention`).
* **PoPE** (Gopalakrishnan et al., arXiv 2509.10534): every feature, not every
  pair, becomes a complex number whose magnitude is ``softplus`` of the content
  and whose phase is the position times one of ``head_dim`` frequencies, plus a
  learned per-frequency bias on the keys; the score is
  ``Σ_c μ_q,c μ_k,c cos((n − m)θ_c + δ_c)`` (:func:`pope_inv_freq`,
  :func:`apply_pope`, :func:`pope_scores`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor

from . import _validate, rope
from .attention import scaled_dot_product_attention

__all__ = [
    "CONVENTIONS",
    "LAYOUTS",
    "RotationPlan",
    "apply_fope",
    "apply_plan",
    "apply_pope",
    "drope_attention",
    "feature_frequencies",
    "fope_cos_sin",
    "fope_inv_freq",
    "pope_inv_freq",
    "pope_scores",
    "proportional_inv_freq",
    "removed_pairs",
    "rnope_swa_attention",
    "rnope_swa_layer_types",
    "rotation_plan",
    "sliding_window_mask",
]

#: Every partial-RoPE layout :func:`rotation_plan` builds (see the module docstring).
LAYOUTS = ("partial", "partial_adjacent", "proportional", "trailing", "trailing_half")
#: The three layouts drawn in the chapter's figure, one per place the turning features sit.
CONVENTIONS = ("partial", "proportional", "trailing")


def _fraction(value) -> float:
    p = _validate.finite_float("partial_rotary_factor", value, greater_than=0.0)
    if p > 1.0:
        raise ValueError(f"partial_rotary_factor must be <= 1 (a share of the head), got {p}")
    return p


def proportional_inv_freq(head_dim: int, partial_rotary_factor: float = 1.0,
                          base: float = 10000.0, *, factor: float = 1.0,
                          dtype: torch.dtype | None = None) -> Tensor:
    """p-RoPE's frequencies, as transformers 5.x's ``"proportional"`` rope type.

    ``k = int(p·head_dim // 2)`` pairs turn at ``base**(-2i/head_dim) / factor``,
    ``i < k``; the other ``head_dim/2 - k`` pairs get 0.

    Args:
        head_dim: features per head (even).
        partial_rotary_factor: the share ``p`` of pairs that turn, ``0 < p <= 1``.
        base: ``rope_theta`` (> 1).
        factor: divides every frequency (5.x's ``factor``, default 1), ``>= 1``.
        dtype: computed in float64 and rounded once (torch's default if ``None``).

    Returns:
        ``(head_dim/2,)`` frequencies, fastest first, zeros at the end.
    """
    factor = _validate.finite_float("factor", factor, at_least=1.0)
    dtype = _validate.floating_dtype("dtype", dtype)
    # p-RoPE is rope.partial_inv_freq's head_dim spacing; 5.x adds the factor
    theta = rope.partial_inv_freq(head_dim, _fraction(partial_rotary_factor), base,
                                  spacing="head_dim", dtype=torch.float64)
    return (theta / factor).to(dtype)


def removed_pairs(head_dim: int, partial_rotary_factor: float, base: float,
                  train_length: int) -> dict:
    """What p-RoPE removes, measured against the training length ``L``.

    Returns a dict with ``kept`` and ``removed`` (pair counts), ``unclosed``
    (pairs of plain RoPE with wavelength ``2π/θ_i > L``: they never close the
    circle in training) and ``unclosed_removed`` (how many of those p-RoPE
    removes). Plain RoPE's wavelengths grow with ``i``, so p-RoPE removes the
    unclosed pairs first.
    """
    head_dim = _validate.even_int("head_dim", head_dim)
    p = _fraction(partial_rotary_factor)
    base = _validate.finite_float("base", base, greater_than=1.0)
    train_length = _validate.positive_int("train_length", train_length)
    kept = int(p * head_dim // 2)
    theta = rope.inv_freq(head_dim, base, dtype=torch.float64)
    unclosed = (2 * math.pi / theta > train_length)
    return {"kept": kept, "removed": head_dim // 2 - kept,
            "unclosed": int(unclosed.sum()), "unclosed_removed": int(unclosed[kept:].sum())}


class RotationPlan(NamedTuple):
    """Which features of a head turn together, and how fast.

    ``first[j]`` and ``second[j]`` are turned by ``position · theta[j]``
    (``theta[j] = 0``: the pair passes through). Every feature index
    ``0 .. head_dim-1`` appears exactly once in ``first`` or ``second``.
    Each is a ``(head_dim/2,)`` tensor.
    """

    first: Tensor
    second: Tensor
    theta: Tensor


def rotation_plan(head_dim: int, partial_rotary_factor: float,
                  convention: str = "partial", base: float = 10000.0) -> RotationPlan:
    """The rotation of one head under a partial-RoPE ``convention``.

    Args:
        head_dim: features per head (even).
        partial_rotary_factor: the share ``p`` of the head that turns
            (the slices: ``rotary_dim = int(head_dim·p)``
            features, which must be even and >= 2; ``"proportional"``:
            ``int(p·head_dim//2)`` pairs).
        convention: one of :data:`LAYOUTS` (see the module docstring).
        base: ``rope_theta``.

    Returns:
        A :class:`RotationPlan` of ``(head_dim/2,)`` float64 tensors (``theta``)
        and int64 feature indices.
    """
    head_dim = _validate.even_int("head_dim", head_dim)
    p = _fraction(partial_rotary_factor)
    _validate.one_of("convention", convention, LAYOUTS)
    base = _validate.finite_float("base", base, greater_than=1.0)
    half = head_dim // 2
    if convention == "proportional":
        j = torch.arange(half)
        return RotationPlan(j, j + half, proportional_inv_freq(head_dim, p, base,
                                                               dtype=torch.float64))
    rotary = int(head_dim * p)
    if rotary < 2 or rotary % 2:
        raise ValueError(f"partial_rotary_factor={p} gives rotary_dim = int({head_dim} * "
                         f"{p}) = {rotary}, which must be even and >= 2 for convention "
                         f"{convention!r}")
    theta = torch.cat([rope.inv_freq(rotary, base, dtype=torch.float64),
                       torch.zeros((head_dim - rotary) // 2, dtype=torch.float64)])
    if convention.endswith("adjacent") or convention == "trailing":
        a = torch.arange(0, rotary, 2)  # adjacent pairs (2j, 2j+1) within the slice
        b = a + 1
    else:
        a = torch.arange(rotary // 2)  # rotate-half pairs (j, j + r/2) within it
        b = a + rotary // 2
    still = torch.arange(rotary, head_dim)  # the passed-through features, paired
    still_a, still_b = still[: (head_dim - rotary) // 2], still[(head_dim - rotary) // 2:]
    if convention.startswith("trailing"):  # the slice is the last `rotary` features
        shift = head_dim - rotary
        return RotationPlan(torch.cat([a + shift, still_a - rotary]),
                            torch.cat([b + shift, still_b - rotary]), theta)
    return RotationPlan(torch.cat([a, still_a]), torch.cat([b, still_b]), theta)


def feature_frequencies(plan: RotationPlan) -> Tensor:
    """``(head_dim,)``: the frequency at which each feature of the head turns (0: still)."""
    head_dim = 2 * plan.theta.shape[0]
    out = torch.zeros(head_dim, dtype=plan.theta.dtype)
    out[plan.first] = plan.theta
    out[plan.second] = plan.theta
    return out


def apply_plan(x: Tensor, positions, plan: RotationPlan) -> Tensor:
    """Rotate ``x`` by a :class:`RotationPlan`.

    Args:
        x: ``(..., seq, head_dim)`` queries or keys, ``head_dim = 2·len(plan.theta)``.
        positions: ``(seq,)`` or anything broadcasting to ``(..., seq)``.
        plan: from :func:`rotation_plan`.

    Returns:
        Tensor shaped like ``x``: ``x[a]cos − x[b]sin`` in feature ``a``,
        ``x[b]cos + x[a]sin`` in feature ``b``, angle ``position·theta``
        (computed in float64, then cast to ``x``'s dtype).
    """
    _validate.tensor("x", x, min_dim=1, floating=True)
    if x.shape[-1] != 2 * plan.theta.shape[0]:
        raise ValueError(f"x.shape[-1] must be the plan's head_dim "
                         f"{2 * plan.theta.shape[0]}, got {x.shape[-1]}")
    angles = rope.rope_angles(positions, plan.theta)  # (..., seq, head_dim/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    a, b = x[..., plan.first], x[..., plan.second]
    out = torch.empty_like(x)
    out[..., plan.first] = a * cos - b * sin
    out[..., plan.second] = b * cos + a * sin
    return out


def rnope_swa_layer_types(num_layers: int, full_every: int = 4) -> list[str]:
    """RNoPE-SWA's layer layout: every ``full_every``-th layer full attention.

    ``"sliding_attention"`` layers use RoPE within a window;
    ``"full_attention"`` layers see every earlier token with no positional
    encoding. Layer ``i`` is full when ``(i + 1) % full_every == 0``, the rule
    of Command A's ``sliding_window_pattern`` (3 sliding : 1 full at 4).

    Returns:
        A list of ``num_layers`` strings.
    """
    num_layers = _validate.positive_int("num_layers", num_layers)
    full_every = _validate.positive_int("full_every", full_every)
    return ["full_attention" if (i + 1) % full_every == 0 else "sliding_attention"
            for i in range(num_layers)]


def sliding_window_mask(n: int, window: int) -> Tensor:
    """``(n, n)`` bool: query ``i`` sees key ``j`` when ``i - window < j <= i``
    (itself and the ``window - 1`` tokens before it)."""
    n = _validate.positive_int("n", n)
    window = _validate.positive_int("window", window)
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    return (j <= i) & (j > i - window)


def rnope_swa_attention(q: Tensor, k: Tensor, v: Tensor, layer_type: str, *,
                        inv_freq: Tensor, window: int, layout: str = "interleaved",
                        positions=None, return_weights: bool = False):
    """One RNoPE-SWA layer: RoPE within a window, or full attention without positions.

    Args:
        q, k, v: ``(..., seq, head_dim)``.
        layer_type: ``"sliding_attention"`` (RoPE with ``inv_freq``, causal
            window of ``window`` keys) or ``"full_attention"`` (no rotation,
            causal over every earlier key).
        inv_freq: ``(head_dim/2,)`` frequencies for the sliding layers.
        window: keys each query sees in a sliding layer (itself included).
        layout: RoPE pair layout (``"interleaved"`` as in Command A's code).
        positions: ``(seq,)``; ``arange(seq)`` if ``None``.
        return_weights: also return the ``(..., seq, seq)`` attention weights.

    Returns:
        ``(..., seq, head_dim)``: softmax(q·kᵀ/√head_dim, masked) · v, and the
        weights if ``return_weights``.
    """
    _validate.one_of("layer_type", layer_type, ("sliding_attention", "full_attention"))
    _validate.tensor("q", q, min_dim=2, floating=True)
    n = q.shape[-2]
    if layer_type == "full_attention":
        return scaled_dot_product_attention(q, k, v, causal=True,
                                            return_weights=return_weights)
    if positions is None:
        positions = torch.arange(n)
    q = rope.apply_rope(q, positions, inv_freq, layout=layout)
    k = rope.apply_rope(k, positions, inv_freq, layout=layout)
    window = _validate.positive_int("window", window)
    blocked = torch.zeros(n, n, dtype=q.dtype).masked_fill(~sliding_window_mask(n, window),
                                                             float("-inf"))
    return scaled_dot_product_attention(q, k, v, score_bias=blocked,
                                        return_weights=return_weights)


def _rms_norm(x: Tensor, weight: Tensor | None, eps: float) -> Tensor:
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return x if weight is None else x * weight


def drope_attention(q: Tensor, k: Tensor, v: Tensor, *, scaling: float | None = None,
                    qk_norm: str | None = None, q_weight: Tensor | None = None,
                    k_weight: Tensor | None = None, eps: float = 1e-6,
                    return_weights: bool = False):
    """Causal attention of a DroPE model: RoPE removed, optional RMS norm on q and k.

    The authors' code removes RoPE by passing ``cos = 1, sin = 0`` (the identity
    rotation) to the model's own attention, optionally replaces the ``scaling``
    (their ``softmax_scale``), and with ``attention_type="qk_norm_nope"`` applies
    ``nn.RMSNorm`` to the *concatenated heads* of the projected queries and keys,
    before they are split into heads.

    Args:
        q, k, v: ``(heads, seq, head_dim)`` (or with leading batch dimensions).
        scaling: multiplies ``q·k``; ``1/√head_dim`` if ``None``.
        qk_norm: ``None``, ``"q"``, ``"k"`` or ``"qk"``: which of q and k get the norm.
        q_weight, k_weight: ``(heads·head_dim,)`` norm weights (ones if ``None``).
        eps: the norm's epsilon (the model's ``rms_norm_eps``).
        return_weights: also return the ``(heads, seq, seq)`` attention weights.

    Returns:
        ``(heads, seq, head_dim)`` attention output, and the weights if
        ``return_weights``.
    """
    _validate.tensor("q", q, min_dim=3, floating=True)
    _validate.one_of("qk_norm", qk_norm, (None, "q", "k", "qk"))
    eps = _validate.finite_float("eps", eps, greater_than=0.0)
    head_dim = q.shape[-1]
    if scaling is None:
        scaling = head_dim ** -0.5
    scaling = _validate.finite_float("scaling", scaling, greater_than=0.0)

    def norm(x: Tensor, weight: Tensor | None) -> Tensor:
        heads = x.shape[-3]
        flat = x.transpose(-3, -2).reshape(*x.shape[:-3], x.shape[-2], heads * head_dim)
        flat = _rms_norm(flat, weight, eps)
        return flat.reshape(*x.shape[:-3], x.shape[-2], heads, head_dim).transpose(-3, -2)

    if qk_norm and "q" in qk_norm:
        q = norm(q, q_weight)
    if qk_norm and "k" in qk_norm:
        k = norm(k, k_weight)
    return scaled_dot_product_attention(q, k, v, causal=True, scale=scaling,
                                        return_weights=return_weights)


def fope_inv_freq(rotary_dim: int, base: float, max_position_embeddings: int, *,
                  num_inv_freq: int | None = None,
                  dtype: torch.dtype | None = None) -> Tensor:
    """FoPE's basis frequencies: RoPE's that close the circle within ``L``.

    ``θ_i = base**(-2i/rotary_dim)`` for the pairs with ``θ_i > 2π/L``
    (``L = max_position_embeddings``), or the first ``num_inv_freq`` if given.
    The under-trained slower frequencies are left out of the basis. This is
    vLLM's test; the authors' code zeroes ``θ_i < 2π/L`` and so also keeps
    ``θ_i = 2π/L`` exactly, the only place the two differ.

    Returns:
        ``(D,)`` frequencies, fastest first, ``D <= rotary_dim/2``.
    """
    rotary_dim = _validate.even_int("rotary_dim", rotary_dim)
    base = _validate.finite_float("base", base, greater_than=1.0)
    length = _validate.positive_int("max_position_embeddings", max_position_embeddings)
    dtype = _validate.floating_dtype("dtype", dtype)
    theta = rope.inv_freq(rotary_dim, base, dtype=torch.float64)
    if num_inv_freq is None:
        keep = theta > 2 * math.pi / length
    else:
        count = _validate.positive_int("num_inv_freq", num_inv_freq)
        keep = torch.arange(theta.shape[0]) < count
    return theta[keep].to(dtype)


def fope_cos_sin(positions, inv_freq: Tensor, cos_coef: Tensor, sin_coef: Tensor,
                 head_dim: int, *, sin_padding: float = 1.0) -> tuple[Tensor, Tensor]:
    """FoPE's cos and sin for the half layout (pairs ``(j, j + head_dim/2)``).

    Pair ``j`` gets ``Σ_D cos(p·θ_D)·cos_coef[D, j]`` and
    ``Σ_D sin(p·θ_D)·sin_coef[D, j]``: a Fourier series in the position instead
    of one frequency. The ``head_dim/2 - d`` pairs beyond the coefficients get
    ``cos = sin = 1`` as in vLLM's ``F.pad(..., value=1)`` and the authors'
    (TsinghuaC3I/Fourier-Position-Embedding at bd94b20d, ``olmo/model.py``
    L713-714; frequency zero with a 45° phase, as a maintainer's reply on that
    repository's issue 6 explains): a fixed,
    position-free map ``x + rotate(x)`` (``√2`` times a 45° turn), so those
    pairs contribute ``2·q·k`` whatever the positions. vLLM's file at commit
    151a2c744af6eb59678be10f3cc13a6eb0a138e3 pads ``sin`` with 0 instead
    (``sin_padding=0``): those pairs pass through unrotated and contribute ``q·k``.

    Args:
        positions: ``(seq,)`` positions.
        inv_freq: ``(D,)`` from :func:`fope_inv_freq`.
        cos_coef, sin_coef: ``(D, d)`` shared by the heads, or ``(heads, D, d)``
            (vLLM's ``fope_sep_head``), ``d <= head_dim/2``.
        head_dim: features per head (even).
        sin_padding: the ``sin`` of the pairs beyond the coefficients: 1 (the
            authors', vLLM 0.33.0's) or 0 (vLLM at 151a2c74).

    Returns:
        ``(cos, sin)``, each ``(seq, head_dim)`` or ``(heads, seq, head_dim)``.
    """
    head_dim = _validate.even_int("head_dim", head_dim)
    inv_freq = rope._check_inv_freq(inv_freq)
    for name, coef in (("cos_coef", cos_coef), ("sin_coef", sin_coef)):
        _validate.tensor(name, coef, min_dim=2, floating=True)
        if coef.dim() > 3 or coef.shape[-2] != inv_freq.shape[0] \
                or coef.shape[-1] > head_dim // 2:
            raise ValueError(f"{name} must be (D, d) or (heads, D, d) with D = "
                             f"{inv_freq.shape[0]} and d <= head_dim/2 = {head_dim // 2}, "
                             f"got shape {tuple(coef.shape)}")
    angles = rope.rope_angles(positions, inv_freq)  # (seq, D)
    cos = angles.cos() @ cos_coef.to(angles.dtype)
    sin = angles.sin() @ sin_coef.to(angles.dtype)
    pad = head_dim // 2 - cos.shape[-1]
    cos = torch.nn.functional.pad(cos, (0, pad), value=1.0)
    sin_padding = _validate.finite_float("sin_padding", sin_padding)
    sin = torch.nn.functional.pad(sin, (0, pad), value=sin_padding)
    return torch.cat((cos, cos), dim=-1), torch.cat((sin, sin), dim=-1)


def apply_fope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """``x·cos + rotate_half(x)·sin`` with FoPE's ``cos, sin`` from :func:`fope_cos_sin`.

    Args:
        x: ``(..., seq, head_dim)`` (``(heads, seq, head_dim)`` for per-head
            coefficients).
        cos, sin: broadcastable to ``x``.

    Returns:
        Tensor shaped like ``x``.
    """
    _validate.tensor("x", x, min_dim=2, floating=True)
    _validate.broadcastable("cos", cos.shape, x.shape)
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos.to(x.dtype) + rotated * sin.to(x.dtype)


def pope_inv_freq(head_dim: int, base: float = 10000.0, *,
                  dtype: torch.dtype | None = None) -> Tensor:
    """PoPE's frequencies: one per feature, ``θ_c = base**(-c/head_dim)``.

    RoPE has ``head_dim/2`` frequencies ``base**(-2i/head_dim)``, one per pair;
    PoPE turns every feature and so has ``head_dim`` of them, spread over the
    same range twice as densely: ``θ_{2i}`` is RoPE's ``θ_i``.

    Args:
        head_dim: features per head (any positive integer).
        base: the base wavelength (``> 1``; 10 000 in the paper and in
            PoPE-pytorch's ``theta`` default).
        dtype: computed in float64 and rounded once (torch's default if ``None``).

    Returns:
        ``(head_dim,)`` frequencies, fastest first.
    """
    head_dim = _validate.positive_int("head_dim", head_dim)
    base = _validate.finite_float("base", base, greater_than=1.0)
    dtype = _validate.floating_dtype("dtype", dtype)
    c = torch.arange(head_dim, dtype=torch.float64)
    return (base ** (-c / head_dim)).to(dtype)


def apply_pope(x: Tensor, positions, inv_freq: Tensor, *,
               bias: Tensor | None = None) -> Tensor:
    """PoPE's polar features of queries or keys, in real form.

    Feature ``c`` of ``x`` at position ``p`` becomes the complex number
    ``softplus(x_c)·exp(i(p·θ_c + δ_c))``: the content sets its magnitude
    (``softplus`` keeps it positive) and the position alone sets its phase.
    The real parts come first, then the imaginary parts, so that
    ``apply_pope(q, m, θ) @ apply_pope(k, n, θ, bias=δ).mT`` is the real part of
    the complex score, ``Σ_c μ_q,c μ_k,c cos((n − m)θ_c + δ_c)``
    (:func:`pope_scores`). The paper adds the bias ``δ`` on the keys only.

    Reference: arXiv 2509.10534, Section 3. The paper links its authors'
    repository (github.com/agopal42/pope), which this library does not check
    against; the unit tests compare with the paper's formula and with an
    independent implementation, lucidrains/PoPE-pytorch (``PoPE_pytorch/pope.py``
    at commit ee11cab0dda8361b02fec56975e84e419ea6a631), which interleaves the
    real and imaginary parts instead (a permutation of the same features) and
    clamps its learned bias to ``[-2π, 0]``.

    Args:
        x: ``(..., seq, head_dim)`` queries or keys (floating point).
        positions: ``(seq,)``, or anything broadcasting to ``(..., seq)``.
        inv_freq: ``(head_dim,)`` from :func:`pope_inv_freq`.
        bias: ``(head_dim,)`` or ``(heads, head_dim)`` phase bias ``δ`` (any
            shape that broadcasts to ``(..., head_dim)`` once a sequence axis is
            inserted before the last), finite; ``None`` for no bias. The paper
            and PoPE-pytorch keep it in ``[-2π, 0]``; any finite value is taken.

    Returns:
        ``(..., seq, 2·head_dim)`` in ``x``'s dtype: ``μ·cos φ`` in the first
        ``head_dim`` features, ``μ·sin φ`` in the last, with the phases
        ``φ = p·θ + δ`` computed in float64.
    """
    _validate.tensor("x", x, min_dim=1, floating=True)
    inv_freq = rope._check_inv_freq(inv_freq)
    if inv_freq.shape[0] != x.shape[-1]:
        raise ValueError(f"inv_freq must have one frequency per feature of x "
                         f"({x.shape[-1]}), got {inv_freq.shape[0]}")
    phase = rope.rope_angles(positions, inv_freq.to(torch.float64))
    if bias is not None:
        _validate.tensor("bias", bias, min_dim=1, last_dim=x.shape[-1], floating=True)
        _validate.finite_tensor("bias", bias)
        phase = phase + bias.to(torch.float64).unsqueeze(-2)
    # positions (..., seq) and bias (..., head_dim) must not grow x
    _validate.broadcastable("the phases of positions and bias", phase.shape, x.shape)
    magnitude = torch.nn.functional.softplus(x)
    return torch.cat((magnitude * phase.cos().to(x.dtype),
                      magnitude * phase.sin().to(x.dtype)), dim=-1)


def pope_scores(q: Tensor, k: Tensor, inv_freq: Tensor, *, q_positions=None,
                k_positions=None, bias: Tensor | None = None) -> Tensor:
    """PoPE's attention logits before scaling and softmax.

    ``a(m, n) = Σ_c softplus(q_m,c)·softplus(k_n,c)·cos((n − m)θ_c + δ_c)``
    for the query at position ``m`` and the key at position ``n``: the content
    enters only through the non-negative magnitudes, the angle only through
    ``n − m`` and the content-free bias ``δ``.

    Args:
        q: ``(..., n_q, head_dim)``.
        k: ``(..., n_k, head_dim)``.
        inv_freq: ``(head_dim,)`` from :func:`pope_inv_freq`.
        q_positions, k_positions: ``(n_q,)`` and ``(n_k,)`` (``arange`` if
            ``None``; pass ``arange(n_k - n_q, n_k)`` for queries that come last).
        bias: the keys' phase bias ``δ``, as in :func:`apply_pope`.

    Returns:
        ``(..., n_q, n_k)`` scores (divide by a temperature such as
        ``√head_dim`` before the softmax, as the model does).
    """
    _validate.tensor("q", q, min_dim=2, floating=True)
    _validate.tensor("k", k, min_dim=2, floating=True)
    if q_positions is None:
        q_positions = torch.arange(q.shape[-2])
    if k_positions is None:
        k_positions = torch.arange(k.shape[-2])
    return apply_pope(q, q_positions, inv_freq) @ apply_pope(
        k, k_positions, inv_freq, bias=bias).mT
