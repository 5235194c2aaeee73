"""How large RoPE's base must be (chapter 10).

Two readings of one question, how far a base lets a model attend:

* Liu et al. (2023), *Scaling Laws of RoPE-based Extrapolation*: the critical
  dimension (:func:`critical_dimension`), the critical base
  (:func:`critical_base`) and the extrapolation bound after fine-tuning
  (:func:`extrapolation_bound`);
* Men et al. (2024), *Base of RoPE Bounds Context Length*: the sum of
  cosines ``B_{m,θ}`` (:func:`rope_cos_sum`), the context length a base
  supports (:func:`rope_supported_length`) and the smallest base that supports
  a context length (:func:`rope_base_bound`).
"""

from __future__ import annotations

import contextlib
import math

import torch
from torch import Tensor

from . import _validate
from .scaling import _default_inv_freq, _exponents

__all__ = ["critical_dimension", "critical_base", "extrapolation_bound", "rope_cos_sum",
           "rope_supported_length", "rope_base_bound"]


def critical_dimension(dim: int, base: float = 10000.0,
                       train_length: float = 4096) -> int:
    """Liu et al.'s critical dimension,
    ``d_extra = 2⌈(dim/2)·log_base(train_length/2π)⌉``.

    Pair ``i`` has the wavelength ``λ_i = 2π·base**(2i/dim)``; the pairs
    ``i < d_extra/2`` complete a full turn within ``train_length``
    (``λ_i <= train_length``), the others do not, so ``d_extra`` counts the
    features whose whole period was seen in training (Liu et al. 2023, Eq. 13
    of OpenLMLab/scaling-rope's README at commit 101b93b). The result is
    clamped to ``[0, dim]``.

    Returns:
        even int.
    """
    dim = _validate.even_int("dim", dim)
    base = _validate.finite_float("base", base, greater_than=1.0)
    length = _validate.finite_float("train_length", train_length, greater_than=0.0)
    half = (dim / 2) * math.log(length / (2 * math.pi)) / math.log(base)
    return 2 * min(dim // 2, max(0, math.ceil(half)))


def _tune_lengths(train_length, tune_length) -> tuple[float, float]:
    train = _validate.finite_float("train_length", train_length, greater_than=2 * math.pi)
    tune = train if tune_length is None else _validate.finite_float("tune_length",
                                                                    tune_length)
    if tune < train:
        raise ValueError(f"tune_length must be >= train_length ({train}), got {tune}")
    return train, tune


def critical_base(train_length: float, tune_length: float | None = None, *,
                  original_base: float = 10000.0) -> float:
    """Liu et al.'s critical base ``β_0 = original_base ** log_{T_train/2π}(T_tune/2π)``.

    The base at which the (fractional) critical pair, the one whose wavelength
    was exactly ``train_length`` under ``original_base``, has the wavelength
    ``tune_length``. ``tune_length`` defaults to ``train_length`` (then
    ``β_0 = original_base``).
    """
    train, tune = _tune_lengths(train_length, tune_length)
    original_base = _validate.finite_float("original_base", original_base, greater_than=1.0)
    return original_base ** (math.log(tune / (2 * math.pi)) / math.log(train / (2 * math.pi)))


def extrapolation_bound(dim: int, base: float, train_length: float,
                        tune_length: float | None = None, *,
                        original_base: float = 10000.0) -> float:
    """Liu et al.'s extrapolation upper bound ``T_extra`` after fine-tuning
    with ``base``.

    A model pre-trained on ``train_length`` tokens with ``original_base`` and
    fine-tuned on ``tune_length`` tokens (default ``train_length``) with
    ``base``: if ``base > β_0`` (:func:`critical_base`),
    ``T_extra = 2π·base**(d_extra/dim)`` with ``d_extra`` from
    :func:`critical_dimension` at ``original_base`` and ``train_length``, the
    wavelength of the first pair that did not complete a turn in
    pre-training; otherwise ``tune_length`` (Liu et al. 2023, Eqs. 16a-b of
    OpenLMLab/scaling-rope's README at commit 101b93b). The bound is their
    claim about trained models; this function only evaluates the formula.

    Returns:
        float, in tokens.
    """
    train, tune = _tune_lengths(train_length, tune_length)
    base = _validate.finite_float("base", base, greater_than=1.0)
    d_extra = critical_dimension(dim, original_base, train)
    if base > critical_base(train, tune, original_base=original_base):
        return 2 * math.pi * base ** (d_extra / dim)
    return tune


def rope_cos_sum(distances, dim: int, base: float = 10000.0) -> Tensor:
    """Men et al.'s ``B_{m,θ} = Σ_{i=0}^{dim/2-1} cos(m·θ_i)`` at every distance ``m``.

    No normalisation: ``B_{0,θ} = dim/2``. For queries and keys with
    independent components of variance ``σ²`` and a similar key
    ``k* = q + ε`` (``ε`` of mean 0), Men et al. (2024) show
    ``E[qᵀR_m k*] - E[qᵀR_m k] = 2σ²·B_{m,θ}``.

    Args:
        distances: relative distances ``m``, any shape ``S`` (computed in float64).
        dim: head size (even).
        base: RoPE base.

    Returns:
        ``S``-shaped float64 tensor.
    """
    theta = _default_inv_freq(_validate.even_int("dim", dim),
                              _validate.finite_float("base", base, greater_than=1.0))
    m = torch.as_tensor(distances)
    if m.is_complex() or m.dtype == torch.bool:
        raise ValueError(f"distances must be real, got {m.dtype}")
    m = m.to(torch.float64)
    _validate.finite_tensor("distances", m)
    return torch.cos(m.unsqueeze(-1) * theta).sum(-1)


@contextlib.contextmanager
def _one_thread():
    """Run torch single-threaded inside the block (many small kernels)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _first_negative(theta: Tensor, limit: int) -> int | None:
    """Smallest integer ``0 <= m <= limit`` with ``Σ cos(m θ_i) < 0``, or ``None``."""
    start, chunk = 0, 512
    while start <= limit:
        m = torch.arange(start, min(limit, start + chunk - 1) + 1, dtype=torch.float64)
        negative = torch.nonzero(torch.cos(m[:, None] * theta).sum(-1) < 0)
        if negative.numel():
            return start + int(negative[0, 0])
        start += chunk
        chunk = min(2 * chunk, 16384)
    return None


def rope_supported_length(dim: int, base: float = 10000.0, *,
                          max_length: int = 2 ** 20) -> int:
    """The largest ``L`` with ``B_{m,θ} >= 0`` for every integer ``0 <= m <= L``.

    Men et al.'s criterion read the other way round: the context length a
    base supports (:func:`rope_cos_sum`). Searched up to ``max_length``,
    which is returned if ``B`` stays non-negative that far.

    Returns:
        int.
    """
    theta = _default_inv_freq(_validate.even_int("dim", dim, minimum=4),
                              _validate.finite_float("base", base, greater_than=1.0))
    max_length = _validate.positive_int("max_length", max_length)
    with _one_thread():
        first = _first_negative(theta, max_length)
    return max_length if first is None else first - 1


def rope_base_bound(context_length: int, dim: int = 128, *, lowest: float = 2.0,
                    highest: float = 1e15) -> float:
    """Men et al.'s lower bound: the smallest base with ``B_{m,θ} >= 0`` for all ``m <= L``.

    ``inf{base : Σ_i cos(m·base^(-2i/dim)) >= 0 for every integer
    0 <= m <= context_length}``, searched upwards from ``lowest``. The set of
    such bases is not an interval: bases above the bound can fail again.

    The search steps through ``u = ln base``. At a failing base, any ``m``
    with ``B(m) < 0`` certifies the bases up to the next root of
    ``u ↦ B(m; u)`` as failing too; the step to that root is taken safely
    from ``B``, its derivative and a bound on its second derivative
    (``|∂²B/∂u²| <= Σ_i (mθ_i x_i)² + mθ_i x_i²`` with ``x_i = 2i/dim``, largest
    at the left end since every ``θ_i`` decreases with ``u``), so no window of
    valid bases is skipped, up to float64 rounding. A base is accepted only
    after every ``m`` up to ``context_length`` has been evaluated.

    Args:
        context_length: ``L``, a positive integer.
        dim: head size (even, >= 4: with ``dim = 2`` the only pair turns one
            radian per position whatever the base, and ``B(2) = cos 2 < 0``).
        lowest: where the search starts (a base > 1).
        highest: the search gives up beyond this base and returns ``inf``.

    Returns:
        float: the bound, or ``math.inf``.
    """
    length = _validate.positive_int("context_length", context_length)
    dim = _validate.even_int("dim", dim, minimum=4)
    lowest = _validate.finite_float("lowest", lowest, greater_than=1.0)
    highest = _validate.finite_float("highest", highest, greater_than=lowest)
    with _one_thread():  # thousands of small steps: threads only add overhead
        return _base_bound_search(length, _exponents(dim), math.log(lowest),
                                  math.log(highest))


def _base_bound_search(length: int, x: Tensor, u: float, top: float) -> float:
    """The search of :func:`rope_base_bound` in ``u = ln base``; ``x = 2i/dim``."""
    certificates = torch.zeros(0, dtype=torch.float64)
    while u <= top:
        theta = torch.exp(-x * u)
        values = torch.cos(certificates[:, None] * theta).sum(-1)
        failing = values < 0
        if not bool(failing.any()):
            # Look near the recent certificates first, then everywhere.
            near = (certificates[-16:, None] + torch.arange(-64.0, 65.0)).flatten()
            near = near[(near >= 0) & (near <= length)].unique()
            near_values = torch.cos(near[:, None] * theta).sum(-1)
            if bool((near_values < 0).any()):
                m = float(near[near_values.argmin()])
            else:
                first = _first_negative(theta, length)
                if first is None:
                    return math.exp(u)
                m = float(first)
            found = torch.tensor([m], dtype=torch.float64)
            certificates = torch.cat([certificates[-255:], found])
            continue
        m = certificates[failing][:, None]
        angle = m * theta                     # mθ_i
        b = values[failing]
        slope = (torch.sin(angle) * angle * x).sum(-1)
        curvature = ((angle * x) ** 2 + angle * x * x).sum(-1)
        step = (-slope + torch.sqrt(slope * slope - 2 * curvature * b)) / curvature
        u += max(float(step.max()), 1e-13 * abs(u))
    return math.inf
