""":func:`diagnose_inv_freq`: the second entry point, for the ``inv_freq`` a
user's code computes for a model's ``config.json``.
"""

from __future__ import annotations

import math
from typing import Mapping

import torch
from torch import Tensor

from ... import _validate, rope
from .explanation import _inv_freq_candidates
from .findings import Diagnosis
from .messages import MESSAGES


def diagnose_inv_freq(inv_freq, config: Mapping) -> Diagnosis:
    """Which known variant or bug reproduces the ``inv_freq`` computed for ``config``.

    The reference is :func:`posenc_lib.scaling.rope_from_config` (transformers
    4.57's numbers). A match within float32 rounding (relative ``1e-5``) gives
    no findings; otherwise every known variant or bug in :data:`INV_FREQ_CODES`
    that applies to the config's ``rope_type`` is computed and the ones that
    reproduce ``inv_freq`` are named. Plain-RoPE frequencies with another base
    are fitted (``"base"``).

    Args:
        inv_freq: ``(dim/2,)`` floating-point tensor (or sequence), the user's.
        config: a parsed ``config.json`` (as for ``rope_from_config``).

    Returns:
        :class:`Diagnosis`; codes from :data:`INV_FREQ_CODES`.
    """
    from ... import scaling
    from ...config_reader import parse_rope_config
    if not isinstance(inv_freq, Tensor):
        try:
            inv_freq = torch.as_tensor(inv_freq, dtype=torch.float64)
        except Exception:
            raise ValueError(f"inv_freq must be a tensor or a sequence of numbers, got "
                             f"{type(inv_freq).__name__}") from None
    _validate.tensor("inv_freq", inv_freq, min_dim=1, floating=True)
    if inv_freq.dim() != 1:
        raise ValueError(f"inv_freq must be 1-D (dim/2,), got shape {tuple(inv_freq.shape)}")
    _validate.finite_tensor("inv_freq", inv_freq)
    if not isinstance(config, Mapping):
        raise ValueError(f"config must be a mapping (a parsed config.json), got "
                         f"{type(config).__name__}")
    rope_cfg = parse_rope_config(config)
    expected, _ = scaling.rope_from_config(config, dtype=torch.float64)
    got = inv_freq.detach().to("cpu", torch.float64)
    rtol = 1e-5

    def matches(candidate):
        return (candidate.shape == got.shape
                and bool(((candidate - got).abs() <= rtol * candidate.abs()).all()))

    what = f"rope_type {rope_cfg.rope_type!r}, dim {rope_cfg.dim}, base {rope_cfg.base:g}"
    fitted = {"rope_type": rope_cfg.rope_type, "dim": rope_cfg.dim, "base": rope_cfg.base}
    if matches(expected):
        return Diagnosis([], f"inv_freq matches the config ({what}) within float32 "
                             f"rounding.", fitted)
    found = [code for code, cand in _inv_freq_candidates(rope_cfg, config).items()
             if matches(cand)]
    if found:
        text = "; ".join(f"{c}: {MESSAGES[c]}" for c in found)
        return Diagnosis(found, f"inv_freq does not match the config ({what}); it is "
                                f"reproduced by {text}. Fix: compute it with "
                                f"scaling.rope_from_config(config).", fitted)
    if got.shape != expected.shape:
        return Diagnosis(["unknown"], f"inv_freq has {got.shape[0]} frequencies; the "
                                      f"config rotates {rope_cfg.dim} features, so "
                                      f"{rope_cfg.dim // 2} are expected ({what}).", fitted)
    if len(got) > 1 and float(got[0]) == 1.0 and bool((got > 0).all()):
        idx = torch.arange(len(got), dtype=torch.float64)
        slope = float((idx * got.log()).sum() / (idx * idx).sum())
        fitted_base = math.exp(-slope * rope_cfg.dim / 2)
        if rope_cfg.rope_type == "default" and matches(
                rope.inv_freq(rope_cfg.dim, fitted_base, dtype=torch.float64)):
            fitted["fitted_base"] = fitted_base
            return Diagnosis(["base"], f"inv_freq is plain RoPE with base "
                                       f"{fitted_base:.6g}; the config's rope_theta "
                                       f"is {rope_cfg.base:g}. Fix: read rope_theta "
                                       f"from the config.", fitted)
    ratio = got / expected
    worst = int((ratio - 1).abs().argmax())
    return Diagnosis(["unknown"], f"inv_freq does not match the config ({what}), and "
                                  f"none of the known variants or bugs reproduces it: "
                                  f"pair {worst} is {float(ratio[worst]):.5g} times the "
                                  f"expected {float(expected[worst]):.5g}.", fitted)
