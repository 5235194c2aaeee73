"""Phase 3 of :func:`diagnose_rope`: which known variant or bug reproduces the
fitted frequencies, phase and entries (the scaled schedules, the wrong
exponents and bases, the attention factor), and the catalogue of known
``inv_freq`` variants and bugs (:data:`INV_FREQ_CODES`).
"""

from __future__ import annotations

import math
from typing import Mapping

import torch

from ... import rope
from . import fit as _fit
from .findings import Diagnosis, _order
from .fit import _fit_frequencies, _fit_offset, _rank, _safe_exp
from .messages import MESSAGES
from .structure import _EPS32, _block_angles, _tolerance, _Unfitted, _wrap


def _scaled_twice(factor, intended):
    """A common ratio of the frequencies against a scaled RoPE's."""
    kind = _rope_type(intended["config"])
    from ...config_reader import parse_rope_config
    intended_factor = parse_rope_config(intended["config"]).params.get("factor")
    twice = (intended_factor is not None
             and abs(factor / intended_factor - 1) < 1e-4)
    return ("scaling",
            f"Scaling: every frequency of fn is the {kind!r} rope_scaling's divided by "
            f"{factor:.6g} (positions divided by {factor:.6g} more than intended)"
            + (f": the factor {intended_factor:g} applied twice (once in inv_freq, once "
               f"to the positions or again in inv_freq)" if twice else "")
            + ". Fix: apply the scaling once, as scaling.rope_from_config(config) "
              "computes it.")


def _free_frequencies(angles, positions, intended):
    """Per-pair frequencies fitted with ``q(p) = p``; ``None`` if they do not
    reproduce the angles."""
    theta = _fit_frequencies(angles, positions)
    tol = _fit.pair_tolerance(positions, theta, intended["noise"])
    model = positions.to(torch.float64)[:, None] * theta
    if bool((_wrap(angles - model).abs() > tol + 64 * _EPS32 * positions[:, None]).any()):
        return None
    return theta


def _schedule(angles, positions, theta, intended, fit, pairs, attention):
    """Frequencies fitted freely, matched to the intended schedule."""
    free = _free_frequencies(angles, positions, intended)
    if free is None or float(free[0]) <= 0:
        return None
    fit.fitted["fitted_inv_freq"] = free
    codes, lines = [], []
    explained = _explain_schedule(free, intended)
    if explained is None:
        # the older fit tries a geometric ladder of another base or exponent;
        # if it cannot, these proven rotations at free frequencies are the answer
        intended["free_rotation"] = _free_sentence(free, intended, attention)
        return None
    codes.append(explained[0])
    lines.append(explained[1])
    if attention is not None:
        codes.append(attention[0])
        lines.append(attention[1])
    return Diagnosis(_order(codes), "\n".join(lines), fit.fitted)


def _free_sentence(free, intended, attention):
    """``(codes, sentence)`` for pairs that are exact rotations, every position
    rotated as itself, at frequencies ``free`` that no ladder or scaling the
    fit knows explains: the finding ``"frequency"``."""
    theta = intended["expected"].to(torch.float64)
    rel = 2e-4
    off = ((free - theta).abs() > rel * theta).nonzero().flatten().tolist()
    shown = "; ".join(f"pair {i} turns {float(free[i]):.6g} rad per position, intended "
                      f"{float(theta[i]):.6g}" for i in off[:3])
    hint = ""
    n = len(free)
    shifted = [i for i in range(n - 1)
               if abs(float(free[i] / theta[i + 1]) - 1) <= rel
               or abs(float(free[i + 1] / theta[i]) - 1) <= rel]
    repeated = [i for i in range(n - 1) if abs(float(free[i + 1] / free[i]) - 1) <= rel]
    if repeated:
        hint = (f" Pairs {repeated[0]} and {repeated[0] + 1} turn at the same frequency "
                f"(a frequency repeated?).")
    elif len(shifted) >= max(2, len(off) // 2):
        hint = (f" From pair {shifted[0]} on, pairs turn at their neighbour's intended "
                f"frequency: the ladder is shifted by one pair (a frequency dropped or "
                f"inserted, or inv_freq indexed off by one).")
    elif bool((free[1:] > free[:-1]).any()):
        k = int(torch.nonzero(free[1:] > free[:-1])[0])
        hint = (f" The ladder is not decreasing: pair {k + 1} turns faster than pair "
                f"{k}.")
    line = (f"Frequency: every pair of the {intended['layout']} layout is a rotation and "
            f"every probed position is rotated as itself, but {len(off)} of {n} pairs "
            f"turn at other frequencies than intended ({shown}), and no base"
            + (", exponent or scaling parameter" if intended["scaled"] else " or exponent")
            + f" reproduces them.{hint} Fix: compute inv_freq from the one formula, "
              f"base ** (-2i/d) for i = 0..d/2-1"
            + (", then the scaling as scaling.rope_from_config does" if intended["scaled"]
               else "") + ".")
    codes, lines = ["frequency"], [line]
    if attention is not None:
        codes.append(attention[0])
        lines.append(attention[1])
    return _order(codes), "\n".join(lines)


def _explain_schedule(free, intended):
    """``(code, sentence)`` for fitted frequencies ``free`` that differ from
    the intended ones; ``None`` for a plain geometric ladder of another base or
    exponent (the older fit names those)."""
    theta = intended["expected"].to(torch.float64)
    rotary, base = intended["rotary"], intended["base"]
    plain = rope.inv_freq(rotary, base, dtype=torch.float64)
    rel = 2e-4
    ratio = free / plain
    truncated = torch.floor(theta.to(torch.float32).to(torch.float64))
    if bool(((free - truncated).abs() <= 1e-6).all()):
        return ("frequency-dtype",
                f"Frequency dtype: fn's frequencies are the intended ones rounded down to "
                f"integers ({', '.join(f'{float(v):g}' for v in free[:4])}, ...: pair 1 "
                f"turns {float(free[1]) if len(free) > 1 else 0:g} rad per position "
                f"instead of {float(theta[1]) if len(theta) > 1 else 0:.5g}): inv_freq "
                f"cast to an integer dtype (inv_freq.to(position_ids.dtype), or "
                f"torch.arange without .float()). Fix: keep inv_freq in float32 and "
                f"cast the positions to float (position_ids.float()).")
    off = ((free - theta).abs() > rel * theta).nonzero().flatten().tolist()
    ramp = _ramp_pairs(theta, plain, intended) if intended["scaled"] else []
    # several pairs off, all where the scaling ramps or smooths: its formula, not
    # a per-pair edit (one pair alone stays a per-pair frequency)
    in_ramp = len(off) >= 2 and set(off) <= set(ramp)
    if off and not in_ramp and len(off) <= max(2, len(theta) // 8) and not (
            intended["scaled"] and _scaling_parameter_fit(free, intended)):
        shown = "; ".join(f"pair {i} turns {float(free[i]):.6g} rad per position, "
                          f"intended {float(theta[i]):.6g} ({float(free[i] / theta[i]):.4g}"
                          f" times)" for i in off[:3])
        return ("frequency",
                f"Frequency: {len(off)} of {len(theta)} pairs turn at another frequency "
                f"than intended ({shown}); every other pair matches. Fix: compute every "
                f"pair's frequency from the one formula (no per-pair edits, overrides "
                f"or off-by-one indexing of inv_freq).")
    common = float(ratio.median())
    if bool(((ratio - common).abs() <= rel * common).all()) and abs(common - 1) > rel:
        factor = 1 / common
        kind = _rope_type(intended["config"]) if intended["scaled"] else None
        if kind is None:
            return ("scaling",
                    f"Scaling: fn is a RoPE whose every frequency is divided by "
                    f"{factor:.6g} (positions divided by {factor:.6g}): position "
                    f"interpolation (rope_type 'linear', factor {factor:.6g}), while "
                    f"you intend plain RoPE. Fix: drop the scaling, or give the "
                    f"rope_scaling the checkpoint was trained with.")
        kept, divided = _fit.bands(theta / plain, _scaling_factor(intended) or factor)
        return ("scaling",
                f"Scaling: fn is plain position interpolation: every frequency is "
                f"divided by {factor:.6g} (rope_type 'linear', factor {factor:.6g}), "
                f"but the rope_scaling you give is {kind!r}, which keeps pairs 0.."
                f"{kept} and divides only pairs {divided}..{len(theta) - 1} fully. "
                f"Fix: compute inv_freq with scaling.rope_from_config(config) for "
                f"rope_type {kind!r}, not 'linear'.")
    if not intended["scaled"]:
        return None
    kind = _rope_type(intended["config"])
    factor = _scaling_factor(intended)
    line = (f"Scaling: fn's frequencies are not those of the rope_scaling you give "
            f"({kind!r}). ")
    if factor and factor > 1 and kind in ("llama3", "yarn"):
        k_fn, d_fn = _fit.bands(ratio, factor)
        k_ex, d_ex = _fit.bands(theta / plain, factor)
        line += (f"Fitted pair by pair: fn keeps pairs 0..{k_fn} and divides pairs "
                 f"{d_fn}..{len(theta) - 1} by {factor:g}, ramping between; the "
                 f"rope_scaling keeps 0..{k_ex} and divides {d_ex}..{len(theta) - 1}. ")
    if in_ramp:
        line += (f"Only pairs between the kept and the divided ones differ ({len(off)} of "
                 f"pairs {ramp[0]}..{ramp[-1]}, where the scaling ramps or smooths): the "
                 f"ramp or smoothing formula differs. ")
    found = _scaling_parameter_fit(free, intended)
    if found:
        line += f"Reproduced by: {found}. "
    else:
        k = int(((free - theta).abs() / theta).argmax())
        line += (f"The largest difference is at pair {k}: {float(free[k]):.5g} rad per "
                 f"position against {float(theta[k]):.5g} "
                 f"({float(free[k] / theta[k]):.4g} times). ")
    line += ("Fix: compute inv_freq with scaling.rope_from_config(config), with the ramp "
             "or smoothing exactly as there.")
    return ("scaling", line)


def _ramp_pairs(theta, plain, intended):
    """Pairs whose intended frequency is neither kept nor divided by the
    scaling's full factor (``theta / plain`` strictly between ``1/factor`` and
    1, and not a common ratio): the ramp of YaRN, the smoothed band of Llama 3."""
    factor = _scaling_factor(intended)
    if not factor or factor <= 1:
        return []
    ratio = theta / plain
    rel = 1e-3
    ramp = [i for i in range(len(ratio))
            if abs(float(ratio[i]) - 1) > rel and abs(float(ratio[i]) * factor - 1) > rel]
    kept = len(ratio) - len(ramp)
    return ramp if ramp and kept else []


def _scaling_factor(intended):
    from ...config_reader import parse_rope_config
    if intended["config"] is None:
        return None
    factor = parse_rope_config(intended["config"]).params.get("factor")
    return float(factor) if isinstance(factor, (int, float)) else None


def _scaling_parameter_fit(free, intended):
    """Which change of one scaling parameter (or one step of its formula)
    reproduces ``free``: a sentence, or ``None``."""
    from ... import scaling
    from ...config_reader import parse_rope_config
    cfg = parse_rope_config(intended["config"])
    kind, params = cfg.rope_type, dict(cfg.params)
    rotary, base = intended["rotary"], intended["base"]
    plain = rope.inv_freq(rotary, base, dtype=torch.float64)
    candidates = []
    factor = params.get("factor")
    original = params.get("original_max_position_embeddings")
    if isinstance(factor, (int, float)) and factor > 0:
        candidates.append((f"factor {factor ** 2:g} (= {factor:g} applied twice) instead "
                           f"of {factor:g}", dict(params, factor=factor ** 2)))
    if kind == "llama3":
        lo, hi = params["low_freq_factor"], params["high_freq_factor"]
        candidates.append((f"low_freq_factor and high_freq_factor swapped ({hi:g} and "
                           f"{lo:g} instead of {lo:g} and {hi:g})",
                           dict(params, low_freq_factor=hi, high_freq_factor=lo)))
        if original and factor:
            candidates.append((f"original_max_position_embeddings {int(original * factor)}"
                               f" (the extended length) instead of {original}",
                               dict(params, original_max_position_embeddings=int(
                                   original * factor))))
    if kind == "yarn":
        if original and factor:
            candidates.append((f"original_max_position_embeddings {int(original * factor)}"
                               f" (the extended length) instead of {original}: the ramp "
                               f"computed from the extended length",
                               dict(params, original_max_position_embeddings=int(
                                   original * factor))))
        bf, bs = params.get("beta_fast") or 32.0, params.get("beta_slow") or 1.0
        candidates.append(("beta_fast and beta_slow swapped",
                           dict(params, beta_fast=bs, beta_slow=bf)))
    if kind == "dynamic" and len(free) > 1:
        found = _dynamic_fit(free, intended, params)
        if found:
            return found
    import warnings
    tried = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # the variants are odd on purpose
        known = _inv_freq_candidates(cfg, intended["config"])
    for code, inv in known.items():
        if code != "frequency-exponent":
            tried.append((f"{MESSAGES[code]} ({code})", inv))
    for text, p in candidates:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                inv = scaling.rope_parameters(kind, rotary, base, dtype=torch.float64,
                                              **{k: v for k, v in p.items()
                                                 if k not in ("rope_type", "type")})[0]
        except Exception:
            continue
        tried.append((text, inv))
    if kind == "llama3" and original and factor:
        lo, hi = params["low_freq_factor"], params["high_freq_factor"]
        variants = (
            ("the wavelength taken as 1/θ_i instead of 2π/θ_i", 1.0, lo, hi, False),
            ("the smoothing weights reversed (smooth and 1 - smooth swapped)",
             2 * math.pi, lo, hi, True),
            (f"low_freq_factor and high_freq_factor swapped ({hi:g} and {lo:g} instead "
             f"of {lo:g} and {hi:g})", 2 * math.pi, hi, lo, False))
        for text, turn, low, high, inverted in variants:
            for keep_first in (False, True):
                tried.append((text, _llama3_variant(plain, factor, low, high, original,
                                                    turn, inverted, keep_first)))
    for text, inv in tried:
        if inv.shape == free.shape and bool(((inv - free).abs() <= 2e-4 * inv).all()):
            return text
    return None


def _dynamic_fit(free, intended, params):
    """Dynamic NTK: the sequence length (and exponent) whose base reproduces a
    geometric ladder ``free``; a sentence or ``None``."""
    rotary, base = intended["rotary"], intended["base"]
    fitted_base = float(free[1]) ** (-rotary / 2)
    if not bool(((rope.inv_freq(rotary, fitted_base, dtype=torch.float64) - free).abs()
                 <= 2e-4 * free).all()):
        return None
    factor = params.get("factor")
    longest = params.get("max_position_embeddings")
    if not factor or not longest:
        return None
    seq_len = intended.get("seq_len")
    grown = fitted_base / base
    right = grown ** ((rotary - 2) / rotary)
    at_right = (right + factor - 1) * longest / factor
    at_dropped = (grown + factor - 1) * longest / factor
    if seq_len is not None and abs(at_dropped - seq_len) <= 1e-3 * seq_len:
        return (f"dynamic NTK's base without the exponent d/(d-2) = "
                f"{rotary}/{rotary - 2}: fn's ladder has base {fitted_base:.6g}, which "
                f"is base·(factor·L/max_position_embeddings - factor + 1) at L = "
                f"{seq_len}, not raised to d/(d-2)")
    return (f"dynamic NTK at sequence length about {at_right:.0f} (fn's ladder has base "
            f"{fitted_base:.6g})" + (f", not at the seq_len {seq_len} you give"
                                    if seq_len is not None else ""))


def _llama3_variant(plain, factor, low, high, original, turn, inverted, keep_first):
    """Llama 3's bands with one step changed: the wavelength ``turn/θ``, the
    smoothing reversed, and which band wins where they overlap (transformers
    divides first, then smooths; ``keep_first`` keeps first)."""
    wavelength = turn / plain
    smooth = (original / wavelength - low) / (high - low)
    if inverted:
        smooth = 1 - smooth
    mid = (1 - smooth) * plain / factor + smooth * plain
    high_wl, low_wl = original / high, original / low
    if keep_first:
        return torch.where(wavelength < high_wl, plain,
                           torch.where(wavelength > low_wl, plain / factor, mid))
    base = torch.where(wavelength > low_wl, plain / factor, plain)
    medium = ~(wavelength < high_wl) & ~(wavelength > low_wl)
    return torch.where(medium, mid, base)


def _zero_pairs(m, positions, theta, pairs, ipairs, intended, fit):
    """Some intended pairs never turn: the frequencies truncated to integers,
    or fewer features rotated."""
    free = torch.zeros_like(theta)
    index = {pair: i for i, pair in enumerate(ipairs)}
    angles, misfit = _block_angles(m, pairs)
    turning = _fit_frequencies(angles, positions)
    for pair, value in zip(pairs, turning):
        free[index[pair]] = value
    truncated = torch.floor(theta.to(torch.float32).to(torch.float64))
    if bool(((free - truncated).abs() <= 1e-6).all()):
        code, line = _explain_schedule(free, intended)
        return Diagnosis([code], line, fit.fitted)
    return None


def _entries(m, positions, theta, ipairs, att, intended, fit):
    """Blocks that are not rotations, explained entry by entry."""
    keep = positions <= 2048
    explained = _fit.explain_entries(m[keep], positions[keep], theta, ipairs, att,
                                     1e-3 + 4 * intended["noise"])
    if explained is None:
        return None
    codes, lines, details = explained
    fit.fitted.update(details)
    gain = details.get("gain")
    if gain is not None:
        attention = _attention_report(gain, att, intended["scaled"],
                                      1e-3 + 4 * intended["noise"])
        if attention is not None:
            codes = codes + [attention[0]]
            lines = lines + [attention[1]]
    return Diagnosis(_order(codes), "\n".join(lines), fit.fitted)


def _rope_type(config) -> str:
    from ...config_reader import parse_rope_config
    return parse_rope_config(config).rope_type


def _dynamic_length(findings, lines, fitted, intended):
    """A plain ladder with another base, for a dynamic rope_scaling: the length
    at which dynamic NTK gives that base."""
    from ...config_reader import parse_rope_config
    cfg = parse_rope_config(intended["config"])
    if cfg.rope_type != "dynamic":
        return findings, lines
    base, d = intended["base"], intended["rotary"]
    factor, longest = cfg.params["factor"], cfg.params["max_position_embeddings"]
    grown = (fitted["base"] / base) ** ((d - 2) / d)
    length = (grown + factor - 1) * longest / factor
    lines = [line for line in lines if not line.startswith("Base:")]
    lines.insert(0, f"Scaling: fn's frequencies are dynamic NTK's at sequence length "
                    f"about {length:.0f} (base {fitted['base']:.6g}), not at the length "
                    f"you give. Fix: recompute inv_freq when the sequence grows past "
                    f"max_position_embeddings = {longest}, at the current length "
                    f"(scaling.rope_from_config(config, seq_len=...)).")
    return [c for c in findings if c != "base"] + ["scaling"], lines


def _attention_report(g: float, attention: float, scaled: bool, rtol: float = 1e-4):
    """``(code, sentence)`` when the rotated features are scaled by ``g`` and the
    intended attention factor is ``attention``; ``None`` when they agree."""
    if abs(g / attention - 1) <= rtol:
        return None
    if abs(g - 1) <= rtol:
        return ("attention-factor",
                f"Attention factor missing: fn's rotation keeps lengths (factor 1), "
                f"but the rope_scaling you give multiplies cos and sin by "
                f"{attention:.6g} (so every q·k by {attention ** 2:.6g}). Fix: "
                f"multiply cos and sin by the attention factor that "
                f"scaling.rope_from_config(config) returns (transformers' "
                f"attention_scaling), once.")
    if abs(g / attention ** 2 - 1) <= rtol:
        return ("attention-factor",
                f"Attention factor applied twice: fn scales the rotated features by "
                f"{g:.6g} = {attention:.6g}², so q·k grows by {g ** 2:.6g} instead of "
                f"{attention ** 2:.6g}. Fix: multiply cos and sin by {attention:.6g} "
                f"once (not again on q, k or the scores).")
    what = ("the rope_scaling you give asks for " + f"{attention:.6g}" if scaled
            else "plain RoPE keeps lengths (factor 1)")
    return ("attention-factor",
            f"Attention factor: fn scales the rotated features by {g:.6g}; {what}. "
            f"Fix: multiply cos and sin by the attention factor of your config "
            f"(scaling.rope_from_config(config)[1]) and nothing else.")


def _explain_phase(phase, findings, lines, fitted, positions, pairs):
    """Name a rotation ``fn`` already applies at position 0: cos and sin
    swapped, or positions shifted by a constant ``c``."""
    sign = fitted.get("sign", 1.0)
    theta = fitted.get("_theta")
    phase_text = ", ".join(f"{float(v):.4g}" for v in phase[:3])
    if "not-rope" in findings or theta is None:
        lines.insert(0, f"At position 0 fn already turns the pairs (by {phase_text} "
                        f"rad, ...); taking that out did not leave a RoPE either.")
        return findings, lines
    quarter = _wrap(phase + sign * math.pi / 2).abs()
    if bool((quarter <= 1e-4).all()):
        findings = [c for c in findings if c != "rotation-reversed"] + ["cos-sin-swapped"]
        lines = [line for line in lines if not line.startswith(("Rotation reversed",
                                                                "fn is RoPE"))]
        lines.insert(0, "cos and sin swapped: at position 0 fn turns every pair by a "
                        "quarter turn, and then backwards as the position grows: its "
                        "block is [[sin, -cos], [cos, sin]], which is the rotation by "
                        "π/2 - m·θ. Fix: x * cos + rotate_half(x) * sin (cos on x, "
                        "sin on the rotated half).")
        return findings, lines
    theta = torch.as_tensor(theta, dtype=torch.float64)[:len(phase)]
    if fitted.get("_flipped"):
        theta = theta.flip(0)
    c = _fit_offset(phase, sign * theta)
    if c is not None:
        fitted["position_offset"] = c
        lines = [line for line in lines if not line.startswith("fn is RoPE")]
        findings = findings + ["position-offset"]
        lines.insert(0, f"Position offset: fn rotates position p as position "
                        f"p {'+' if c > 0 else '-'} {abs(c)} "
                        f"(at position 0 pair 0 already turns {float(phase[0]):.4g} "
                        f"rad, pair 1 {float(phase[1]) if len(phase) > 1 else 0:.4g}; "
                        f"M(p) = R(p + c) with c = {c} fits every probed position). Scores q·k "
                        f"only see m - n, so the offset cancels when q and k both carry "
                        f"it; it does not when they come from different code paths (the "
                        f"cached keys and a new query) or when outputs are compared "
                        f"with the checkpoint's. Fix: look up cos and sin at the "
                        f"positions themselves (cos[positions], not "
                        f"cos[positions {'+' if c > 0 else '-'} {abs(c)}]); position 0 "
                        f"must be the identity.")
        return findings, lines
    lines = [line for line in lines if not line.startswith("fn is RoPE")]
    lines.insert(0, f"Not RoPE: at position 0 fn turns the pairs by {phase_text} rad "
                    f"...; RoPE's rotation at position 0 is the identity, and no "
                    f"position offset or cos/sin swap explains these angles.")
    return findings + ["not-rope"], lines


def _direct_ladders(angles, positions, intended, n_pairs, theta_fit):
    """Ladders that the geometric fit cannot see, tested directly against the
    angles ``(n_pos, n_pairs)``: the intended (scaled) frequencies and the known
    bugs of a scaling, a flat ladder (integer division in the exponent), a
    rising one (``base ** (2i/d)``) and a reversed one. ``(codes, lines,
    theta, sign)`` of the first that reproduces every angle, or ``None``."""
    from ...config_reader import parse_rope_config
    expected, rotary = intended["expected"], intended["rotary"]
    if n_pairs != len(expected):
        return None
    tol = _tolerance(positions)[:, None]
    p = positions.to(torch.float64)[:, None]
    big = theta_fit.abs() * 64 > 1e-3
    first = int(torch.nonzero(big)[0]) if bool(big.any()) else 0
    sign = float(torch.sign(theta_fit[first])) or 1.0

    def fits(theta):
        # float32 rounds an angle p·θ to a few ulp of itself
        allowed = tol + 64 * _EPS32 * p * theta.clamp_min(1.0)
        return bool((_wrap(angles - sign * p * theta).abs() <= allowed).all())

    d = rotary
    candidates = []
    if intended["scaled"]:
        config = intended["config"]
        candidates.append(([], [], expected))
        for code, theta in _inv_freq_candidates(parse_rope_config(config),
                                                config).items():
            if theta.shape == expected.shape:
                candidates.append((["scaling"], [
                    f"Scaling: fn's frequencies are not those of the rope_scaling you "
                    f"give ({_rope_type(config)!r}); a known bug reproduces them: "
                    f"{MESSAGES[code]} ({code}). Fix: compute inv_freq with "
                    f"scaling.rope_from_config(config) (transformers' "
                    f"ROPE_INIT_FUNCTIONS) and the ramp or smoothing exactly as "
                    f"there."], theta))
    if n_pairs > 1:
        candidates.append((["frequency-exponent"], [
            f"Frequency exponent: every pair turns 1 rad per position (a flat "
            f"ladder): the exponent is 0 for every pair, which is what integer "
            f"division gives, torch.arange(0, {d}, 2) // {d} (the old meaning of / "
            f"on integer tensors). Fix: inv_freq = 1.0 / base ** (torch.arange(0, "
            f"{d}, 2).float() / {d}), exponent 2i/{d} for pair i."],
            torch.ones_like(expected)))
        candidates.append((["frequency-exponent"], [
            f"Frequency exponent: the frequencies rise with the pair, θ_i = "
            f"base^(+2i/{d}) (pair 1 turns {float(1 / expected[1]):.5g} rad per "
            f"position instead of {float(expected[1]):.5g}): the 1 / (or the minus "
            f"sign of the exponent) is missing. Fix: inv_freq = 1.0 / base ** "
            f"(torch.arange(0, {d}, 2).float() / {d})."], 1 / expected))
        candidates.append((["frequency-reversed"], [
            f"Frequency ladder reversed: pair 0 turns slowest "
            f"({float(expected[-1]):.4g} rad per position) and pair {n_pairs - 1} "
            f"fastest (1 rad per position); RoPE's pair 0 turns fastest (θ_0 = "
            f"base^0 = 1). Fix: do not flip or reverse inv_freq (inv_freq.flip(0), "
            f"[::-1]); pair i takes base^(-2i/{d})."], expected.flip(0)))
    for way in (sign, -sign):       # the first pair's own sign may be aliased
        sign = way
        for codes, lines, theta in candidates:
            if fits(theta):
                return list(codes), list(lines), theta, sign
    return None


def _layout_fix(fn_layout: str, rotary: int) -> str:
    """How to reorder a checkpoint's W_q and W_k for a fn of the other layout."""
    if fn_layout == "half":
        return (f"rope.interleaved_to_half(W, n_heads) converts a checkpoint "
                f"trained interleaved (rows W[perm] within each head, perm = "
                f"rope.layout_permutation({rotary}))")
    return (f"within each head take rows W[torch.argsort(perm)], perm = "
            f"rope.layout_permutation({rotary}) (the inverse of "
            f"rope.interleaved_to_half)")


def _formulas(dim: int, rotary: int, n_rotated: int, n_block: int,
              hidden_tail: bool = False) -> list:
    """Candidate exponents ``(e, text, right)`` of a ladder ``θ_i = base**(-e·i)``.

    ``e`` is ``2/d`` (right), ``1/d`` (``i/d``), ``2/(d-2)`` (``linspace`` to
    the last pair) or ``4/d`` (``-2 * arange(0, d, 2) / d``), with ``d`` the
    features fn rotates, the intended number, or the whole head (the two
    partial-rotary conventions), in that order of preference; then, if
    ``hidden_tail`` (the next pair of fn's ladder would turn too slowly to
    see), the powers of two between fn's rotated features and the head. Each comes with its
    ``d``: ``(e, text, right, d)``.
    """
    powers = [2 ** k for k in range(1, 16) if n_rotated < 2 ** k <= dim and hidden_tail]
    spacings = list(dict.fromkeys(d for d in (n_rotated, rotary, dim, 2 * n_block, *powers)
                                  if d >= 2))
    # The whole head's spacing is a convention of its own (p-RoPE) only for a
    # fn that rotates another number of features than intended; for one that
    # rotates the intended rotary_dim < dim it is a wrong exponent.
    allowed = {n_rotated, rotary} | ({dim} if n_rotated != rotary else set())
    out = [(2.0 / d, f"2i/{d}", d in allowed or d in powers, d) for d in spacings]
    out += [(1.0 / d, f"i/{d}", False, d) for d in spacings]
    out += [(2.0 / (d - 2), f"2i/{d - 2}", False, d) for d in spacings if d > 2]
    out += [(4.0 / d, f"4i/{d}", False, d) for d in spacings]
    return out


def _denominator_hint(text: str, rotary: int, dim) -> str:
    """Why a ladder ``2i/D`` has the denominator ``D`` it has."""
    if not text.startswith("2i/"):
        return ""
    denominator = int(text.split("/")[1])
    if dim is not None and denominator == dim and rotary < dim:
        return (f"; {denominator} in the denominator is the whole head (head_dim), "
                f"but only rotary_dim = {rotary} features rotate: space the "
                f"frequencies over the rotated features")
    if denominator > (dim or rotary):
        return (f"; {denominator} in the denominator is larger than the head: "
                f"hidden_size (n_heads × head_dim) used instead of head_dim?")
    return ""


def _frequency_report(fitted_base: float, e: float, text: str, right: bool, base: float,
                      rotary: int, n: int, dim: int | None = None) -> tuple[list, list]:
    codes, lines = [], []
    if abs(math.log(fitted_base / base)) >= 1e-3:
        codes.append("base")
        lines.append(f"Base: fn's frequencies fit base {fitted_base:.6g} "
                     f"(θ_i = {fitted_base:.6g}^(-{text})); you intend {base:g}, so "
                     f"pair 1 turns {fitted_base ** -e:.5g} rad per position instead of "
                     f"{base ** (-2 / rotary):.5g}. Fix: pass the model's rope_theta "
                     f"({base:g}) as the base.")
    if not right:
        codes.append("frequency-exponent")
        lines.append(f"Frequency exponent: the frequencies fall as base^(-{text}) "
                     f"(ln θ_i falls {e * math.log(fitted_base):.5g} per pair; "
                     f"base^(-2i/{rotary}) falls {2 * math.log(fitted_base) / rotary:.5g}), "
                     f"so the slowest pair turns {fitted_base ** (-e * (n - 1)):.3g} "
                     f"rad per position instead of "
                     f"{fitted_base ** (-2 * (n - 1) / rotary):.3g}"
                     + _denominator_hint(text, rotary, dim)
                     + f". Fix: inv_freq = 1 / "
                     f"base ** (torch.arange(0, {rotary}, 2) / {rotary}), that is 2i/d "
                     f"for pair i (rope.inv_freq({rotary}, base)).")
    return codes, lines


def _explain_slope(slope: float, base: float, dim: int, rotary: int, n_rotated: int,
                   n_block: int, fitted: dict, hidden_tail: bool = False):
    """Codes, sentences and the model's frequencies for the ladder slope ``a``.

    A ladder ``θ_i = base'**(-e·i)`` has ``a = -e·ln(base')``: each candidate
    exponent (:func:`_formulas`) implies a base; the most plausible pair
    (:func:`_rank`) is the explanation.
    """
    n = max(n_block, 1)
    if slope >= 0 or n == 1:
        fitted.update(base=None, exponent=None)
        return [], [], torch.ones(n, dtype=torch.float64)
    best = min(((_rank(min(_safe_exp(-slope / e), 1e300), base, right), k, e, text,
                 right, d)
                for k, (e, text, right, d) in enumerate(_formulas(
                    dim, rotary, n_rotated, n_block, hidden_tail))))
    d_free = -2 * math.log(base) / slope
    if best[0] >= 3 and abs(d_free - round(d_free)) <= 1e-4 * d_free and \
            round(d_free) % 2 == 0:
        # The intended base with another denominator (hidden_size, say) fits
        # better than an odd base with a right one.
        d_free = round(d_free)
        best = (best[0], -1, 2.0 / d_free, f"2i/{d_free}", False, d_free)
    _, _, e, text, right, spacing = best
    fitted_base = _safe_exp(-slope / e)
    if not math.isfinite(fitted_base) or fitted_base > 1e300:
        raise _Unfitted(f"the ladder's slope {slope:.4g} per pair implies a base beyond "
                        f"1e300 for every exponent")
    if abs(math.log(fitted_base / base)) < 1e-3:
        fitted_base = base
    fitted.update(base=fitted_base, exponent=text, spacing=spacing)
    codes, lines = _frequency_report(fitted_base, e, text, right, base, rotary, n, dim)
    idx = torch.arange(n, dtype=torch.float64)
    return codes, lines, torch.pow(fitted_base, -e * idx)


#: What :func:`diagnose_inv_freq` can name: known variants (another rope_type
#: than the config's) and known bugs (mostly the book's mutation catalogue).
INV_FREQ_CODES = {code: MESSAGES[code] for code in (
    "scaling-ignored", "frequency-exponent", "base", "partial-rotary-ignored",
    "linear-factor-multiplied", "ntk-exponent-dropped", "yarn-ramp-inverted",
    "yarn-clamp-half-dim", "yarn-no-truncate", "yarn-original-ignored",
    "llama3-smoothing-inverted", "unknown")}


def _inv_freq_candidates(rope_cfg, config: Mapping) -> dict:
    """Frequencies of every known variant or bug that applies to this config."""
    from ... import scaling
    dim, base, kind, params = rope_cfg.dim, rope_cfg.base, rope_cfg.rope_type, rope_cfg.params
    idx = torch.arange(dim // 2, dtype=torch.float64)
    plain = rope.inv_freq(dim, base, dtype=torch.float64)
    out = {"frequency-exponent": base ** (-idx / dim)}
    if kind != "default":
        out["scaling-ignored"] = plain
    if rope_cfg.head_dim != dim:
        try:
            out["partial-rotary-ignored"] = scaling.rope_parameters(
                kind, rope_cfg.head_dim, base, dtype=torch.float64, **params)[0]
        except ValueError:
            pass
    factor = params.get("factor")
    if kind == "linear":
        out["linear-factor-multiplied"] = plain * factor
    if kind in ("ntk", "dynamic"):
        out["ntk-exponent-dropped"] = rope.inv_freq(dim, base * factor, dtype=torch.float64)
    if kind == "yarn":
        beta_fast = params.get("beta_fast") or 32.0
        beta_slow = params.get("beta_slow") or 1.0
        length = params["original_max_position_embeddings"]
        truncate = params.get("truncate", True)
        truncate = True if truncate is None else truncate

        def yarn(low, high, inverted=False):
            if low == high:
                high += 0.001
            w = ((idx - low) / (high - low)).clamp(0, 1)
            if inverted:
                w = 1 - w
            return plain * (1 - w) + plain / factor * w

        low, high = scaling.yarn_correction_range(dim, base, length, beta_fast, beta_slow,
                                                  truncate=truncate)
        out["yarn-ramp-inverted"] = yarn(low, high, inverted=True)
        out["yarn-clamp-half-dim"] = yarn(low, min(high, dim // 2 - 1))
        out["yarn-no-truncate"] = yarn(*scaling.yarn_correction_range(
            dim, base, length, beta_fast, beta_slow, truncate=False))
        longest = rope_cfg.max_position_embeddings
        if longest and longest != length:
            out["yarn-original-ignored"] = yarn(*scaling.yarn_correction_range(
                dim, base, longest, beta_fast, beta_slow, truncate=truncate))
    if kind == "llama3":
        length = params["original_max_position_embeddings"]
        lo, hi = params["low_freq_factor"], params["high_freq_factor"]
        wavelength = 2 * math.pi / plain
        smooth = ((length / wavelength - lo) / (hi - lo)).clamp(0, 1)
        smooth = torch.where(wavelength < length / hi, 1.0,
                             torch.where(wavelength > length / lo, 0.0, smooth))
        out["llama3-smoothing-inverted"] = plain * (1 - smooth) + plain / factor * smooth
    return out
